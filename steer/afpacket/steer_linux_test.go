//go:build linux

package afpacket

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/kgroup"
)

// flowRec is what the handler saw of one flow.
type flowRec struct {
	workers map[int]int
	lastSeq uint32
	haveSeq bool
	regress int // TCP sequence numbers that went backwards
	lastID  uint16
	idBack  int // IP IDs that went backwards
	frames  int
}

// live is a dispatcher fed from a veth in a test namespace, recording every
// frame its handler gets.
type live struct {
	t       *testing.T
	p       *netns.Pair
	d       *steer.Dispatcher
	st      *kgroup.Steering // nil for a single socket
	single  *Source
	wc      *kgroup.WorkerChanges
	cancel  context.CancelFunc
	runErr  chan error
	r0      uint64
	handled atomic.Uint64

	mu        sync.Mutex
	flows     map[flow]*flowRec
	table     []int // for the agreement check, nil to skip it
	mismatch  int   // hashed frames not on table[flowid & mask]
	hashed    int
	unhashed  int
	fallback  int // the worker unhashed frames must be on, -1 for any
	offWorker int // unhashed frames elsewhere

	// ref is an independent socket on the same link: its capture order is
	// the reference for the handler's (the kernel itself may deliver a
	// flow out of send order, when the sender's frames cross two CPUs).
	ref      *collector
	refFlows map[flow]*flowRec
	// capFlows, for a single socket, is the order in which the source read
	// each flow's frames from its own ring: the capture order the handler
	// must see exactly. Nil for fanout groups.
	capFlows map[flow]*flowRec
}

// orderSource records the capture order of each flow as frames leave the
// ring, before the dispatcher sees them.
type orderSource struct {
	*Source
	l *live
}

func (o *orderSource) ReadBatch(ctx context.Context, b *steer.Batch) error {
	err := o.Source.ReadBatch(ctx, b)
	o.l.mu.Lock()
	for i := range b.Frames {
		if k, ok := parseFlow(b.Frames[i].Data); ok {
			r := o.l.capFlows[k]
			if r == nil {
				r = &flowRec{workers: map[int]int{}}
				o.l.capFlows[k] = r
			}
			r.observe(b.Frames[i].Data)
		}
	}
	o.l.mu.Unlock()
	return err
}

type liveOpts struct {
	mode     FanoutMode
	single   bool // one socket, Dispatcher.Run
	dispatch steer.DispatchMode
	workers  int
	cfg      Config
	udp4     bool
	hash     *steer.HashConfig // in place of {UDP4Tuple: udp4}
}

func startLive(t *testing.T, p *netns.Pair, o liveOpts) *live {
	t.Helper()
	l := &live{t: t, p: p, flows: map[flow]*flowRec{}, fallback: -1, runErr: make(chan error, 1)}
	l.wc = kgroup.NewWorkerChanges(o.workers, 0)
	hc := steer.HashConfig{UDP4Tuple: o.udp4}
	if o.hash != nil {
		hc = *o.hash
	}
	d, err := steer.New(steer.Config{Workers: o.workers, Dispatch: o.dispatch, Hash: hc, Queue: steer.QueueConfig{Limit: steer.MaxQLimit}},
		l.wc.Handler(l.handle))
	if err != nil {
		t.Fatal(err)
	}
	l.d = d
	l.refFlows = map[flow]*flowRec{}
	refSrc := openIn(t, p.A, p.A.Link, Config{IgnoreOutgoing: true, BlockTimeout: 2 * time.Millisecond})
	l.ref = collect(refSrc, func(f *steer.Frame) {
		if k, ok := parseFlow(f.Data); ok {
			r := l.refFlows[k]
			if r == nil {
				r = &flowRec{workers: map[int]int{}}
				l.refFlows[k] = r
			}
			r.observe(f.Data)
		}
	})
	t.Cleanup(func() { l.ref.Stop(t) })
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	if o.single {
		l.single = openIn(t, p.A, p.A.Link, o.cfg)
		l.r0 = rx(t, p.A)
		l.capFlows = map[flow]*flowRec{}
		src := &orderSource{Source: l.single, l: l}
		go func() { l.runErr <- d.Run(ctx, src) }()
		return l
	}
	g := openGroupIn(t, p.A, o.workers, o.cfg, o.mode, 0)
	l.st, err = NewSteering(d, g, kgroup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.st.Close() })
	if o.mode == FanoutEBPF {
		l.table = d.Table()
		l.fallback = 0
	}
	l.r0 = rx(t, p.A)
	go func() { l.runErr <- l.st.Run(ctx) }()
	return l
}

// tcpSeq returns the sequence number of an untagged IPv4 TCP frame.
func tcpSeq(b []byte) (uint32, bool) {
	if len(b) < 14+20 || b[14]>>4 != 4 || b[14+9] != 6 {
		return 0, false
	}
	ihl := int(b[14]&0xf) * 4
	if len(b) < 14+ihl+8 {
		return 0, false
	}
	return binary.BigEndian.Uint32(b[14+ihl+4:]), true
}

func (l *live) handle(p *steer.Packet) {
	l.handled.Add(1)
	k, ok := parseFlow(p.Data)
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.HashType.IsHash() {
		l.hashed++
		if l.table != nil && l.table[p.FlowID&uint32(len(l.table)-1)] != p.Worker {
			l.mismatch++
		}
	} else {
		l.unhashed++
		if l.fallback >= 0 && p.Worker != l.fallback {
			l.offWorker++
		}
	}
	if !ok {
		return
	}
	r := l.flows[k]
	if r == nil {
		r = &flowRec{workers: map[int]int{}}
		l.flows[k] = r
	}
	r.frames++
	r.workers[p.Worker]++
	r.observe(p.Data)
}

// observe tracks the TCP sequence number and IP ID of a frame of the flow.
func (r *flowRec) observe(b []byte) {
	seq, ok := tcpSeq(b)
	if !ok {
		return
	}
	if r.haveSeq && int32(seq-r.lastSeq) < 0 {
		r.regress++
	}
	if !r.haveSeq || int32(seq-r.lastSeq) > 0 {
		r.lastSeq = seq
	}
	id := binary.BigEndian.Uint16(b[14+4:])
	if r.haveSeq && int16(id-r.lastID) < 0 {
		r.idBack++
	}
	r.lastID = id
	r.haveSeq = true
}

// sourceSums adds up the kernel counters the dispatcher shows.
func sourceSums(s *steer.Stats) (recv, drop uint64) {
	for _, src := range s.Sources {
		recv += src.Received
		drop += src.Dropped
	}
	return recv, drop
}

// finish waits until the counters add up (the interface's rx delta equals
// the kernel's count for the sockets, and every frame the rings got reached
// the dispatcher), stops the run, closes the dispatcher and checks the
// accounting. It returns the final stats.
func (l *live) finish() steer.Stats {
	t := l.t
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last string
	for stable := 0; stable < 2; {
		s := l.d.Stats()
		recv, drop := sourceSums(&s)
		r := rx(t, l.p.A) - l.r0
		cur := fmt.Sprintf("rx delta %d, kernel received %d dropped %d, dispatcher frames %d, handled %d, dropped %d",
			r, recv, drop, s.Frames, s.Handled(), s.Dropped())
		if r == recv && recv == s.Frames+drop && s.Frames == s.Handled()+s.Dropped() && cur == last {
			stable++
		} else {
			stable = 0
		}
		last = cur
		if time.Now().After(deadline) {
			t.Fatalf("counters do not add up: %s", cur)
		}
		time.Sleep(60 * time.Millisecond)
	}
	l.cancel()
	select {
	case err := <-l.runErr:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after cancel")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.d.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
	s := l.d.Stats()
	recv, drop := sourceSums(&s)
	if s.Frames != s.Handled()+s.Dropped() || l.handled.Load() != s.Handled() {
		t.Errorf("frames %d != handled %d + dropped %d (handler saw %d)", s.Frames, s.Handled(), s.Dropped(), l.handled.Load())
	}
	if recv != s.Frames+drop {
		t.Errorf("kernel received %d != dispatcher frames %d + ring drops %d", recv, s.Frames, drop)
	}
	t.Logf("%s", last)
	return s
}

// checkFlows checks that each flow was handled by one worker (when
// oneWorker is set) and that TCP sequence numbers went backwards at the
// handler no more often than the sender retransmitted (retr; a
// retransmission is a step back in capture order too). A negative retr
// skips the order check (modes that split flows).
func (l *live) checkFlows(oneWorker bool, retr, minTCP int) {
	t := l.t
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	tcp, split, regress, idBack := 0, 0, 0, 0
	for k, r := range l.flows {
		if k.proto == 6 && r.frames > 10 {
			tcp++
		}
		if len(r.workers) > 1 {
			split++
			if oneWorker {
				t.Errorf("flow %v handled by %d workers: %v", k, len(r.workers), r.workers)
			}
		}
		regress += r.regress
		idBack += r.idBack
	}
	// The reference capture's own steps back (retransmissions, and frames
	// the kernel delivered out of send order) are the allowance.
	// For a single socket the allowance is the capture order of that very
	// socket: the kernel may deliver a flow to two sockets in different
	// orders when its frames cross two CPUs, so only our own ring's order
	// is what the dispatcher promises to keep.
	l.ref.mu.Lock()
	refRegress, refIDBack := 0, 0
	allow := l.refFlows
	if l.capFlows != nil {
		allow = l.capFlows
	}
	for _, r := range allow {
		refRegress += r.regress
		refIDBack += r.idBack
	}
	l.ref.mu.Unlock()
	if retr >= 0 && idBack > refIDBack {
		t.Errorf("IP IDs of TCP flows went backwards %d times at the handler, %d times in the reference capture", idBack, refIDBack)
	}
	if retr >= 0 && regress > refRegress {
		t.Errorf("TCP sequence numbers went backwards %d times at the handler, %d times in the reference capture (%d retransmissions)", regress, refRegress, retr)
	}
	if tcp < minTCP {
		t.Errorf("saw %d TCP flows, want at least %d", tcp, minTCP)
	}
	if l.table != nil {
		if l.mismatch > 0 {
			t.Errorf("%d of %d hashed frames were not on the worker the user-space table picks", l.mismatch, l.hashed)
		}
		if l.offWorker > 0 {
			t.Errorf("%d of %d unhashed frames were not on the fallback worker", l.offWorker, l.unhashed)
		}
	}
	t.Logf("%d flows (%d TCP), %d split over workers, %d hashed frames, %d unhashed, %d mismatches, worker changes %d, sequence steps back %d (reference %d), retransmissions %d, IP ID steps back %d (reference %d)",
		len(l.flows), tcp, split, l.hashed, l.unhashed, l.mismatch, l.wc.Changes(), regress, refRegress, retr, idBack, refIDBack)
}

// iperfRetr runs iperf3 as iperf does, with JSON output, and returns the
// number of segments the senders retransmitted.
func iperfRetr(t *testing.T, p *netns.Pair, args ...string) int {
	t.Helper()
	var r struct {
		Error string `json:"error"`
		End   struct {
			SumSent struct {
				Retransmits int `json:"retransmits"`
			} `json:"sum_sent"`
		} `json:"end"`
	}
	for try := 0; ; try++ {
		out := iperf(t, p, append(args, "-J", "-A", "0")...)
		r.Error = ""
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("iperf3 JSON: %v", err)
		}
		if r.Error == "" {
			return r.End.SumSent.Retransmits
		}
		if try == 5 {
			t.Fatalf("iperf3: %s", r.Error)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSteerLive runs real traffic through a fanout group steered by the
// kernel's own rule (DIRECT, one socket per worker) and through a single
// socket with user-space steering (DEFERRED): every frame the interface
// received is handled or counted as dropped, flows stay on one worker in
// the modes that promise it, and TCP sequence numbers reach the handler in
// order. (steer/kgroup's tests run the EBPF mode, the library's own
// steering.)
func TestSteerLive(t *testing.T) {
	netns.Require(t, "iperf3", "trafgen", "ethtool")
	p := netns.New(t, netns.Options{})
	cases := []struct {
		name string
		o    liveOpts
	}{
		{"hash", liveOpts{mode: FanoutHash, dispatch: steer.DispatchDirect, workers: 3, udp4: true}},
		{"single-deferred", liveOpts{single: true, dispatch: steer.DispatchDeferred, workers: 3, udp4: true}},
		{"lb", liveOpts{mode: FanoutLB, dispatch: steer.DispatchDirect, workers: 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.o.cfg = Config{IgnoreOutgoing: true, BlockTimeout: 2 * time.Millisecond}
			l := startLive(t, p, c.o)
			retr := iperfRetr(t, p, "-P", "8", "-t", "1", "-b", "40M")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			trafgenUDP(t, ctx, p, 20000)
			cancel()
			s := l.finish()
			keeps := c.o.single || c.o.mode.KeepsFlows()
			if c.o.mode == FanoutLB && !c.o.single {
				// LB deals frames round robin: flows are split, and counted.
				l.checkFlows(false, -1, 8)
				if l.wc.Changes() == 0 {
					t.Errorf("lb: no flow moves counted over %d frames", l.wc.Frames())
				}
			} else {
				l.checkFlows(keeps, retr, 8)
				if l.wc.Changes() != 0 {
					t.Errorf("%s: %d flow moves", c.name, l.wc.Changes())
				}
			}
			if len(s.Sources) != max(1, map[bool]int{true: 1, false: c.o.workers}[c.o.single]) {
				t.Errorf("%d sources in the stats", len(s.Sources))
			}
			if !c.o.single {
				for _, w := range s.Workstreams {
					if w.DirectDispatched == 0 || w.Queued != 0 {
						t.Errorf("workstream %d: Disp'd %d, Queued %d: want DIRECT dispatch in every worker", w.Worker, w.DirectDispatched, w.Queued)
					}
				}
			}
		})
	}
}

// TestSteerOffloads runs TCP with the veth's offloads on: 64 KiB
// super-frames, each one frame in every counter, still one worker per flow
// and in order.
func TestSteerOffloads(t *testing.T) {
	netns.Require(t, "iperf3")
	p := netns.New(t, netns.Options{KeepOffloads: true})
	l := startLive(t, p, liveOpts{mode: FanoutHash, dispatch: steer.DispatchDirect, workers: 2,
		cfg: Config{IgnoreOutgoing: true, BlockTimeout: 2 * time.Millisecond}})
	retr := iperfRetr(t, p, "-P", "4", "-t", "1", "-b", "100M")
	l.finish()
	l.checkFlows(true, retr, 4)
}

// TestSteerModes runs a short UDP burst through every other fanout mode:
// the counters add up and every frame reaches a handler or a drop counter.
func TestSteerModes(t *testing.T) {
	netns.Require(t, "trafgen", "ethtool")
	p := netns.New(t, netns.Options{})
	for _, m := range []FanoutMode{FanoutCPU, FanoutQM, FanoutRollover, FanoutRandom} {
		t.Run(m.String(), func(t *testing.T) {
			l := startLive(t, p, liveOpts{mode: m, dispatch: steer.DispatchDirect, workers: 2, udp4: true,
				cfg: Config{IgnoreOutgoing: true, BlockTimeout: 2 * time.Millisecond}})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			trafgenUDP(t, ctx, p, 5000)
			cancel()
			s := l.finish()
			if s.Frames == 0 {
				t.Fatal("no frames")
			}
			t.Logf("%v: flow moves %d over %d hashed frames", m, l.wc.Changes(), l.wc.Frames())
		})
	}
}

// TestSteerTunnels steers VXLAN traffic between two tunnel endpoints (one
// outer flow carrying many inner ones) through an EBPF group whose
// dispatcher opens tunnels and hashes with SipHash: every frame is on the
// worker the user-space table picks for its inner flow, so the frames of
// the one outer flow spread over every worker.
func TestSteerTunnels(t *testing.T) {
	netns.Require(t, "trafgen", "ethtool")
	p := netns.New(t, netns.Options{})
	const workers = 3
	l := startLive(t, p, liveOpts{mode: FanoutEBPF, dispatch: steer.DispatchDirect, workers: workers,
		hash: &steer.HashConfig{Algorithm: hash.AlgorithmSipHash, Tunnels: steer.TunnelsInner, UDP4Tuple: true},
		cfg:  Config{IgnoreOutgoing: true, BlockTimeout: 2 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	trafgenVXLAN(t, ctx, p, 6000)
	cancel()
	s := l.finish()
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("%d hashed, %d unhashed, %d not on the worker the table picks", l.hashed, l.unhashed, l.mismatch)
	if l.hashed < 6000 || l.mismatch != 0 || l.offWorker != 0 {
		t.Errorf("%d of %d hashed frames not on the worker the user-space table picks (%d unhashed off the fallback)", l.mismatch, l.hashed, l.offWorker)
	}
	for _, w := range s.Workstreams {
		if w.Handled < 6000/workers/2 {
			t.Errorf("workstream %d handled %d of 6000 frames of one outer flow: the inner flows did not spread", w.Worker, w.Handled)
		}
	}
}

// trafgenVXLAN sends count VXLAN frames from B to A, all between the two
// addresses on one outer UDP flow, each carrying a UDP/IPv4 packet of an
// inner flow with a random source port.
func trafgenVXLAN(t testing.TB, ctx context.Context, p *netns.Pair, count int) {
	t.Helper()
	src, dst := p.B.Addr.Addr().As4(), p.A.Addr.Addr().As4()
	var sb strings.Builder
	sb.WriteString("{\n fill(0xff, 6),\n 0x02, 0x00, 0x00, 0x00, 0x00, 0x02,\n c16(0x0800),\n")
	sb.WriteString(" 0x45, 0x00, c16(96), drnd(2), c16(0x4000), 64, 17, csumip(14, 33),\n")
	fmt.Fprintf(&sb, " %d, %d, %d, %d,\n %d, %d, %d, %d,\n", src[0], src[1], src[2], src[3], dst[0], dst[1], dst[2], dst[3])
	sb.WriteString(" c16(40000), c16(4789), c16(76), c16(0),\n")                // outer UDP
	sb.WriteString(" 0x08, 0, 0, 0, 0, 0, 42, 0,\n")                            // VXLAN, VNI 42
	sb.WriteString(" 0x02, 0, 0, 0, 0, 3, 0x02, 0, 0, 0, 0, 4, c16(0x0800),\n") // inner Ethernet
	sb.WriteString(" 0x45, 0x00, c16(46), c16(0), c16(0x4000), 64, 17, c16(0),\n 10, 1, 0, 1,\n 10, 1, 0, 2,\n")
	sb.WriteString(" drnd(2), c16(9), c16(26), c16(0),\n fill(0x00, 18)\n}\n")
	file := filepath.Join(t.TempDir(), "vxlan.cfg")
	if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--dev", p.B.Link, "--conf", file, "--num", strconv.Itoa(count),
		"--cpus", "1", "--no-sock-mem", "--notouch-irq", "--no-cpu-stats"}
	if out, err := p.B.Exec(ctx, "trafgen", args...); err != nil && ctx.Err() == nil {
		t.Errorf("trafgen: %v: %s", err, out)
	}
}

// TestSteeringErrors checks what only a fanout group refuses: SetTable in
// a mode where the kernel, not the table, picks the socket, with DIRECT
// dispatch, and fanout mode names that do not exist. (steer/kgroup's
// tests check the rest, over both families.)
func TestSteeringErrors(t *testing.T) {
	netns.Require(t)
	p := netns.New(t, netns.Options{KeepOffloads: true})
	d, err := steer.New(steer.Config{Workers: 2, Dispatch: steer.DispatchDirect}, func(*steer.Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	g := openGroupIn(t, p.A, 2, Config{BlockSize: 4096, NumBlocks: 2}, FanoutHash, 0)
	st, err := NewSteering(d, g, kgroup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.SetTable(context.Background(), d.Table()); !errors.Is(err, steer.ErrConfig) {
		t.Errorf("SetTable in hash mode with direct dispatch: %v", err)
	}
	if _, err := st.KernelTable(); !errors.Is(err, steer.ErrConfig) {
		t.Errorf("KernelTable in hash mode: %v", err)
	}
	if _, err := ParseFanoutMode("nope"); !errors.Is(err, steer.ErrConfig) {
		t.Errorf("ParseFanoutMode: %v", err)
	}
	for m, n := range fanoutModeNames {
		if got, err := ParseFanoutMode(n); err != nil || got != m {
			t.Errorf("ParseFanoutMode(%q) = %v, %v", n, got, err)
		}
	}
}
