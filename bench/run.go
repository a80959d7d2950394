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
	"time"

	"github.com/rpsgo/rps/internal/synth"
	"github.com/rpsgo/rps/steer"
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

func (s *suite) note(format string, args ...any) {
	s.notes = append(s.notes, fmt.Sprintf(format, args...))
}

// latencyRates are the offered rates of the latency experiment, in frames
// a second: below the single-queue baseline's saturation with the spin1us
// handler (about 1 Mpps), so that both it and the library are measured
// where they keep up.
var latencyRates = []int{250_000, 500_000, 750_000}

// cases returns the configurations, experiment by experiment.
func (s *suite) cases() []Case {
	q := s.o.quick
	if q && s.o.exps != "" {
		for _, e := range []string{"sizes", "modes", "pcap", "latency", "live", "rr"} {
			if s.want(e) {
				s.note("%s: not run with -quick, which runs the workers and skew experiments in memory only", e)
			}
		}
	}
	ws := workerCounts()
	nCPU := ws[len(ws)-1]
	var cs []Case
	base := Case{Source: "mem", Size: 64, Flows: 1024, Dispatch: steer.DispatchDeferred, Policy: steer.PolicyRSS,
		Warm: s.o.warm, Dur: s.o.dur}
	// pinned says which pinnings to run with w workers: unpinned, and
	// pinned where each worker gets a CPU of its own.
	pinned := func(w int) []bool {
		if q || pinCPUs(w) == nil {
			return []bool{false}
		}
		return []bool{false, true}
	}
	if s.want("workers") {
		handlers := []string{handlerNone, handlerSpin, handlerStateful}
		if q {
			handlers = handlers[:2]
		}
		for _, h := range handlers {
			c := base
			c.Experiment, c.Handler = "workers", h
			c.Impl, c.Workers = "single", 1
			cs = append(cs, c)
			for _, w := range ws[1:] {
				c.Impl, c.Workers = "ceiling", w
				cs = append(cs, c)
			}
			for _, w := range ws {
				c.Workers = w
				for _, pin := range pinned(w) {
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
				c.Experiment, c.Handler, c.Size, c.Flows, c.Dur = "sizes", handlerNone, size, flows, s.o.dur/2
				c.Impl, c.Workers = "single", 1
				cs = append(cs, c)
				c.Impl, c.Workers = "rps", nCPU
				cs = append(cs, c)
			}
		}
	}
	if s.want("modes") && !q {
		c := base
		c.Experiment, c.Handler, c.Dur = "modes", handlerSpin, s.o.dur/2
		c.Impl, c.Workers = "single", 1
		cs = append(cs, c)
		for _, m := range []steer.DispatchMode{steer.DispatchDirect, steer.DispatchHybrid, steer.DispatchDeferred} {
			for _, p := range []steer.Policy{steer.PolicyRSS, steer.PolicyFlow, steer.PolicySource} {
				for _, pin := range pinned(nCPU) {
					c.Impl, c.Workers, c.Dispatch, c.Policy, c.Pinned = "rps", nCPU, m, p, pin
					cs = append(cs, c)
				}
			}
		}
	}
	if s.want("skew") {
		c := base
		c.Experiment, c.Handler, c.Zipf = "skew", handlerSpin, 1.0
		c.Impl, c.Workers = "single", 1
		cs = append(cs, c)
		for _, reb := range []bool{false, true} {
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
	if s.want("latency") && !q {
		c := base
		c.Experiment, c.Handler = "latency", handlerSpin
		cs = append(cs, latencyCases(c, latencyRates, nCPU)...)
	}
	if s.want("live") && !q { // -quick stays in memory
		if why := liveMissing(); why != "" {
			s.note("live: skipped: %s", why)
		} else {
			cs = append(cs, s.liveCases(ws)...)
		}
	}
	return cs
}

// latencyCases are base at each offered rate for the single-queue
// baseline and the library with 1 and nCPU workers; a live case sends a
// second's worth of frames.
func latencyCases(base Case, rates []int, nCPU int) []Case {
	var cs []Case
	for _, rate := range rates {
		c := base
		c.Rate = rate
		if c.Source != "mem" {
			c.Frames = rate
		}
		c.Impl, c.Workers = "single", 1
		cs = append(cs, c)
		for _, w := range slices.Compact([]int{1, nCPU}) {
			c.Impl, c.Workers = "rps", w
			cs = append(cs, c)
		}
	}
	return cs
}

// liveRates are the offered rates of the capture comparison, in frames a
// second; 0 is as fast as the sender goes.
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
		c := Case{Experiment: expCapture, Handler: handlerNone, Size: 64, Flows: 1 << 24, Rate: rate,
			Dispatch: steer.DispatchDeferred, Policy: steer.PolicyRSS, Frames: 1 << 20}
		if rate > 0 {
			c.Frames = rate // a second
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
			if c.Rate > 0 {
				return runLatency(ctx, c, fs, s.sp, rep)
			}
			return runMem(ctx, c, fs, s.sp, rep)
		case "pcap":
			path, err := s.pcapFile()
			if err != nil {
				return c.result(rep), err
			}
			return runPcap(ctx, c, path, s.sp, rep)
		default:
			if s.live == nil {
				e, err := newLiveEnv(s.tmp)
				if err != nil {
					return c.result(rep), err
				}
				s.live = e
				s.closes = append(s.closes, func() { e.Close() })
			}
			if c.Experiment == expZeroLoss {
				return runSearch(ctx, s.live, c, s.sp, rep)
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
	frames := synth.Frames(synth.Spec{Flows: 1024, Size: 64, Seed: 1}, 1<<18)
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
	rep := &Report{Machine: machine(), Command: commandLine(), Started: time.Now().UTC(), Quick: o.quick,
		Count: o.count, QLimit: qlimit(), Warmup: o.warm.Seconds(), Measure: o.dur.Seconds()}
	cal, err := loadCalibration(o.calibration, o.spinIters, rep.Machine.CPU, true)
	if err != nil {
		return nil, err
	}
	rep.Spin = cal
	s := &suite{o: o, tmp: tmp, sp: spinner{iters: cal.Iters}}
	defer func() {
		for _, c := range s.closes {
			c()
		}
	}()
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
	rep.Before = sampleLoad(o.loadSample)
	rep.SpinCost.StartNs, rep.SpinCost.StartMedNs = spinCost(s.sp, 60)
	rep.ClassifyNs = classifyCost(s.sets.get(synth.Spec{Flows: 1024, Size: 64, Seed: 1}))
	ticks0, _ := readCPUTicks()
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
	rep.SpinCost.EndNs, rep.SpinCost.EndMedNs = spinCost(s.sp, 60)
	if ticks1, ok := readCPUTicks(); ok {
		_, rep.StealRun = share(ticks0, ticks1)
	}
	rep.After = sampleLoad(o.loadSample)
	rep.Notes = s.notes
	rep.Warnings = warnings(rep)
	rep.Seconds = time.Since(rep.Started).Seconds()
	printTables(stdout, rep)
	return rep, runErr
}

// warnings says what makes rep's figures doubtful: a busy machine before
// or after the runs, a hypervisor that took time, a handler whose cost
// drifted.
func warnings(rep *Report) []string {
	var w []string
	for _, l := range []struct {
		when string
		l    load
	}{{"before the runs", rep.Before}, {"after the runs", rep.After}} {
		if why := l.l.busy(rep.Machine.Cores); why != "" {
			w = append(w, fmt.Sprintf("the machine was busy %s: %s; the figures are not those of a quiet machine", l.when, why))
		}
	}
	if rep.StealRun > 0.02 {
		w = append(w, fmt.Sprintf("the hypervisor stole %.1f%% of the CPU time during the runs", 100*rep.StealRun))
	}
	if d := rep.SpinCost.drift(); d > maxSpinDrift || d < -maxSpinDrift {
		w = append(w, fmt.Sprintf("the spin1us handler's cost drifted %+.1f%% from the start to the end (%.0f to %.0f ns a call): the CPU's speed changed, or other work took the CPUs from every round of the check",
			100*d, rep.SpinCost.StartNs, rep.SpinCost.EndNs))
	}
	if c := rep.Spin; c.NsPerCall > 0 && rep.SpinCost.StartNs > 0 {
		if d := (rep.SpinCost.StartNs - c.NsPerCall) / c.NsPerCall; d > maxSpinDrift || d < -maxSpinDrift {
			w = append(w, fmt.Sprintf("the spin1us handler costs %.0f ns a call, %+.0f%% from the %.0f ns it cost when calibrated (%s): results of this machine then and now do not compare",
				rep.SpinCost.StartNs, 100*d, c.NsPerCall, c.When.Format(time.DateOnly)))
		}
	}
	return w
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
		switch {
		case r.Experiment == "rr":
			p.line(fmt.Sprintf("%s: %.0f tps, p99 %.2f ms, %d retransmissions", p.name, r.TPS, r.LatP99/1e3, r.Retrans))
		case r.Trials > 0:
			p.line(fmt.Sprintf("%s: zero loss up to %.0f kpps, sender top %.0f kpps, %d trials %s", p.name,
				r.ZeroLossPPS/1e3, r.SendPPS/1e3, r.Trials, r.Flag))
		default:
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
