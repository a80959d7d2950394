// Command livesteer captures live traffic from one interface and steers it
// over worker goroutines, printing a netstat -Q-like report every second
// and a final one when it stops.
//
// It teaches the two ways to feed the dispatcher from a live interface:
//
//   - -fanout none: one AF_PACKET ring read by one goroutine, steered in
//     user space (RSS indirection table, DEFERRED dispatch by default): the
//     frames of a flow are queued to its worker.
//   - -fanout hash|lb|cpu|qm|rollover|rnd|ebpf: a kernel fanout group with
//     one socket per worker, each read by its own worker (DIRECT dispatch by
//     default): the kernel picks the worker. hash and ebpf keep a flow on one
//     worker; ebpf runs the library's own RSS steering in the kernel, so the
//     worker is the one the user-space table names. The others spread by
//     load (lb, rnd, rollover) or follow the receiving CPU or queue (cpu,
//     qm), and the report counts how often a flow changed worker.
//
// Every frame the kernel saw is accounted for: the report shows each
// socket's kernel counters (received, dropped for lack of ring space) next
// to the workers' handled and dropped frames.
//
// Run it as root (AF_PACKET needs CAP_NET_RAW, eBPF CAP_BPF):
//
//	sudo go run ./examples/livesteer -i eth0 -fanout ebpf -workers 4
//	sudo go run ./examples/livesteer -i eth0 -fanout none -dispatch deferred -duration 10s
//
// Stop it with Ctrl-C: it stops reading, lets the workers drain (for at
// most two seconds), prints the final report and closes the sockets.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/afpacket"
)

// options are the command's flags.
type options struct {
	iface    string
	fanout   string // none, or a fanout mode name
	workers  int
	dispatch string // empty: direct with a fanout group, deferred without
	policy   string
	key      string // random, microsoft or symmetric
	duration time.Duration
	interval time.Duration
	quiet    bool // only the final report
	qlimit   int

	// enter runs fn where the sockets must be opened (the test's network
	// namespace); nil runs it directly.
	enter func(fn func() error) error
}

func main() {
	var o options
	flag.StringVar(&o.iface, "i", "", "interface to capture on (required)")
	flag.StringVar(&o.fanout, "fanout", "none", "none (one socket, user-space steering) or a fanout mode: hash, lb, cpu, qm, rollover, rnd, ebpf")
	flag.IntVar(&o.workers, "workers", 2, "worker goroutines (and sockets in a fanout group)")
	flag.StringVar(&o.dispatch, "dispatch", "", "direct, hybrid or deferred (default: direct with a fanout group, deferred without)")
	flag.StringVar(&o.policy, "policy", "rss", "steering policy: rss, flow, source (ebpf needs rss)")
	flag.StringVar(&o.key, "key", "random", "Toeplitz key: random, microsoft or symmetric")
	flag.DurationVar(&o.duration, "duration", 0, "stop after this long (0: until Ctrl-C)")
	flag.DurationVar(&o.interval, "interval", time.Second, "report interval")
	flag.BoolVar(&o.quiet, "q", false, "print only the final report")
	flag.IntVar(&o.qlimit, "qlimit", 4096, "per-worker queue limit in frames (net.isr.defaultqlimit is 256)")
	flag.Parse()
	if o.iface == "" {
		fmt.Fprintln(os.Stderr, "livesteer: -i IFACE is required")
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "livesteer:", err)
		os.Exit(1)
	}
}

// run captures and steers until ctx ends or o.duration passes, then drains,
// prints the final report and closes everything.
func run(ctx context.Context, o options, out io.Writer) error {
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	if o.enter == nil {
		o.enter = func(fn func() error) error { return fn() }
	}
	cfg := steer.Config{Workers: o.workers, QLimit: o.qlimit}
	var err error
	if cfg.Policy, err = steer.ParsePolicy(o.policy); err != nil {
		return err
	}
	if o.dispatch == "" {
		o.dispatch = "deferred"
		if o.fanout != "none" {
			o.dispatch = "direct"
		}
	}
	if cfg.Dispatch, err = steer.ParseDispatch(o.dispatch); err != nil {
		return err
	}
	switch o.key {
	case "random":
	case "microsoft":
		cfg.Key, cfg.KeyName = hash.MicrosoftKey[:], "microsoft"
	case "symmetric":
		cfg.Key, cfg.KeyName, cfg.Symmetric = hash.SymmetricKey[:], "symmetric", true
	default:
		return fmt.Errorf("unknown key %q (want random, microsoft or symmetric)", o.key)
	}

	// The handler does nothing but exist: a real program would parse, count
	// or forward here. The flow-move counter wraps it.
	fm := afpacket.NewFlowMoves(max(o.workers, 1), 0)
	d, err := steer.New(cfg, fm.Handler(func(*steer.Packet) {}))
	if err != nil {
		return err
	}
	srcCfg := afpacket.Config{IgnoreOutgoing: false}

	var (
		runErr  = make(chan error, 1)
		runCtx  context.Context
		stopRun context.CancelFunc
		closers []func() error
		st      *afpacket.Steering
	)
	runCtx, stopRun = context.WithCancel(context.Background())
	defer stopRun()
	if o.fanout == "none" {
		var src *afpacket.Source
		if err := o.enter(func() (err error) { src, err = afpacket.Open(o.iface, srcCfg); return err }); err != nil {
			d.Close(context.Background())
			return err
		}
		closers = append(closers, src.Close)
		go func() { runErr <- d.Run(runCtx, src) }()
	} else {
		mode, err := afpacket.ParseFanoutMode(o.fanout)
		if err != nil {
			d.Close(context.Background())
			return err
		}
		var g *afpacket.Group
		if err := o.enter(func() (err error) { g, err = afpacket.OpenGroup(o.iface, d.Workers(), srcCfg, mode, 0); return err }); err != nil {
			d.Close(context.Background())
			return err
		}
		closers = append(closers, g.Close)
		if st, err = afpacket.NewSteering(d, g, afpacket.SteeringOptions{}); err != nil {
			d.Close(context.Background())
			g.Close()
			return err
		}
		closers = append(closers, st.Close)
		go func() { runErr <- st.Run(runCtx) }()
	}
	fmt.Fprintf(out, "livesteer: capturing on %s, fanout %s, %d workers, dispatch %s, policy %s, key %s\n",
		o.iface, o.fanout, d.Workers(), cfg.Dispatch, cfg.Policy, o.key)

	report := func(final bool) {
		s := d.Stats()
		title := "report"
		if final {
			title = "final report"
		}
		fmt.Fprintf(out, "\n--- %s at %s ---\n", title, time.Now().Format(time.TimeOnly))
		_ = s.WriteReport(out)
		fmt.Fprintf(out, "Flow moves between workers: %d (over %d hashed frames)\n", fm.Moves(), fm.Frames())
		if st != nil {
			ss := st.Stats()
			fmt.Fprintf(out, "Fanout %s: keeps flows on one worker: %v; table changes %d, held frames %d\n",
				ss.Mode, ss.Mode.KeepsFlows(), ss.TableChanges, ss.HeldFrames)
		}
	}
	tick := time.NewTicker(o.interval)
	defer tick.Stop()
	var failed error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-runErr:
			failed = err
			break loop
		case <-tick.C:
			if !o.quiet {
				report(false)
			}
		}
	}
	stopRun()
	if failed == nil {
		if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
			failed = err
		}
	}
	cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := d.Close(cctx); err != nil {
		fmt.Fprintln(out, "livesteer:", err)
	}
	report(true)
	for i := len(closers) - 1; i >= 0; i-- {
		if err := closers[i](); err != nil && failed == nil {
			failed = err
		}
	}
	return failed
}
