package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rpsgo/rps/internal/synth"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/afxdp"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// job is one run of one configuration.
type job struct {
	name string
	run  func(ctx context.Context) (Result, error)
}

// suite builds the jobs of one invocation and the shared state they need.
type suite struct {
	o      options
	sp     spinner
	sets   frameSets
	tmp    string
	notes  []string
	live   *liveEnv
	fwdBin string
	closes []func()
}

func (s *suite) want(exp string) bool {
	if s.o.exps == "" {
		return true
	}
	return slices.Contains(strings.Split(s.o.exps, ","), exp)
}

func (s *suite) frames(n int) int { return max(int(float64(n)*s.o.scale), 256) }

func (s *suite) note(format string, args ...any) {
	s.notes = append(s.notes, fmt.Sprintf(format, args...))
}

// cases returns the configurations, experiment by experiment.
func (s *suite) cases() []Case {
	q := s.o.quick
	if q && s.o.exps != "" {
		for _, e := range []string{"sizes", "modes", "pcap", "live", "rr"} {
			if s.want(e) {
				s.note("%s: not run with -quick, which runs the workers and skew experiments in memory only", e)
			}
		}
	}
	ws := workerCounts()
	nCPU := ws[len(ws)-1]
	var cs []Case
	base := Case{Source: "mem", Size: 64, Flows: 1024, Dispatch: steer.Deferred, Policy: steer.PolicyRSS}
	count := func(h string) int {
		switch {
		case h == handlerSpin && q:
			return s.frames(1 << 17)
		case h == handlerSpin:
			return s.frames(1 << 19)
		case q:
			return s.frames(1 << 20)
		}
		return s.frames(1 << 22)
	}
	if s.want("workers") {
		handlers := []string{handlerNone, handlerSpin, handlerStateful}
		pins := []bool{false, true}
		if q {
			handlers, pins = handlers[:2], pins[:1]
		}
		if pinnedCPUs() == nil {
			pins = pins[:1]
		}
		for _, h := range handlers {
			c := base
			c.Experiment, c.Handler, c.Frames = "workers", h, count(h)
			c.Impl, c.Workers = "single", 1
			cs = append(cs, c)
			for _, w := range ws {
				c.Workers = w
				for _, pin := range pins {
					c.Impl, c.Pinned = "rps", pin
					cs = append(cs, c)
				}
				c.Impl, c.Pinned = "idiomatic", false
				cs = append(cs, c)
			}
		}
	}
	if s.want("sizes") && !q {
		for _, size := range []int{64, 128, 512, 1500} {
			for _, flows := range []int{1, 16, 1024, 100000} {
				c := base
				c.Experiment, c.Handler, c.Size, c.Flows, c.Frames = "sizes", handlerNone, size, flows, s.frames(1<<21)
				c.Impl, c.Workers = "single", 1
				cs = append(cs, c)
				c.Impl, c.Workers = "rps", nCPU
				cs = append(cs, c)
			}
		}
	}
	if s.want("modes") && !q {
		pins := []bool{false, true}
		if pinnedCPUs() == nil {
			pins = pins[:1]
		}
		for _, m := range []steer.DispatchMode{steer.Direct, steer.Hybrid, steer.Deferred} {
			for _, p := range []steer.Policy{steer.PolicyRSS, steer.PolicyFlow, steer.PolicySource} {
				for _, pin := range pins {
					c := base
					c.Experiment, c.Handler, c.Frames = "modes", handlerSpin, s.frames(1<<18)
					c.Impl, c.Workers, c.Dispatch, c.Policy, c.Pinned = "rps", nCPU, m, p, pin
					cs = append(cs, c)
				}
			}
		}
	}
	if s.want("skew") {
		for _, reb := range []bool{false, true} {
			c := base
			c.Experiment, c.Handler, c.Zipf, c.Frames = "skew", handlerSpin, 1.0, s.frames(1<<18)
			if !q {
				c.Frames = s.frames(1 << 19)
			}
			c.Impl, c.Workers, c.Rebalance = "rps", nCPU, reb
			cs = append(cs, c)
		}
	}
	if s.want("pcap") && !q {
		for _, h := range []string{handlerNone, handlerSpin} {
			c := base
			c.Experiment, c.Source, c.Handler = "pcap", "pcap", h
			c.Impl, c.Workers = "single", 1
			cs = append(cs, c)
			for _, w := range ws {
				c.Impl, c.Workers = "rps", w
				cs = append(cs, c)
			}
		}
	}
	if s.want("live") && !q { // -quick stays in memory
		if why := liveMissing(); why != "" {
			s.note("live: skipped: %s", why)
		} else {
			handlers := []string{handlerNone, handlerSpin}
			for _, h := range handlers {
				c := Case{Experiment: "live", Source: "afpacket", Handler: h, Size: 64, Flows: 1 << 24, Frames: s.frames(1 << 20),
					Dispatch: steer.Deferred, Policy: steer.PolicyRSS}
				c.Impl, c.Workers = "single", 1
				cs = append(cs, c)
				for _, w := range ws {
					c.Impl, c.Workers, c.Source = "rps", w, "afpacket"
					cs = append(cs, c)
				}
				c.Workers = nCPU
				c.Impl, c.Source = "rps-fanout", "fanout-hash"
				cs = append(cs, c)
				c.Impl = "kernel-fanout"
				cs = append(cs, c)
			}
			cs = append(cs, s.captureCases(nCPU, cs)...)
		}
	}
	return cs
}

// liveRates are the offered rates of the capture comparison, in frames a
// second; 0 is as fast as trafgen goes.
var liveRates = []int{250_000, 500_000, 1_000_000, 0}

// captureCases are the live experiment's capture comparison: at each of
// liveRates, tcpdump, then one AF_PACKET socket and one AF_XDP socket
// steered in user space, a fanout EBPF group and an XDP-steered AF_XDP
// group (a socket per worker, the library's Toeplitz hash and table in the
// kernel), in turn, so that they alternate within one run. A case already in have is left out.
func (s *suite) captureCases(workers int, have []Case) []Case {
	why := tcpdumpMissing()
	if why != "" {
		s.note("live: tcpdump skipped: %s", why)
	}
	var cs []Case
	for _, rate := range liveRates {
		c := Case{Experiment: "live", Handler: handlerNone, Size: 64, Flows: 1 << 24, Rate: rate,
			Dispatch: steer.Deferred, Policy: steer.PolicyRSS, Frames: s.frames(1 << 20)}
		if rate > 0 {
			c.Frames = s.frames(rate) // a second
		}
		if why == "" {
			t := c
			t.Impl, t.Source, t.Workers = "tcpdump", "afpacket", 1
			cs = append(cs, t)
		}
		c.Workers = workers
		captures := [][2]string{{"rps", "afpacket"}, {"rps", "afxdp"}, {"rps-fanout", "fanout-ebpf"}, {"rps-xdp", "xdp-ebpf"}}
		if benchXDPUnbatched {
			captures = slices.Insert(captures, 2, [2]string{"rps", "afxdp-unbatched"})
		}
		for _, is := range captures {
			c.Impl, c.Source = is[0], is[1]
			if !slices.Contains(have, c) {
				cs = append(cs, c)
			}
		}
	}
	return cs
}

// job makes the job of one case and repetition.
func (s *suite) job(c Case, rep int) job {
	return job{name: c.Name(), run: func(ctx context.Context) (Result, error) {
		switch c.Source {
		case "mem":
			fs := s.sets.get(synth.Spec{Flows: c.Flows, Size: c.Size, Zipf: c.Zipf, Seed: 1})
			return runMem(c, fs, s.sp, rep)
		case "pcap":
			path, err := s.pcapFile()
			if err != nil {
				return c.result(rep), err
			}
			return runPcap(c, path, s.sp, rep)
		default:
			if s.live == nil {
				e, err := newLiveEnv(s.tmp)
				if err != nil {
					return c.result(rep), err
				}
				s.live = e
				s.closes = append(s.closes, func() { e.Close() })
			}
			return runLive(ctx, s.live, c, s.sp, rep)
		}
	}}
}

// pcapFile writes, once, a pcap file of 1<<18 frames of the in-memory
// workload (64 bytes, 1024 flows) into the temporary directory.
func (s *suite) pcapFile() (string, error) {
	path := filepath.Join(s.tmp, "synth64.pcap")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("%w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	frames := synth.Frames(synth.Spec{Flows: 1024, Size: 64, Seed: 1}, s.frames(1<<18))
	err = writePcap(w, frames, time.Unix(1_700_000_000, 0))
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}

// rrJobs returns the request/response runs: one worker, then one per CPU.
// -quick has none: it stays in memory.
func (s *suite) rrJobs() []job {
	if !s.want("rr") || s.o.quick {
		return nil
	}
	if why := rrMissing(); why != "" {
		s.note("rr: skipped: %s", why)
		return nil
	}
	dur := s.o.rrDur
	if dur == 0 {
		dur = 10 * time.Second
	}
	ws := workerCounts()
	var jobs []job
	for rep := 0; rep < s.o.count; rep++ {
		for _, w := range []int{1, ws[len(ws)-1]} {
			spec := rrSpec{Workers: w, Work: s.o.rrWork, Conns: s.o.rrConns, Duration: dur}
			jobs = append(jobs, job{name: fmt.Sprintf("rr forwarder w=%d %d conns", w, spec.Conns),
				run: func(ctx context.Context) (Result, error) {
					if s.fwdBin == "" {
						bin, err := buildForwarder(ctx, s.tmp)
						if err != nil {
							return Result{Experiment: "rr"}, err
						}
						s.fwdBin = bin
					}
					return runRR(ctx, s.fwdBin, spec, rep)
				}})
		}
	}
	return jobs
}

// runAll runs the matrix o describes and prints the tables to stdout and
// the progress to progress.
func runAll(ctx context.Context, o options, stdout, progress io.Writer) (*Report, error) {
	tmp, err := os.MkdirTemp("", "rpsbench-")
	if err != nil {
		return nil, fmt.Errorf("%w", err)
	}
	defer os.RemoveAll(tmp)
	s := &suite{o: o, tmp: tmp, sp: newSpinner(time.Microsecond)}
	defer func() {
		for _, c := range s.closes {
			c()
		}
	}()
	rep := &Report{Machine: machine(), Command: commandLine(), Started: time.Now().UTC(), Quick: o.quick}
	t0 := time.Now()
	for i := 0; i < 2000; i++ {
		s.sp.spin()
	}
	rep.SpinNs = float64(time.Since(t0).Nanoseconds()) / 2000
	cases := s.cases()
	var jobs []job
	for r := 0; r < o.count; r++ {
		for _, c := range cases {
			jobs = append(jobs, s.job(c, r))
		}
	}
	jobs = append(jobs, s.rrJobs()...)
	for _, n := range s.notes {
		fmt.Fprintln(progress, "bench: note:", n)
	}
	pr := newProgress(progress, len(jobs), o.verbose)
	var runErr error
	for _, j := range jobs {
		if ctx.Err() != nil {
			runErr = ctx.Err()
			break
		}
		pr.start(j.name)
		runtime.GC()
		debug.FreeOSMemory()
		r, err := j.run(ctx)
		if err != nil {
			msg := fmt.Sprintf("%s: %v", j.name, err)
			s.note("failed: %s", msg)
			pr.fail(msg)
			continue
		}
		rep.Results = append(rep.Results, r)
		pr.done(&r)
	}
	pr.finish()
	rep.Notes = s.notes
	rep.Seconds = time.Since(rep.Started).Seconds()
	printTables(stdout, rep)
	return rep, runErr
}

// printTables prints the machine, then one table of medians per experiment.
func printTables(w io.Writer, rep *Report) {
	m := rep.Machine
	fmt.Fprintf(w, "machine: %s, %d CPUs, %s, %s\ncommand: %s\nspin1us handler: %.0f ns per call\n",
		m.CPU, m.Cores, m.Kernel, m.Go, rep.Command, rep.SpinNs)
	meds := medians(rep.Results)
	var exps []string
	for _, r := range meds {
		if !slices.Contains(exps, r.Experiment) {
			exps = append(exps, r.Experiment)
		}
	}
	for _, e := range exps {
		fmt.Fprintf(w, "\n== %s (median of runs)\n", e)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		if e == "rr" {
			fmt.Fprintln(tw, "workers\ttps\tx 1 worker\tp50 ms\tp99 ms\tp99.9 ms\tretrans\tfwd CPU\t")
			for _, r := range meds {
				if r.Experiment != e {
					continue
				}
				ratio := "-"
				if b := baseline(meds, &r); b != nil && b.TPS > 0 {
					ratio = fmt.Sprintf("%.2f", r.TPS/b.TPS)
				}
				fmt.Fprintf(tw, "%d\t%.0f\t%s\t%.2f\t%.2f\t%.2f\t%d\t%.2f\t\n", r.Workers, r.TPS, ratio,
					r.LatP50/1e3, r.LatP99/1e3, r.LatP999/1e3, r.Retrans, r.CPUShare)
			}
			tw.Flush()
			fmt.Fprint(w, rrLegend)
			continue
		}
		fmt.Fprintln(tw, "impl\tsource\thandler\tbytes\tflows\tw\tmode\tpin\tMpps\tGbit/s\tns/frame\tx single\tCPU\tsys s\tallocs/f\timbal\tdrops\tp50 µs\tp99 µs\tp99.9 µs\t")
		for _, r := range meds {
			if r.Experiment != e {
				continue
			}
			ratio := "-"
			if b := baseline(meds, &r); b != nil && b.Mpps > 0 {
				ratio = fmt.Sprintf("%.2f", r.Mpps/b.Mpps)
			}
			mode := "-"
			if r.Dispatch != "" {
				mode = r.Dispatch + "/" + r.Policy
				if r.Rebalance {
					mode += "+rebal"
				}
			}
			lat := func(v float64) string {
				if r.LatSamples == 0 {
					return "-"
				}
				return fmt.Sprintf("%.1f", v)
			}
			flows := fmt.Sprint(r.Flows)
			if r.Zipf > 0 {
				flows += fmt.Sprintf("z%g", r.Zipf)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\t%.2f\t%.2f\t%.1f\t%s\t%.2f\t%.2f\t%.3f\t%.2f\t%d\t%s\t%s\t%s\t\n",
				r.Impl, r.Source, r.Handler, r.FrameSize, flows, r.Workers, mode, yesNo(r.Pinned), r.Mpps, r.Gbps,
				r.NsPerFrame, ratio, r.CPUShare, r.SysSec, r.AllocsPerFrame, r.Imbalance, r.Drops+r.KernelDrops,
				lat(r.LatP50), lat(r.LatP99), lat(r.LatP999))
		}
		tw.Flush()
		writeLegend(w, meds, e)
		if e == "live" {
			printCapture(w, rep.Results, meds)
		}
	}
	if slices.ContainsFunc(meds, func(r Result) bool { return r.Experiment != "rr" }) {
		fmt.Fprint(w, columnLegend)
	}
	if len(rep.Notes) > 0 {
		fmt.Fprintln(w, "\nnotes:")
		for _, n := range rep.Notes {
			fmt.Fprintln(w, "  "+n)
		}
	}
	fmt.Fprintf(w, "\n%d runs in %.0f s\n", len(rep.Results), rep.Seconds)
}

// implLegend says what each implementation in the tables is.
var implLegend = map[string]string{
	"rps": "this library: a steer.Dispatcher, frames in batches of 64 from one input (live: one AF_PACKET " +
		"or AF_XDP socket read by one goroutine), classified, Toeplitz-hashed and queued to their worker",
	"single": "the single-queue baseline: one goroutine calls the handler for every frame itself " +
		"(no classification, no hash, no hand-off); live: one socket read by one goroutine",
	"idiomatic": "the usual Go pipeline: gopacket's DecodingLayerParser, NetworkFlow and TransportFlow " +
		"FastHash, and one channel send per frame to the chosen worker",
	"rps-fanout": "this library over a kernel fanout group (fanout-hash: PACKET_FANOUT_HASH; fanout-ebpf: " +
		"the library's Toeplitz hash and table in a socket-filter program, afpacket.NewSteering): one socket " +
		"per worker, read by that worker (RunOnWorkers, DIRECT dispatch)",
	"rps-xdp": "this library over AF_XDP sockets, one per worker on one shared UMEM, the library's Toeplitz " +
		"hash and table in an XDP program picking the socket (afxdp.NewSteering), each read by its worker " +
		"(RunOnWorkers, DIRECT dispatch)",
	"tcpdump": "tcpdump -w /dev/null with a kernel filter for UDP and the same ring size (-B) as an " +
		"AF_PACKET socket's default: libpcap's TPACKET_V3 ring read by one thread",
	"kernel-fanout": "the same fanout group without the library: one goroutine per socket calls the handler",
}

// columnLegend says what the columns of the throughput tables mean.
const columnLegend = `
columns of the throughput tables: w workers; mode dispatch/policy (+rebal: the rebalancer on); pin workers pinned to CPUs;
    Mpps millions of frames a second; Gbit/s frame bytes x 8 a second; ns/frame wall time per frame;
    x single Mpps over the single-queue baseline's with the same handler, frame size and flows (-: none);
    CPU (user+sys)/wall time, 1.00 is one core busy; sys s system time; allocs/f heap allocations per frame;
    imbal frames of the busiest worker over the mean per worker (1.00 is even);
    drops frames dropped by the dispatcher and by the kernel;
    p50/p99/p99.9 µs dispatch-to-handler latency of one frame in 1024 (single: the handler call)
`

// printCapture prints the live experiment's capture comparison (the runs
// with a handler that does nothing, by offered rate): per configuration and
// rate, the most frames one run lost and the median over the runs of the
// other figures; then the highest offered rate each configuration took
// without losing a frame in any of its runs.
func printCapture(w io.Writer, rs, meds []Result) {
	captured := func(r *Result) bool { return r.Experiment == "live" && r.Handler == handlerNone && r.Sent > 0 }
	if !slices.ContainsFunc(meds, func(r Result) bool { return captured(&r) }) {
		return
	}
	fmt.Fprintf(w, "\n== live capture: loss and CPU a frame by offered rate (median of runs, lost: the most of a run)\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "impl\tsource\tw\tcapture\toffered\tsent kpps\tlost\tf/batch\treader ns/f\ttotal ns/f\t")
	// config names a configuration without its rate.
	config := func(r *Result) string { c := *r; c.Rate = 0; return c.groupKey() }
	var order []string
	for _, r := range meds {
		if !captured(&r) {
			continue
		}
		if k := config(&r); !slices.Contains(order, k) {
			order = append(order, k)
		}
	}
	for _, k := range order {
		var top *captureFigures
		for i := range meds {
			r := &meds[i]
			if !captured(r) || config(r) != k {
				continue
			}
			f := captureMedians(rs, r.groupKey())
			mode := r.Capture
			if mode == "" {
				mode = "-"
			}
			perBatch := "-"
			if f.perBatch > 0 {
				perBatch = fmt.Sprintf("%.1f", f.perBatch)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%.0f\t%d\t%s\t%.0f\t%.0f\t\n", r.Impl, r.Source, r.Workers, mode,
				offered(r.Rate), f.sendPPS/1e3, f.lost, perBatch, f.readerNs, f.totalNs)
			if f.lost == 0 && (top == nil || f.sendPPS > top.sendPPS) {
				top = &f
			}
		}
		if top != nil {
			fmt.Fprintf(tw, "\t\t\t\tno loss up to\t%.0f\t0\t\t%.0f\t%.0f\t\n", top.sendPPS/1e3, top.readerNs, top.totalNs)
		} else {
			fmt.Fprintf(tw, "\t\t\t\tno loss up to\tnone\t\t\t\t\t\n")
		}
	}
	tw.Flush()
	fmt.Fprint(w, captureLegend)
}

// captureFigures are one live configuration's figures over its runs.
type captureFigures struct {
	lost                                 uint64 // the most of one run
	sendPPS, perBatch, readerNs, totalNs float64
}

// captureMedians returns the medians over the runs in rs of the
// configuration key (a groupKey), and the most frames one of them lost.
func captureMedians(rs []Result, key string) captureFigures {
	var f captureFigures
	var send, batch, reader, total []float64
	for i := range rs {
		r := &rs[i]
		if r.groupKey() != key {
			continue
		}
		f.lost = max(f.lost, r.Lost)
		send, reader, total = append(send, r.SendPPS), append(reader, r.ReaderNs), append(total, r.TotalNs)
		if r.Batches > 0 {
			batch = append(batch, float64(r.Frames+r.Drops)/float64(r.Batches))
		}
	}
	f.sendPPS, f.perBatch, f.readerNs, f.totalNs = median(send), median(batch), median(reader), median(total)
	return f
}

// median returns the median of v (the mean of the middle two for an even
// count), or 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// captureLegend says what the capture comparison's columns mean.
var captureLegend = fmt.Sprintf(`  trafgen sends 64-byte UDP frames of random 4-tuples from the other namespace over the veth pair;
  AF_PACKET sockets have the default 4 MiB ring, AF_XDP sockets the defaults: a %d-entry RX ring
  and a UMEM of %d chunks.
  columns: capture an AF_XDP socket's attach and bind modes (native or generic, zerocopy or copy)
    and its batch timeout (how long a read waits for a full batch; unbatched: none);
    offered the rate asked of trafgen (max: as fast as it goes); sent kpps frames over trafgen's
    run, its start-up included; lost frames sent and never handled, every cause; f/batch frames
    per non-empty batch a socket read gave; reader ns/f the CPU time of the reader (this process,
    or tcpdump) per frame handled; total ns/f the same with trafgen's and the ksoftirqd threads',
    which run the kernel's receive path (veth, XDP, the copy into the ring or the UMEM, the IP
    stack); no loss up to: the highest offered rate without loss in any run
`, afxdp.DefaultRingSize, afxdp.DefaultNumFrames)

// rrLegend says what the request/response table's columns mean.
const rrLegend = `  examples/forwarder between a client and a server namespace; TCP connections doing 1-byte
  request/response through it.
  columns: tps transactions a second; x 1 worker tps over the one-worker run's; p50/p99/p99.9 ms
    transaction latency; retrans the client's TCP retransmissions; fwd CPU the forwarder's
    (user+sys)/wall time
`

// writeLegend prints, after experiment e's table, what each of its
// implementations is.
func writeLegend(w io.Writer, meds []Result, e string) {
	var seen []string
	for _, r := range meds {
		if r.Experiment == e && !slices.Contains(seen, r.Impl) {
			seen = append(seen, r.Impl)
		}
	}
	for _, impl := range seen {
		if what := implLegend[impl]; what != "" {
			fmt.Fprintf(w, "  %s: %s\n", impl, what)
		}
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// baseline returns the median result r is compared with: the single-queue
// run of the same experiment, handler, frame size and flows (for rr, the
// one-worker run), or nil.
func baseline(meds []Result, r *Result) *Result {
	for i := range meds {
		b := &meds[i]
		if b.Experiment != r.Experiment || b.Handler != r.Handler || b.FrameSize != r.FrameSize || b.Flows != r.Flows || b.Zipf != r.Zipf || b.Rate != r.Rate {
			continue
		}
		if r.Experiment == "rr" && b.Workers == 1 {
			return b
		}
		if b.Impl == "single" {
			return b
		}
	}
	return nil
}

// progress reports runs as they go: a bar on a terminal, a line per run
// otherwise.
type progress struct {
	w       io.Writer
	total   int
	n       int
	tty     bool
	verbose bool
	began   time.Time
	name    string
}

func newProgress(w io.Writer, total int, verbose bool) *progress {
	p := &progress{w: w, total: total, verbose: verbose, began: time.Now()}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progress) start(name string) {
	p.name = name
	if p.tty {
		p.bar()
	}
}

func (p *progress) bar() {
	const width = 30
	fill := width * p.n / max(p.total, 1)
	el := time.Since(p.began)
	eta := "?"
	if p.n > 0 {
		eta = (el * time.Duration(p.total-p.n) / time.Duration(p.n)).Round(time.Second).String()
	}
	name := p.name
	if len(name) > 60 {
		name = name[:60]
	}
	fmt.Fprintf(p.w, "\r\033[K[%s%s] %d/%d %s eta %s  %s", strings.Repeat("=", fill), strings.Repeat(" ", width-fill),
		p.n, p.total, el.Round(time.Second), eta, name)
}

func (p *progress) line(s string) {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, "bench: [%d/%d] %s\n", p.n, p.total, s)
}

func (p *progress) done(r *Result) {
	p.n++
	if !p.tty || p.verbose {
		if r.Experiment == "rr" {
			p.line(fmt.Sprintf("%s: %.0f tps, p99 %.2f ms, %d retransmissions", p.name, r.TPS, r.LatP99/1e3, r.Retrans))
		} else {
			p.line(fmt.Sprintf("%s: %.2f Mpps, %.1f ns/frame, %.2f s", p.name, r.Mpps, r.NsPerFrame, r.Seconds))
		}
	}
	if p.tty {
		p.bar()
	}
}

func (p *progress) fail(msg string) {
	p.n++
	p.line("FAILED " + msg)
	if p.tty {
		p.bar()
	}
}

func (p *progress) finish() {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, "bench: %d runs in %s\n", p.n, time.Since(p.began).Round(time.Second))
}

// writePcap writes frames as a classic pcap file (microsecond timestamps,
// LINKTYPE_ETHERNET), one frame per microsecond from t.
func writePcap(w io.Writer, frames [][]byte, t time.Time) error {
	pw, err := pcapfile.NewWriter(w, pcapfile.LinkTypeEthernet, pcapfile.WriterOptions{SnapLen: 65535})
	if err != nil {
		return err
	}
	for i, b := range frames {
		if err := pw.WritePacket(t.Add(time.Duration(i)*time.Microsecond), b, 0); err != nil {
			return err
		}
	}
	return nil
}
