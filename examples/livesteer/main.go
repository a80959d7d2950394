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
// to the workers' handled and dropped frames, and the final report checks
// that they reconcile: kernel received == frames steered + kernel dropped.
//
// Run it as root (AF_PACKET needs CAP_NET_RAW, eBPF CAP_BPF):
//
//	sudo go run ./examples/livesteer -i eth0 -fanout ebpf -workers 4
//	sudo go run ./examples/livesteer -i eth0 -fanout none -dispatch deferred -duration 10s
//
// Stop it with Ctrl-C (or SIGTERM). It first stops intake at the sockets (a
// filter that drops every frame, so the kernel passes and counts no more),
// reads the rings dry, lets the workers drain (each step for at most two
// seconds), closes the sockets and prints the final report. The reports go
// to standard output, status lines and errors to standard error.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/afpacket"
)

// options are the command's flags.
type options struct {
	iface    string
	fanout   string // none, or a fanout mode name
	workers  int    // 0: steer.DefaultWorkers()
	dispatch string // empty: direct with a fanout group, deferred without
	policy   string
	key      string // random, microsoft or symmetric
	duration time.Duration
	interval time.Duration
	quiet    bool // only the final report
	qlimit   int  // 0: the library's default

	// enter runs fn where the sockets must be opened (the test's network
	// namespace); nil runs it directly.
	enter func(fn func() error) error
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err = run(ctx, o, os.Stdout, os.Stderr)
	}
	cli.Exit("livesteer", err)
}

// parseFlags parses args. Its errors wrap cli.ErrUsage (or are flag.ErrHelp).
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := cli.NewFlagSet("livesteer", "-i IFACE [flags]",
		"Captures live traffic with AF_PACKET and steers it over worker goroutines,\n"+
			"printing a netstat -Q-like report every -interval and a final one at the end.", stderr)
	fs.StringVar(&o.iface, "i", "", "`interface` to capture on (required)")
	fs.StringVar(&o.fanout, "fanout", "none", "none (one socket, user-space steering) or a fanout `mode`: hash, lb, cpu, qm, rollover, rnd, ebpf")
	fs.IntVar(&o.workers, "workers", 0, "`number` of worker goroutines (and sockets in a fanout group); 0: steer.DefaultWorkers(), one per CPU this process may run on")
	fs.StringVar(&o.dispatch, "dispatch", "", "`mode`: direct, hybrid or deferred (default: direct with a fanout group, deferred without)")
	fs.StringVar(&o.policy, "policy", "rss", "steering `policy`: rss, flow, source (ebpf needs rss)")
	fs.StringVar(&o.key, "key", "random", "Toeplitz `key`: random, microsoft or symmetric")
	fs.DurationVar(&o.duration, "duration", 0, "stop after this `long` (0: until Ctrl-C)")
	fs.DurationVar(&o.interval, "interval", time.Second, "report `interval`")
	fs.BoolVar(&o.quiet, "q", false, "print only the final report")
	fs.IntVar(&o.qlimit, "qlimit", 0, fmt.Sprintf("per-worker queue limit in `frames`, at most %d; 0: the library's default", steer.MaxQLimit))
	if err := cli.Parse(fs, args); err != nil {
		return o, err
	}
	return o, o.check()
}

// check returns a usage error for options that cannot work.
func (o options) check() error {
	switch {
	case o.iface == "":
		return cli.Usagef("-i IFACE is required")
	case o.workers < 0:
		return cli.Usagef("-workers %d: want 0 or more", o.workers)
	case o.interval <= 0:
		return cli.Usagef("-interval %v: want a positive duration", o.interval)
	case o.duration < 0:
		return cli.Usagef("-duration %v is negative", o.duration)
	case o.qlimit < 0 || o.qlimit > steer.MaxQLimit:
		return cli.Usagef("-qlimit %d: want 0 to %d", o.qlimit, steer.MaxQLimit)
	case o.key != "random" && o.key != "microsoft" && o.key != "symmetric":
		return cli.Usagef("-key %q: want random, microsoft or symmetric", o.key)
	}
	if _, err := steer.ParsePolicy(o.policy); err != nil {
		return cli.Usagef("-policy: %v", err)
	}
	if o.dispatch != "" {
		if _, err := steer.ParseDispatch(o.dispatch); err != nil {
			return cli.Usagef("-dispatch: %v", err)
		}
	}
	if o.fanout != "none" {
		if _, err := afpacket.ParseFanoutMode(o.fanout); err != nil {
			return cli.Usagef("-fanout: %v", err)
		}
	}
	return nil
}

// run captures and steers until ctx ends or o.duration passes, then stops
// intake, drains, closes everything and prints the final report to out.
// Status lines and errors that do not end the run go to errOut.
func run(ctx context.Context, o options, out, errOut io.Writer) error {
	if err := o.check(); err != nil {
		return err
	}
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	if o.enter == nil {
		o.enter = func(fn func() error) error { return fn() }
	}
	cfg := steer.Config{Workers: o.workers, Queue: steer.QueueConfig{Limit: o.qlimit}}
	cfg.Policy, _ = steer.ParsePolicy(o.policy) // checked
	if o.dispatch == "" {
		o.dispatch = "deferred"
		if o.fanout != "none" {
			o.dispatch = "direct"
		}
	}
	cfg.Dispatch, _ = steer.ParseDispatch(o.dispatch) // checked
	switch o.key {
	case "microsoft":
		cfg.Hash.Key = hash.MicrosoftKey[:]
	case "symmetric":
		cfg.Hash = steer.HashConfig{Key: hash.SymmetricKey[:], Symmetric: true}
	}

	// The handler does nothing but count flow moves: a real program would
	// parse, count or forward here. The counter is made once the dispatcher
	// says how many workers it has, before any frame arrives.
	var fm *afpacket.FlowMoves
	d, err := steer.New(cfg, func(p *steer.Packet) { fm.Observe(p.FlowID, p.HashType.IsHash(), p.Worker) })
	if err != nil {
		return err
	}
	fm = afpacket.NewFlowMoves(d.Workers(), 0)
	srcCfg := afpacket.Config{IgnoreOutgoing: false}

	var (
		runErr  = make(chan error, 1)
		runCtx  context.Context
		stopRun context.CancelFunc
		socks   []*afpacket.Source // every socket, to stop and drain
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
		socks = append(socks, src)
		closers = append(closers, src.Close)
		go func() { runErr <- d.Run(runCtx, src) }()
	} else {
		mode, _ := afpacket.ParseFanoutMode(o.fanout) // checked
		var g *afpacket.Group
		if err := o.enter(func() (err error) { g, err = afpacket.OpenGroup(o.iface, d.Workers(), srcCfg, mode, 0); return err }); err != nil {
			d.Close(context.Background())
			return err
		}
		socks = append(socks, g.Sources()...)
		closers = append(closers, g.Close)
		if st, err = afpacket.NewSteering(d, g, afpacket.SteeringOptions{}); err != nil {
			d.Close(context.Background())
			g.Close()
			return err
		}
		closers = append(closers, st.Close)
		go func() { runErr <- st.Run(runCtx) }()
	}
	fmt.Fprintf(errOut, "livesteer: capturing on %s, fanout %s, %d workers, dispatch %s, policy %s, key %s\n",
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
		if final {
			writeReconcile(out, &s, socks)
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
	if failed == nil {
		// Stop intake at the sockets and let the readers empty the rings,
		// so that every frame the kernel counted is steered before the
		// final counts.
		if err := stopIntake(socks); err != nil {
			fmt.Fprintln(errOut, "livesteer:", err)
		}
		if err := drain(socks, 2*time.Second); err != nil {
			fmt.Fprintln(errOut, "livesteer:", err)
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
		fmt.Fprintln(errOut, "livesteer:", err)
	}
	// Closing the sockets reads their final kernel counters.
	for i := len(closers) - 1; i >= 0; i-- {
		if err := closers[i](); err != nil && failed == nil {
			failed = err
		}
	}
	report(true)
	return failed
}

// drain waits, for at most timeout, until every socket has handed out every
// frame its ring received (kernel received == delivered + kernel dropped)
// on two reads in a row.
func drain(socks []*afpacket.Source, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	dry := 0
	for {
		left := uint64(0)
		for _, s := range socks {
			st, err := s.Stats()
			if err != nil {
				return fmt.Errorf("reading the rings dry: %w", err)
			}
			left += st.Packets - st.Drops - st.Delivered
		}
		if left == 0 {
			if dry++; dry == 2 {
				return nil
			}
		} else {
			dry = 0
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("reading the rings dry: %d frames still in them after %v", left, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// writeReconcile prints whether the kernel's counters and the dispatcher's
// agree: every frame the kernel passed to a socket was steered or dropped
// by the kernel for lack of ring space.
func writeReconcile(out io.Writer, s *steer.Stats, socks []*afpacket.Source) {
	var received, dropped uint64
	for _, sock := range socks {
		st, err := sock.Stats()
		if err != nil {
			fmt.Fprintf(out, "Kernel counters: %v\n", err)
			return
		}
		received += st.Packets
		dropped += st.Drops
	}
	ok := "yes"
	if received != s.Frames+dropped {
		ok = "NO"
	}
	fmt.Fprintf(out, "Kernel received %d = steered %d + kernel dropped %d: %s\n", received, s.Frames, dropped, ok)
}
