// Command bench measures the steering library against single-queue
// baselines, over in-memory frames, a capture file and (as root) live
// AF_PACKET traffic between network namespaces it creates itself.
//
//	go run ./bench                 # the whole matrix
//	go run ./bench -quick          # a small subset, under two minutes
//	go run ./bench -exp workers,skew -count 5 -out /tmp/r
//
// One command runs every configuration -count times (interleaved, so that
// noise spreads over all of them), shows its progress on stderr (a bar on a
// terminal, a line per run otherwise), prints text tables of the medians on
// stdout, and writes into -out (default bench-results/):
//
//	results.csv     every run, one row each
//	results.json    the same with the machine, the command line and notes
//	*.png           throughput against workers per handler (with the
//	                single-queue baseline and the linear ideal), speed-up,
//	                per-worker load under a skewed workload with and
//	                without the rebalancer, latency distribution, and the
//	                request/response experiment
//
// # Experiments
//
//	workers  throughput against workers (1 up to the CPU count) for each
//	         handler (none, spin1us: about 1 µs of CPU per frame, stateful:
//	         a per-flow counter in a map owned by the worker), for the
//	         library unpinned and pinned, the idiomatic Go pipeline
//	         (gopacket decoding, one channel send per frame) and the
//	         single-queue baseline (one goroutine calling the handler)
//	sizes    frame sizes 64..1500 bytes against 1..100000 flows
//	modes    dispatch direct/hybrid/deferred x policy rss/flow/source,
//	         pinned and unpinned
//	skew     Zipf(1.0) flow sizes, with and without the rebalancer
//	pcap     replay of a capture file written from the same frames
//	live     (root) trafgen across a veth pair into one AF_PACKET socket
//	         steered in user space, a kernel fanout group read by the
//	         library's workers (RunOnWorkers), the same group without the
//	         library (kernel PACKET_FANOUT_HASH baseline), and one socket
//	         read by one goroutine (single-queue baseline)
//	rr       (root) examples/forwarder between a client and a server
//	         namespace, 300 TCP connections doing 1-byte request/response
//	         through it, with one worker and with one per CPU
//
// Every in-memory run pushes the same frames (built by internal/synth,
// TCP/IPv4, Toeplitz with the public Microsoft key so that runs repeat);
// dispatch blocks instead of dropping. Latency is dispatch to handler, from
// one frame in 1024 stamped with the monotonic clock, in a log-linear
// histogram per worker. CPU is getrusage(RUSAGE_SELF) user and system time
// over the run; CPU share 1.0 is one core busy. Allocations are
// runtime.MemStats.Mallocs over the run per frame.
//
// The Go benchmarks in bench_test.go measure the same paths with `go test
// -bench . ./bench`.
package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/rpsgo/rps/steer"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// options are the command-line flags.
type options struct {
	out     string
	quick   bool
	count   int
	scale   float64
	exps    string
	rrDur   time.Duration
	rrConns int
	rrWork  time.Duration
	noPlots bool
	verbose bool
}

func main() {
	var o options
	flag.StringVar(&o.out, "out", "bench-results", "directory for results.csv, results.json and the plots")
	flag.BoolVar(&o.quick, "quick", false, "run a small subset (in-memory, 64-byte frames, 1024 flows) in under two minutes")
	flag.IntVar(&o.count, "count", 3, "runs of each configuration; tables and plots use the median")
	flag.Float64Var(&o.scale, "scale", 1, "multiply the frames per run by this")
	flag.StringVar(&o.exps, "exp", "", "comma-separated experiments to run (workers,sizes,modes,skew,pcap,live,rr); default all")
	flag.DurationVar(&o.rrDur, "rr-duration", 0, "measured time per request/response run (default 10s, 3s with -quick)")
	flag.IntVar(&o.rrConns, "rr-conns", 300, "TCP connections in the request/response experiment")
	flag.DurationVar(&o.rrWork, "rr-work", 20*time.Microsecond, "CPU time the forwarder spends per frame")
	flag.BoolVar(&o.noPlots, "noplots", false, "do not draw the PNG plots")
	flag.IntVar(&benchQLimit, "qlimit", steer.DefaultQLimit, "queue limit of every dispatcher run, in frames (the Go benchmarks use 4096)")
	flag.BoolVar(&o.verbose, "v", false, "print a line per run even on a terminal")
	flag.Parse()
	if flag.NArg() > 0 || o.count < 1 || o.scale <= 0 {
		fmt.Fprintln(os.Stderr, "usage: go run ./bench [-quick] [-out DIR] [-count N] [-scale F] [-exp LIST]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := runAll(ctx, o, os.Stdout, os.Stderr)
	if rep != nil && len(rep.Results) > 0 {
		if werr := writeAll(rep, o); werr != nil {
			fmt.Fprintln(os.Stderr, "bench:", werr)
			if err == nil {
				err = werr
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// writeAll writes the CSV, the JSON and the plots into o.out.
func writeAll(rep *Report, o options) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	write := func(name string, f func(*os.File) error) error {
		file, err := os.Create(filepath.Join(o.out, name))
		if err != nil {
			return fmt.Errorf("bench: %w", err)
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
	if !o.noPlots {
		files, err := writePlots(o.out, rep)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "bench: wrote %s/results.csv, results.json and %s\n", o.out, strings.Join(files, ", "))
	}
	return nil
}

// workerCounts is 1, 2, 4, ... up to the CPU count, and the CPU count.
func workerCounts() []int {
	n := runtime.NumCPU()
	var ws []int
	for w := 1; w < n; w *= 2 {
		ws = append(ws, w)
	}
	return append(ws, n)
}
