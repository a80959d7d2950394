package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rpsgo/rps/steer/afxdp"
)

// printTables prints the provenance, then one table per experiment, each
// figure as its median and spread over the repetitions.
func printTables(w io.Writer, rep *Report) {
	printHeader(w, rep)
	gs := groups(rep.Results)
	var exps []string
	for _, g := range gs {
		if e := g.first().Experiment; !slices.Contains(exps, e) {
			exps = append(exps, e)
		}
	}
	for _, e := range exps {
		switch e {
		case "rr":
			printRR(w, gs)
		case "latency", expLiveLatency:
			printLatency(w, gs, e)
		case expZeroLoss:
			printZeroLoss(w, gs)
		case expCapture:
			printCapture(w, gs)
		default:
			printThroughput(w, gs, e)
		}
	}
	if slices.ContainsFunc(gs, func(g *group) bool { return g.first().Source == "mem" || g.first().Source == "pcap" }) {
		fmt.Fprint(w, columnLegend)
	}
	if len(rep.Notes) > 0 {
		fmt.Fprintln(w, "\nnotes:")
		for _, n := range rep.Notes {
			fmt.Fprintln(w, "  "+n)
		}
	}
	for _, wn := range rep.Warnings {
		fmt.Fprintln(w, "WARNING: "+wn)
	}
	fmt.Fprintf(w, "\n%d runs in %.0f s\n", len(rep.Results), rep.Seconds)
}

// printHeader prints where, when and how the figures were made.
func printHeader(w io.Writer, rep *Report) {
	m := rep.Machine
	fmt.Fprintf(w, "command: %s\n", rep.Command)
	if rep.Quick {
		fmt.Fprintf(w, "A SMOKE RUN (-quick): short runs on a subset, for checking that the bench works; not figures to publish\n")
	}
	fmt.Fprintf(w, "date: %s, commit %s\n", rep.Started.Format(time.RFC3339), orNone(m.Commit))
	fmt.Fprintf(w, "machine: %s, %d CPUs (set %s, GOMAXPROCS %d), flags %s\n", m.CPU, m.Cores, cpuList(m.CPUSet),
		m.GOMAXPROCS, orNone(strings.Join(m.Flags, " ")))
	fmt.Fprintf(w, "clock: %s MHz now, max %s, governor %s, turbo %s\n", mhz(m.MHz), mhz(m.MaxMHz), orNone(m.Governor), orNone(m.Turbo))
	fmt.Fprintf(w, "system: %s, %s, build %s\n", m.Kernel, m.Go, orNone(m.Build))
	fmt.Fprintf(w, "load: before %s; after %s; stolen during the runs %.1f%%\n", rep.Before, rep.After, 100*rep.StealRun)
	src := rep.Spin.Source
	if rep.Spin.File != "" {
		src += " " + rep.Spin.File
	}
	fmt.Fprintf(w, "handler spin1us: %d iterations (%s; %.0f ns a call when calibrated %s), %.0f ns a call at the start, %.0f at the end (%+.1f%%)\n",
		rep.Spin.Iters, src, rep.Spin.NsPerCall, rep.Spin.When.Format(time.DateOnly),
		rep.SpinCost.StartNs, rep.SpinCost.EndNs, 100*rep.SpinCost.drift())
	fmt.Fprintf(w, "classifier: %.1f ns a frame on the in-memory frames (steer.Classifier alone, the cheapest of 20 rounds)\n", rep.ClassifyNs)
	fmt.Fprintf(w, "queues: %d frames for an input that waits\n", rep.QLimit)
	fmt.Fprintf(w, "runs: %d of each configuration, interleaved; in memory and from a file %.2f s of warm-up, not counted,\n"+
		"  then %.2f s measured (the sizes and modes experiments half that)", rep.Count, rep.Warmup, rep.Measure)
	fmt.Fprintf(w, "\nfigures: the median of the runs (of an even count, the mean of the middle two) ±the largest distance\n"+
		"  from it to a run, which with n runs is a %.0f%% interval for the median; ratios paired run by run, median (min-max)\n",
		100*(1-2/float64(int(1)<<max(rep.Count, 1))))
	for _, wn := range rep.Warnings {
		fmt.Fprintln(w, "WARNING: "+wn)
	}
}

func orNone(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func mhz(v float64) string {
	if v == 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.0f", v)
}

// cpuList formats CPU numbers as "0-3,6".
func cpuList(cpus []int) string {
	if len(cpus) == 0 {
		return "unknown"
	}
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		} else {
			parts = append(parts, fmt.Sprint(cpus[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// baseline returns the group g is compared with: the single-queue runs of
// the same experiment, handler, frame size, flows and offered rate (for
// rr, the one-worker runs), or nil.
func baseline(gs []*group, g *group) *group {
	r := g.first()
	for _, bg := range gs {
		b := bg.first()
		if b.Experiment != r.Experiment || b.Handler != r.Handler || b.FrameSize != r.FrameSize || b.Flows != r.Flows || b.Zipf != r.Zipf || b.Rate != r.Rate {
			continue
		}
		if r.Experiment == "rr" && b.Workers == 1 {
			return bg
		}
		if b.Impl == "single" {
			return bg
		}
	}
	return nil
}

// printThroughput prints the throughput table of experiment e.
func printThroughput(w io.Writer, gs []*group, e string) {
	fmt.Fprintf(w, "\n== %s\n", e)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "impl\tsource\thandler\tbytes\tflows\tw\tmode\tcpus\tMpps\tns/frame\tx single\tCPU\tallocs/f\timbal\tdrops\tn\t")
	for _, g := range gs {
		r := g.first()
		if r.Experiment != e {
			continue
		}
		ratio := "-"
		if b := baseline(gs, g); b != nil && b != g {
			ratio = g.ratio(b, mpps).rng("%.2f")
		}
		mode := "-"
		if r.Dispatch != "" {
			mode = r.Dispatch + "/" + r.Policy
			if r.Rebalance {
				mode += "+rebal"
			}
		}
		imb := "-"
		if r.Workers > 1 {
			imb = g.sum(imbal).pm("%.2f")
		}
		var drops uint64
		for _, x := range g.runs {
			drops = max(drops, x.Drops+x.KernelDrops)
		}
		flows := fmt.Sprint(r.Flows)
		if r.Zipf > 0 {
			flows += fmt.Sprintf("z%g", r.Zipf)
		}
		cpus := "-"
		if len(r.CPUs) > 0 {
			cpus = cpuList(r.CPUs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%.2f\t%.3f\t%s\t%d\t%d\t\n",
			r.Impl, r.Source, r.Handler, r.FrameSize, flows, r.Workers, mode, cpus, g.sum(mpps).pm("%.2f"),
			g.sum(nsPer).pm("%.1f"), ratio, g.sum(cpuOf).Med, g.sum(allocs).Med, imb, drops, len(g.runs))
	}
	tw.Flush()
	writeLegend(w, gs, e)
}

// flagged counts the runs of g flagged sender-limited.
func flagged(g *group) int {
	n := 0
	for _, r := range g.runs {
		if r.Flag != "" {
			n++
		}
	}
	return n
}

// printZeroLoss prints the zero-loss searches.
func printZeroLoss(w io.Writer, gs []*group) {
	fmt.Fprintf(w, "\n== live: zero-loss throughput (RFC 2544: the highest offered rate without loss, by binary search)\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "impl\tsource\thandler\tw\tzero-loss kpps\tx single\tsender top kpps\tsender-limited\ttrials\tn\t")
	for _, g := range gs {
		r := g.first()
		if r.Experiment != expZeroLoss {
			continue
		}
		ratio := "-"
		if b := baseline(gs, g); b != nil && b != g {
			ratio = g.ratio(b, mpps).rng("%.2f")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\t%.0f\t%d\t\n", r.Impl, r.Source, r.Handler, r.Workers,
			g.sum(func(r *Result) float64 { return r.ZeroLossPPS / 1e3 }).pm("%.0f"), ratio,
			g.sum(func(r *Result) float64 { return r.SendPPS / 1e3 }).pm("%.0f"), flagged(g),
			g.sum(func(r *Result) float64 { return float64(r.Trials) }).Med, len(g.runs))
	}
	tw.Flush()
	writeLegend(w, gs, expZeroLoss)
	fmt.Fprintf(w, zeroLossLegend, 100*searchResolution, maxTrials)
}

// zeroLossLegend says how the zero-loss search goes.
const zeroLossLegend = `  a sender (this program) sends 64-byte UDP frames of random 4-tuples from the other namespace over
  the veth pair, pinned to the last CPU (it shares a CPU with the receiver where there are no more
  CPUs than workers); every rate is the veth's transmit counter over the time it moved, one clock
  for all rows.
  A first trial as fast as the sender goes gives the sender's top rate; then a binary search, a trial of
  half a second at each offered rate, keeps the highest without a lost frame, to %.0f%% of the top
  or %d trials. columns: zero-loss kpps the rate found; x single over the single-queue baseline's,
  paired; sender top kpps the on-wire rate at full speed; sender-limited runs with no loss even at
  the sender's top: the sender, not the receiver, was the limit, and the figure is a lower bound
`

// printLatency prints the table of a latency experiment, e: latency (in
// memory) or live-latency.
func printLatency(w io.Writer, gs []*group, e string) {
	if e == "latency" {
		fmt.Fprintf(w, "\n== latency (in memory, open loop at fixed offered rates; due time to the end of the handler)\n")
	} else {
		fmt.Fprintf(w, "\n== live: latency at fixed offered rates (kernel receive time to the end of the handler)\n")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "impl\thandler\tw\toffered\thandled kpps\tp50 µs\tp99 µs\tp99.9 µs\tsaturated\tn\t")
	for _, g := range gs {
		r := g.first()
		if r.Experiment != e {
			continue
		}
		sat := 0
		for _, x := range g.runs {
			if strings.HasPrefix(x.Note, "saturated") || x.Lost > 0 {
				sat++
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t\n", r.Impl, r.Handler, r.Workers, offered(r.Rate),
			g.sum(func(r *Result) float64 { return r.Mpps * 1e3 }).pm("%.0f"),
			g.sum(func(r *Result) float64 { return r.LatP50 }).rng("%.0f"),
			g.sum(func(r *Result) float64 { return r.LatP99 }).rng("%.0f"),
			g.sum(func(r *Result) float64 { return r.LatP999 }).rng("%.0f"), sat, len(g.runs))
	}
	tw.Flush()
	writeLegend(w, gs, e)
	if e == "latency" {
		fmt.Fprintf(w, latencyLegend, latencyEvery)
	} else {
		fmt.Fprintf(w, liveLatencyLegend, latencyEvery)
	}
}

// liveLatencyLegend says what the live latency table's columns mean.
const liveLatencyLegend = `  the sender offers the frames at a fixed rate; the latency of one frame in %d, after the first tenth
  of the run, is from the time the kernel put it in the ring (the ring's timestamp) to the end of its
  handler, for the single-queue baseline and the library alike. columns as in the latency table;
  saturated: runs that lost frames
`

// latencyLegend says what the latency table's columns mean.
const latencyLegend = `  the in-memory frames offered at a fixed rate, open loop: frame i is due at i/rate whether or not
  the frames before it were handled, and the source hands over every frame due, in batches of up
  to 64; the latency of one frame in %d is from its due time to the end of its handler, for
  the single-queue baseline (which handles it in the source loop) and the library alike.
  columns: offered frames a second offered; handled kpps what was handled; p50/p99/p99.9 µs
    percentiles of the latency, median (min-max) over the runs; saturated runs that handled less
    than 98%% of what was offered
`

// printRR prints the request/response table.
func printRR(w io.Writer, gs []*group) {
	fmt.Fprintf(w, "\n== rr\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workers\ttps\tx 1 worker\tp50 ms\tp99 ms\tp99.9 ms\tretrans\tfwd CPU\tn\t")
	for _, g := range gs {
		r := g.first()
		if r.Experiment != "rr" {
			continue
		}
		ratio := "-"
		if b := baseline(gs, g); b != nil && b != g {
			ratio = g.ratio(b, tps).rng("%.2f")
		}
		var retrans uint64
		for _, x := range g.runs {
			retrans = max(retrans, x.Retrans)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%.2f\t%d\t\n", r.Workers, g.sum(tps).pm("%.0f"), ratio,
			g.sum(func(r *Result) float64 { return r.LatP50 / 1e3 }).pm("%.2f"),
			g.sum(func(r *Result) float64 { return r.LatP99 / 1e3 }).pm("%.2f"),
			g.sum(func(r *Result) float64 { return r.LatP999 / 1e3 }).pm("%.2f"), retrans, g.sum(cpuOf).Med, len(g.runs))
	}
	tw.Flush()
	fmt.Fprint(w, rrLegend)
}

// implLegend says what each implementation in the tables is.
var implLegend = map[string]string{
	"rps": "this library: a steer.Dispatcher, frames in batches of 64 from one input (live: one AF_PACKET " +
		"or AF_XDP socket read by one goroutine), classified, Toeplitz-hashed and queued to their worker; " +
		"with w 1 it is the library with one worker, not a single queue",
	"single": "the single-queue baseline: one goroutine reads the same source in batches of 64, classifies " +
		"each frame with the library's classifier (steer.Classifier.Classify: the flowid the handler uses) " +
		"and runs the handler itself; no hand-off, no second goroutine",
	"ceiling": "w single-queue baselines at once, each over its own share of the frames, as w independent " +
		"programs would run: the measured ceiling of w workers (x single is the highest speed-up w CPUs give)",
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
columns of the throughput tables: w workers; mode dispatch/policy (+rebal: the rebalancer on);
    cpus the CPUs the workers were pinned to, one each (-: not pinned);
    Mpps millions of frames handled a second in the measured time; ns/frame wall time per frame;
    x single Mpps over the single-queue baseline's of the same repetition, with the same handler,
    frame size and flows: median (min-max) of the paired ratios (-: none);
    CPU (user+sys)/wall time, 1.00 is one core busy; allocs/f heap allocations per frame;
    imbal frames of the busiest worker over the mean per worker (1.00 is even);
    drops the most frames one run dropped (dispatcher and kernel); n runs;
    in memory nothing touches the payload, so no Gbit/s is given
`

// writeLegend prints, after experiment e's table, what each of its
// implementations is.
func writeLegend(w io.Writer, gs []*group, e string) {
	var seen []string
	for _, g := range gs {
		if r := g.first(); r.Experiment == e && !slices.Contains(seen, r.Impl) {
			seen = append(seen, r.Impl)
		}
	}
	for _, impl := range seen {
		if what := implLegend[impl]; what != "" {
			fmt.Fprintf(w, "  %s: %s\n", impl, what)
		}
	}
}

// printCapture prints the live experiment's capture comparison: per
// configuration and offered rate, the on-wire and handled rates, the most
// frames one run lost and the medians over the runs of the CPU figures;
// then each configuration's zero-loss rate from its search.
func printCapture(w io.Writer, gs []*group) {
	captured := func(r *Result) bool { return r.Experiment == expCapture && r.Sent > 0 }
	if !slices.ContainsFunc(gs, func(g *group) bool { return captured(g.first()) }) {
		return
	}
	fmt.Fprintf(w, "\n== live: capture, loss and CPU a frame by offered rate (median of runs, lost: the most of a run)\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "impl\tsource\tw\tcapture\toffered\ton-wire kpps\thandled kpps\tlost\tf/batch\treader ns/f\ttotal ns/f\tsender-limited\tn\t")
	// config names a configuration without its rate and experiment.
	config := func(r *Result) string { c := *r; c.Rate, c.Experiment = 0, ""; return c.groupKey() }
	var order []string
	for _, g := range gs {
		if r := g.first(); captured(r) && !slices.Contains(order, config(r)) {
			order = append(order, config(r))
		}
	}
	for _, k := range order {
		for _, g := range gs {
			r := g.first()
			if !captured(r) || config(r) != k {
				continue
			}
			f := captureMedians(g)
			mode := r.Capture
			if mode == "" {
				mode = "-"
			}
			perBatch := "-"
			if f.perBatch > 0 {
				perBatch = fmt.Sprintf("%.1f", f.perBatch)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%.0f\t%.0f\t%d\t%d\t\n", r.Impl, r.Source, r.Workers, mode,
				offered(r.Rate), g.sum(func(r *Result) float64 { return r.SendPPS / 1e3 }).pm("%.0f"),
				g.sum(func(r *Result) float64 { return r.Mpps * 1e3 }).pm("%.0f"), f.lost, perBatch, f.readerNs, f.totalNs,
				flagged(g), len(g.runs))
		}
		for _, g := range gs {
			if r := g.first(); r.Experiment == expZeroLoss && config(r) == k {
				fmt.Fprintf(tw, "\t\t\t\tzero-loss\t%s\t\t\t\t\t\t%d\t%d\t\n",
					g.sum(func(r *Result) float64 { return r.ZeroLossPPS / 1e3 }).pm("%.0f"), flagged(g), len(g.runs))
			}
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

// captureMedians returns the medians over g's runs and the most frames one
// of them lost.
func captureMedians(g *group) captureFigures {
	var f captureFigures
	var send, batch, reader, total []float64
	for _, r := range g.runs {
		f.lost = max(f.lost, r.Lost)
		send, reader, total = append(send, r.SendPPS), append(reader, r.ReaderNs), append(total, r.TotalNs)
		if r.Batches > 0 {
			batch = append(batch, float64(r.Frames+r.Drops)/float64(r.Batches))
		}
	}
	f.sendPPS, f.perBatch, f.readerNs, f.totalNs = median(send), median(batch), median(reader), median(total)
	return f
}

var captureLegend = fmt.Sprintf(`  a sender (this program, sendmmsg on an AF_PACKET socket, paced open loop) sends 64-byte UDP frames
  of random 4-tuples from the other namespace over the veth pair, pinned to the last CPU;
  AF_PACKET sockets have the default 4 MiB ring, AF_XDP sockets the defaults: a %d-entry RX ring
  and a UMEM of %d chunks.
  columns: capture an AF_XDP socket's attach and bind modes (native or generic, zerocopy or copy)
    and its batch timeout (how long a read waits for a full batch; unbatched: none);
    offered the rate asked of the sender (max: as fast as it goes); on-wire kpps the veth's transmit
    counter over the time it moved; handled kpps frames handled over that same time (one clock for
    every row, tcpdump's too); lost frames sent and never handled, every cause; f/batch frames
    per non-empty batch a socket read gave; reader ns/f the CPU time of the reader (this process,
    or tcpdump) per frame handled; total ns/f the same with the sender's and the ksoftirqd threads',
    which run the kernel's receive path (veth, XDP, the copy into the ring or the UMEM, the IP
    stack); sender-limited runs where the sender fell short of the offered rate by more than 5%%
    or lost nothing at its top: they measured the sender; zero-loss the configuration's
    zero-loss rate from its search (see the zero-loss table)
`, afxdp.DefaultRingSize, afxdp.DefaultNumFrames)

// rrLegend says what the request/response table's columns mean.
const rrLegend = `  examples/forwarder between a client and a server namespace; TCP connections doing 1-byte
  request/response through it.
  columns: tps transactions a second; x 1 worker tps over the forwarder's with one worker, paired by
    repetition: the library against itself, not against a single queue (examples/forwarder always
    steers; this experiment has no single-queue forwarder); p50/p99/p99.9 ms transaction latency;
    retrans the client's TCP retransmissions; fwd CPU the forwarder's (user+sys)/wall time
`
