//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rpsgo/rps/internal/affinity"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/internal/pace"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/afpacket"
	"github.com/rpsgo/rps/steer/afxdp"
	"github.com/rpsgo/rps/steer/kgroup"
)

// liveEnv is a veth pair in two namespaces the bench created: the sender
// sends from B, the sockets under test read in A.
type liveEnv struct {
	pair    *netns.Pair
	dir     string
	softirq []string // /proc/<pid>/schedstat of each ksoftirqd thread
}

// liveMissing says why live runs cannot happen here, or "" when they can.
func liveMissing() string {
	if os.Geteuid() != 0 {
		return "live runs need root (network namespaces, AF_PACKET, AF_XDP)"
	}
	for _, tool := range []string{"ip", "ethtool", "taskset"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "live runs need " + tool + " in PATH (Debian: iproute2, ethtool, util-linux)"
		}
	}
	return ""
}

// tcpdumpMissing says why the tcpdump baseline cannot run, or "".
func tcpdumpMissing() string {
	if _, err := exec.LookPath("tcpdump"); err != nil {
		return "the tcpdump baseline needs tcpdump in PATH"
	}
	return ""
}

func newLiveEnv(dir string) (*liveEnv, error) {
	p, err := netns.Create(netns.Options{})
	if err != nil {
		return nil, fmt.Errorf("creating the namespaces: %w", err)
	}
	return &liveEnv{pair: p, dir: dir, softirq: softirqThreads()}, nil
}

func (e *liveEnv) Close() error { return e.pair.Close() }

// sendStats is what one sender run took.
type sendStats struct {
	wall    time.Duration // the sender's life, start-up included
	cpu     time.Duration // the sender's user+system time over its sending
	softirq time.Duration // the ksoftirqd threads' CPU time meanwhile
	// wire is B's veth transmit counter over the run: the frames that went
	// on the wire, and the time from the first to the last it counted
	// (sampled every wireEvery).
	wirePkts uint64
	wireSpan time.Duration
	cpuID    int // the CPU the sender was pinned to, -1 none
}

// wireEvery is how often the veth's counter is read during a run.
const wireEvery = 2 * time.Millisecond

// senderCPU is the CPU the sender is pinned to: the last the process may
// use, so that the receiver's source goroutine, which the pinned runs leave
// on the first, does not share it when there are CPUs to spare. It is -1
// where pinning is not possible.
func senderCPU() int {
	cpus := pinCPUs(1)
	all, err := affinity.Allowed()
	if cpus == nil || err != nil || len(all) == 0 {
		return -1
	}
	return all[len(all)-1]
}

// send runs the sender (this program again, see senderMain) in B, pinned
// to senderCPU: c.Frames UDP frames of c.Size bytes at c.Rate frames a
// second (0: as fast as it goes), and samples B's veth transmit counter
// meanwhile.
func (e *liveEnv) send(ctx context.Context, c Case) (sendStats, error) {
	st := sendStats{cpuID: senderCPU()}
	exe, err := os.Executable()
	if err != nil {
		return st, fmt.Errorf("the sender: %w", err)
	}
	spec := pace.Spec{Dev: e.pair.B.Link, Frames: c.Frames, Rate: c.Rate, Size: max(c.Size, 60),
		Src: e.pair.B.Addr.Addr(), Dst: e.pair.A.Addr.Addr()}
	args := append([]string{exe}, spec.Args()...)
	if st.cpuID >= 0 {
		args = append([]string{"taskset", "-c", strconv.Itoa(st.cpuID)}, args...)
	}
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := e.pair.B.Command(tctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), senderEnv+"=1")
	sampled := make(chan wireSample, 1)
	stopSampling := make(chan struct{})
	go func() { sampled <- e.sampleWire(stopSampling) }()
	k0 := e.softirqCPU()
	start := time.Now()
	out, err := cmd.CombinedOutput()
	st.wall = time.Since(start)
	st.softirq = e.softirqCPU() - k0
	time.Sleep(2 * wireEvery) // the last frames' count
	close(stopSampling)
	ws := <-sampled
	st.wirePkts, st.wireSpan = ws.pkts, ws.span
	if err != nil {
		return st, fmt.Errorf("the sender: %w: %s", err, bytes.TrimSpace(out))
	}
	if ws.err != nil {
		return st, ws.err
	}
	// The sender's own CPU over its sending: the process's start (the
	// runtime, the packages' init) is no part of any receiver's cost.
	_, _, st.cpu, err = parseSenderReport(out)
	return st, err
}

// wireSample is what sampleWire saw.
type wireSample struct {
	pkts uint64
	span time.Duration
	err  error
}

// sampleWire reads B's veth transmit counter every wireEvery until stop is
// closed, and returns how much it moved and the time from its first move
// to its last: the on-wire time of a run, the one clock every row's rates
// are taken over.
func (e *liveEnv) sampleWire(stop <-chan struct{}) wireSample {
	var ws wireSample
	c0, err := e.txPackets()
	if err != nil {
		ws.err = err
		return ws
	}
	last := c0
	var first, lastMove time.Time
	tick := time.NewTicker(wireEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			ws.pkts = last - c0
			if !first.IsZero() {
				ws.span = lastMove.Sub(first)
			}
			return ws
		case <-tick.C:
		}
		c, err := e.txPackets()
		if err != nil {
			ws.err = err
			return ws
		}
		if c != last {
			now := time.Now()
			if first.IsZero() {
				// The counter moved within the last period: count the
				// first move from half a period back.
				first = now.Add(-wireEvery / 2)
			}
			lastMove, last = now, c
		}
	}
}

// txPackets reads the transmit counter of B's veth from /proc/net/dev as
// B's namespace shows it.
func (e *liveEnv) txPackets() (uint64, error) {
	var v uint64
	err := e.pair.B.Do(func() error {
		b, err := os.ReadFile("/proc/thread-self/net/dev")
		if err != nil {
			return fmt.Errorf("reading the veth's counters: %w", err)
		}
		for _, ln := range strings.Split(string(b), "\n") {
			name, rest, ok := strings.Cut(ln, ":")
			if !ok || strings.TrimSpace(name) != e.pair.B.Link {
				continue
			}
			f := strings.Fields(rest)
			if len(f) < 10 {
				break
			}
			v, err = strconv.ParseUint(f[9], 10, 64) // tx packets
			return err
		}
		return fmt.Errorf("no %s in /proc/net/dev", e.pair.B.Link)
	})
	return v, err
}

// softirqThreads returns the schedstat files of the ksoftirqd threads,
// which run the softirqs (here: veth's receive path, XDP, the copy into a
// ring or a UMEM) that the task they interrupted could not finish.
func softirqThreads() []string {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var files []string
	for _, ent := range ents {
		if _, err := strconv.Atoi(ent.Name()); err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "comm"))
		if err == nil && strings.HasPrefix(string(comm), "ksoftirqd/") {
			files = append(files, filepath.Join("/proc", ent.Name(), "schedstat"))
		}
	}
	return files
}

// softirqCPU is the CPU time the ksoftirqd threads have run
// (/proc/<pid>/schedstat's first field, nanoseconds).
func (e *liveEnv) softirqCPU() time.Duration {
	var sum time.Duration
	for _, f := range e.softirq {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if fields := strings.Fields(string(b)); len(fields) > 0 {
			ns, _ := strconv.ParseInt(fields[0], 10, 64)
			sum += time.Duration(ns)
		}
	}
	return sum
}

// receiver is the capture under test in one live run, reading from
// before the sender starts until it is stopped.
type receiver struct {
	d       *steer.Dispatcher
	stamped []*stampSource
	cancel  context.CancelFunc
	done    chan error
	// kernel returns the sockets' own drop count and a summary of their
	// counters that stops changing once they are drained; settled reports
	// that every frame they received is accounted for.
	kernel  func() (drops uint64, summary string, settled bool)
	closers []func() error
	capture string // AF_XDP: attach and bind modes
}

// startReceiver opens c's sockets in A and starts reading them:
//
//	source afpacket     one AF_PACKET socket
//	source fanout-MODE  a fanout group of c.Workers sockets (hash, lb, cpu,
//	                    or ebpf: the library's program, afpacket.NewSteering)
//	source afxdp        one AF_XDP socket and the redirect program Open attaches
//	source xdp-ebpf     c.Workers AF_XDP sockets on one UMEM, steered by the
//	                    library's XDP program (afxdp.NewSteering)
//
// read by c.Impl:
//
//	rps           the dispatcher over the one socket (c.Dispatch)
//	rps-fanout,   one socket per worker read by that worker (RunOnWorkers,
//	rps-xdp       DIRECT)
//	single,       a goroutine per socket calls the handler (the kernel-only
//	kernel-fanout baselines)
func startReceiver(ctx context.Context, e *liveEnv, c Case, wk *work) (*receiver, error) {
	rc := &receiver{done: make(chan error, 1)}
	lib := library(c.Impl)
	if lib {
		scfg := c.steerConfig()
		scfg.Hash.UDP4Tuple = true // the sender's flows differ in their ports too
		// Hold the reader back on a full queue, as the in-memory runs do:
		// the ring then fills and the kernel drops, counted beside the run.
		scfg.Queue.Overflow = steer.OverflowWait
		if c.Impl != "rps" {
			scfg.Dispatch = steer.DispatchDirect
		}
		d, err := wk.dispatcher(scfg)
		if err != nil {
			return nil, err
		}
		rc.d = d
	}
	var srcs []steer.Source
	err := e.pair.A.Do(func() (err error) {
		srcs, err = rc.open(e.pair.A.Link, c)
		return err
	})
	if err != nil {
		rc.close()
		return nil, fmt.Errorf("opening %s: %w", c.Source, err)
	}
	for _, src := range srcs {
		ss := newStampSource(src)
		if c.Experiment == "live-latency" {
			// From the kernel's receive time, one frame in latencyEvery,
			// after the first tenth of the run.
			ss.kernelTime, ss.every, ss.skip = true, latencyEvery, uint64(c.Frames/10/len(srcs))
		}
		rc.stamped = append(rc.stamped, ss)
	}
	rctx, cancel := context.WithCancel(ctx)
	rc.cancel = cancel
	switch {
	case lib && len(srcs) == 1 && c.Impl == "rps":
		go func() { rc.done <- rc.d.Run(rctx, rc.stamped[0]) }()
	case lib && c.Impl != "rps":
		ss := make([]steer.Source, len(rc.stamped))
		for i, s := range rc.stamped {
			ss[i] = s
		}
		go func() { rc.done <- rc.d.RunOnWorkers(rctx, ss) }()
	case c.Impl == "single" || c.Impl == "kernel-fanout":
		errs := make(chan error, len(srcs))
		wws := wk.baseline(len(srcs))
		for i, s := range rc.stamped {
			go func() { errs <- readDirect(rctx, s, wws[i], &singleQueue{cls: newClassifier(true)}) }()
		}
		go func() {
			var first error
			for range srcs {
				if err := <-errs; err != nil && first == nil {
					first = err
				}
			}
			rc.done <- first
		}()
	default:
		cancel()
		rc.close()
		return nil, fmt.Errorf("implementation %q cannot read %d sockets of %s", c.Impl, len(srcs), c.Source)
	}
	return rc, nil
}

// open opens c.Source on link (in the caller's namespace) and returns the
// sources to read, one per worker for a group.
func (rc *receiver) open(link string, c Case) ([]steer.Source, error) {
	acfg := afpacket.Config{IgnoreOutgoing: true}
	switch src := c.Source; {
	case src == "afpacket":
		s, err := afpacket.Open(link, acfg)
		if err != nil {
			return nil, err
		}
		rc.closers = append(rc.closers, s.Close)
		rc.kernel = func() (uint64, string, bool) {
			st, _ := s.Stats()
			return st.Drops, fmt.Sprint(st), st.Packets == st.Delivered+st.Drops
		}
		return []steer.Source{s}, nil
	case strings.HasPrefix(src, "fanout-"):
		mode, err := afpacket.ParseFanoutMode(strings.TrimPrefix(src, "fanout-"))
		if err != nil {
			return nil, err
		}
		g, err := afpacket.OpenGroup(link, c.Workers, acfg, mode, 0)
		if err != nil {
			return nil, err
		}
		rc.closers = append(rc.closers, g.Close)
		rc.kernel = func() (uint64, string, bool) {
			st, _ := g.Stats()
			return st.Drops, fmt.Sprint(st), st.Packets == st.Delivered+st.Drops
		}
		if mode != afpacket.FanoutEBPF {
			return sources(g.Sources()), nil
		}
		if rc.d == nil {
			return nil, errors.New("fanout-ebpf steers by the dispatcher's table: it needs a library implementation")
		}
		st, err := afpacket.NewSteering(rc.d, g, kgroup.Options{})
		if err != nil {
			return nil, err
		}
		rc.closers = append(rc.closers, st.Close)
		return st.Sources(), nil
	case src == "afxdp" || src == "afxdp-unbatched":
		cfg := xdpConfig()
		if src == "afxdp-unbatched" {
			cfg.BatchTimeout = -1
		}
		s, err := afxdp.Open(link, cfg)
		if err != nil {
			return nil, err
		}
		rc.closers = append(rc.closers, s.Close)
		rc.capture = xdpCapture(s.Info(), s.Config())
		rc.kernel = func() (uint64, string, bool) {
			st, _ := s.Stats()
			return st.RxDropped + st.RxRingFull, fmt.Sprint(st), true
		}
		return []steer.Source{s}, nil
	case src == "xdp-ebpf":
		if rc.d == nil {
			return nil, errors.New("xdp-ebpf steers by the dispatcher's table: it needs a library implementation")
		}
		g, err := afxdp.OpenGroup(link, c.Workers, xdpConfig())
		if err != nil {
			return nil, err
		}
		rc.closers = append(rc.closers, g.Close)
		rc.kernel = func() (uint64, string, bool) {
			st, _ := g.Stats()
			return st.RxDropped + st.RxRingFull, fmt.Sprint(st), true
		}
		st, err := afxdp.NewSteering(rc.d, g, kgroup.Options{})
		if err != nil {
			return nil, err
		}
		rc.closers = append(rc.closers, st.Close)
		rc.capture = xdpCapture(g.Info(), g.Source(0).Config())
		return st.Sources(), nil
	}
	return nil, fmt.Errorf("unknown live source %q", c.Source)
}

// xdpConfig configures the AF_XDP sockets of the live runs: afxdp's
// defaults, with -xdp-batch-timeout's batch timeout, taking every frame
// (the veth has an address, and the traffic is the bench's own).
func xdpConfig() afxdp.Config { return afxdp.Config{BatchTimeout: benchXDPBatch, Host: afxdp.HostTake} }

// xdpCapture describes AF_XDP sockets for the capture column: how the
// program is attached, the bind mode and the batch timeout.
func xdpCapture(info afxdp.Info, cfg afxdp.Config) string {
	batch := "unbatched"
	if cfg.BatchTimeout > 0 {
		batch = "batch " + cfg.BatchTimeout.String()
	}
	return info.Attach.String() + " " + info.Mode() + " " + batch
}

// sources converts a slice of sources to steer.Source values.
func sources[S steer.Source](ss []S) []steer.Source {
	out := make([]steer.Source, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// drain waits, up to five seconds, until every frame the sockets got was
// read and their counters stopped moving.
func (rc *receiver) drain() {
	deadline := time.Now().Add(5 * time.Second)
	last, stable := "", 0
	for time.Now().Before(deadline) && stable < 3 {
		time.Sleep(30 * time.Millisecond)
		_, sum, settled := rc.kernel()
		cur := sum + " " + strconv.FormatUint(rc.read(), 10)
		if settled && cur == last {
			stable++
		} else {
			stable = 0
		}
		last = cur
	}
}

// read is the number of frames the readers got from the sockets.
func (rc *receiver) read() uint64 {
	var n uint64
	for _, s := range rc.stamped {
		n += s.frames.Load()
	}
	return n
}

// batches is the number of non-empty batches the readers got.
func (rc *receiver) batches() uint64 {
	var n uint64
	for _, s := range rc.stamped {
		n += s.batches.Load()
	}
	return n
}

// stop ends the reading, closes the dispatcher and returns the first error
// of either.
func (rc *receiver) stop() error {
	rc.cancel()
	err := <-rc.done
	if rc.d != nil {
		if cerr := rc.d.Close(context.Background()); err == nil {
			err = cerr
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// close closes the sockets, the steering first.
func (rc *receiver) close() {
	for i := len(rc.closers) - 1; i >= 0; i-- {
		rc.closers[i]()
	}
	rc.closers = nil
}

// runLive sends c.Frames frames with the sender across the veth pair at
// c.Rate and receives them with c's implementation (see startReceiver, and
// runTcpdump for tcpdump). Besides the rate over the first..last batch it
// records what was lost and the CPU time per frame of the reader and of
// the whole path.
func runLive(ctx context.Context, e *liveEnv, c Case, sp spinner, rep int) (Result, error) {
	if c.Impl == "tcpdump" {
		return runTcpdump(ctx, e, c, rep)
	}
	r := c.result(rep)
	wk := newWork(c.Handler, sp)
	rc, err := startReceiver(ctx, e, c, wk)
	if err != nil {
		return r, err
	}
	rx0, _ := e.pair.A.LinkCounter(ctx, e.pair.A.Link, "rx_packets")
	before := snapshot()
	ss, serr := e.send(ctx, c)
	if serr == nil {
		rc.drain()
	}
	runErr := rc.stop()
	after := snapshot()
	kdrops, ksum, _ := rc.kernel()
	rc.close()
	if serr != nil {
		return r, serr
	}
	if runErr != nil {
		return r, runErr
	}
	rx1, _ := e.pair.A.LinkCounter(ctx, e.pair.A.Link, "rx_packets")
	if rc.d != nil {
		ds := rc.d.Stats()
		r.Drops = ds.Dropped()
		r.Dispatch = rc.d.Config().Dispatch.String()
	}
	r.KernelDrops = kdrops
	r.Capture = rc.capture
	r.PerWorker, r.Frames = wk.counts()
	r.Batches = rc.batches()
	r.Note = fmt.Sprintf("veth rx %d, sockets gave %d in %d batches, socket counters %s",
		rx1-rx0, rc.read(), rc.batches(), ksum)
	r.finish(ss.wireSpan, before, after, wk.latency())
	if ss.wireSpan > 0 {
		// The sockets idle (in poll) outside the sender's run, so the CPU
		// time is that run's.
		r.CPUShare = (r.UserSec + r.SysSec) / ss.wireSpan.Seconds()
	}
	r.sent(c, ss, time.Duration((r.UserSec+r.SysSec)*1e9))
	return r, nil
}

// sent fills the figures of a live run from what the sender sent and the
// reader's CPU time. Every rate is over the on-wire time, the one clock of
// all rows; a run whose sender did not reach the offered rate, or that lost
// nothing at the sender's top rate, is flagged sender-limited: it measured
// the sender, not the receiver.
func (r *Result) sent(c Case, ss sendStats, reader time.Duration) {
	r.Sent = uint64(c.Frames)
	if r.Frames < r.Sent {
		r.Lost = r.Sent - r.Frames
	}
	r.SenderCPU = ss.cpuID
	if ss.wireSpan > 0 {
		r.SendPPS = float64(ss.wirePkts) / ss.wireSpan.Seconds()
		r.Mpps = float64(r.Frames) / ss.wireSpan.Seconds() / 1e6
		r.Gbps = float64(r.Frames) * float64(r.FrameSize) * 8 / ss.wireSpan.Seconds() / 1e9
	}
	switch {
	case c.Rate > 0 && r.SendPPS < 0.95*float64(c.Rate):
		r.Flag = "sender-limited"
	case c.Rate == 0 && r.Lost == 0:
		r.Flag = "sender-limited"
	}
	if r.Frames > 0 {
		n := float64(r.Frames)
		r.ReaderNs = float64(reader.Nanoseconds()) / n
		r.TotalNs = float64((reader + ss.cpu + ss.softirq).Nanoseconds()) / n
	}
}

// tcpdumpStat matches tcpdump's closing counts.
var tcpdumpStat = regexp.MustCompile(`(\d+) packets? (captured|received by filter|dropped by kernel)`)

// runTcpdump captures c.Frames frames with tcpdump -w /dev/null in A, with
// the same ring size as an afpacket socket's default (-B) and a kernel
// filter for UDP, and takes its counts from what it prints at exit.
func runTcpdump(ctx context.Context, e *liveEnv, c Case, rep int) (Result, error) {
	r := c.result(rep)
	kib := afpacket.DefaultBlockSize * afpacket.DefaultNumBlocks / 1024
	tctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := e.pair.A.Command(tctx, "tcpdump", "-i", e.pair.A.Link, "-w", "/dev/null", "-B", strconv.Itoa(kib),
		"-n", "-Q", "in", "udp")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return r, fmt.Errorf("tcpdump: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return r, fmt.Errorf("tcpdump: %w", err)
	}
	var mu sync.Mutex
	var text strings.Builder
	listening := make(chan struct{})
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(pipe)
		var once sync.Once
		for sc.Scan() {
			mu.Lock()
			text.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if strings.Contains(sc.Text(), "listening on") {
				once.Do(func() { close(listening) })
			}
		}
		_, _ = io.Copy(io.Discard, pipe)
	}()
	stopTcpdump := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		<-read
		_ = cmd.Wait()
	}
	select {
	case <-listening:
	case <-read:
	case <-time.After(5 * time.Second):
	}
	select {
	case <-listening:
	default:
		stopTcpdump()
		mu.Lock()
		defer mu.Unlock()
		return r, fmt.Errorf("tcpdump did not start listening: %s", strings.TrimSpace(text.String()))
	}
	ss, serr := e.send(ctx, c)
	// libpcap retires a ring block that is not full after tcpdump's
	// timeout, 1 s: wait for the last one.
	time.Sleep(1200 * time.Millisecond)
	stopTcpdump()
	if serr != nil {
		return r, serr
	}
	mu.Lock()
	out := text.String()
	mu.Unlock()
	for _, m := range tcpdumpStat.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseUint(m[1], 10, 64)
		switch m[2] {
		case "captured":
			r.Frames = v
		case "dropped by kernel":
			r.KernelDrops = v
		}
	}
	// tcpdump's whole life is the reader's CPU time, set against the
	// on-wire time as every row's.
	var before, after usage
	after.wall = before.wall.Add(ss.wireSpan)
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		after.user, after.sys = time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
	}
	r.PerWorker = []uint64{r.Frames}
	r.finish(ss.wireSpan, before, after, nil)
	r.sent(c, ss, after.user+after.sys)
	return r, nil
}
