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
// With -xdp it reads through AF_XDP sockets (package steer/afxdp) instead,
// in the same two ways: -fanout none is one socket, fed by a small XDP
// program that redirects every frame of its queue (-xdp-queue, default 0)
// to it, steered in user space; -fanout ebpf is one socket per worker on
// that queue, sharing one UMEM, and the XDP program runs the library's
// RSS steering and redirects each frame to its worker's socket. Other
// fanout modes are a usage error: AF_XDP has no fanout group. Unlike an
// AF_PACKET tap, an AF_XDP socket takes the frames: the kernel stack does
// not see the frames of that queue while livesteer runs, ARP included (in
// both modes the sockets take every frame of the queue: with -fanout ebpf
// the frames the program cannot hash go to socket 0), so use it on a port
// given over to capture. On an interface that has addresses (other than
// IPv6 link-local ones) it therefore does not start unless -xdp-host says
// what becomes of the host's own frames (afxdp.Config.Host): with pass,
// ARP, neighbour discovery and the packets to the interface's addresses
// go to the kernel stack, counted, and the host keeps answering there, its
// connections included; with take the sockets take them too. With
// -xdp-pass-unhashed the frames the library cannot hash (ARP, other
// non-IP frames, malformed headers) go to the kernel stack instead, in
// both modes (afxdp.Config.PassUnhashed, kgroup.Options.PassUnhashed). The
// program is attached native (in the
// driver) where the driver allows, else generic, and the socket is zero
// copy where the driver allows, else copy (-xdp-attach, -xdp-bind force a
// mode); the status line, the per-socket lines of the report and the JSON
// report's live.xdp say which. As with AF_PACKET, the interface is put in
// promiscuous mode while the sockets are open (afxdp.Config.Promisc, which
// the kernel counts per holder and gives back at the end), unless -p.
//
// Every frame the kernel saw is accounted for: the report shows each
// socket's kernel counters (received, dropped for lack of ring space) next
// to the workers' handled and dropped frames, and the final report checks
// that they reconcile: kernel received == frames steered + kernel dropped
// (+ filtered, for a filter run in user space with -xdp).
//
// Run it as root (AF_PACKET needs CAP_NET_RAW, eBPF CAP_BPF):
//
//	sudo go run ./examples/livesteer -i eth0 -fanout ebpf -workers 4
//	sudo go run ./examples/livesteer -i eth0 -fanout none -dispatch deferred -duration 10s
//	sudo go run ./examples/livesteer -i eth0 -tunnels inner -vxlan-ports 4789,8472 -udp4tuple
//	sudo go run ./examples/livesteer -i eth1 -xdp -fanout ebpf -workers 4
//
// Once its sockets and programs are set up, and before it handles a frame,
// it drops to the user -Z names, as tcpdump -Z does: nobody by default
// when run as root (-Z root keeps root), without any capability, in all
// its threads (internal/privdrop); the -w files, created before, are given
// to that user. What it does afterwards needs no privilege: it reads the
// rings and the programs' counters, stops intake (a filter on its own
// sockets, or closing the XDP program's link) and closes everything,
// which detaches the programs and gives promiscuous mode back. Before
// Linux 5.19, with kernel.unprivileged_bpf_disabled set, reading the XDP
// program's counters and emptying its XSKMAP at the end need CAP_BPF: the
// steering line then keeps the counts of the drop, and the close reports
// the map's error (the program goes anyway); use -Z root there.
//
// It has tcpdump's habits where they fit:
//
//	sudo go run ./examples/livesteer -i eth0 -c 10000 -w 'worker-%d.pcap' tcp port 443
//	sudo go run ./examples/livesteer -i eth0 -s 128 -p -json -duration 5s | jq .totals
//
// A capture filter follows the flags as tcpdump takes it, or comes with -f
// EXPR or -F FILE: a pcap-filter(7) expression (compiled as tcpdump -i IFACE
// would attach it, in Go; see package steer/filter) or a program as
// `tcpdump -dd` prints it.
// It runs in the kernel on every socket (SO_ATTACH_FILTER), so the frames
// it rejects never reach user space and are counted nowhere; in a fanout
// group it replaces the drop-everything filter once every socket has
// joined. With -xdp it runs in user space instead (an AF_XDP socket has no
// socket filter, and an XDP program cannot run classic BPF), compiled as
// for a file, VLAN tags read in the frame's bytes: the sockets take every
// frame, and the ones it rejects are counted as filtered (and are not
// given to the kernel stack either). -c N stops after N frames; -w FILE writes what was steered as
// pcap (link type Ethernet, the tag the kernel took out put back), into
// one file or, with a %d in the name, one file per worker; one file grows
// as the workers write, in chunks of each worker's frames, so its
// timestamps are not sorted (mergecap can sort the per-worker files);
// -s SNAPLEN truncates frames (in the kernel; in user space with -xdp,
// whose sockets get whole frames); -p leaves the interface out of
// promiscuous mode; -json prints the final report on standard output as
// one JSON document (internal/capture's Report), the text reports then
// going to standard error, as they do with -w -; -version prints the
// version.
//
// What the flowid hashes is chosen as in pcapsteer: -tunnels inner opens
// VXLAN (UDP to the -vxlan-ports, default 4789), GENEVE, GRE and ERSPAN,
// GTP-U, IP in IP and MPLS over UDP and hashes the innermost flow, so that
// the flows between a few tunnel endpoints spread over the workers;
// -hashtypes is the set of RSS hash types (-udp4tuple its one-flag form for
// UDP, so that a DNS monitor between two hosts does not land on one
// worker), and -fragments follow sends a datagram's fragments after its
// first, to its flow's worker; -hash toeplitz or siphash.
// -verify-checksums verifies in the workers the checksums of the frames
// the kernel says nothing of (steer.Config.VerifyChecksums). They steer with -fanout none, where user space picks
// the worker, and with -fanout ebpf, whose kernel program computes the same
// flowid, or refuses a combination it cannot (a usage error, never another
// steering). The other fanout modes pick the worker in the kernel by their
// own rules, so there the flags change only the flowids the report counts.
// The final report counts frames by encapsulation, and when tunnelled
// frames were hashed by their outer headers it says so in one line, with
// the flag that would spread them.
//
// Stop it with Ctrl-C (or SIGTERM), or let -duration or -c stop it. It first
// stops intake at the sockets (a filter that drops every frame, so the
// kernel passes and counts no more), reads the rings dry, lets the workers
// drain (each step for at most two seconds), closes the sockets and prints
// the final report, then, on standard error, the counts tcpdump prints when
// it stops (packets captured, received by filter, dropped by kernel). With
// -xdp it stops intake by detaching the XDP program instead (afxdp's
// StopIntake, which returns once no frame can reach the rings), so the
// queue's frames go to the kernel stack again while the rings are read
// dry. A second Ctrl-C ends it at once. The reports go to standard output, status
// lines and errors to standard error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/rpsgo/rps/internal/capture"
	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/internal/privdrop"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/afpacket"
	"github.com/rpsgo/rps/steer/afxdp"
	"github.com/rpsgo/rps/steer/kgroup"
	"github.com/rpsgo/rps/steer/metrics"
)

// options are the command's flags.
type options struct {
	iface    string
	fanout   string // none, or a fanout mode name
	workers  int    // 0: steer.DefaultWorkers()
	dispatch string // empty: direct with a fanout group, deferred without
	policy   string
	key      string // -key: random, microsoft, symmetric or hex (capture.ParseKey)
	hash     capture.HashFlags
	duration time.Duration
	interval time.Duration
	quiet    bool // only the final report
	qlimit   int  // 0: the library's default
	verify   bool // -verify-checksums

	filter    string // the capture filter's text, "" for none
	count     int64  // -c: stop after this many frames; 0: no limit
	write     string // -w: pcap file or %d pattern
	snaplen   int    // -s: 0 keeps whole frames
	noPromisc bool   // -p
	json      bool
	version   bool
	metrics   string // -metrics: address to serve Prometheus metrics on, "" for none

	xdp       bool             // -xdp: read through AF_XDP instead of AF_PACKET
	xdpQueue  int              // -xdp-queue
	xdpAttach afxdp.AttachMode // -xdp-attach: auto, native or generic
	xdpBind   afxdp.BindMode   // -xdp-bind: auto, zerocopy or copy
	xdpPass   bool             // -xdp-pass-unhashed: frames the program cannot hash go to the kernel stack
	xdpHost   afxdp.HostMode   // -xdp-host: refuse, pass or take the host's own frames

	user    string // -Z: the user to drop to once the sockets are open; "root" keeps root
	userSet bool   // -Z was given
	// drop drops the process's privileges to a user (privdrop.Drop, which
	// main sets); nil drops nothing, as in the tests that run the command
	// in their own process.
	drop func(privdrop.Target) (privdrop.Dropped, error)

	// enter runs fn where the sockets must be opened (the test's network
	// namespace); nil runs it directly.
	enter func(fn func() error) error
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	o.drop = privdrop.Drop
	if err == nil {
		// The first SIGINT or SIGTERM stops the capture (run still drains
		// and reports); a second one ends the program at once.
		ctx, stop := cli.NotifyContext(context.Background())
		defer stop()
		err = run(ctx, o, os.Stdout, os.Stderr)
	}
	cli.Exit("livesteer", err)
}

// parseFlags parses args. Its errors wrap cli.ErrUsage (or are flag.ErrHelp).
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := cli.NewFlagSet("livesteer", "-i IFACE [flags] [filter expression]",
		"Captures live traffic with AF_PACKET (AF_XDP with -xdp) and steers it over worker\n"+
			"goroutines, printing a netstat -Q-like report every -interval and a final one at the end.\n"+
			"A capture filter in tcpdump's syntax may follow the flags; it runs in the kernel\n"+
			"(in user space with -xdp, its rejects counted as filtered).", stderr)
	fs.StringVar(&o.iface, "i", "", "`interface` to capture on (required)")
	fs.StringVar(&o.fanout, "fanout", "none", "none (one socket, user-space steering) or a fanout `mode`: hash, lb, cpu, qm, rollover, rnd, ebpf")
	fs.IntVar(&o.workers, "workers", 0, "`number` of worker goroutines (and sockets in a fanout group); 0: steer.DefaultWorkers(), one per CPU this process may run on")
	fs.StringVar(&o.dispatch, "dispatch", "", "`mode`: direct, hybrid or deferred (default: direct with a fanout group, deferred without)")
	fs.StringVar(&o.policy, "policy", "rss", "steering `policy`: rss, flow, source (ebpf needs rss)")
	fs.StringVar(&o.key, "key", "random", capture.KeyUsage+" (symmetric also hashes both directions of a connection alike)")
	o.hash.Register(fs)
	fs.DurationVar(&o.duration, "duration", 0, "stop after this `long` (0: until Ctrl-C)")
	fs.DurationVar(&o.interval, "interval", time.Second, "report `interval`")
	fs.BoolVar(&o.quiet, "q", false, "print only the final report")
	fs.IntVar(&o.qlimit, "qlimit", 0, fmt.Sprintf("per-worker queue limit in `frames`, at most %d; 0: the library's default", steer.MaxQLimit))
	fs.BoolVar(&o.verify, "verify-checksums", false, "verify in the workers the IPv4 header, TCP and UDP checksums of each frame the kernel has not (AF_PACKET's checksum status); a bad one is counted as the reason bad-checksum")
	var ff capture.FilterFlags
	ff.Register(fs)
	fs.Int64Var(&o.count, "c", 0, "stop after `n` frames, as tcpdump -c; 0: no limit")
	fs.StringVar(&o.write, "w", "", "write the steered frames as pcap (link type Ethernet, snap length -s) to `file` (\"-\": standard output), as the workers write them: in chunks of each worker's frames, not sorted by time; a name with %d, such as worker-%d.pcap, writes one file per worker")
	fs.IntVar(&o.snaplen, "s", 0, "keep at most `snaplen` bytes of each frame, as tcpdump -s (cut in the kernel; in user space with -xdp); 0: whole frames")
	fs.BoolVar(&o.noPromisc, "p", false, "do not put the interface in promiscuous mode, as tcpdump -p (with AF_PACKET and with -xdp alike)")
	fs.BoolVar(&o.json, "json", false, "print the final report on standard output as one JSON document (the text reports go to standard error)")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.StringVar(&o.metrics, "metrics", "", "serve Prometheus metrics at http://`addr`/metrics while capturing (for example 127.0.0.1:9100); off by default")
	fs.BoolVar(&o.xdp, "xdp", false, "read through AF_XDP instead of AF_PACKET, with -fanout none (one socket) or ebpf (one per worker, steered by the XDP program); the sockets take the frames from the kernel stack, and a filter runs in user space")
	fs.IntVar(&o.xdpQueue, "xdp-queue", 0, "with -xdp, the NIC receive `queue` to read; the other queues' frames go to the kernel stack")
	fs.TextVar(&o.xdpAttach, "xdp-attach", afxdp.AttachAuto, "with -xdp, the XDP program's attach `mode`: auto (native, else generic), native or generic")
	fs.TextVar(&o.xdpBind, "xdp-bind", afxdp.BindAuto, "with -xdp, the socket's `mode`: auto (zero copy, else copy), zerocopy or copy")
	fs.TextVar(&o.xdpHost, "xdp-host", afxdp.HostRefuse, "with -xdp on an interface that has addresses, what becomes of the frames the host itself needs (the sockets take the frames from its stack): refuse (do not start), pass (ARP, neighbour discovery and packets to its addresses go to the kernel stack, counted) or take (the sockets take them too: the host stops answering there)")
	fs.StringVar(&o.user, "Z", defaultUser, "once the sockets and programs are set up, drop to this `user` (a name or a number) and every capability, as tcpdump -Z does, before any frame is handled; the -w files are given to it; -Z root keeps root's privileges; when not run as root, only a -Z given drops")
	fs.BoolVar(&o.xdpPass, "xdp-pass-unhashed", false, "with -xdp, pass the frames the library cannot hash (ARP, other non-IP frames) to the kernel stack instead of the sockets, in both modes, so that the host keeps ARP on the interface; off by default: the sockets take every frame of the queue")
	rest, err := cli.ParseWithArgs(fs, args)
	if err != nil {
		return o, err
	}
	if o.filter, err = ff.Text(rest); err != nil {
		return o, err
	}
	fs.Visit(func(f *flag.Flag) { o.userSet = o.userSet || f.Name == "Z" })
	if o.version {
		return o, nil
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
	case o.count < 0:
		return cli.Usagef("-c %d is negative", o.count)
	case o.snaplen < 0:
		return cli.Usagef("-s %d is negative", o.snaplen)
	case o.json && o.write == "-":
		return cli.Usagef("-json and -w - both write to standard output: choose one")
	case o.xdp && o.fanout != "none" && o.fanout != "ebpf":
		return cli.Usagef("-xdp -fanout %s: AF_XDP has no fanout group; use -fanout none (one socket, steered in user space) or -fanout ebpf (one socket per worker, steered by the XDP program)", o.fanout)
	case o.xdpQueue < 0 || o.xdpQueue > 1<<16-1:
		return cli.Usagef("-xdp-queue %d: want 0 to 65535", o.xdpQueue)
	case o.userSet && o.user == "":
		return cli.Usagef("-Z needs a user (-Z root keeps root's privileges)")
	case o.xdpAttach == afxdp.AttachNone:
		return cli.Usagef("-xdp-attach none attaches no program, so the socket would receive nothing: want auto, native or generic")
	}
	var p steer.Policy
	if err := p.UnmarshalText([]byte(o.policy)); err != nil {
		return cli.Usagef("-policy: %v", err)
	}
	if o.dispatch != "" {
		var m steer.DispatchMode
		if err := m.UnmarshalText([]byte(o.dispatch)); err != nil {
			return cli.Usagef("-dispatch: %v", err)
		}
	}
	if o.fanout != "none" {
		if _, err := afpacket.ParseFanoutMode(o.fanout); err != nil {
			return cli.Usagef("-fanout: %v", err)
		}
	}
	_, err := o.config()
	return err
}

// config is the dispatcher's configuration the options give. Its errors
// are usage errors.
func (o options) config() (steer.Config, error) {
	cfg := steer.Config{Workers: o.workers, Queue: steer.QueueConfig{Limit: o.qlimit}, VerifyChecksums: o.verify}
	_ = cfg.Policy.UnmarshalText([]byte(o.policy)) // checked
	dispatch := o.dispatch
	if dispatch == "" {
		dispatch = "deferred"
		if o.fanout != "none" {
			dispatch = "direct"
		}
	}
	_ = cfg.Dispatch.UnmarshalText([]byte(dispatch)) // checked
	key, err := capture.ParseKey(o.key, o.hash.Algorithm)
	if err != nil {
		return cfg, cli.Usagef("-key: %v", err)
	}
	// The symmetric key comes with symmetric hashing: livesteer has no
	// -symmetric flag of its own.
	cfg.Hash, err = o.hash.Config(key, o.key == "symmetric")
	return cfg, err
}

// worker is one worker's state (steer.NewPerWorker): its counts by
// encapsulation, and its pcap writer for -w, or nil. A real program would
// keep its per-flow tables here.
type worker struct {
	encaps *capture.EncapTally
	dump   *capture.WorkerDump
}

// Tick lets the pcap writer write what it holds (steer.Ticker).
func (w *worker) Tick(now time.Time) {
	if w.dump != nil {
		w.dump.Tick(now)
	}
}

// Close runs in the worker before it exits (io.Closer): the pcap writer
// writes the rest; Dispatcher.Close returns its error.
func (w *worker) Close() error {
	if w.dump != nil {
		return w.dump.Close()
	}
	return nil
}

// run captures and steers until ctx ends, o.duration passes or -c frames
// were steered, then stops intake, drains, closes everything and prints the
// final report to out (to errOut, and the JSON report to out, with -json;
// to errOut with -w -). Status lines and errors that do not end the run go
// to errOut.
func run(ctx context.Context, o options, out, errOut io.Writer) error {
	if o.version {
		return capture.WriteVersion(out, "livesteer")
	}
	if err := o.check(); err != nil {
		return err
	}
	stdout := out
	if o.json || o.write == "-" {
		out = errOut // standard output carries the JSON or the pcap alone
	}
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	if o.enter == nil {
		o.enter = func(fn func() error) error { return fn() }
	}
	cfg, _ := o.config() // checked
	sockCfg, err := o.sockConfig()
	if err != nil {
		return err
	}
	dropTo, drop, err := o.dropTarget()
	if err != nil {
		return err
	}
	var dump *capture.Dump
	if o.write != "" {
		var err error
		if dump, err = capture.OpenDump(o.write, capture.DumpOptions{SnapLen: o.snaplen}, stdout); err != nil {
			return err
		}
		defer dump.Close()
	}
	// Until the capture runs, a failure leaves an existing -w file as it
	// was: the dump writes under a temporary name until Commit.
	capturing := false
	defer func() {
		if !capturing {
			dump.Abort()
		}
	}()

	// The handler counts worker changes and encapsulations and writes -w:
	// a real program would parse, count or forward here. The counter of
	// worker changes is made once the dispatcher says how many workers it
	// has, before any frame arrives.
	encaps, err := capture.NewEncapCounter(cfg.Hash)
	if err != nil {
		return err
	}
	var wc *kgroup.WorkerChanges
	d, workers, err := steer.NewPerWorker(cfg, func(w *steer.Worker) *worker {
		st := &worker{encaps: encaps.NewTally()}
		if dump != nil {
			st.dump = dump.Worker(w.Index())
		}
		return st
	}, func(w *worker, p *steer.Packet) {
		wc.Observe(p.FlowID, p.HashType.IsHash(), p.Worker)
		k := p.Key()
		w.encaps.Add(p.Data, &k, p.WireLen)
		if w.dump != nil {
			w.dump.Write(p)
		}
	})
	if err != nil {
		if errors.Is(err, steer.ErrConfig) {
			err = cli.UsageError(err) // a flag's value the library refuses
		}
		return err
	}
	wc = kgroup.NewWorkerChanges(d.Workers(), 0)
	if o.metrics != "" {
		stopMetrics, err := serveMetrics(o.metrics, d, errOut)
		if err != nil {
			d.Close(context.Background())
			return err
		}
		defer stopMetrics()
	}

	var limit *capture.Limit
	var limitReached <-chan struct{}
	if o.count > 0 {
		limit, _ = capture.NewLimit(o.count) // checked
		limitReached = limit.Reached()
	}
	// wrap puts the -c limit around a socket; the rings are drained past it.
	wrap := func(src steer.Source) steer.Source {
		if limit == nil {
			return src
		}
		return limit.Source(src, true)
	}

	runErr := make(chan error, 1)
	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	start := time.Now()
	in, err := openIntake(o, d, sockCfg)
	if err != nil {
		d.Close(context.Background())
		return err
	}
	defer in.close() // on an early return; closed before the final report
	if err := dump.Commit(); err != nil {
		d.Close(context.Background())
		return err
	}
	capturing = true
	if drop {
		if err := o.dropPrivileges(dropTo, dump, errOut); err != nil {
			d.Close(context.Background())
			return err
		}
	}
	srcs := in.srcs
	for i := range srcs {
		srcs[i] = wrap(srcs[i])
	}
	if o.fanout == "none" {
		go func() { runErr <- d.Run(runCtx, srcs[0]) }()
	} else {
		go func() { runErr <- d.RunOnWorkers(runCtx, srcs) }()
	}
	filterNote := ""
	if o.filter != "" {
		where := "in the kernel"
		if o.xdp {
			where = "in user space"
		}
		filterNote = fmt.Sprintf(", filter %q (%d instructions, %s)", o.filter, sockCfg.filterLen, where)
	}
	steering := fmt.Sprintf("policy %s, key %s, hash %s", cfg.Policy, o.key, capture.HashSummary(cfg.Hash))
	if o.fanout != "none" && o.fanout != "ebpf" {
		// The kernel's fanout picks each frame's socket, so its worker: the
		// policy, key and table the report shows steer nothing here.
		steering = fmt.Sprintf("the kernel's fanout %s picks the worker (policy, key and buckets unused; the hash still gives flowids)", o.fanout)
	}
	fmt.Fprintf(errOut, "livesteer: capturing on %s (%s), fanout %s, %d workers, dispatch %s, %s%s\n",
		o.iface, in.note, o.fanout, d.Workers(), cfg.Dispatch, steering, filterNote)

	report := func(final bool) {
		s := d.Stats()
		title := "report"
		if final {
			title = "final report"
		}
		fmt.Fprintf(out, "\n--- %s at %s ---\n", title, time.Now().Format(time.TimeOnly))
		_ = s.WriteReport(out)
		fmt.Fprintf(out, "Worker changes (a flow's frame handled by another worker than its last): %d of %d hashed frames\n",
			wc.Changes(), wc.Frames())
		if in.steering != nil {
			fmt.Fprintln(out, in.steering())
		}
	}
	tick := time.NewTicker(o.interval)
	defer tick.Stop()
	var failed error
	interrupted := false
loop:
	for {
		select {
		case <-ctx.Done():
			interrupted = !errors.Is(ctx.Err(), context.DeadlineExceeded)
			break loop
		case <-limitReached:
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
		// so that every frame the kernel counted is steered (or, past -c,
		// counted) before the final counts.
		if err := in.socks.stop(); err != nil {
			fmt.Fprintln(errOut, "livesteer:", err)
		}
		if err := drain(in.socks, 2*time.Second); err != nil {
			fmt.Fprintln(errOut, "livesteer:", err)
		}
	}
	stopRun()
	if failed == nil {
		err := <-runErr
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, steer.ErrClosed) {
			failed = err
		}
	}
	cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := d.Close(cctx); err != nil {
		fmt.Fprintln(errOut, "livesteer:", err)
		if failed == nil && dump != nil {
			failed = err // the pcap writers' errors come through Close
		}
	}
	if dump != nil {
		if err := dump.Close(); err != nil && failed == nil {
			failed = err
		}
	}
	elapsed := time.Since(start)
	// Closing the sockets reads their final kernel counters.
	if err := in.close(); err != nil && failed == nil {
		failed = err
	}
	report(true)
	var enc capture.EncapCounts
	for _, w := range workers { // read after Close
		enc.Merge(w.encaps.Counts())
	}
	if err := enc.WriteText(out); err != nil && failed == nil {
		failed = err
	}
	s := d.Stats()
	k := in.socks.totals()
	if limit != nil {
		k.afterCount, k.count = limit.Over(), o.count
	}
	writeReconcile(out, &s, k)
	// As tcpdump prints its counts when it stops, meaning what it means.
	_ = capture.WriteSummary(errOut, &s, capture.LiveCounts{Received: k.received, Dropped: k.dropped, Filtered: k.filtered, AfterCount: k.afterCount})
	if o.json {
		r := capture.NewReport("livesteer", &s)
		r.Input, r.Filter, r.Interrupted, r.ElapsedSeconds = o.iface, o.filter, interrupted, elapsed.Seconds()
		r.Totals.Read, r.Totals.AfterCount = k.delivered, k.afterCount
		for _, w := range workers { // read after Close
			if w.dump != nil {
				r.Totals.Written += w.dump.Frames()
			}
		}
		r.Totals.Balanced = k.err == nil && k.balanced(&s)
		r.Config.KeyRandom = cfg.Hash.Key == nil
		r.Encapsulations = enc.Report()
		r.Live = &capture.Live{Interface: o.iface, Fanout: o.fanout, KeepsFlows: in.keepsFlows(),
			WorkerChanges: wc.Changes(), HashedFrames: wc.Frames(), SnapLen: o.snaplen, Promiscuous: !o.noPromisc,
			Socket: "af_packet", XDP: in.xdp, Steering: in.steeringCounters()}
		if o.xdp {
			r.Live.Socket = "af_xdp"
		}
		if err := r.Write(stdout); err != nil && failed == nil {
			failed = err
		}
	}
	return failed
}

// defaultUser is -Z's default: the user with no privilege a Unix system
// has. tcpdump drops to a user of its own by default; livesteer has none,
// and a capture that keeps root while it parses untrusted frames is the
// risk -Z is for, so it drops by default too.
const defaultUser = "nobody"

// dropTarget returns -Z's user, or false when the capture keeps its
// privileges: with -Z root, when not run as root without a -Z, or without
// o.drop. It runs before anything is opened, so that a user who does not
// exist is a usage error that costs nothing.
func (o options) dropTarget() (privdrop.Target, bool, error) {
	if o.drop == nil || o.user == "root" || !o.userSet && os.Geteuid() != 0 {
		return privdrop.Target{}, false, nil
	}
	t, err := privdrop.Lookup(o.user)
	if err != nil {
		return t, false, cli.UsageError(fmt.Errorf("-Z %s: %w (-Z root keeps root's privileges)", o.user, err))
	}
	return t, true, nil
}

// dropPrivileges drops the process to t and every capability (o.drop),
// once the sockets and programs are set up and before any frame is
// handled, as tcpdump does; the -w files, already created, are given to
// the user first.
func (o options) dropPrivileges(t privdrop.Target, dump *capture.Dump, errOut io.Writer) error {
	if dump != nil && o.write != "-" {
		if err := dump.Chown(t.UID, t.GID); err != nil {
			return fmt.Errorf("-Z %s: giving the -w file to the user: %w", o.user, err)
		}
	}
	dropped, err := o.drop(t)
	if err != nil {
		return fmt.Errorf("-Z %s: %w", o.user, err)
	}
	fmt.Fprintf(errOut, "livesteer: dropped to %v, with no capability, in all %d threads\n", t, dropped.Threads)
	return nil
}

// steeringError returns an error of afpacket.NewSteering or
// afxdp.NewSteering as the command reports it: a configuration the group
// or the kernel's steering program cannot honour (a hash function, hash
// types or tunnels it does not compute, a key length it cannot take:
// every one wraps steer.ErrConfig) is a usage error, with its message.
func steeringError(err error) error {
	if errors.Is(err, steer.ErrConfig) {
		return cli.UsageError(err)
	}
	return err
}

// kernel sums the sockets' counters.
type kernel struct {
	received, dropped, delivered uint64
	filtered                     uint64 // frames a user-space filter rejected (AF_XDP)
	afterCount                   uint64 // frames read past -c, not steered
	count                        int64  // -c N, 0 for none
	err                          error
}

// balanced reports whether every frame the kernel passed to a socket was
// steered, read past -c, rejected by a user-space filter, or dropped by
// the kernel for lack of ring space, and every steered frame handled,
// dropped or panicked.
func (k kernel) balanced(s *steer.Stats) bool {
	return k.received == s.Frames+k.dropped+k.filtered+k.afterCount && s.Frames == s.Handled()+s.Dropped()+s.Panicked()
}

// writeReconcile prints whether the kernel's counters and the dispatcher's
// agree: every frame the kernel passed to a socket was steered, read past
// -c, rejected by a user-space filter, or dropped by the kernel for lack of
// ring space.
func writeReconcile(out io.Writer, s *steer.Stats, k kernel) {
	if k.err != nil {
		fmt.Fprintf(out, "Kernel counters: %v\n", k.err)
		return
	}
	ok := "yes"
	if !k.balanced(s) {
		ok = "NO"
	}
	after := ""
	if k.afterCount > 0 {
		after = fmt.Sprintf(" + past -c %d", k.afterCount)
	}
	if k.filtered > 0 {
		after += fmt.Sprintf(" + filtered %d", k.filtered)
	}
	fmt.Fprintf(out, "Kernel received %d = steered %d + kernel dropped %d%s: %s\n", k.received, s.Frames, k.dropped, after, ok)
	if k.afterCount > 0 {
		fmt.Fprintf(out, "  (past -c: read from the rings once -c %d frames were steered, and not steered)\n", k.count)
	}
}

// serveMetrics serves the dispatcher's metrics at addr until the returned
// function is called, and says where on errOut.
func serveMetrics(addr string, d *steer.Dispatcher, errOut io.Writer) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-metrics: %w", err)
	}
	fmt.Fprintf(errOut, "metrics at http://%s%s\n", ln.Addr(), metrics.Path)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := metrics.Serve(ctx, ln, d); err != nil {
			fmt.Fprintf(errOut, "livesteer: metrics: %v\n", err)
		}
	}()
	return func() { cancel(); <-done }, nil
}
