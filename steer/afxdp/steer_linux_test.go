//go:build linux

package afxdp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
)

// seqMagic marks the test's sequence-numbered UDP frames.
const seqMagic = 0x52505358 // "RPSX"

// seqFrame returns a 60-byte UDP/IPv4 frame from B to A of flow (its UDP
// source port is 10000+flow) carrying seq: magic, flow and seq after the
// UDP header.
func seqFrame(p *netns.Pair, src net.HardwareAddr, flow, seq uint32) []byte {
	b := make([]byte, 60)
	copy(b[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(b[6:12], src)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], 20+8+12)
	binary.BigEndian.PutUint16(ip[6:], 0x4000)
	s, d := p.B.Addr.Addr().As4(), p.A.Addr.Addr().As4()
	copy(ip[12:16], s[:])
	copy(ip[16:20], d[:])
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	udp := ip[20:]
	binary.BigEndian.PutUint16(udp[0:], uint16(10000+flow))
	binary.BigEndian.PutUint16(udp[2:], 9)
	binary.BigEndian.PutUint16(udp[4:], 8+12)
	binary.BigEndian.PutUint32(udp[8:], seqMagic)
	binary.BigEndian.PutUint32(udp[12:], flow)
	binary.BigEndian.PutUint32(udp[16:], seq)
	return b
}

// parseSeq returns the flow and sequence number of a seqFrame.
func parseSeq(b []byte) (flow, seq uint32, ok bool) {
	if len(b) < 54 || binary.BigEndian.Uint16(b[12:]) != 0x0800 || b[14] != 0x45 || b[23] != 17 ||
		binary.BigEndian.Uint32(b[42:]) != seqMagic {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(b[46:]), binary.BigEndian.Uint32(b[50:]), true
}

// arpFrame returns an ARP request from B asking for A's address.
func arpFrame(p *netns.Pair, src net.HardwareAddr) []byte {
	b := make([]byte, 60)
	copy(b[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(b[6:12], src)
	binary.BigEndian.PutUint16(b[12:], 0x0806)
	a := b[14:]
	binary.BigEndian.PutUint16(a[0:], 1)      // Ethernet
	binary.BigEndian.PutUint16(a[2:], 0x0800) // IPv4
	a[4], a[5] = 6, 4
	binary.BigEndian.PutUint16(a[6:], 1) // request
	copy(a[8:14], src)
	s, d := p.B.Addr.Addr().As4(), p.A.Addr.Addr().As4()
	copy(a[14:18], s[:])
	copy(a[24:28], d[:])
	return b
}

func isARP(b []byte) bool { return len(b) >= 14 && binary.BigEndian.Uint16(b[12:]) == 0x0806 }

// sendFrom writes frames out of B's link in order through an AF_PACKET
// socket, from one OS thread pinned to one CPU (so that the kernel
// receives them in send order: frames sent from two CPUs may be received
// in either order), pausing a millisecond after every burst frames. The
// frames come from next until it returns nil.
func sendFrom(t testing.TB, p *netns.Pair, burst int, next func(src net.HardwareAddr) []byte) {
	t.Helper()
	err := p.B.Do(func() error {
		ifi, err := net.InterfaceByName(p.B.Link)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifi.Index}); err != nil {
			return err
		}
		var old, one unix.CPUSet
		if err := unix.SchedGetaffinity(0, &old); err != nil {
			return err
		}
		for c := 0; c < 1024; c++ {
			if old.IsSet(c) {
				one.Set(c)
				break
			}
		}
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			return err
		}
		defer unix.SchedSetaffinity(0, &old)
		for n := 1; ; n++ {
			f := next(ifi.HardwareAddr)
			if f == nil {
				return nil
			}
			for {
				_, err := unix.Write(fd, f)
				if err == nil {
					break
				}
				if !errors.Is(err, unix.ENOBUFS) && !errors.Is(err, unix.EAGAIN) {
					return fmt.Errorf("writing frame %d: %w", n, err)
				}
				time.Sleep(time.Millisecond)
			}
			if n%burst == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	})
	if err != nil {
		t.Errorf("sending from %s: %v", p.B.Name, err)
	}
}

// seqTraffic returns a frame source for sendFrom: rounds rounds over flows
// flows from first on, the sequence numbers of each flow counting from 1,
// then arps ARP requests, one after every so many frames.
func seqTraffic(p *netns.Pair, first, flows, rounds, arps int) func(net.HardwareAddr) []byte {
	total := flows * rounds
	every := total + 1
	if arps > 0 {
		every = max(1, total/arps)
	}
	i, sentARP := 0, 0
	arpNext := false
	return func(src net.HardwareAddr) []byte {
		if arpNext || (i == total && sentARP < arps) {
			arpNext = false
			sentARP++
			return arpFrame(p, src)
		}
		if i == total {
			return nil
		}
		f := seqFrame(p, src, uint32(first+i%flows), uint32(1+i/flows))
		i++
		if i%every == 0 && sentARP < arps {
			arpNext = true
		}
		return f
	}
}

// seqFlow is what the handler saw of one flow.
type seqFlow struct {
	workers map[int]int
	last    uint32
	regress int // sequence numbers not above the one before
	frames  int
}

// steerLive is a dispatcher fed by a Steering over a group in A, recording
// what its handler gets.
type steerLive struct {
	t      *testing.T
	p      *netns.Pair
	d      *steer.Dispatcher
	g      *Group
	st     *Steering
	cancel context.CancelFunc
	runErr chan error
	r0     uint64

	mu       sync.Mutex
	flows    map[uint32]*seqFlow
	table    []int // the table every hashed frame must agree with, nil for none
	hashed   int
	mismatch int
	unhashed map[int]int // per worker
	arps     map[int]int // ARP frames per worker
	// slowEvery, when positive, makes each worker pause for pause after
	// every slowEvery frames it handles, so that its RX ring backs up.
	slowEvery int
	pause     time.Duration
	perWorker map[int]int
}

func startSteer(t *testing.T, p *netns.Pair, workers int, cfg Config, opts SteeringOptions) *steerLive {
	t.Helper()
	l := &steerLive{t: t, p: p, flows: map[uint32]*seqFlow{}, unhashed: map[int]int{}, arps: map[int]int{}, perWorker: map[int]int{}, runErr: make(chan error, 1)}
	d, err := steer.New(steer.Config{Workers: workers, Dispatch: steer.Direct, Hash: steer.HashConfig{UDP4Tuple: true}}, l.handle)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	l.d = d
	err = p.A.Do(func() (err error) {
		if l.g, err = OpenGroup(p.A.Link, workers, cfg); err != nil {
			return err
		}
		l.st, err = NewSteering(d, l.g, opts)
		return err
	})
	if l.g != nil {
		t.Cleanup(func() { l.g.Close() })
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.st.Close() })
	l.table = d.Table()
	l.r0 = rxPackets(t, p.A)
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go func() { l.runErr <- l.st.Run(ctx) }()
	return l
}

func (l *steerLive) handle(p *steer.Packet) {
	l.mu.Lock()
	l.perWorker[p.Worker]++
	pause := l.slowEvery > 0 && l.perWorker[p.Worker]%l.slowEvery == 0
	l.record(p)
	l.mu.Unlock()
	if pause {
		time.Sleep(l.pause)
	}
}

// record notes p; l.mu is held.
func (l *steerLive) record(p *steer.Packet) {
	if isARP(p.Data) {
		l.arps[p.Worker]++
	}
	if !p.HashType.IsHash() {
		l.unhashed[p.Worker]++
		return
	}
	l.hashed++
	if l.table != nil && l.table[p.FlowID&uint32(len(l.table)-1)] != p.Worker {
		l.mismatch++
	}
	flow, seq, ok := parseSeq(p.Data)
	if !ok {
		return
	}
	r := l.flows[flow]
	if r == nil {
		r = &seqFlow{workers: map[int]int{}}
		l.flows[flow] = r
	}
	r.frames++
	r.workers[p.Worker]++
	if seq <= r.last {
		r.regress++
	}
	r.last = max(r.last, seq)
}

// settle waits until every frame the interface received since startSteer
// is accounted for: the program saw each once, the sockets received what
// it redirected to them, and the dispatcher handled or counted every frame
// the sockets received. It returns the Steering's and the dispatcher's
// stats.
func (l *steerLive) settle() (SteeringStats, steer.Stats) {
	t := l.t
	t.Helper()
	var ss SteeringStats
	var ds steer.Stats
	t.Log(waitStable(t, func() (string, bool) {
		r := rxPackets(t, l.p.A) - l.r0
		ss, ds = l.st.Stats(), l.d.Stats()
		var recv, drop uint64
		for _, s := range ds.Sources {
			recv += s.Received
			drop += s.Dropped
		}
		perSocket := true
		for i, s := range l.g.Sources() {
			st, err := s.Stats()
			if err != nil || i >= len(ss.Redirected) || st.Received() != ss.Redirected[i] {
				perSocket = false
			}
		}
		return fmt.Sprintf("rx delta %d, program saw %d (redirected %v, unhashed passed %d, to fallback %d, no socket %d, other queue %d), sockets received %d dropped %d, dispatcher frames %d handled %d dropped %d",
				r, ss.Frames(), ss.Redirected, ss.UnhashedPassed, ss.UnhashedFallback, ss.NoSocket, ss.OtherQueue, recv, drop, ds.Frames, ds.Handled(), ds.Dropped()),
			perSocket && r == ss.Frames() && recv+ss.UnhashedPassed+ss.NoSocket+ss.OtherQueue == r &&
				recv == ds.Frames+drop && ds.Frames == ds.Handled()+ds.Dropped() && len(ds.Sources) == l.g.Len()
	}))
	return ss, ds
}

// stop ends Run and closes the Steering: the link then has no program.
func (l *steerLive) stop() {
	t := l.t
	t.Helper()
	l.cancel()
	select {
	case err := <-l.runErr:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if err := l.st.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if xdpAttached(t, l.p.A) {
		t.Error("an XDP program is left on the link after the Steering's Close")
	}
	if a := l.g.Info().Attach; a != AttachNone {
		t.Errorf("attach %v after Close", a)
	}
}

// checkFlows checks that every flow from first on (of flows) reached the
// handler on one worker, in order, and, unless the table changed, that
// the worker was the table's.
func (l *steerLive) checkFlows(first, flows, minFrames int) {
	t := l.t
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	frames, regress, split := 0, 0, 0
	busy := map[int]bool{}
	for f := first; f < first+flows; f++ {
		r := l.flows[uint32(f)]
		if r == nil {
			t.Errorf("flow %d never reached the handler", f)
			continue
		}
		frames += r.frames
		regress += r.regress
		if len(r.workers) != 1 {
			split++
			t.Errorf("flow %d reached %d workers: %v", f, len(r.workers), r.workers)
		}
		for w := range r.workers {
			busy[w] = true
		}
	}
	if regress > 0 {
		t.Errorf("sequence numbers went backwards %d times at the handler", regress)
	}
	if frames < minFrames {
		t.Errorf("the handler saw %d frames of flows %d..%d, want at least %d", frames, first, first+flows-1, minFrames)
	}
	if l.mismatch > 0 {
		t.Errorf("%d of %d hashed frames not on the worker Table()[FlowID & (buckets-1)] picks", l.mismatch, l.hashed)
	}
	if len(busy) < 2 {
		t.Errorf("every flow on %d worker(s): the flows did not spread", len(busy))
	}
	t.Logf("flows %d..%d: %d frames, %d split, %d steps back; %d hashed frames, %d mismatches, workers busy %d", first, first+flows-1, frames, split, regress, l.hashed, l.mismatch, len(busy))
}

// neighbour reports whether A's kernel has learnt B's address (from an ARP
// request the program passed to it).
func neighbour(t testing.TB, p *netns.Pair) bool {
	t.Helper()
	out, err := p.A.Exec(context.Background(), "ip", "neigh", "show", p.B.Addr.Addr().String(), "dev", p.A.Link)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(out), "lladdr")
}

// TestSteeringLive steers sequence-numbered UDP flows and ARP requests
// through a group of three sockets, native and generic: every flow on one
// worker, the one the user-space table picks for every hashed frame, in
// order; the ARP requests sent to the fallback socket (socket 0 by
// default, the SOURCE rule: A's kernel does not learn B's address), or
// with PassUnhashed passed to the kernel (which learns it) and counted;
// the program's counters, the
// sockets' and the dispatcher's adding up to the interface's rx_packets;
// and no program left once the Steering is closed.
func TestSteeringLive(t *testing.T) {
	const workers, flows, rounds, arps = 3, 48, 200, 40
	for _, c := range []struct {
		name string
		cfg  Config
		want AttachMode
		opts SteeringOptions
	}{
		{"native", Config{}, AttachNative, SteeringOptions{}},
		{"generic fallback", Config{Attach: AttachGeneric}, AttachGeneric, SteeringOptions{Fallback: 2}},
		{"pass unhashed", Config{}, AttachNative, SteeringOptions{PassUnhashed: true, Fallback: 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := netns.New(t, netns.Options{})
			fds0, rings0, umems0 := openFDs(t), socketMaps(t), mappedAreas.Load()
			l := startSteer(t, p, workers, c.cfg, c.opts)
			if a := l.g.Info().Attach; a != c.want {
				t.Fatalf("attach %v, want %v", a, c.want)
			}
			if !xdpAttached(t, p.A) {
				t.Fatal("no XDP program on the link")
			}
			sendFrom(t, p, 64, seqTraffic(p, 0, flows, rounds, arps))
			ss, ds := l.settle()
			l.stop()
			if err := l.g.Close(); err != nil {
				t.Fatal(err)
			}
			if fds, rings, umems := openFDs(t), socketMaps(t), mappedAreas.Load(); fds != fds0 || rings != rings0 || umems != umems0 {
				t.Errorf("leak: %d descriptors, %d ring and %d UMEM mappings, had %d, %d and %d", fds, rings, umems, fds0, rings0, umems0)
			}
			l.checkFlows(0, flows, flows*rounds*9/10)
			l.mu.Lock()
			defer l.mu.Unlock()
			if !c.opts.PassUnhashed {
				if ss.UnhashedFallback != arps || ss.UnhashedPassed != 0 || l.arps[c.opts.Fallback] != arps || len(l.arps) != 1 {
					t.Errorf("%d ARP frames: %d sent to the fallback, %d passed; the handler saw %v (by worker), want all on %d",
						arps, ss.UnhashedFallback, ss.UnhashedPassed, l.arps, c.opts.Fallback)
				}
				if neighbour(t, p) {
					t.Error("A's kernel learnt B's address though its ARP requests went to a socket")
				}
			} else {
				if ss.UnhashedPassed != arps || ss.UnhashedFallback != 0 || len(l.arps) != 0 {
					t.Errorf("%d ARP frames: %d passed, %d to the fallback, %v at the handler", arps, ss.UnhashedPassed, ss.UnhashedFallback, l.arps)
				}
				if !neighbour(t, p) {
					t.Error("A's kernel did not learn B's address: the ARP requests did not reach it")
				}
			}
			if ss.NoSocket != 0 || ss.OtherQueue != 0 || ss.TableChanges != 0 {
				t.Errorf("stats %+v", ss)
			}
			var fill uint64
			for i, s := range ds.Sources {
				if s.XDP == nil || s.XDP.Attach != c.want.String() || s.XDP.ZeroCopy {
					t.Errorf("source %d: %+v", i, s.XDP)
				} else if i > 0 {
					fill += s.XDP.RxFillRingEmptyDescs
				}
			}
			if fill != 0 {
				t.Errorf("sockets after the first report %d FILL-ring events: the one ring's count is the first socket's", fill)
			}
		})
	}
}

// TestSteeringOtherQueue steers queue 1 of a veth given two receive
// queues (ethtool -L on both ends), attached natively. B's kernel puts
// each flow on a transmit queue by its hash, and veth's native hook sees
// it on A's receive queue of that number, so the flows spread over both
// queues (at the generic hook every frame of a veth comes as queue 0's:
// the hook takes the queue from the skb, which veth does not mark). The
// program, told the group's queue, redirects the flows of queue 1 to the
// table's workers and passes those of queue 0 to the kernel, counted in
// OtherQueue; the sockets receive all that was redirected to them (the
// kernel would drop a frame of queue 0 redirected to them), and each flow
// reaches the handler whole, in order, on one worker, or not at all.
func TestSteeringOtherQueue(t *testing.T) {
	const workers, flows, rounds = 2, 32, 50
	p := netns.New(t, netns.Options{})
	for _, ns := range []*netns.NS{p.A, p.B} {
		if _, err := ns.Exec(context.Background(), "ethtool", "-L", ns.Link, "rx", "2", "tx", "2"); err != nil {
			t.Fatal(err)
		}
	}
	l := startSteer(t, p, workers, Config{Queue: 1, Attach: AttachNative}, SteeringOptions{})
	sendFrom(t, p, 64, seqTraffic(p, 0, flows, rounds, 0))
	ss, _ := l.settle()
	l.stop()
	var redirected uint64
	for _, r := range ss.Redirected {
		redirected += r
	}
	if ss.OtherQueue == 0 || redirected == 0 || ss.OtherQueue+redirected != flows*rounds || ss.UnhashedPassed != 0 || ss.NoSocket != 0 {
		t.Errorf("%d frames over two queues: program stats %+v", flows*rounds, ss)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var steered uint64
	for f := uint32(0); f < flows; f++ {
		r := l.flows[f]
		if r == nil {
			continue
		}
		steered += uint64(r.frames)
		if r.frames != rounds || r.regress != 0 || len(r.workers) != 1 {
			t.Errorf("flow %d: %d of %d frames, %d steps back, workers %v", f, r.frames, rounds, r.regress, r.workers)
		}
	}
	if steered != redirected || l.mismatch != 0 {
		t.Errorf("the handler saw %d frames of the flows (%d not on the table's worker), the program redirected %d", steered, l.mismatch, redirected)
	}
	t.Logf("%d frames redirected, %d of the other queue passed", redirected, ss.OtherQueue)
}

// TestSteeringSetTable changes the table ten times while sequence-numbered
// flows run: no sequence number may go backwards at the handler, no hold
// may time out or overflow, some frames must have been held, and
// afterwards the program's table and the dispatcher's agree and steer new
// flows as the table says.
func TestSteeringSetTable(t *testing.T) {
	const workers, flows, rounds = 3, 64, 1200
	p := netns.New(t, netns.Options{})
	l := startSteer(t, p, workers, Config{}, SteeringOptions{})
	l.mu.Lock()
	l.table = nil // the table changes: agreement is checked after
	// The rings back up, for longer than a grace period: a change finds
	// frames of moved buckets in them, and must wait for them.
	l.slowEvery, l.pause = 512, 10*time.Millisecond
	l.mu.Unlock()
	var changes int
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(100 * time.Millisecond)
		for k := 1; k <= 10; k++ {
			tab := l.d.Table()
			for b := range tab {
				tab[b] = (b*5 + k) % workers
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			err := l.st.SetTable(ctx, tab)
			cancel()
			if err != nil {
				t.Errorf("SetTable %d: %v", k, err)
				return
			}
			changes++
			time.Sleep(40 * time.Millisecond)
		}
	}()
	sendFrom(t, p, 64, seqTraffic(p, 0, flows, rounds, 0))
	<-done
	kt, err := l.st.KernelTable()
	if err != nil {
		t.Fatal(err)
	}
	ut := l.d.Table()
	for b := range kt {
		if kt[b] != ut[b] {
			t.Fatalf("bucket %d: the program's table says worker %d, the dispatcher's %d", b, kt[b], ut[b])
		}
	}
	// New flows after the changes: on the workers the new table picks.
	l.mu.Lock()
	l.table = ut
	l.slowEvery = 0
	l.mu.Unlock()
	sendFrom(t, p, 64, seqTraffic(p, 1000, flows, 50, 0))
	ss, _ := l.settle()
	l.stop()
	l.mu.Lock()
	regress := 0
	for _, r := range l.flows {
		regress += r.regress
	}
	l.mu.Unlock()
	if regress != 0 {
		t.Errorf("sequence numbers went backwards %d times at the handler across the table changes", regress)
	}
	l.checkFlows(1000, flows, flows*50*9/10)
	t.Logf("%d table changes: %+v", changes, ss)
	if changes != 10 || ss.TableChanges != 10 || ss.BucketsMoved == 0 {
		t.Errorf("%d changes made, stats %+v", changes, ss)
	}
	if ss.HoldTimeouts != 0 || ss.HoldOverflows != 0 {
		t.Errorf("holds lifted early: %+v", ss)
	}
	if ss.HeldFrames == 0 {
		t.Error("no frame was ever held: the test did not exercise the hold")
	}
}

// TestSteeringErrors checks what NewSteering, SetTable, Run and Close
// refuse, and that a failed NewSteering leaves the group free.
func TestSteeringErrors(t *testing.T) {
	p := netns.New(t, netns.Options{})
	h := func(*steer.Packet) {}
	newD := func(cfg steer.Config) *steer.Dispatcher {
		t.Helper()
		d, err := steer.New(cfg, h)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close(context.Background()) })
		return d
	}
	d2 := newD(steer.Config{Workers: 2, Dispatch: steer.Direct})
	var g2 *Group
	if err := p.A.Do(func() (err error) {
		g2, err = OpenGroup(p.A.Link, 2, Config{NumFrames: 64, RingSize: 64})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer g2.Close()
	inA := func(f func() error) error { return p.A.Do(f) }
	for _, c := range []struct {
		name string
		d    *steer.Dispatcher
		opts SteeringOptions
		says string
	}{
		{"one socket per worker", newD(steer.Config{Workers: 3, Dispatch: steer.Direct}), SteeringOptions{}, "one socket per worker"},
		{"fallback out of range", d2, SteeringOptions{Fallback: 2}, "fallback"},
		{"negative fallback, passing", d2, SteeringOptions{PassUnhashed: true, Fallback: -1}, "fallback"},
		{"flow policy", newD(steer.Config{Workers: 2, Dispatch: steer.Direct, Policy: steer.PolicyFlow}), SteeringOptions{}, "rss policy"},
	} {
		err := inA(func() error { _, err := NewSteering(c.d, g2, c.opts); return err })
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want ErrConfig saying %q", c.name, err, c.says)
		}
	}
	// Outside the group's namespace the interface index names another
	// interface: refused, and the group stays free.
	if _, err := NewSteering(d2, g2, SteeringOptions{}); !errors.Is(err, ErrConfig) || !errors.Is(err, errOtherNetNS) {
		t.Errorf("NewSteering outside the namespace: %v", err)
	}
	if xdpAttached(t, p.A) {
		t.Fatal("a refused NewSteering left a program on the link")
	}
	var st *Steering
	if err := inA(func() (err error) { st, err = NewSteering(d2, g2, SteeringOptions{}); return err }); err != nil {
		t.Fatal(err)
	}
	if err := inA(func() error { _, err := NewSteering(d2, g2, SteeringOptions{}); return err }); !errors.Is(err, ErrConfig) {
		t.Errorf("a second Steering on one group: %v", err)
	}
	if err := st.SetTable(context.Background(), []int{0, 1}); !errors.Is(err, ErrConfig) {
		t.Errorf("SetTable with a short table: %v", err)
	}
	bad := d2.Table()
	bad[0] = 2
	if err := st.SetTable(context.Background(), bad); !errors.Is(err, ErrConfig) {
		t.Errorf("SetTable naming worker 2 of 2: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := st.KernelTable(); !errors.Is(err, ErrClosed) {
		t.Errorf("KernelTable after Close: %v", err)
	}
	if err := st.Run(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close: %v", err)
	}
	if err := st.SetTable(context.Background(), d2.Table()); !errors.Is(err, ErrClosed) {
		t.Errorf("SetTable after Close: %v", err)
	}
	if xdpAttached(t, p.A) {
		t.Error("a program is left on the link after Close")
	}
	// The group is free again; a deferred dispatcher steers but cannot
	// change its table in order.
	dd := newD(steer.Config{Workers: 2, Dispatch: steer.Deferred})
	if err := inA(func() (err error) { st, err = NewSteering(dd, g2, SteeringOptions{}); return err }); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.SetTable(context.Background(), dd.Table()); !errors.Is(err, ErrConfig) {
		t.Errorf("SetTable with deferred dispatch: %v", err)
	}
}
