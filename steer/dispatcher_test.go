package steer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/affinity"
	"go.uber.org/goleak"
)

// dtFrame builds a TCP/IPv4 frame of flow f whose TCP sequence number is seq.
func dtFrame(f int, seq uint32) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], 50)
	ip[8] = 64
	ip[9] = 6
	binary.BigEndian.PutUint32(ip[12:], 0x0a000000|uint32(f>>8))
	binary.BigEndian.PutUint32(ip[16:], 0xc0a80000|uint32(f&0xff))
	tcp := ip[20:]
	binary.BigEndian.PutUint16(tcp[0:], uint16(1024+f%50000))
	binary.BigEndian.PutUint16(tcp[2:], 80)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	tcp[12] = 5 << 4
	return b
}

func dtSeq(p *Packet) uint32 { return binary.BigEndian.Uint32(p.Data[14+20+4:]) }

// dtTraffic returns n frames over flows, each flow's frames numbered 1, 2, ...
// in order, interleaved at random.
func dtTraffic(rng *rand.Rand, flows, n int) []Frame {
	seq := make([]uint32, flows)
	out := make([]Frame, n)
	for i := range out {
		f := rng.IntN(flows)
		seq[f]++
		out[i] = Frame{Data: dtFrame(f, seq[f]), IfIndex: 1}
	}
	return out
}

// orderChecker records, per flow, the last sequence number seen and the
// workers that handled it.
type orderChecker struct {
	mu      sync.Mutex
	last    map[FlowKey]uint32
	workers map[FlowKey]map[int]bool
	errs    []string
	handled atomic.Uint64
}

func newOrderChecker() *orderChecker {
	return &orderChecker{last: map[FlowKey]uint32{}, workers: map[FlowKey]map[int]bool{}}
}

func (o *orderChecker) handle(p *Packet) {
	o.handled.Add(1)
	s := dtSeq(p)
	o.mu.Lock()
	defer o.mu.Unlock()
	k := p.Key().Flow()
	if s != o.last[k]+1 && len(o.errs) < 10 {
		o.errs = append(o.errs, fmt.Sprintf("flow %v: seq %d after %d", k, s, o.last[k]))
	}
	o.last[k] = s
	if o.workers[k] == nil {
		o.workers[k] = map[int]bool{}
	}
	o.workers[k][p.Worker] = true
}

func checkAccounting(t *testing.T, d *Dispatcher, in uint64) Stats {
	t.Helper()
	st := d.Stats()
	if st.Frames != in {
		t.Errorf("Stats.Frames = %d, want %d frames handed in", st.Frames, in)
	}
	if got := st.Handled() + st.Dropped() + st.Panicked(); got != st.Frames {
		t.Errorf("handled %d + dropped %d + panicked %d = %d, want Frames %d", st.Handled(), st.Dropped(), st.Panicked(), got, st.Frames)
	}
	for _, w := range st.Workstreams {
		if w.QueueLen != 0 {
			t.Errorf("workstream %d: Len %d after Close", w.Worker, w.QueueLen)
		}
		if w.Queued+w.DirectDispatched+w.HybridDispatched < w.Handled {
			t.Errorf("workstream %d: handled %d more than queued %d + inline %d", w.Worker, w.Handled, w.Queued, w.DirectDispatched+w.HybridDispatched)
		}
	}
	return st
}

func TestFlowsStayOnOneWorkerInOrder(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, mode := range []DispatchMode{DispatchDeferred, DispatchHybrid, DispatchDirect} {
		for _, pol := range []Policy{PolicyRSS, PolicyFlow, PolicySource} {
			for _, workers := range []int{1, 3, 2 * runtime.NumCPU()} {
				t.Run(fmt.Sprintf("%s/%s/%d", mode, pol, workers), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(workers), uint64(mode)))
					frames := dtTraffic(rng, 500, 20000)
					oc := newOrderChecker()
					d, err := New(Config{Workers: workers, Policy: pol, Dispatch: mode, Hash: HashConfig{Key: hash.MicrosoftKey[:]}, Queue: QueueConfig{Overflow: OverflowWait}}, oc.handle)
					if err != nil {
						t.Fatal(err)
					}
					if err := d.Run(context.Background(), &SliceSource{Frames: frames, BatchLen: 37}); err != nil {
						t.Fatal(err)
					}
					if err := d.Close(context.Background()); err != nil {
						t.Fatal(err)
					}
					st := checkAccounting(t, d, uint64(len(frames)))
					if st.Dropped() != 0 {
						t.Errorf("blocking mode dropped %d", st.Dropped())
					}
					if oc.handled.Load() != uint64(len(frames)) {
						t.Errorf("handler ran %d times, want %d", oc.handled.Load(), len(frames))
					}
					for _, e := range oc.errs {
						t.Error(e)
					}
					for k, ws := range oc.workers {
						if len(ws) != 1 {
							t.Errorf("flow %v handled by workers %v", k, ws)
						}
					}
					if workers > 1 && pol != PolicySource && len(st.Workstreams) == workers {
						busy := 0
						for _, w := range st.Workstreams {
							if w.Handled > 0 {
								busy++
							}
						}
						if busy < 2 {
							t.Errorf("only %d workers handled frames", busy)
						}
					}
				})
			}
		}
	}
}

func TestSelectionMatchesPolicy(t *testing.T) {
	defer goleak.VerifyNone(t)
	h, _ := hash.NewToeplitz(hash.MicrosoftKey[:])
	cls, _ := NewClassifier(HashConfig{Key: h.Key()})
	for _, pol := range []Policy{PolicyRSS, PolicyFlow, PolicySource} {
		var mu sync.Mutex
		var bad []string
		var seen int
		const workers = 3
		d, err := New(Config{Workers: workers, Policy: pol, Buckets: 64, Hash: HashConfig{Key: hash.MicrosoftKey[:]}, Queue: QueueConfig{Overflow: OverflowWait}}, func(p *Packet) {
			var c Classification
			cls.Classify(p.Data, &c)
			var want int
			switch pol {
			case PolicyRSS:
				want = int(c.FlowID&63) % workers
			case PolicyFlow:
				want = int(c.FlowID % workers)
			case PolicySource:
				want = (p.InputID + p.IfIndex) % workers
			}
			mu.Lock()
			seen++
			if p.Worker != want || p.FlowID != c.FlowID || p.HashType != c.HashType {
				bad = append(bad, fmt.Sprintf("%s: worker %d flowid %x, want %d %x", pol, p.Worker, p.FlowID, want, c.FlowID))
			}
			mu.Unlock()
		})
		if err != nil {
			t.Fatal(err)
		}
		frames := dtTraffic(rand.New(rand.NewPCG(1, 2)), 300, 3000)
		if err := d.Run(context.Background(), &SliceSource{Frames: frames}); err != nil {
			t.Fatal(err)
		}
		d.Close(context.Background())
		if seen != len(frames) || len(bad) > 0 {
			t.Fatalf("%s: %d/%d seen, mismatches: %v", pol, seen, len(frames), bad[:min(len(bad), 5)])
		}
	}
}

func TestNonIPFallsBackToSource(t *testing.T) {
	defer goleak.VerifyNone(t)
	arp := make([]byte, 42)
	binary.BigEndian.PutUint16(arp[12:], 0x0806)
	var got sync.Map
	d, err := New(Config{Workers: 4, Queue: QueueConfig{Overflow: OverflowDrop}}, func(p *Packet) {
		got.Store(p.IfIndex, p.Worker)
		if p.HashType != hash.None || p.Reason != ReasonNonIP {
			t.Errorf("ARP got %v %v", p.HashType, p.Reason)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	in := d.NewInput()
	var frames []Frame
	for ifi := 0; ifi < 8; ifi++ {
		frames = append(frames, Frame{Data: arp, IfIndex: ifi})
	}
	if err := in.Dispatch(frames, nil); err != nil {
		t.Fatal(err)
	}
	d.Close(context.Background())
	for ifi := 0; ifi < 8; ifi++ {
		w, _ := got.Load(ifi)
		if w != (in.ID()+ifi)%4 {
			t.Errorf("ifindex %d went to worker %v, want %d", ifi, w, (in.ID()+ifi)%4)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	h := func(*Packet) {}
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{CPUs: []int{9999}}, "steer: CPU 9999 is not one the process may use"},
		{Config{Queue: QueueConfig{Limit: 20000}}, "steer: queue limit 20000 exceeds maxqlimit 10240"},
		{Config{Queue: QueueConfig{Limit: -1}}, "steer: queue limit -1 is negative"},
		{Config{Queue: QueueConfig{Overflow: 7}}, "unknown overflow rule 7"},
		{Config{Hash: HashConfig{Key: make([]byte, 5)}}, "steer: Toeplitz key of 5 bytes"},
		// A 16-byte key hashes IPv4 but gives every IPv6 4-tuple one flowid.
		{Config{Hash: HashConfig{Key: hash.MicrosoftKey[:16]}}, "steer: Toeplitz key of 16 bytes: want 40 to 64"},
		{Config{Buckets: 100}, "steer: 100 buckets"},
		// One bucket for four workers sends every frame to worker 0.
		{Config{Workers: 4, Buckets: 1}, "steer: 1 buckets for 4 workers: only 1 workers would get frames; use at least 4 buckets"},
		{Config{Workers: -1}, "steer: -1 workers"},
		// A key of zero bits hashes every flow to 0: one worker gets all.
		{Config{Hash: HashConfig{Key: make([]byte, 40)}}, "a Toeplitz key whose bytes are all zero hashes every flow to 0"},
		{Config{Rebalance: RebalanceConfig{Interval: time.Second, MaxMoves: -1}}, "rebalance max moves -1 is negative"},
		{Config{Rebalance: RebalanceConfig{Interval: time.Second, Cooldown: -1}}, "rebalance cooldown -1 is negative"},
		{Config{Rebalance: RebalanceConfig{Interval: time.Second, Threshold: math.NaN()}}, "rebalance threshold NaN"},
		{Config{Policy: PolicyCPU}, "needs a CPUFunc"},
		{Config{RFS: RFSConfig{Enabled: true, TableSize: 1000}}, "RFS table size 1000"},
		// Sizes the RFS tables refuse: RFS would be reported on but do nothing.
		{Config{RFS: RFSConfig{Enabled: true, TableSize: 8}}, "RFS table size 8"},
		{Config{RFS: RFSConfig{Enabled: true, TableSize: 1 << 27}}, "RFS table size 134217728"},
		{Config{TickInterval: -time.Second}, "tick interval -1s is negative"},
		{Config{Rebalance: RebalanceConfig{Threshold: 0.5, Interval: time.Second}}, "threshold"},
	}
	if !affinity.Supported() {
		cases = cases[1:]
	}
	for _, c := range cases {
		d, err := New(c.cfg, h)
		if err == nil {
			d.Close(context.Background())
			t.Errorf("%+v: no error", c.cfg)
			continue
		}
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %q: want ErrConfig containing %q", err, c.want)
		}
	}
	if _, err := New(Config{Queue: QueueConfig{Overflow: OverflowDrop}}, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("nil handler: %v", err)
	}
}

func TestPinnedWorkersReadAffinityBack(t *testing.T) {
	defer goleak.VerifyNone(t)
	if !affinity.Supported() {
		t.Skip("no thread affinity on " + runtime.GOOS)
	}
	cpus, _ := affinity.Allowed()
	var mu sync.Mutex
	got := map[int][]int{}
	// More workers than CPUs: they take the CPUs round-robin.
	n := 2*len(cpus) + 1
	d, err := newHooked(Config{Workers: n, CPUs: cpus}, hookFuncs{
		init: func(w *Worker) {
			c, err := affinity.Current()
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			got[w.Index()] = c
			mu.Unlock()
		},
	}, func(*Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	d.Close(context.Background())
	for i := 0; i < n; i++ {
		want := cpus[i%len(cpus)]
		if len(got[i]) != 1 || got[i][0] != want {
			t.Errorf("worker %d affinity %v, want [%d]", i, got[i], want)
		}
	}
}

func TestHooksRunInWorker(t *testing.T) {
	defer goleak.VerifyNone(t)
	type state struct{ inits, ticks, closes, frames int }
	states := make([]state, 3) // per worker, no locks: only the worker touches its own
	d, err := newHooked(Config{
		Workers:      3,
		TickInterval: time.Millisecond,
		Queue:        QueueConfig{Overflow: OverflowWait},
	}, hookFuncs{
		init:  func(w *Worker) { states[w.Index()].inits++ },
		tick:  func(w *Worker, _ time.Time) { states[w.Index()].ticks++ },
		close: func(w *Worker) { states[w.Index()].closes++ },
	}, func(p *Packet) { states[p.Worker].frames++ })
	if err != nil {
		t.Fatal(err)
	}
	frames := dtTraffic(rand.New(rand.NewPCG(3, 4)), 100, 1000)
	d.Run(context.Background(), &SliceSource{Frames: frames})
	time.Sleep(20 * time.Millisecond)
	d.Close(context.Background())
	total := 0
	for i, s := range states {
		if s.inits != 1 || s.closes != 1 || s.ticks == 0 {
			t.Errorf("worker %d: %+v", i, s)
		}
		total += s.frames
	}
	if total != len(frames) {
		t.Errorf("frames %d, want %d", total, len(frames))
	}
}

func TestOverflowPanicsAndAccounting(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, mode := range []DispatchMode{DispatchDeferred, DispatchHybrid, DispatchDirect} {
		t.Run(mode.String(), func(t *testing.T) {
			var panics, released, calls atomic.Int64
			d, err := New(Config{
				Workers:  2,
				Dispatch: mode,
				OnPanic: func(pi PanicInfo) {
					panics.Add(1)
					if pi.Summary == "" || pi.Value == nil {
						t.Error("empty panic info")
					}
				},
				Queue: QueueConfig{Limit: 16, Overflow: OverflowDrop},
			}, func(p *Packet) {
				if calls.Add(1)%3 == 0 {
					panic("boom")
				}
				time.Sleep(time.Microsecond)
			})
			if err != nil {
				t.Fatal(err)
			}
			frames := dtTraffic(rand.New(rand.NewPCG(5, 6)), 50, 5000)
			in := d.NewInput()
			batches := 0
			for i := 0; i < len(frames); i += 100 {
				batches++
				if err := in.Dispatch(frames[i:i+100], func() { released.Add(1) }); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := checkAccounting(t, d, uint64(len(frames)))
			if released.Load() != int64(batches) {
				t.Errorf("release called %d times, want %d", released.Load(), batches)
			}
			var p uint64
			for _, w := range st.Workstreams {
				p += w.Panics
			}
			if p == 0 || int64(p) != panics.Load() {
				t.Errorf("panics counted %d, reported %d", p, panics.Load())
			}
			if mode == DispatchDeferred && st.Dropped() == 0 {
				t.Errorf("qlimit 16 with a slow handler dropped nothing")
			}
			if err := in.Dispatch(frames[:1], nil); !errors.Is(err, ErrClosed) {
				t.Errorf("dispatch after close: %v", err)
			}
		})
	}
}

func TestRedispatch(t *testing.T) {
	defer goleak.VerifyNone(t)
	// A frame whose payload holds another frame: the handler "decapsulates"
	// by re-dispatching the inner bytes, which alias the outer buffer.
	for _, mode := range []DispatchMode{DispatchDeferred, DispatchHybrid, DispatchDirect} {
		t.Run(mode.String(), func(t *testing.T) {
			var inner, outer, released atomic.Int64
			var d *Dispatcher
			d, err := New(Config{Workers: 3, Dispatch: mode, Queue: QueueConfig{Limit: 64, Overflow: OverflowWait}}, func(p *Packet) {
				if len(p.Data) > 64 {
					outer.Add(1)
					if err := p.Redispatch(p.Data[64:]); err != nil {
						t.Error(err)
					}
					return
				}
				// An inner frame keeps its outer frame's source, whichever
				// goroutine re-dispatched it.
				if p.InputID != 0 {
					t.Errorf("%s: inner frame from source %d, want the input's 0", mode, p.InputID)
				}
				inner.Add(1)
			})
			if err != nil {
				t.Fatal(err)
			}
			in := d.NewInput()
			var frames []Frame
			for i := 0; i < 2000; i++ {
				frames = append(frames, Frame{Data: append(dtFrame(i, 1), dtFrame(i+7, 1)...)})
			}
			for i := 0; i < len(frames); i += 50 {
				in.Dispatch(frames[i:i+50], func() { released.Add(1) })
			}
			if err := d.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := d.Stats()
			if st.Frames != 4000 || st.Handled()+st.Dropped() != 4000 {
				t.Errorf("frames %d handled %d dropped %d", st.Frames, st.Handled(), st.Dropped())
			}
			if outer.Load() != 2000 || inner.Load()+int64(st.Dropped()) != 2000 {
				t.Errorf("outer %d inner %d dropped %d", outer.Load(), inner.Load(), st.Dropped())
			}
			if released.Load() != 40 {
				t.Errorf("released %d batches, want 40", released.Load())
			}
		})
	}
}

func TestReprogramNeverReorders(t *testing.T) {
	defer goleak.VerifyNone(t)
	oc := newOrderChecker()
	var moveOuts, moveIns atomic.Int64
	d, err := newHooked(Config{
		Workers: 4,
		Buckets: 16,
		Queue:   QueueConfig{Overflow: OverflowWait},
	}, hookFuncs{
		moveOut: func(w *Worker, m Move) any { moveOuts.Add(1); return m.Bucket },
		moveIn: func(w *Worker, m Move, s any) {
			moveIns.Add(1)
			if s.(int) != m.Bucket || w.Index() != m.To {
				t.Errorf("MoveIn %+v got state %v in worker %d", m, s, w.Index())
			}
		},
	}, func(p *Packet) {
		oc.handle(p)
		if p.FlowID%5 == 0 {
			time.Sleep(2 * time.Microsecond)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(7, 8))
		for {
			select {
			case <-stop:
				return
			default:
			}
			tab := d.Table()
			tab[rng.IntN(len(tab))] = rng.IntN(4)
			if err := d.SetTable(tab); err != nil {
				t.Error(err)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}()
	frames := dtTraffic(rand.New(rand.NewPCG(9, 10)), 300, 100000)
	if err := d.Run(context.Background(), &SliceSource{Frames: frames}); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := checkAccounting(t, d, uint64(len(frames)))
	for _, e := range oc.errs {
		t.Error(e)
	}
	if st.BucketMoves == 0 {
		t.Error("no bucket moved")
	}
	if moveOuts.Load() != int64(st.BucketMoves) || moveIns.Load() != int64(st.BucketMoves) {
		t.Errorf("moves %d, MoveOut %d, MoveIn %d", st.BucketMoves, moveOuts.Load(), moveIns.Load())
	}
	t.Logf("%d bucket moves", st.BucketMoves)
}

func TestSeveralInputsConcurrently(t *testing.T) {
	defer goleak.VerifyNone(t)
	type key struct {
		src  int
		flow FlowKey
	}
	var mu sync.Mutex
	last := map[key]uint32{}
	var bad atomic.Int64
	d, err := New(Config{Workers: 3, Queue: QueueConfig{Overflow: OverflowWait}}, func(p *Packet) {
		k := key{p.InputID, p.Key().Flow()}
		mu.Lock()
		if dtSeq(p) != last[k]+1 {
			bad.Add(1)
		}
		last[k] = dtSeq(p)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			frames := dtTraffic(rand.New(rand.NewPCG(uint64(g), 11)), 100, 10000)
			if err := d.Run(context.Background(), &SliceSource{Frames: frames}); err != nil {
				t.Error(err)
			}
		}(g)
	}
	wg.Wait()
	d.Close(context.Background())
	checkAccounting(t, d, 40000)
	if bad.Load() != 0 {
		t.Errorf("%d frames out of order within a source and flow", bad.Load())
	}
}

// TestCloseTimeoutWithStalledHandler: a Close that runs out of time while
// worker 0's handler is stalled drops what is queued at once, says what is
// left, and the counters say where every frame is: queued ones are close
// drops, the batch in the stalled worker's hands is its Len. Once the
// handler returns, the rest of that batch is dropped, not handled.
func TestCloseTimeoutWithStalledHandler(t *testing.T) {
	release := make(chan struct{})
	defer goleak.VerifyNone(t)
	var handled0 atomic.Int64
	// The key is fixed: a random one sends the 64 flows all to one worker
	// once in 64 keys (see TestLiveStalledWorker), and worker 0 then has
	// nothing to stall on half the time.
	d, err := New(Config{Workers: 2, Hash: HashConfig{Key: hash.MicrosoftKey[:]}, Queue: QueueConfig{Limit: 32, Overflow: OverflowDrop}}, func(p *Packet) {
		if p.Worker == 0 {
			handled0.Add(1)
			<-release
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
		d.Close(context.Background())
	}()
	frames := dtTraffic(rand.New(rand.NewPCG(12, 13)), 64, 2000)
	bothWorkers(t, d, frames)
	d.Run(context.Background(), &SliceSource{Frames: frames})
	// Worker 1 is not held back by worker 0's stalled handler.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		w1 := d.Stats().Workstreams[1]
		if w1.Handled == w1.Queued {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker 1 handled %d of its %d queued frames: a stalled handler blocked another worker", w1.Handled, w1.Queued)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = d.Close(ctx)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "left") ||
		!strings.Contains(err.Error(), "workers [0] have not exited") {
		t.Fatalf("Close = %v, want a deadline error saying what was left, and that worker 0 has not exited", err)
	}
	st := d.Stats()
	w0 := st.Workstreams[0]
	if w0.QueueLen == 0 || uint64(w0.QueueLen)+w0.CloseDrops != w0.Queued || w0.Handled != 0 {
		t.Errorf("worker 0 after the timed-out Close: Len %d, CloseDrops %d, Handled %d, Queued %d; want the batch in hand as Len, "+
			"the rest of its queue as close drops, none handled", w0.QueueLen, w0.CloseDrops, w0.Handled, w0.Queued)
	}
	if sum := st.Handled() + st.Dropped() + st.Panicked() + uint64(w0.QueueLen) + uint64(st.Workstreams[1].QueueLen); sum != st.Frames {
		t.Errorf("handled %d + dropped %d + panicked %d + Len = %d, want Frames %d", st.Handled(), st.Dropped(), st.Panicked(), sum, st.Frames)
	}
	close(release)
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	st = checkAccounting(t, d, uint64(len(frames)))
	if got := st.Workstreams[0].Handled; got != 1 || handled0.Load() != 1 {
		t.Errorf("worker 0 handled %d frames (its handler ran %d times) after Close gave up; want 1, the one in the handler: the rest of its batch is dropped",
			got, handled0.Load())
	}
}

func TestReport(t *testing.T) {
	defer goleak.VerifyNone(t)
	d, err := New(Config{Workers: 2, Hash: HashConfig{Key: hash.MicrosoftKey[:]}, Queue: QueueConfig{Overflow: OverflowDrop}}, func(*Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	frames := dtTraffic(rand.New(rand.NewPCG(1, 1)), 10, 100)
	d.Run(context.Background(), &SliceSource{Frames: frames})
	d.Close(context.Background())
	st := d.Stats()
	var b strings.Builder
	if err := st.WriteReport(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"Configuration:", "Workstreams:", "WSID", "WMark", "Disp'd", "HDisp'd", "QDrops", "Queued", "Handled", "microsoft", "Frames: 100 in, 100 handled, 0 dropped"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestSourcesAllocateNothingInSteadyState(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	d, err := New(Config{Workers: 2, Queue: QueueConfig{Overflow: OverflowWait}}, func(*Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	frames := dtTraffic(rand.New(rand.NewPCG(1, 1)), 100, 256)
	in := d.NewInput()
	rel := func() {}
	for i := 0; i < 100; i++ { // warm the pools
		in.Dispatch(frames, rel)
	}
	allocs := testing.AllocsPerRun(200, func() { in.Dispatch(frames, rel) })
	if allocs > 0.5 {
		t.Errorf("%.2f allocations per 256-frame dispatch", allocs)
	}
}

func TestRunOnWorkersDirect(t *testing.T) {
	defer goleak.VerifyNone(t)
	const workers = 3
	var mu sync.Mutex
	byWorker := map[int]int{}
	var ticks atomic.Int64
	d, err := newHooked(Config{
		Workers:      workers,
		Dispatch:     DispatchDirect,
		TickInterval: time.Millisecond,
		Queue:        QueueConfig{Overflow: OverflowDrop},
	}, hookFuncs{tick: func(*Worker, time.Time) { ticks.Add(1) }}, func(p *Packet) {
		mu.Lock()
		byWorker[p.Worker]++
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	srcs := make([]Source, workers)
	for i := range srcs {
		srcs[i] = &SliceSource{Frames: dtTraffic(rand.New(rand.NewPCG(uint64(i), 1)), 10, 1000+i)}
	}
	if err := d.RunOnWorkers(context.Background(), srcs); err != nil {
		t.Fatal(err)
	}
	d.Close(context.Background())
	for i := 0; i < workers; i++ {
		// DIRECT: each frame is handled by the worker that read it.
		if byWorker[i] != 1000+i {
			t.Errorf("worker %d handled %d, want %d", i, byWorker[i], 1000+i)
		}
	}
	st := checkAccounting(t, d, 3003)
	if st.Workstreams[1].DirectDispatched != 1001 {
		t.Errorf("Disp'd %d, want 1001", st.Workstreams[1].DirectDispatched)
	}
}

func TestTraceExplainsEveryDecision(t *testing.T) {
	defer goleak.VerifyNone(t)
	var b strings.Builder
	n := 0
	d, err := New(Config{
		Workers: 2,
		Buckets: 8,
		Trace: func(dc *Decision) {
			n++
			dc.WriteTo(&b)
		},
		Hash:  HashConfig{Key: hash.MicrosoftKey[:]},
		Queue: QueueConfig{Overflow: OverflowDrop},
	}, func(*Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	arp := make([]byte, 42)
	binary.BigEndian.PutUint16(arp[12:], 0x0806)
	in := d.NewInput()
	in.Dispatch([]Frame{{Data: dtFrame(1, 1)}, {Data: arp}}, nil)
	d.Close(context.Background())
	out := b.String()
	for _, want := range []string{"ether_demux: ethertype 0x0800", "toeplitz input (12 bytes)", "key: microsoft",
		"RSS_TCP_IPV4", "bucket = 0x", "table[", "netisr_select_cpuid: policy rss", "netisr_queue_src: queued to worker", "netisr_select_cpuid: no hash, SOURCE policy", "reason non-ip"} {
		if !strings.Contains(out, want) {
			t.Errorf("trace lacks %q:\n%s", want, out)
		}
	}
	if n != 2 {
		t.Errorf("%d decisions traced, want 2", n)
	}
}

// TestRunOnWorkersWithoutTick hands the workers sources twice, with no
// tick to wake them: only the hand-over itself may (Worker.park).
func TestRunOnWorkersWithoutTick(t *testing.T) {
	defer goleak.VerifyNone(t)
	const workers = 2
	var handled atomic.Int64
	d, err := New(Config{Workers: workers, Dispatch: DispatchDirect, Queue: QueueConfig{Overflow: OverflowDrop}}, func(*Packet) { handled.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 2; round++ {
		time.Sleep(time.Millisecond) // let the workers park
		srcs := make([]Source, workers)
		for i := range srcs {
			srcs[i] = &SliceSource{Frames: dtTraffic(rand.New(rand.NewPCG(uint64(i), uint64(round))), 10, 100)}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := d.RunOnWorkers(ctx, srcs)
		cancel()
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if got, want := handled.Load(), int64(round*workers*100); got != want {
			t.Fatalf("round %d: %d frames handled, want %d", round, got, want)
		}
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, d, 400)
}

// TestCloseWakesIdleWorkers closes a dispatcher whose workers wait with no
// tick: Close itself must wake them.
func TestCloseWakesIdleWorkers(t *testing.T) {
	defer goleak.VerifyNone(t)
	d, err := New(Config{Workers: 3, Queue: QueueConfig{Overflow: OverflowDrop}}, func(*Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	in := d.NewInput()
	in.Dispatch(dtTraffic(rand.New(rand.NewPCG(1, 1)), 10, 64), nil)
	if err := d.barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond) // let the workers park
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, d, 64)
}

// busyReader starts a one-worker DIRECT dispatcher and a RunOnWorkers call
// whose first frame blocks in the handler until block is closed; it
// returns once the worker is there. first receives that call's result.
func busyReader(t *testing.T) (d *Dispatcher, block chan struct{}, first chan error) {
	t.Helper()
	block = make(chan struct{})
	entered := make(chan struct{}, 1)
	d, err := New(Config{Workers: 1, Dispatch: DispatchDirect, Queue: QueueConfig{Overflow: OverflowDrop}}, func(p *Packet) {
		select {
		case entered <- struct{}{}:
			<-block
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	first = make(chan error, 1)
	go func() {
		src := &SliceSource{Frames: dtTraffic(rand.New(rand.NewPCG(2, 0)), 4, 10)}
		first <- d.RunOnWorkers(context.Background(), []Source{src})
	}()
	<-entered // the worker is in readSource, inside the handler
	return d, block, first
}

// TestConcurrentRunOnWorkers has two more RunOnWorkers calls arrive while
// the worker reads a first source (its handler blocked): each must be
// served once the source before it ends.
func TestConcurrentRunOnWorkers(t *testing.T) {
	defer goleak.VerifyNone(t)
	d, block, first := busyReader(t)
	w := d.workers[0]
	errs := make(chan error, 3)
	go func() { errs <- <-first }()
	run := func(seed uint64) {
		src := &SliceSource{Frames: dtTraffic(rand.New(rand.NewPCG(2, seed)), 4, 10)}
		errs <- d.RunOnWorkers(context.Background(), []Source{src})
	}
	go run(1)
	go run(2)
	for offered(w) != 2 {
		time.Sleep(time.Millisecond)
	}
	close(block)
	for k := 0; k < 3; k++ {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of 3 RunOnWorkers calls returned; the others are still blocked (%d offered)", k, offered(w))
		}
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, d, 30)
}

// offered is how many sources RunOnWorkers has offered w that it has not
// taken yet.
func offered(w *Worker) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.attachQ)
}

// TestRunOnWorkersContextWhileBusy ends the context of a RunOnWorkers call
// whose worker is still reading another source: the call returns with the
// context's error, and its source is never read.
func TestRunOnWorkersContextWhileBusy(t *testing.T) {
	defer goleak.VerifyNone(t)
	d, block, first := busyReader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	unread := &SliceSource{Frames: dtTraffic(rand.New(rand.NewPCG(3, 2)), 4, 10)}
	second := make(chan error, 1)
	go func() { second <- d.RunOnWorkers(ctx, []Source{unread}) }()
	select {
	case err := <-second:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("RunOnWorkers returned %v, want %v", err, context.DeadlineExceeded)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RunOnWorkers did not return when its context ended")
	}
	if n := offered(d.workers[0]); n != 0 {
		t.Errorf("%d sources still offered after the call returned", n)
	}
	close(block)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, d, 10) // the second source's frames never came in
}

// gatedSource delivers its frames in one batch once gate is closed, then
// io.EOF; entered is closed when the first ReadBatch begins.
type gatedSource struct {
	gate, entered chan struct{}
	frames        []Frame
	reads         int
}

func (s *gatedSource) ReadBatch(ctx context.Context, b *Batch) error {
	if s.reads > 0 {
		return io.EOF
	}
	s.reads++
	close(s.entered)
	select {
	case <-s.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	b.Frames = s.frames
	return nil
}

func (s *gatedSource) Close() error { return nil }

// TestCloseWhileWorkerReadsAndInputWaits closes a dispatcher while an
// input in blocking mode waits for room in a worker's queue and that
// worker, reading a source of its own, gets a batch: the worker must not
// wait behind Close for the intake lock the input holds, or nothing moves.
func TestCloseWhileWorkerReadsAndInputWaits(t *testing.T) {
	for _, mode := range []DispatchMode{DispatchDeferred, DispatchHybrid} {
		t.Run(mode.String(), func(t *testing.T) {
			defer goleak.VerifyNone(t)
			d, err := New(Config{Workers: 1, Dispatch: mode, Queue: QueueConfig{Overflow: OverflowWait, Limit: 64}}, func(*Packet) {})
			if err != nil {
				t.Fatal(err)
			}
			w := d.workers[0]
			src := &gatedSource{gate: make(chan struct{}), entered: make(chan struct{}),
				frames: dtTraffic(rand.New(rand.NewPCG(9, 9)), 4, 8)}
			ran := make(chan error, 1)
			go func() { ran <- d.RunOnWorkers(context.Background(), []Source{src}) }()
			<-src.entered // the worker is in ReadBatch
			in := d.NewInput()
			dispatched := make(chan error, 1)
			go func() { dispatched <- in.Dispatch(dtTraffic(rand.New(rand.NewPCG(1, 2)), 10, 4*BatchSize), nil) }()
			for { // until the input waits for room, holding intake shared
				w.mu.Lock()
				n := w.waiters
				w.mu.Unlock()
				if n > 0 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			closed := make(chan error, 1)
			go func() { closed <- d.Close(ctx) }()
			for !d.closed.Load() {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond) // Close now waits for intake.Lock
			close(src.gate)                   // the worker gets a batch
			if err := <-closed; err != nil {
				t.Errorf("Close: %v", err)
			}
			<-dispatched
			if err := <-ran; !errors.Is(err, ErrClosed) {
				t.Errorf("RunOnWorkers returned %v, want %v", err, ErrClosed)
			}
			checkAccounting(t, d, 4*BatchSize) // the source's late batch was never handed in
		})
	}
}

// TestRunOnWorkersKeepsNoSource checks that a dispatcher holds no
// reference to a source once RunOnWorkers has returned.
func TestRunOnWorkersKeepsNoSource(t *testing.T) {
	d, err := New(Config{Workers: 1, Dispatch: DispatchDirect, Queue: QueueConfig{Overflow: OverflowDrop}}, func(*Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	wp := func() weak.Pointer[SliceSource] {
		src := &SliceSource{Frames: dtTraffic(rand.New(rand.NewPCG(1, 1)), 4, 10)}
		if err := d.RunOnWorkers(context.Background(), []Source{src}); err != nil {
			t.Fatal(err)
		}
		return weak.Make(src)
	}()
	for i := 0; i < 5 && wp.Value() != nil; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if wp.Value() != nil {
		t.Error("the source is still reachable after RunOnWorkers returned")
	}
}
