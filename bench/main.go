// Command bench measures the steering library against single-queue
// baselines, over in-memory frames, a capture file and (as root) live
// AF_PACKET and AF_XDP traffic between network namespaces it creates itself.
//
//	go run ./bench                     # the whole matrix, 6 runs of each configuration
//	go run ./bench -quick              # a smoke run: in memory only, short runs, 3 of each
//	go run ./bench -exp workers,skew -count 8 -out /tmp/r
//	go run ./bench -compare old/results.txt new/results.txt
//
// One command runs every configuration -count times (interleaved, so that
// noise spreads over all of them), shows its progress on stderr (a bar on a
// terminal, a line per run otherwise), prints on stdout where and how the
// figures were made and one table per experiment, each followed by what
// its implementations and columns are, and writes into -out (default
// bench-results/):
//
//	results.csv     every run, one row each
//	results.json    the same with the machine, the load, the calibration,
//	                the command line, warnings and notes
//	results.txt     every run in Go's benchmark format, for benchstat
//	*.png           throughput against workers per handler, speed-up over
//	                the single-queue baseline with its measured ceiling,
//	                per-worker load under a skewed workload with and without
//	                the rebalancer, latency at fixed offered rates, and the
//	                request/response experiment
//
// # Baselines
//
// single is the single-queue baseline of every experiment: one goroutine
// reads the same source (the in-memory frames, the capture file, the live
// socket) in batches of 64, classifies each frame with the library's
// classifier (steer.Classifier; the handler gets the flowid, as the library's
// handler does) and runs the same handler itself. The library with one
// worker is labelled "rps" with w 1, never single queue. ceiling is w
// single-queue loops run at once, each over its own share of the frames, as
// w independent programs: the measured ceiling of w workers. idiomatic is
// the usual Go pipeline (gopacket's DecodingLayerParser, FastHash, a channel
// send per frame).
//
// # Method
//
// An in-memory or file run first runs for -warmup, not counted (pools warm,
// queues filled, the rebalancer acting), then for -duration, over which the
// frames handled are counted from outside the goroutines that handle them;
// a capture file is read over and over. Every table gives a figure's median
// over the runs (of an even count, the mean of the middle two) ± the
// largest distance from the median to a run, which with n runs is a
// 1-2^(1-n) confidence interval for the median (97% at the default 6);
// ratios to the baseline are taken run by run, the runs of one repetition
// paired, and given as median (min-max). Plots draw the medians with
// min-max error bars and are not drawn from runs too short to show their
// effect.
//
// The spin1us handler is a loop of a fixed number of iterations, calibrated
// once per machine to about 1 µs (the cheapest of many rounds) and kept in
// -calibration (the user's cache directory), or given by -spin-iters, so
// that invocations and machines compare; its cost is measured at the start
// and at the end, with a warning when it moved more than 5%. The header
// records the CPU model and flags (GFNI and AVX-512 choose the hash's path),
// clock, governor and turbo where readable, the CPU set, the build settings,
// the commit, the queue limit, and the machine's load and steal just before
// and after the runs, with a warning when the machine was busy. Pinned runs
// give each worker a CPU of its own (the first left to the source when
// there is one to spare) and are not run where there are fewer CPUs than
// workers.
//
// # Experiments
//
//	workers  throughput against workers (1 up to steer.DefaultWorkers()) for each
//	         handler (none; spin1us; stateful: a per-flow counter in a map
//	         owned by the worker), for the single-queue baseline, its
//	         ceiling, the library unpinned and pinned, and the idiomatic
//	         pipeline
//	sizes    frame sizes 64..1500 bytes against 1..100000 flows
//	modes    dispatch direct/hybrid/deferred x policy rss/flow/source,
//	         pinned and unpinned
//	skew     Zipf(1.0) flow sizes, with and without the rebalancer (every
//	         20 ms; the warm-up holds several of its periods)
//	pcap     a capture file written from the same frames, read over and over
//	latency  open loop: the in-memory frames offered at fixed rates below
//	         saturation; the time from each sampled frame's due time to the
//	         end of its handler, for the baseline and the library alike
//	live     (root; not with -quick) a paced sender of its own across a veth pair into one AF_PACKET socket
//	         steered in user space, a kernel fanout group read by the
//	         library's workers (RunOnWorkers), the same group without the
//	         library (kernel PACKET_FANOUT_HASH baseline), and one socket
//	         read by one goroutine (single-queue baseline); then the
//	         capture comparison, at offered rates of 250 kpps to the sender's
//	         most, in turn: tcpdump, one AF_PACKET socket and one AF_XDP
//	         socket steered in user space, a fanout EBPF group and N
//	         AF_XDP sockets on one UMEM steered by the library's XDP
//	         program (the library's hash in the kernel, both), each with
//	         the frames it lost (with -xdp-unbatched, one more AF_XDP socket
//	         that hands frames over as soon as its ring has any)
//	         and its CPU time per frame, of the reader and of the whole
//	         path (the sender and the ksoftirqd threads too, which run the
//	         kernel's receive work), and the highest rate it took without
//	         loss
//	rr       (root; not with -quick) examples/forwarder between a client and a server
//	         namespace, 300 TCP connections doing 1-byte request/response
//	         through it, with one worker and with one per CPU
//
// Every in-memory run pushes the same frames (built by internal/synth,
// TCP/IPv4, Toeplitz with the public Microsoft key so that runs repeat)
// through the library's defaults otherwise: an input that can wait is held
// back on a full queue, not dropped from (the live runs too, where the ring
// then fills and the kernel drops). CPU is getrusage(RUSAGE_SELF) user and
// system time over the measured time; CPU share 1.0 is one core busy.
// Allocations are runtime.MemStats.Mallocs over it per frame.
//
// # Comparing
//
// -compare OLD NEW reads two results files (results.json or results.txt,
// or go test -bench output) and prints, for every benchmark and unit they
// share, the old and the new median with their spread, the change, and the
// p-value of a Mann-Whitney U test, as benchstat does: "~" where p > 0.05.
//
// The Go benchmarks in bench_test.go measure the same paths with `go test
// -bench . ./bench`; BenchmarkSteeredVsSingleQueue against the same
// single-queue baseline and ceiling (-count 6 or more for benchstat).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/afxdp"
)

// options are the command-line flags.
type options struct {
	out         string
	quick       bool
	count       int
	warm, dur   time.Duration
	exps        string
	rrDur       time.Duration
	rrConns     int
	rrWork      time.Duration
	noPlots     bool
	verbose     bool
	spinIters   int
	calibration string
	loadSample  time.Duration
	compare     string // -compare OLD: the old results; the new are the argument
	compareNew  string
	from        string // -from: print and plot a saved results.json, run nothing
}

func main() {
	if os.Getenv(senderEnv) != "" {
		os.Exit(senderMain(os.Args[1:], os.Stderr))
	}
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		cli.Exit("bench", err)
		return
	}
	if o.compare != "" {
		cli.Exit("bench", compareFiles(os.Stdout, o.compare, o.compareNew))
		return
	}
	if o.from != "" {
		cli.Exit("bench", replot(o, os.Stdout))
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := runAll(ctx, o, os.Stdout, os.Stderr)
	if rep != nil && len(rep.Results) > 0 {
		if werr := writeAll(rep, o); werr != nil && err == nil {
			err = werr
		}
	}
	cli.Exit("bench", err)
}

// parseFlags parses args. Its errors wrap cli.ErrUsage (or are flag.ErrHelp).
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := cli.NewFlagSet("bench", "[flags]",
		"Measures the steering library against single-queue baselines and prints the\n"+
			"median of each configuration; see the package documentation for the experiments.", stderr)
	fs.StringVar(&o.out, "out", "bench-results", "`directory` for results.csv, results.json and the plots")
	fs.BoolVar(&o.quick, "quick", false, "a smoke run: a small subset in memory only (workers and skew, 64-byte frames, 1024 flows; no pcap, latency, live or rr), short runs, 3 of each, in under a minute")
	fs.IntVar(&o.count, "count", 0, "`runs` of each configuration, interleaved (default 6, 3 with -quick); tables and plots show their median and spread")
	fs.DurationVar(&o.dur, "duration", 0, "measured `time` of each in-memory and file run (default 1s, 250ms with -quick; the sizes and modes experiments take half)")
	fs.DurationVar(&o.warm, "warmup", 0, "`time` each in-memory and file run runs before it is measured, not counted (default 200ms, 100ms with -quick)")
	fs.StringVar(&o.exps, "exp", "", "comma-separated `experiments` to run (workers,sizes,modes,skew,pcap,latency,live,rr); default all")
	fs.IntVar(&o.spinIters, "spin-iters", 0, "`iterations` of the spin1us handler's loop; 0: the machine's calibration (see -calibration)")
	fs.StringVar(&o.calibration, "calibration", defaultCalibrationFile(), "`file` keeping the spin1us handler's iteration count for this machine, calibrated and written on first use")
	fs.StringVar(&o.from, "from", "", "print the tables of a saved results.json `file` and draw its plots into -out, and run nothing")
	fs.StringVar(&o.compare, "compare", "", "compare the results in `OLD` (results.json or results.txt) with those named by the argument, as benchstat does, and run nothing")
	fs.DurationVar(&o.rrDur, "rr-duration", 0, "measured `time` per request/response run (default 10s)")
	fs.IntVar(&o.rrConns, "rr-conns", 300, "TCP `connections` in the request/response experiment")
	fs.DurationVar(&o.rrWork, "rr-work", 20*time.Microsecond, "CPU `time` the forwarder spends per frame")
	fs.BoolVar(&o.noPlots, "noplots", false, "do not draw the PNG plots")
	fs.IntVar(&benchQLimit, "qlimit", 0, "queue limit of every dispatcher run, in `frames`; 0: the library's default")
	fs.DurationVar(&benchXDPBatch, "xdp-batch-timeout", 0, "live AF_XDP sockets' batch timeout (afxdp.Config.BatchTimeout): how `long` a read waits for a full batch; 0: the library's default, negative: none")
	fs.BoolVar(&benchXDPUnbatched, "xdp-unbatched", false, "the live capture comparison also runs an AF_XDP socket with no batch timeout")
	fs.BoolVar(&o.verbose, "v", false, "print a line per run even on a terminal")
	rest, err := cli.ParseWithArgs(fs, args)
	if err != nil {
		return o, err
	}
	switch {
	case o.compare != "" && len(rest) != 1:
		return o, cli.Usagef("-compare OLD NEW: want one NEW results file after the flags, have %d arguments", len(rest))
	case o.compare == "" && len(rest) > 0:
		return o, cli.Usagef("unexpected argument %q", rest[0])
	case o.count < 0:
		return o, cli.Usagef("-count %d: want at least 1", o.count)
	case o.dur < 0 || o.warm < 0:
		return o, cli.Usagef("-duration %v -warmup %v: want positive times", o.dur, o.warm)
	case o.spinIters < 0:
		return o, cli.Usagef("-spin-iters %d: want a positive count", o.spinIters)
	case benchQLimit < 0 || benchQLimit > steer.MaxQLimit:
		return o, cli.Usagef("-qlimit %d: want 0 to %d", benchQLimit, steer.MaxQLimit)
	case benchXDPBatch < -afxdp.MaxBatchTimeout || benchXDPBatch > afxdp.MaxBatchTimeout:
		return o, cli.Usagef("-xdp-batch-timeout %v: want -%v to %v", benchXDPBatch, afxdp.MaxBatchTimeout, afxdp.MaxBatchTimeout)
	}
	for _, e := range strings.Split(o.exps, ",") {
		if e != "" && !slices.Contains(experiments, e) {
			return o, cli.Usagef("-exp: unknown experiment %q (want %s)", e, strings.Join(experiments, ","))
		}
	}
	if o.compare != "" {
		o.compareNew = rest[0]
	}
	o.defaults()
	return o, nil
}

// replot prints the tables of the saved results o.from and draws its
// plots into o.out.
func replot(o options, stdout io.Writer) error {
	b, err := os.ReadFile(o.from)
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("%s: %w", o.from, err)
	}
	printTables(stdout, &rep)
	if o.noPlots {
		return nil
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("%w", err)
	}
	files, err := writePlots(o.out, &rep)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: drew %s into %s\n", strings.Join(files, ", "), o.out)
	return nil
}

// defaults fills in what the flags left at zero.
func (o *options) defaults() {
	pick := func(v *time.Duration, full, quick time.Duration) {
		if *v == 0 {
			*v = full
			if o.quick {
				*v = quick
			}
		}
	}
	pick(&o.dur, time.Second, 250*time.Millisecond)
	pick(&o.warm, 200*time.Millisecond, 100*time.Millisecond)
	pick(&o.loadSample, time.Second, 500*time.Millisecond)
	if o.count == 0 {
		o.count = 6
		if o.quick {
			o.count = 3
		}
	}
}

// experiments are the names -exp takes.
var experiments = []string{"workers", "sizes", "modes", "skew", "pcap", "latency", "live", "rr"}

// writeAll writes the plots, the CSV, the JSON and the benchmark format
// into o.out: the plots first, so that what they left out is in the notes
// the JSON keeps.
func writeAll(rep *Report, o options) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("%w", err)
	}
	var files []string
	if !o.noPlots {
		notes := len(rep.Notes)
		var err error
		if files, err = writePlots(o.out, rep); err != nil {
			return err
		}
		for _, n := range rep.Notes[notes:] {
			fmt.Fprintln(os.Stderr, "bench: note:", n)
		}
	}
	write := func(name string, f func(*os.File) error) error {
		file, err := os.Create(filepath.Join(o.out, name))
		if err != nil {
			return fmt.Errorf("%w", err)
		}
		if err := f(file); err != nil {
			file.Close()
			return err
		}
		return file.Close()
	}
	if err := write("results.csv", func(f *os.File) error { return writeCSV(f, rep.Results) }); err != nil {
		return err
	}
	if err := write("results.json", func(f *os.File) error { return writeJSON(f, rep) }); err != nil {
		return err
	}
	if err := write("results.txt", func(f *os.File) error { return writeBenchfmt(f, rep) }); err != nil {
		return err
	}
	plots := "no plot"
	if len(files) > 0 {
		plots = strings.Join(files, ", ")
	}
	fmt.Fprintf(os.Stderr, "bench: wrote %s/results.csv, results.json, results.txt (benchstat's format); %s\n", o.out, plots)
	return nil
}

// workerCounts is 1, 2, 4, ... up to steer.DefaultWorkers() (the CPUs the
// process may run on), and that count.
func workerCounts() []int {
	n := steer.DefaultWorkers()
	var ws []int
	for w := 1; w < n; w *= 2 {
		ws = append(ws, w)
	}
	return append(ws, n)
}
