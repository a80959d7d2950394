//go:build linux

package kgroup_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/livetest"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/kgroup"
)

// TestCloseStress opens, reads under traffic and closes a socket of each
// family 1000 times (200 with -short), closing while a reader waits in
// poll, while it reads, and while handlers still hold batches (released
// after Close, their bytes unchanged). Nothing may crash, race or leak: no
// descriptor, no ring or UMEM mapping, no goroutine, no program on a link.
// The rounds that close while reading wait for their first frame (up to
// a second) before their pause, so that they close under traffic however
// slowly trafgen runs on a loaded machine; a third of the rounds or more
// must then have held batches at Close, and a sixth closed in poll.
func TestCloseStress(t *testing.T) {
	netns.Require(t, "trafgen", "ethtool")
	forEach(t, func(t *testing.T, f family) {
		// Pairs side by side (opening and closing wait for RCU grace
		// periods, which they share), the rounds on one pair one after the
		// other: an AF_XDP queue takes one socket, a link one XDP program.
		const pairs = 4
		ps := make([]*netns.Pair, pairs)
		for i := range ps {
			ps[i] = netns.New(t, netns.Options{})
		}
		leaks := goleak.IgnoreCurrent()
		r0 := taken(t)
		// A deadline of its own, past the stress's end: trafgen runs for the
		// whole stress, longer than Exec's default timeout.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		var tg sync.WaitGroup
		for _, p := range ps {
			tg.Go(func() { livetest.TrafgenUDP(t, ctx, p, 3000000, 0, "--gap", "50us") }) // bounded
		}
		defer func() { cancel(); tg.Wait() }()
		time.Sleep(100 * time.Millisecond)
		iterations := 1000
		if testing.Short() {
			iterations = 200
		}
		start := time.Now()
		c := livetest.Stress(t, pairs, iterations, func(w, i int) livetest.Counts { return closeRound(t, f, ps[w], i) })
		t.Logf("%d iterations in %v: %d frames read, %d closes with batches held, %d with the reader in poll",
			iterations, time.Since(start).Round(time.Millisecond), c.Frames, c.HeldAtClose, c.BlockedAtClose)
		if c.Frames == 0 || c.HeldAtClose < iterations/3 || c.BlockedAtClose < iterations/6 {
			t.Errorf("the stress did not exercise reads under traffic (frames %d, held at close %d, in poll %d)", c.Frames, c.HeldAtClose, c.BlockedAtClose)
		}
		cancel()
		tg.Wait()
		var nss []*netns.NS
		for _, p := range ps {
			nss = append(nss, p.A)
		}
		if left := r0.leftBehind(t, nss...); left != "" {
			t.Errorf("leak: %s", left)
		}
		goleak.VerifyNone(t, leaks)
	})
}

// closeRound is one open-read-close round of TestCloseStress; it may run
// on any goroutine, so it reports failures with Errorf.
func closeRound(t *testing.T, f family, p *netns.Pair, i int) (c livetest.Counts) {
	variant := i % 6
	var s livetest.Source
	if err := p.A.Do(func() (err error) { s, err = f.open(p.A, variant == 0, variant == 3); return err }); err != nil {
		t.Errorf("iteration %d: %v", i, err)
		return c
	}
	var held []livetest.Held
	switch variant {
	case 0: // a reader that can only wait in poll
		c.Frames, held = livetest.CloseWhileReading(t, s, i, 200*time.Microsecond, f.errClosed)
		c.BlockedAtClose++
	case 1, 3:
		c.Frames, held = livetest.CloseAfterFrames(t, s, i, time.Duration(1+i%3)*time.Millisecond, f.errClosed)
	case 2:
		c.Frames, held = livetest.HoldThenClose(t, s, i, f.errClosed)
	case 4:
		c.Frames, held = livetest.CloseWhileReading(t, s, i, 0, f.errClosed)
	case 5: // closed at once, never read
		if err := s.Close(); err != nil {
			t.Errorf("iteration %d: Close: %v", i, err)
		}
	}
	if len(held) > 0 {
		c.HeldAtClose++
	}
	livetest.ReleaseAfterClose(t, s, i, held)
	return c
}

// seqFlow is what the handler saw of one flow.
type seqFlow struct {
	workers map[int]int
	last    uint32
	regress int // sequence numbers not above the one before
	frames  int
}

// steered is a dispatcher fed by a family's Steering over a group in A,
// recording what its handler gets.
type steered struct {
	t      *testing.T
	f      family
	p      *netns.Pair
	d      *steer.Dispatcher
	g      *group
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
	// every slowEvery frames it handles, so that its ring backs up.
	slowEvery int
	pause     time.Duration
	perWorker map[int]int
}

// steeredKey is startSteered's key. SeqTraffic's flows differ in the low
// bits of their UDP source port (10000 + flow) only: a flow's bucket is a
// fixed bucket XOR a linear function of those bits whose coefficients are
// key bits, so a random key puts every flow on one worker for some keys:
// 47 of 100000 for TestSteeringLive's 48 flows over three workers, 17 for
// the 64 that TestSteeringSetTable sends after its table changes, and 1
// in 65536 (16 key bits zero) for TestSteeringStopIntake's trafgen ports
// over two. Under this key the flows of both tests reach all three
// workers whatever the pair's addresses; seqSpread checks it before they
// are sent.
var steeredKey = hash.MicrosoftKey[:]

// startSteered opens a group of workers sockets in p.A with a DIRECT
// dispatcher steered by it, and runs it.
func startSteered(t *testing.T, f family, p *netns.Pair, workers int, o kgroup.Options, g groupOpts) *steered {
	t.Helper()
	l := &steered{t: t, f: f, p: p, flows: map[uint32]*seqFlow{}, unhashed: map[int]int{}, arps: map[int]int{},
		perWorker: map[int]int{}, runErr: make(chan error, 1)}
	d, err := steer.New(steer.Config{Workers: workers, Dispatch: steer.DispatchDirect,
		Hash: steer.HashConfig{Key: steeredKey, UDP4Tuple: true}}, l.handle)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	l.d = d
	if err := p.A.Do(func() (err error) { l.g, err = f.group(p.A, d, workers, o, g); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.g.st.Close(); l.g.close() })
	l.table = d.Table()
	l.r0 = livetest.LinkRx(t, p.A)
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go func() { l.runErr <- l.g.st.Run(ctx) }()
	return l
}

func (l *steered) handle(p *steer.Packet) {
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
func (l *steered) record(p *steer.Packet) {
	if livetest.IsARP(p.Data) {
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
	flow, seq, ok := livetest.ParseSeq(p.Data)
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

// settle waits until every frame the interface received since the start
// is accounted for: each reached one socket, or the program left it to
// the kernel stack, counted; the program's count for each socket is what
// the socket received; and the dispatcher handled or counted every frame
// the sockets received. It returns the Steering's and the dispatcher's
// stats.
func (l *steered) settle() (kgroup.Stats, steer.Stats) {
	t := l.t
	t.Helper()
	var ss kgroup.Stats
	var ds steer.Stats
	t.Log(livetest.WaitStable(t, func() (string, bool) {
		r := livetest.LinkRx(t, l.p.A) - l.r0
		ss, ds = l.g.st.Stats(), l.d.Stats()
		var recv, drop uint64
		for _, s := range ds.Sources {
			recv += s.Received
			drop += s.Dropped
		}
		perSocket := true
		if want := l.f.bySocket(ss); want != nil {
			for i, s := range l.g.stats() {
				if i >= len(want) || s.Received != want[i] {
					perSocket = false
				}
			}
		}
		passed := l.f.passed(ss)
		return fmt.Sprintf("rx delta %d, program %v, sockets received %d dropped %d, dispatcher frames %d handled %d dropped %d",
				r, ss.Kernel, recv, drop, ds.Frames, ds.Handled(), ds.Dropped()),
			perSocket && recv+passed == r && recv == ds.Frames+drop && ds.Frames == ds.Handled()+ds.Dropped() && len(ds.Sources) == len(l.g.stats())
	}))
	return ss, ds
}

// stop ends Run and closes the Steering: no program may stay on the link.
func (l *steered) stop() {
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
	if err := l.g.st.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if livetest.XDPAttached(t, l.p.A) {
		t.Error("an XDP program is left on the link after the Steering's Close")
	}
}

// seqSpread fails the test unless SeqTraffic's flows first to
// first+flows-1 reach two workers or more under d's classifier and table.
func seqSpread(t *testing.T, d *steer.Dispatcher, p *netns.Pair, table []int, first, flows int) {
	t.Helper()
	var frames [][]byte
	for f := first; f < first+flows; f++ {
		frames = append(frames, livetest.SeqFrame(p, nil, uint32(f), 1))
	}
	per := perWorker(t, d, table, frames)
	if slices.Contains(per, flows) { // one worker has them all
		t.Fatalf("flows %d..%d reach the workers %v: the test needs them on two or more", first, first+flows-1, per)
	}
}

// checkFlows checks that every flow from first on (of flows) reached the
// handler on one worker, in order, and, unless the table changed, that
// the worker was the table's.
func (l *steered) checkFlows(first, flows, minFrames int) {
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

// TestSteeringLive steers sequence-numbered UDP flows and ARP requests
// through a group of three sockets of each family: every flow on one
// worker, the one the user-space table picks for every hashed frame, in
// order; the ARP requests on the fallback socket (socket 0 by default,
// the SOURCE rule), or with PassUnhashed passed to the kernel stack and
// counted (a family of taps refuses PassUnhashed: its stack gets every
// frame anyway); A's kernel learning B's address exactly when its stack
// saw the requests; the program's counters, the sockets' and the
// dispatcher's adding up to the interface's rx_packets; and nothing left
// once the Steering and the group are closed.
func TestSteeringLive(t *testing.T) {
	const workers, flows, rounds, arps = 3, 48, 200, 40
	forEach(t, func(t *testing.T, f family) {
		for _, c := range []struct {
			name string
			g    groupOpts
			o    kgroup.Options
		}{
			{"default", groupOpts{}, kgroup.Options{}},
			{"generic fallback", groupOpts{generic: true}, kgroup.Options{Fallback: 2}},
			{"pass unhashed", groupOpts{}, kgroup.Options{PassUnhashed: true, Fallback: 2}},
		} {
			t.Run(c.name, func(t *testing.T) {
				p := netns.New(t, netns.Options{})
				if c.o.PassUnhashed && f.tap {
					d, err := steer.New(steer.Config{Workers: workers, Dispatch: steer.DispatchDirect}, func(*steer.Packet) {})
					if err != nil {
						t.Fatal(err)
					}
					defer d.Close(context.Background())
					if err := p.A.Do(func() error { _, err := f.group(p.A, d, workers, c.o, c.g); return err }); !errors.Is(err, steer.ErrConfig) {
						t.Errorf("PassUnhashed on a family of taps: %v, want steer.ErrConfig", err)
					}
					return
				}
				r0 := taken(t)
				l := startSteered(t, f, p, workers, c.o, c.g)
				seqSpread(t, l.d, p, l.table, 0, flows)
				livetest.SendFrom(t, p, 64, livetest.SeqTraffic(p, 0, flows, rounds, arps))
				ss, _ := l.settle()
				l.stop()
				if err := l.g.close(); err != nil {
					t.Fatal(err)
				}
				if left := r0.leftBehind(t, p.A); left != "" {
					t.Errorf("leak: %s", left)
				}
				l.checkFlows(0, flows, flows*rounds*9/10)
				l.mu.Lock()
				defer l.mu.Unlock()
				learnt := livetest.Neighbour(t, p)
				if !c.o.PassUnhashed {
					if l.arps[c.o.Fallback] != arps || len(l.arps) != 1 {
						t.Errorf("%d ARP frames: the handler saw %v (by worker), want all on %d", arps, l.arps, c.o.Fallback)
					}
					if learnt != f.tap {
						t.Errorf("A's kernel learnt B's address: %v; want %v (its stack sees the sockets' frames: %v)", learnt, f.tap, f.tap)
					}
				} else {
					if ss.Counter("unhashed_passed") != arps || len(l.arps) != 0 {
						t.Errorf("%d ARP frames: program %v, %v at the handler", arps, ss.Kernel, l.arps)
					}
					if !learnt {
						t.Error("A's kernel did not learn B's address: the ARP requests did not reach it")
					}
				}
				if ss.TableChanges != 0 || f.passed(ss) != ss.Counter("unhashed_passed") {
					t.Errorf("stats %+v", ss)
				}
			})
		}
	})
}

// TestSteeringOtherQueue steers queue 1 of a veth given two receive
// queues (ethtool -L on both ends), attached natively. B's kernel puts
// each flow on a transmit queue by its hash, and veth's native hook sees
// it on A's receive queue of that number, so the flows spread over both
// queues. A family that binds to a queue (AF_XDP) steers the flows of
// queue 1 and passes those of queue 0 to the kernel, counted; one whose
// sockets see every queue (AF_PACKET) steers them all. Either way each
// flow reaches the handler whole, in order, on one worker, or not at all,
// and every frame is steered or passed.
func TestSteeringOtherQueue(t *testing.T) {
	const workers, flows, rounds = 2, 32, 50
	forEach(t, func(t *testing.T, f family) {
		p := netns.New(t, netns.Options{})
		for _, ns := range []*netns.NS{p.A, p.B} {
			if _, err := ns.Exec(context.Background(), "ethtool", "-L", ns.Link, "rx", "2", "tx", "2"); err != nil {
				t.Fatal(err)
			}
		}
		l := startSteered(t, f, p, workers, kgroup.Options{}, groupOpts{queue: 1})
		livetest.SendFrom(t, p, 64, livetest.SeqTraffic(p, 0, flows, rounds, 0))
		ss, _ := l.settle()
		l.stop()
		l.mu.Lock()
		defer l.mu.Unlock()
		var steered uint64
		for fl := uint32(0); fl < flows; fl++ {
			r := l.flows[fl]
			if r == nil {
				continue
			}
			steered += uint64(r.frames)
			if r.frames != rounds || r.regress != 0 || len(r.workers) != 1 {
				t.Errorf("flow %d: %d of %d frames, %d steps back, workers %v", fl, r.frames, rounds, r.regress, r.workers)
			}
		}
		passed := f.passed(ss)
		if steered+passed != flows*rounds || l.mismatch != 0 {
			t.Errorf("the handler saw %d frames of the flows (%d not on the table's worker), the program passed %d, of %d", steered, l.mismatch, passed, flows*rounds)
		}
		if !f.tap && (passed == 0 || steered == 0) {
			t.Errorf("queue 1 steered %d frames, queue 0's passed %d: want both", steered, passed)
		}
		t.Logf("%d frames steered, %d of the other queue passed", steered, passed)
	})
}

// TestSteeringSetTable changes the table ten times while sequence-numbered
// flows run and the workers fall behind: no sequence number may go
// backwards at the handler, no hold may time out or overflow, some frames
// must have been held, and afterwards the kernel's table and the
// dispatcher's agree and steer new flows as the table says.
func TestSteeringSetTable(t *testing.T) {
	const workers, flows, rounds = 3, 64, 1200
	forEach(t, func(t *testing.T, f family) {
		p := netns.New(t, netns.Options{})
		l := startSteered(t, f, p, workers, kgroup.Options{}, groupOpts{})
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
				err := l.g.st.SetTable(ctx, tab)
				cancel()
				if err != nil {
					t.Errorf("SetTable %d: %v", k, err)
					return
				}
				changes++
				time.Sleep(40 * time.Millisecond)
			}
		}()
		livetest.SendFrom(t, p, 64, livetest.SeqTraffic(p, 0, flows, rounds, 0))
		<-done
		kt, err := l.g.st.KernelTable()
		if err != nil {
			t.Fatal(err)
		}
		ut := l.d.Table()
		for b := range kt {
			if kt[b] != ut[b] {
				t.Fatalf("bucket %d: the kernel's table says worker %d, the dispatcher's %d", b, kt[b], ut[b])
			}
		}
		// New flows after the changes: on the workers the new table picks.
		l.mu.Lock()
		l.table = ut
		l.slowEvery = 0
		l.mu.Unlock()
		seqSpread(t, l.d, p, ut, 1000, flows)
		livetest.SendFrom(t, p, 64, livetest.SeqTraffic(p, 1000, flows, 50, 0))
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
	})
}

// idle opens a group of two sockets in a fresh namespace and a Steering
// over it for a dispatcher of dispatch mode, not run.
func idle(t *testing.T, f family, dispatch steer.DispatchMode, o kgroup.Options) (*steer.Dispatcher, *group) {
	t.Helper()
	p := netns.New(t, netns.Options{})
	d, err := steer.New(steer.Config{Workers: 2, Dispatch: dispatch}, func(*steer.Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	var g *group
	if err := p.A.Do(func() (err error) { g, err = f.group(p.A, d, 2, o, groupOpts{small: true}); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.st.Close(); g.close() })
	return d, g
}

// swapped returns table with every bucket on the other of two workers.
func swapped(table []int) []int {
	out := make([]int, len(table))
	for b, w := range table {
		out[b] = 1 - w
	}
	return out
}

// setTableAsync runs st.SetTable(ctx, table) on a goroutine.
func setTableAsync(st *kgroup.Steering, table []int) chan error {
	errc := make(chan error, 1)
	go func() { errc <- st.SetTable(context.Background(), table) }()
	return errc
}

// waitErr returns what errc yields within limit, or fails the test.
func waitErr(t *testing.T, errc chan error, limit time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(limit):
		t.Fatalf("%s: still blocked after %v", what, limit)
		return nil
	}
}

// TestSteeringIdle: with Run not running no reader lifts the holds.
//
//   - timeout: a SetTable then returns on its own twice HoldTimeout after
//     the switch, with both tables switched and each abandoned hold
//     counted as a timeout; Run then reads on, and the next SetTable's
//     holds are lifted by the readers as usual.
//   - close: a SetTable waiting for holds no reader lifts (HoldTimeout
//     long), and one waiting for its turn behind it, return ErrClosed once
//     the Steering is closed; a SetTable after Close returns ErrClosed at
//     once; once the group and the dispatcher are closed no goroutine is
//     left.
//   - direct: with another dispatch mode the group is steered, and every
//     SetTable is a configuration error that names the field to set.
func TestSteeringIdle(t *testing.T) {
	netns.Require(t)
	forEach(t, func(t *testing.T, f family) {
		t.Run("timeout", func(t *testing.T) {
			const timeout = 250 * time.Millisecond // long enough for the readers under Run to lift the second change's holds
			d, g := idle(t, f, steer.DispatchDirect, kgroup.Options{HoldTimeout: timeout})
			table := swapped(d.Table())
			start := time.Now()
			if err := waitErr(t, setTableAsync(g.st, table), 5*time.Second, "SetTable without Run"); err != nil {
				t.Fatalf("SetTable without Run: %v", err)
			}
			if e := time.Since(start); e < 2*timeout {
				t.Errorf("SetTable returned after %v, before twice HoldTimeout: were the holds lifted by no one?", e)
			}
			kt, err := g.st.KernelTable()
			if err != nil {
				t.Fatal(err)
			}
			for b := range table {
				if kt[b] != table[b] || d.Table()[b] != table[b] {
					t.Fatalf("bucket %d: the kernel's table %d, the dispatcher's %d, want %d", b, kt[b], d.Table()[b], table[b])
				}
			}
			if s := g.st.Stats(); s.TableChanges != 1 || s.HoldTimeouts != 2 {
				t.Errorf("stats %+v: want one table change and two hold timeouts (a hold per worker)", s)
			}
			ctx, cancel := context.WithCancel(context.Background())
			runErr := make(chan error, 1)
			go func() { runErr <- g.st.Run(ctx) }()
			if err := waitErr(t, setTableAsync(g.st, swapped(table)), 5*time.Second, "SetTable under Run"); err != nil {
				t.Fatalf("SetTable under Run: %v", err)
			}
			if s := g.st.Stats(); s.TableChanges != 2 || s.HoldTimeouts != 2 {
				t.Errorf("stats %+v: want two table changes, no more timeouts", s)
			}
			cancel()
			if err := waitErr(t, runErr, 5*time.Second, "Run after cancel"); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Run: %v", err)
			}
		})
		t.Run("close", func(t *testing.T) {
			leaks := goleak.IgnoreCurrent()
			d, g := idle(t, f, steer.DispatchDirect, kgroup.Options{HoldTimeout: time.Minute})
			table := swapped(d.Table())
			orig := d.Table()
			first := setTableAsync(g.st, table)
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
				if kt, err := g.st.KernelTable(); err == nil && kt[0] == table[0] {
					break // switched: the first SetTable waits for its holds
				}
				if time.Now().After(deadline) {
					t.Fatal("the first SetTable never switched the kernel's table")
				}
			}
			second := setTableAsync(g.st, orig)
			time.Sleep(300 * time.Millisecond)
			for _, errc := range []chan error{first, second} {
				select {
				case err := <-errc:
					t.Fatalf("SetTable returned %v with its holds on and Run not running", err)
				default:
				}
			}
			if err := g.st.Close(); err != nil {
				t.Fatal(err)
			}
			for i, errc := range []chan error{first, second} {
				if err := waitErr(t, errc, 5*time.Second, "SetTable after Close"); !errors.Is(err, kgroup.ErrClosed) {
					t.Errorf("SetTable %d woken by Close: %v, want ErrClosed", i+1, err)
				}
			}
			start := time.Now()
			if err := g.st.SetTable(context.Background(), table); !errors.Is(err, kgroup.ErrClosed) {
				t.Errorf("SetTable after Close: %v, want ErrClosed", err)
			}
			if e := time.Since(start); e > time.Second {
				t.Errorf("SetTable after Close took %v", e)
			}
			if err := g.st.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			g.close()
			d.Close(context.Background())
			goleak.VerifyNone(t, leaks)
		})
		t.Run("direct", func(t *testing.T) {
			d, g := idle(t, f, steer.DispatchDeferred, kgroup.Options{})
			err := g.st.SetTable(context.Background(), d.Table())
			if !errors.Is(err, steer.ErrConfig) || !strings.Contains(err.Error(), "steer.Config.Dispatch = steer.DispatchDirect") {
				t.Errorf("SetTable with deferred dispatch: %v, want steer.ErrConfig naming steer.Config.Dispatch = steer.DispatchDirect", err)
			}
		})
	})
}

// TestSteeringErrors checks what NewSteering, SetTable, Run and Close
// refuse, every configuration error a steer.ErrConfig, and that a refused
// NewSteering leaves the group free and no program behind.
func TestSteeringErrors(t *testing.T) {
	netns.Require(t)
	forEach(t, func(t *testing.T, f family) {
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
		ports := make([]uint16, 17)
		for i := range ports {
			ports[i] = uint16(5000 + i)
		}
		d2 := newD(steer.Config{Workers: 2, Dispatch: steer.DispatchDirect})
		for _, c := range []struct {
			name string
			d    *steer.Dispatcher
			n    int
			o    kgroup.Options
			says string
		}{
			{"one socket per worker", newD(steer.Config{Workers: 3, Dispatch: steer.DispatchDirect}), 2, kgroup.Options{}, "one socket per worker"},
			{"fallback out of range", d2, 2, kgroup.Options{Fallback: 2}, "fallback"},
			{"negative fallback, passing", d2, 2, kgroup.Options{PassUnhashed: true, Fallback: -1}, "fallback"},
			{"flow policy", newD(steer.Config{Workers: 2, Dispatch: steer.DispatchDirect, Policy: steer.PolicyFlow}), 2, kgroup.Options{}, "rss policy"},
			{"17 VXLAN ports", newD(steer.Config{Workers: 2, Dispatch: steer.DispatchDirect,
				Hash: steer.HashConfig{Tunnels: steer.TunnelsInner, VXLANPorts: ports}}), 2, kgroup.Options{}, "VXLANPorts"},
		} {
			err := p.A.Do(func() error { _, err := f.group(p.A, c.d, c.n, c.o, groupOpts{small: true}); return err })
			if !errors.Is(err, steer.ErrConfig) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%s: %v, want steer.ErrConfig saying %q", c.name, err, c.says)
			}
			if livetest.XDPAttached(t, p.A) {
				t.Fatalf("%s: a refused NewSteering left a program on the link", c.name)
			}
		}
		var g *group
		if err := p.A.Do(func() (err error) { g, err = f.group(p.A, d2, 2, kgroup.Options{}, groupOpts{small: true}); return err }); err != nil {
			t.Fatal(err)
		}
		defer g.close()
		if _, err := g.again(d2, kgroup.Options{}); !errors.Is(err, steer.ErrConfig) {
			t.Errorf("a second Steering on one group: %v, want steer.ErrConfig", err)
		}
		if err := g.st.SetTable(context.Background(), []int{0, 1}); !errors.Is(err, steer.ErrConfig) {
			t.Errorf("SetTable with a short table: %v", err)
		}
		bad := d2.Table()
		bad[0] = 2
		if err := g.st.SetTable(context.Background(), bad); !errors.Is(err, steer.ErrConfig) {
			t.Errorf("SetTable naming worker 2 of 2: %v", err)
		}
		if err := g.st.Close(); err != nil {
			t.Fatal(err)
		}
		if err := g.st.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if _, err := g.st.KernelTable(); !errors.Is(err, kgroup.ErrClosed) {
			t.Errorf("KernelTable after Close: %v", err)
		}
		if err := g.st.Run(context.Background()); !errors.Is(err, kgroup.ErrClosed) {
			t.Errorf("Run after Close: %v", err)
		}
		if err := g.st.SetTable(context.Background(), d2.Table()); !errors.Is(err, kgroup.ErrClosed) {
			t.Errorf("SetTable after Close: %v", err)
		}
		if livetest.XDPAttached(t, p.A) {
			t.Error("a program is left on the link after Close")
		}
		// The group is free again.
		st, err := g.again(d2, kgroup.Options{})
		if err != nil {
			t.Fatalf("a Steering after the first one's Close: %v", err)
		}
		st.Close()
	})
}

// TestSteeringStopIntake stops a Steering's group of two while traffic
// flows: each socket's ring is read dry and then stays so (its position
// does not move again) while the interface keeps receiving, the program's
// counters stop, the frames reach the kernel stack (for a family whose
// sockets take them, not before), no program stays on the link, the
// counters add up, and the sockets' SourceStats keep the mode they
// received in, after the Steering's and the group's Close too.
func TestSteeringStopIntake(t *testing.T) {
	netns.Require(t, "trafgen", "ethtool")
	forEach(t, func(t *testing.T, f family) {
		p := netns.New(t, netns.Options{})
		l := startSteered(t, f, p, 2, kgroup.Options{}, groupOpts{generic: true})
		livetest.Background(t, p)
		livetest.WaitFor(t, "no frame handled on both workers", func() bool {
			ds := l.d.Stats()
			return len(ds.Workstreams) == 2 && ds.Workstreams[0].Handled > 500 && ds.Workstreams[1].Handled > 500
		})
		in0 := livetest.IPInReceives(t, p.A)
		time.Sleep(50 * time.Millisecond)
		if in := livetest.IPInReceives(t, p.A); in == in0 && f.tap || in != in0 && !f.tap {
			t.Errorf("the kernel stack took %d frames while the sockets were steered; want some exactly for a family of taps", in-in0)
		}
		modes := map[string]bool{}
		for _, s := range l.g.stats() {
			modes[s.Mode] = true
		}
		if l.g.fed != nil && !l.g.fed() {
			t.Error("the sockets say that no program feeds them before StopIntake")
		}
		if err := l.g.st.StopIntake(); err != nil {
			t.Fatal(err)
		}
		if livetest.XDPAttached(t, p.A) {
			t.Error("a program is still on the link after StopIntake")
		}
		if l.g.fed != nil && l.g.fed() {
			t.Error("the sockets say that a program feeds them after StopIntake")
		}
		ss0 := l.g.st.Stats()
		state := func() string {
			ds := l.d.Stats()
			var b strings.Builder
			for i, s := range l.g.stats() {
				fmt.Fprintf(&b, "socket %d: received %d dropped %d; ", i, s.Received, s.Dropped)
			}
			fmt.Fprintf(&b, "dispatcher frames %d handled %d dropped %d", ds.Frames, ds.Handled(), ds.Dropped())
			return b.String()
		}
		livetest.WaitFor(t, "the rings are not read dry", func() bool {
			ds := l.d.Stats()
			var recv, drop uint64
			bySocket := f.bySocket(ss0)
			for i, s := range l.g.stats() {
				recv += s.Received
				drop += s.Dropped
				if bySocket != nil && s.Received != bySocket[i] {
					return false // each socket received what the program sent it
				}
			}
			return recv == ds.Frames+drop && ds.Frames == ds.Handled()+ds.Dropped()
		})
		before := state()
		rx0, in1 := livetest.LinkRx(t, p.A), livetest.IPInReceives(t, p.A)
		time.Sleep(200 * time.Millisecond)
		ss1 := l.g.st.Stats()
		rx1, in2 := livetest.LinkRx(t, p.A), livetest.IPInReceives(t, p.A)
		if after := state(); after != before {
			t.Errorf("the sockets moved after StopIntake:\n%s\nthen\n%s", before, after)
		}
		if fmt.Sprint(ss1.Kernel) != fmt.Sprint(ss0.Kernel) {
			t.Errorf("the program counted after StopIntake: %v, then %v", ss0.Kernel, ss1.Kernel)
		}
		if rx1 == rx0 || in2 == in1 {
			t.Errorf("in 200ms after StopIntake the link received %d frames and the kernel stack took %d; want traffic reaching the stack", rx1-rx0, in2-in1)
		}
		if err := l.g.st.StopIntake(); err != nil {
			t.Errorf("a second StopIntake: %v", err)
		}
		checkModes := func(when string) {
			t.Helper()
			for i, s := range l.g.stats() {
				if !modes[s.Mode] {
					t.Errorf("%s: socket %d: mode %q, want the one it received in (%v)", when, i, s.Mode, modes)
				}
			}
		}
		checkModes("after StopIntake")
		l.stop()
		checkModes("after the Steering's Close")
		if err := l.g.st.StopIntake(); err != nil {
			t.Errorf("StopIntake after Close: %v", err)
		}
		if err := l.g.close(); err != nil {
			t.Fatal(err)
		}
		checkModes("after the group's Close")
		t.Logf("after the stop the stack took %d of %d frames", in2-in1, rx1-rx0)
	})
}

// TestOpenErrors: what stops a socket or a Steering from opening says
// what to change, in both families: a missing interface names the
// namespace the process looked in and the interfaces there; a process
// without CAP_NET_RAW (not root) is told that a packet or AF_XDP socket
// needs it, and one without CAP_BPF that the steering program does.
func TestOpenErrors(t *testing.T) {
	netns.Require(t)
	forEach(t, func(t *testing.T, f family) {
		p := netns.New(t, netns.Options{})
		missing := *p.A
		missing.Link = "rps-nosuch0"
		err := p.A.Do(func() error { s, err := f.open(&missing, false, false); closeIf(s, err); return err })
		want := fmt.Sprintf(`device "rps-nosuch0" does not exist in network namespace %q; its interfaces are `, p.A.Name)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p.A.Link) {
			t.Errorf("a missing interface: %v, want %q and the namespace's interfaces", err, want)
		}
		t.Log(err)
		err = p.A.Do(func() error {
			return livetest.WithoutCaps(nil, func() error { s, err := f.open(p.A, false, false); closeIf(s, err); return err })
		})
		if !errors.Is(err, unix.EPERM) || !strings.Contains(err.Error(), "needs root or CAP_NET_RAW; the process lacks CAP_NET_RAW") {
			t.Errorf("without capabilities: %v, want EPERM naming CAP_NET_RAW", err)
		}
		t.Log(err)
		d, err := steer.New(steer.Config{Workers: 2, Dispatch: steer.DispatchDirect}, func(*steer.Packet) {})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close(context.Background())
		err = p.A.Do(func() error {
			return livetest.WithoutCaps([]int{livetest.CapBPF, livetest.CapSysAdmin}, func() error {
				g, err := f.group(p.A, d, 2, kgroup.Options{}, groupOpts{small: true})
				if err == nil {
					g.st.Close()
					g.close()
				}
				return err
			})
		})
		if !errors.Is(err, unix.EPERM) || !strings.Contains(err.Error(), "CAP_BPF") || !strings.Contains(err.Error(), "the process lacks CAP_BPF") {
			t.Errorf("without CAP_BPF: %v, want EPERM naming CAP_BPF", err)
		}
		t.Log(err)
		if livetest.XDPAttached(t, p.A) {
			t.Error("a refused Steering left a program on the link")
		}
	})
}

// closeIf closes s when err is nil.
func closeIf(s livetest.Source, err error) {
	if err == nil {
		s.Close()
	}
}
