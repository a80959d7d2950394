package steer

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/synth"
	"go.uber.org/goleak"
)

var rfsFull = flag.Bool("rfs.full", false, "run the RFS stress tests at full size even under -race or -short")

// rfsScale returns full, or small when the race detector is on or -short is
// set (unless -rfs.full).
func rfsScale(full, small int) int {
	if (raceEnabled || testing.Short()) && !*rfsFull {
		return small
	}
	return full
}

// synthTraffic returns n TCP frames over flows (synth flow indexes), each
// flow's frames numbered 1, 2, ... (synth.Seq).
func synthTraffic(seed uint64, flows, n int, zipf float64) []Frame {
	raw := synth.Frames(synth.Spec{Flows: flows, Zipf: zipf, Seed: seed}, n)
	out := make([]Frame, n)
	for i, b := range raw {
		out[i] = Frame{Data: b, IfIndex: 1}
	}
	return out
}

// synthFlow returns the synth flow index of a frame built by synth.Build
// (its source port is 1024 + index for indexes below 60000).
func synthFlow(p *Packet) int { return int(p.Key().SrcPort) - 1024 }

func synthSeq(p *Packet) uint32 {
	s, _ := synth.Seq(p.Data, false)
	return s
}

// synthFlowIDs returns the flowid the dispatcher computes for each synth
// flow index below flows.
func synthFlowIDs(d *Dispatcher, flows int) []uint32 {
	ids := make([]uint32, flows)
	b := make([]byte, 64)
	var c Classification
	for f := range ids {
		synth.Build(b, f, 1, false)
		d.cls.Classify(b, &c)
		ids[f] = c.FlowID
	}
	return ids
}

// waitDrained waits until every frame queued so far has been handled.
func waitDrained(t *testing.T, d *Dispatcher) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !d.drained() {
		if time.Now().After(deadline) {
			t.Fatal("queues did not drain in 10 s")
		}
		time.Sleep(50 * time.Microsecond)
	}
}

func TestSetDesiredErrors(t *testing.T) {
	defer goleak.VerifyNone(t)
	d, err := New(Config{Workers: 2, Queue: QueueConfig{Overflow: OverflowDrop}}, func(*Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.SetDesired(1, 0); !errors.Is(err, ErrConfig) {
		t.Errorf("SetDesired without RFS: %v, want ErrConfig", err)
	}
	d.ClearDesired(1) // a no-op, not a panic
	d.Close(context.Background())

	d, err = New(Config{Workers: 2, Queue: QueueConfig{Overflow: OverflowDrop}, RFS: RFSConfig{Enabled: true}}, func(*Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	for _, w := range []int{-1, 2, 1 << 20} {
		if err := d.SetDesired(1, w); !errors.Is(err, ErrConfig) {
			t.Errorf("SetDesired(1, %d): %v, want ErrConfig", w, err)
		}
	}
	if err := d.SetDesired(1, 1); err != nil {
		t.Errorf("SetDesired(1, 1): %v", err)
	}
}

// TestRFSSteersToDesiredWorker: every flow ends on the worker its consumer
// named, in order, each flow moving at most once.
func TestRFSSteersToDesiredWorker(t *testing.T) {
	defer goleak.VerifyNone(t)
	const workers, flows = 4, 64
	lastWorker := make([]int, flows) // written only by the worker handling the flow
	lastSeq := make([]uint32, flows)
	var bad atomic.Int64
	d, err := New(Config{Workers: workers, Hash: HashConfig{Key: hash.MicrosoftKey[:]}, Queue: QueueConfig{Overflow: OverflowWait}, RFS: RFSConfig{Enabled: true}}, func(p *Packet) {
		f := synthFlow(p)
		if s := synthSeq(p); s != lastSeq[f]+1 {
			bad.Add(1)
		} else {
			lastSeq[f] = s
		}
		lastWorker[f] = p.Worker
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := synthFlowIDs(d, flows)
	for f, id := range ids {
		if err := d.SetDesired(id, f%workers); err != nil {
			t.Fatal(err)
		}
	}
	frames := synthTraffic(1, flows, 20000, 0)
	if err := d.Run(context.Background(), &SliceSource{Frames: frames}); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := checkAccounting(t, d, uint64(len(frames)))
	if bad.Load() != 0 {
		t.Errorf("%d frames out of order", bad.Load())
	}
	policy := 0 // flows whose policy worker is already their desired worker
	for f, id := range ids {
		if lastWorker[f] != f%workers {
			t.Errorf("flow %d (flowid %#x) ended on worker %d, desired %d", f, id, lastWorker[f], f%workers)
		}
		if st.Table[id&uint32(st.Config.Buckets-1)] == f%workers {
			policy++
		}
	}
	if want := uint64(flows - policy); st.FlowMoves != want {
		t.Errorf("FlowMoves = %d, want %d (one per flow whose policy worker is not its desired one)", st.FlowMoves, want)
	}
	if len(st.TopFlows) == 0 || st.TopFlows[0].Desired < 0 || st.TopFlows[0].Worker != st.TopFlows[0].Desired {
		t.Errorf("TopFlows = %+v, want flows on their desired workers", st.TopFlows)
	}
}

// flowState is per-worker, lock-free per-flow state (a frame count per synth
// flow) moved between workers only by the MoveOut/MoveIn hooks.
type flowState struct {
	ids   []uint32         // synth flow index -> flowid, read-only
	byW   []map[int]uint32 // worker -> flow -> frames handled
	errs  chan string
	bad   atomic.Int64
	moves atomic.Int64
}

func newFlowState(workers int, ids []uint32) *flowState {
	s := &flowState{ids: ids, byW: make([]map[int]uint32, workers), errs: make(chan string, 10)}
	for w := range s.byW {
		s.byW[w] = map[int]uint32{}
	}
	return s
}

func (s *flowState) errorf(format string, args ...any) {
	s.bad.Add(1)
	select {
	case s.errs <- fmt.Sprintf(format, args...):
	default:
	}
}

// handle counts the frame in its worker's state and checks that the state
// followed the flow: the count equals the frame's sequence number.
func (s *flowState) handle(p *Packet) {
	f := synthFlow(p)
	m := s.byW[p.Worker]
	m[f]++
	if seq := synthSeq(p); m[f] != seq {
		s.errorf("flow %d frame %d on worker %d: its state there counts %d frames", f, seq, p.Worker, m[f])
		m[f] = seq
	}
}

func (s *flowState) moveOut(w *Worker, m Move) any {
	if w.Index() != m.From {
		s.errorf("MoveOut %+v ran in worker %d", m, w.Index())
	}
	s.moves.Add(1)
	out := map[int]uint32{}
	mine := s.byW[w.Index()]
	for f, n := range mine {
		if m.Contains(s.ids[f]) {
			out[f] = n
			delete(mine, f)
		}
	}
	return out
}

func (s *flowState) moveIn(w *Worker, m Move, state any) {
	if w.Index() != m.To {
		s.errorf("MoveIn %+v ran in worker %d", m, w.Index())
	}
	mine := s.byW[w.Index()]
	for f, n := range state.(map[int]uint32) {
		if mine[f] != 0 {
			s.errorf("MoveIn %+v: worker %d already holds %d frames of flow %d, %d more arrive", m, w.Index(), mine[f], f, n)
		}
		mine[f] += n
	}
}

// TestRFSStateFollowsFlow moves flows all the time (SetDesired from a
// consumer goroutine and from handlers, ClearDesired, reprogrammed buckets)
// and checks that per-worker, lock-free per-flow state moved by the hooks is
// exactly right at every frame: a flow's state is always in the worker
// handling it, and the final counts equal the frames sent.
func TestRFSStateFollowsFlow(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, mode := range []DispatchMode{DispatchDeferred, DispatchHybrid, DispatchDirect} {
		t.Run(mode.String(), func(t *testing.T) {
			const workers, flows = 4, 400
			n := rfsScale(200000, 40000)
			var d *Dispatcher
			var s *flowState
			d, err := newHooked(Config{
				Workers:  workers,
				Buckets:  16,
				Dispatch: mode,
				Queue:    QueueConfig{Overflow: OverflowWait},
				RFS:      RFSConfig{Enabled: true},
			}, hookFuncs{
				moveOut: func(w *Worker, m Move) any { return s.moveOut(w, m) },
				moveIn:  func(w *Worker, m Move, st any) { s.moveIn(w, m, st) },
			}, func(p *Packet) {
				s.handle(p)
				switch seq := synthSeq(p); {
				case seq%53 == 0: // the consumer moved to another worker
					d.SetDesired(p.FlowID, (p.Worker+1)%workers)
				case seq%211 == 0:
					d.ClearDesired(p.FlowID)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			ids := synthFlowIDs(d, flows)
			s = newFlowState(workers, ids)
			frames := synthTraffic(2, flows, n, 0.8)
			sent := make([]uint32, flows)
			for i := range frames {
				sent[(int(frames[i].Data[34])<<8|int(frames[i].Data[35]))-1024]++
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // the consumers, and an operator reprogramming the table
				defer wg.Done()
				rng := rand.New(rand.NewPCG(3, 4))
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					id := ids[rng.IntN(flows)]
					switch rng.IntN(4) {
					case 0:
						d.ClearDesired(id)
					case 1:
						d.SetBucket(rng.IntN(16), rng.IntN(workers))
					default:
						d.SetDesired(id, rng.IntN(workers))
					}
					if i%8 == 0 {
						time.Sleep(20 * time.Microsecond)
					}
				}
			}()
			if err := d.Run(context.Background(), &SliceSource{Frames: frames, BatchLen: 50}); err != nil {
				t.Fatal(err)
			}
			close(stop)
			wg.Wait()
			if err := d.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := checkAccounting(t, d, uint64(n))
			close(s.errs)
			for e := range s.errs {
				t.Error(e)
			}
			if s.bad.Load() > 0 {
				t.Errorf("%d state errors", s.bad.Load())
			}
			for f := range sent {
				holders, total := 0, uint32(0)
				for w := range s.byW {
					if c := s.byW[w][f]; c > 0 {
						holders++
						total += c
					}
				}
				if total != sent[f] || holders > 1 {
					t.Errorf("flow %d: %d frames sent, state counts %d over %d workers", f, sent[f], total, holders)
				}
			}
			if st.FlowMoves == 0 {
				t.Error("no flow moved")
			}
			t.Logf("%s: %d frames, %d flow moves, %d bucket moves, %d move hooks", mode, n, st.FlowMoves, st.BucketMoves, s.moves.Load())
		})
	}
}

// TestBucketMoveNotHeldByRFSFrames: frames RFS steers away from a bucket's
// worker must not count as that bucket's frames on its worker; otherwise a
// reprogrammed bucket waits for a position in another worker's queue and
// may never move.
func TestBucketMoveNotHeldByRFSFrames(t *testing.T) {
	defer goleak.VerifyNone(t)
	const elephant, mouse = 0, 1
	var onWorker [3]atomic.Int64 // frames of the mouse per worker
	d, err := New(Config{Workers: 3, Buckets: 1, Queue: QueueConfig{Overflow: OverflowWait}, RFS: RFSConfig{Enabled: true}}, func(p *Packet) {
		if synthFlow(p) == mouse {
			onWorker[p.Worker].Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	ids := synthFlowIDs(d, 2)
	in := d.NewInput()
	send := func(flow, n int) {
		frames := make([]Frame, n)
		for i := range frames {
			b := make([]byte, 64)
			synth.Build(b, flow, uint32(i+1), false)
			frames[i] = Frame{Data: b}
		}
		in.Dispatch(frames, nil)
		waitDrained(t, d)
	}
	send(mouse, 10) // bucket 0 is on worker 0
	if onWorker[0].Load() != 10 {
		t.Fatalf("mouse frames on workers %d %d %d, want all on 0", onWorker[0].Load(), onWorker[1].Load(), onWorker[2].Load())
	}
	if err := d.SetDesired(ids[elephant], 2); err != nil {
		t.Fatal(err)
	}
	send(elephant, 2000) // steered to worker 2 by RFS
	if err := d.SetBucket(0, 1); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		send(mouse, 10)
		send(elephant, 10)
	}
	if got := onWorker[1].Load(); got != 50 {
		t.Errorf("after the bucket moved to worker 1 (every queue drained) the mouse had %d of 50 frames there (worker 0: %d)",
			got, onWorker[0].Load()-10)
	}
}

// TestRFSOffTouchesNoFlowTable: without Config.RFS no producer has a flow
// table and none is consulted.
func TestRFSOffTouchesNoFlowTable(t *testing.T) {
	defer goleak.VerifyNone(t)
	d, err := New(Config{Workers: 2, Queue: QueueConfig{Overflow: OverflowWait}}, func(*Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	frames := synthTraffic(5, 100, 1000, 0)
	if err := d.Run(context.Background(), &SliceSource{Frames: frames}); err != nil {
		t.Fatal(err)
	}
	d.Close(context.Background())
	if d.desired != nil {
		t.Error("a desired table exists without RFS")
	}
	for _, p := range d.producers {
		if p.flows != nil {
			t.Errorf("producer %d has a flow table without RFS", p.id)
		}
	}
	if st := d.Stats(); len(st.TopFlows) != 0 || st.FlowMoves != 0 {
		t.Errorf("TopFlows %v, FlowMoves %d without RFS", st.TopFlows, st.FlowMoves)
	}
}

// TestRFSAllocatesNothingInSteadyState: RFS on, flows known, consumers
// settled: dispatch allocates nothing.
func TestRFSAllocatesNothingInSteadyState(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	d, err := New(Config{Workers: 2, Queue: QueueConfig{Overflow: OverflowWait}, RFS: RFSConfig{Enabled: true}}, func(*Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	ids := synthFlowIDs(d, 100)
	for f, id := range ids {
		d.SetDesired(id, f%2)
	}
	frames := synthTraffic(6, 100, 256, 0)
	in := d.NewInput()
	rel := func() {}
	for range 100 {
		in.Dispatch(frames, rel)
	}
	if allocs := testing.AllocsPerRun(200, func() { in.Dispatch(frames, rel) }); allocs > 0.5 {
		t.Errorf("%.2f allocations per 256-frame dispatch with RFS", allocs)
	}
}

// floodSource makes frames of ever new flows (synth flow i, i+1, ...) into a
// small pool of buffers that come back when a batch is released.
type floodSource struct {
	next, end int
	free      chan []byte
	frames    []Frame
}

func newFloodSource(n int) *floodSource {
	s := &floodSource{end: n, free: make(chan []byte, 16), frames: make([]Frame, BatchSize)}
	for range cap(s.free) {
		s.free <- make([]byte, BatchSize*64)
	}
	return s
}

func (s *floodSource) ReadBatch(ctx context.Context, b *Batch) error {
	if s.next >= s.end {
		return io.EOF
	}
	buf := <-s.free
	k := min(BatchSize, s.end-s.next)
	for i := range k {
		fb := buf[i*64 : (i+1)*64 : (i+1)*64]
		f := s.next + i
		synth.Build(fb, f, 1, true)
		// synth spreads flows over its ports only up to 60000; vary the
		// destination address too so that every frame is a new flow.
		fb[14+16+1], fb[14+16+2] = byte(f>>16), byte(f>>8)
		s.frames[i] = Frame{Data: fb}
	}
	s.next += k
	b.Frames = s.frames[:k]
	b.Release = func() { s.free <- buf }
	return nil
}

func (s *floodSource) Close() error { return nil }

// TestRFSFloodBoundedMemory sends ten million new flows (fewer under -race)
// through a dispatcher with RFS on: the flow tables stay within their
// capacity and the heap does not grow with the number of flows.
func TestRFSFloodBoundedMemory(t *testing.T) {
	defer goleak.VerifyNone(t)
	n := rfsScale(10_000_000, 300_000)
	const capacity = 1 << 14
	var handled atomic.Uint64
	var d *Dispatcher
	d, err := New(Config{Workers: 2, Hash: HashConfig{UDP4Tuple: true}, Queue: QueueConfig{Overflow: OverflowWait}, RFS: RFSConfig{Enabled: true, TableSize: capacity}}, func(p *Packet) {
		handled.Add(1)
		if p.FlowID%64 == 0 { // some consumers claim their flow
			d.SetDesired(p.FlowID, int(p.FlowID>>8)%2)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// Warm up, then measure the heap over the flood.
	if err := d.Run(context.Background(), newFloodSource(100_000)); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	src := newFloodSource(n)
	src.next = 100_000
	if err := d.Run(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	waitDrained(t, d)
	runtime.GC()
	runtime.ReadMemStats(&after)
	for _, p := range d.producers {
		if p.flows == nil {
			continue
		}
		fs := p.flows.Stats()
		if fs.Len > capacity || fs.Capacity != capacity {
			t.Errorf("producer %d: flow table holds %d of capacity %d (%d)", p.id, fs.Len, capacity, fs.Capacity)
		}
		if p.id == 1 { // the flood's input
			if fs.Evictions == 0 || fs.Inserts < uint64(n)/2 {
				t.Errorf("producer %d: flood made %d inserts, %d evictions", p.id, fs.Inserts, fs.Evictions)
			}
			t.Logf("input %d flow table: %+v", p.id, fs)
		}
	}
	growth := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("%d new flows: heap in use %d -> %d bytes (%+d)", n, before.HeapInuse, after.HeapInuse, growth)
	if growth > 8<<20 {
		t.Errorf("heap grew by %d bytes over the flood", growth)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, d, uint64(n))
	if handled.Load() != uint64(n) {
		t.Errorf("handled %d of %d", handled.Load(), n)
	}
}

// TestRFSNeverReorders steers a million frames (fewer under -race) over
// thousands of flows while consumers keep changing their desired workers
// (from a goroutine and from handlers), the live rebalancer moves buckets
// and an operator reprograms the table, and checks every flow's sequence at
// the handler: in order per input and flow, with one input or several.
func TestRFSNeverReorders(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tc := range []struct {
		name   string
		inputs int
		block  bool
	}{{"one-input", 1, true}, {"three-inputs", 3, true}, {"one-input-dropping", 1, false}} {
		t.Run(tc.name, func(t *testing.T) {
			const workers, flows, buckets = 4, 5000, 128
			n := rfsScale(1_000_000, 200_000)
			per := n / tc.inputs
			// last[input][flow], written only by the worker handling the
			// flow at the time: a flow on two workers at once is a race.
			last := make([][]uint32, tc.inputs)
			for i := range last {
				last[i] = make([]uint32, flows)
			}
			var bad, handled atomic.Int64
			var firstBad atomic.Value
			var d *Dispatcher
			d, err := New(Config{
				Workers:   workers,
				Buckets:   buckets,
				Rebalance: RebalanceConfig{Interval: 500 * time.Microsecond, Threshold: 1.02, MaxMoves: 4, Cooldown: 1},
				Queue:     QueueConfig{Overflow: overflowOf(tc.block)},
				RFS:       RFSConfig{Enabled: true},
			}, func(p *Packet) {
				handled.Add(1)
				f, s := synthFlow(p), synthSeq(p)
				l := &last[p.InputID][f]
				ok := s == *l+1
				if !tc.block {
					ok = s > *l
				}
				if !ok {
					if bad.Add(1) == 1 {
						firstBad.Store(fmt.Sprintf("input %d flow %d: frame %d after %d on worker %d", p.InputID, f, s, *l, p.Worker))
					}
				}
				*l = s
				if s%64 == 0 {
					d.SetDesired(p.FlowID, (p.Worker+int(s>>6))%workers)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			ids := synthFlowIDs(d, flows)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { // consumers changing their minds
				defer wg.Done()
				rng := rand.New(rand.NewPCG(11, 12))
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					id := ids[rng.IntN(flows)]
					if rng.IntN(5) == 0 {
						d.ClearDesired(id)
					} else {
						d.SetDesired(id, rng.IntN(workers))
					}
					if i%64 == 0 {
						time.Sleep(10 * time.Microsecond)
					}
				}
			}()
			go func() { // an operator reprogramming the table
				defer wg.Done()
				rng := rand.New(rand.NewPCG(13, 14))
				for {
					select {
					case <-stop:
						return
					case <-time.After(200 * time.Microsecond):
					}
					d.SetBucket(rng.IntN(buckets), rng.IntN(workers))
				}
			}()
			var inWG sync.WaitGroup
			for i := range tc.inputs {
				frames := synthTraffic(uint64(100+i), flows, per, 1.0)
				inWG.Add(1)
				go func() {
					defer inWG.Done()
					if err := d.Run(context.Background(), &SliceSource{Frames: frames}); err != nil {
						t.Error(err)
					}
				}()
			}
			inWG.Wait()
			close(stop)
			wg.Wait()
			if err := d.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := checkAccounting(t, d, uint64(per*tc.inputs))
			if bad.Load() > 0 {
				t.Errorf("%d frames out of order; first: %v", bad.Load(), firstBad.Load())
			}
			if tc.block && (st.Dropped() != 0 || handled.Load() != int64(per*tc.inputs)) {
				t.Errorf("blocking mode: %d dropped, %d handled of %d", st.Dropped(), handled.Load(), per*tc.inputs)
			}
			if st.FlowMoves == 0 || st.BucketMoves == 0 {
				t.Errorf("flow moves %d, bucket moves %d: the test moved nothing", st.FlowMoves, st.BucketMoves)
			}
			t.Logf("%d frames, %d inputs: %d flow moves, %d bucket moves, %d dropped", per*tc.inputs, tc.inputs, st.FlowMoves, st.BucketMoves, st.Dropped())
		})
	}
}

// TestRFSCountsInlineFrames: with DIRECT dispatch (frames handled inline)
// the flow table still counts every frame of a flow, so TopFlows is right.
func TestRFSCountsInlineFrames(t *testing.T) {
	defer goleak.VerifyNone(t)
	d, err := New(Config{Workers: 2, Dispatch: DispatchDirect, Queue: QueueConfig{Overflow: OverflowDrop}, RFS: RFSConfig{Enabled: true}}, func(*Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	frames := make([]Frame, 0, 600)
	for f := range 3 {
		for i := range 100 * (f + 1) {
			b := make([]byte, 64)
			synth.Build(b, f, uint32(i+1), false)
			frames = append(frames, Frame{Data: b})
		}
	}
	if err := d.Run(context.Background(), &SliceSource{Frames: frames}); err != nil {
		t.Fatal(err)
	}
	d.Close(context.Background())
	top := d.Stats().TopFlows
	if len(top) != 3 || top[0].Packets != 300 || top[1].Packets != 200 || top[2].Packets != 100 || top[0].Bytes != 300*64 {
		t.Errorf("TopFlows = %+v, want 3 flows of 300, 200 and 100 frames", top)
	}
}

// TestRFSFollowsChangedDesired: entries keep their flows' desired workers
// between changes (Desired.Gen); a change, or a clear, made after the flows
// are established must still reach every flow.
func TestRFSFollowsChangedDesired(t *testing.T) {
	const workers, flows = 4, 256
	last := make([]int, flows) // DIRECT: handlers run in the dispatching goroutine
	d, err := New(Config{Workers: workers, Dispatch: DispatchDirect, Hash: HashConfig{Key: hash.MicrosoftKey[:]}, Queue: QueueConfig{Overflow: OverflowDrop}, RFS: RFSConfig{Enabled: true}}, func(p *Packet) {
		last[synthFlow(p)] = p.Worker
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	ids := synthFlowIDs(d, flows)
	frames := synthTraffic(3, flows, 8*flows, 0)
	in := d.NewInput()
	send := func() {
		for i := 0; i < len(frames); i += BatchSize {
			in.Dispatch(frames[i:min(i+BatchSize, len(frames))], nil)
		}
	}
	// Flows sharing a desired slot overwrite each other's record; leave
	// them out.
	slots := map[uint32]int{}
	for _, id := range ids {
		slots[id&(defaultRFSTableSize-1)]++
	}
	check := func(round string, want func(f int) int) {
		t.Helper()
		for f := range flows {
			if slots[ids[f]&(defaultRFSTableSize-1)] > 1 {
				continue
			}
			if last[f] != want(f) {
				t.Errorf("%s: flow %d (flowid %#x) on worker %d, want %d", round, f, ids[f], last[f], want(f))
			}
		}
	}
	for f, id := range ids {
		if err := d.SetDesired(id, f%workers); err != nil {
			t.Fatal(err)
		}
	}
	send()
	check("first desired workers", func(f int) int { return f % workers })
	// Change every other flow: the others' cached workers stay right, the
	// changed ones must be read again.
	moved := func(f int) int {
		if f%2 == 1 {
			return (f + 1) % workers
		}
		return f % workers
	}
	for f, id := range ids {
		if f%2 == 1 {
			if err := d.SetDesired(id, moved(f)); err != nil {
				t.Fatal(err)
			}
		}
	}
	send()
	check("after SetDesired", moved)
	// Clear every fourth: those go back to their policy worker.
	for f, id := range ids {
		if f%4 == 2 {
			d.ClearDesired(id)
		}
	}
	send()
	table := d.Table()
	check("after ClearDesired", func(f int) int {
		if f%4 == 2 {
			return table[ids[f]&uint32(len(table)-1)]
		}
		return moved(f)
	})
}

// TestMoveUnderBacklog: an input that waits for room keeps its workers'
// queues full, so a busy flow's last frame is always still queued on its
// old worker; the input then waits for the old worker to handle it, and the
// flow moves (to the worker its consumer names with RFS, or to the one a
// reprogrammed table names) instead of staying where it was for good. The
// flow's frames stay in order throughout.
func TestMoveUnderBacklog(t *testing.T) {
	for _, how := range []string{"rfs", "table"} {
		t.Run(how, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			const limit, total = 256, 2048
			var byWorker [2]atomic.Int64
			var last atomic.Uint32
			var bad atomic.Int64
			d, err := New(Config{Workers: 2, Buckets: 2, Hash: HashConfig{Key: hash.MicrosoftKey[:]},
				Queue: QueueConfig{Limit: limit}, RFS: RFSConfig{Enabled: how == "rfs"}}, func(p *Packet) {
				if s := dtSeq(p); s != last.Load()+1 {
					bad.Add(1)
				} else {
					last.Store(s)
				}
				byWorker[p.Worker].Add(1)
				// A slow handler: the input fills the queue much faster
				// than the worker empties it.
				for end := time.Now().Add(10 * time.Microsecond); time.Now().Before(end); {
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			flow := flowInBucket(t, d, 0) // on worker 0 under the default table
			var c Classification
			d.cls.Classify(dtFrame(flow, 1), &c)
			in := d.NewInput()
			for seq := 1; seq <= total; seq += BatchSize {
				if seq == 4*BatchSize+1 { // the queue is full by now
					switch how {
					case "rfs":
						err = d.SetDesired(c.FlowID, 1)
					case "table":
						err = d.SetTable([]int{1, 1})
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				batch := make([]Frame, BatchSize)
				for i := range batch {
					batch[i] = Frame{Data: dtFrame(flow, uint32(seq+i))}
				}
				if err := in.Dispatch(batch, nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			checkAccounting(t, d, total)
			if bad.Load() != 0 {
				t.Errorf("%d frames out of order", bad.Load())
			}
			// The move waits for at most the queue and the batch pending
			// when it was asked for.
			if w1 := byWorker[1].Load(); w1 < total-4*BatchSize-limit-BatchSize {
				t.Errorf("worker 1 handled %d of the flow's %d frames (worker 0 %d): the flow did not move under the backlog", w1, total, byWorker[0].Load())
			}
		})
	}
}

// sourceHook is a SliceSource that calls at before its k-th batch.
type sourceHook struct {
	SliceSource
	k, n int
	at   func()
}

func (s *sourceHook) ReadBatch(ctx context.Context, b *Batch) error {
	if s.n++; s.n == s.k {
		s.at()
	}
	return s.SliceSource.ReadBatch(ctx, b)
}

// TestMoveUnderBacklogHybridReader: under HYBRID, Run reads the source in
// worker 0, which waits for room in the other workers' queues and so keeps
// them full; it waits for a move off them too, as an input does.
func TestMoveUnderBacklogHybridReader(t *testing.T) {
	defer goleak.VerifyNone(t)
	const limit, total = 256, 2048
	var byWorker [2]atomic.Int64
	d, err := New(Config{Workers: 2, Buckets: 2, Dispatch: DispatchHybrid, Hash: HashConfig{Key: hash.MicrosoftKey[:]},
		Queue: QueueConfig{Limit: limit}}, func(p *Packet) {
		byWorker[p.Worker].Add(1)
		for end := time.Now().Add(10 * time.Microsecond); time.Now().Before(end); {
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	flow := flowInBucket(t, d, 1) // worker 1's, not the reader's
	frames := make([]Frame, total)
	for i := range frames {
		frames[i] = Frame{Data: dtFrame(flow, uint32(i+1))}
	}
	src := &sourceHook{SliceSource: SliceSource{Frames: frames}, k: 5, at: func() {
		if err := d.SetTable([]int{0, 0}); err != nil {
			t.Error(err)
		}
	}}
	if err := d.Run(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, d, total)
	if w0 := byWorker[0].Load(); w0 < total-4*BatchSize-limit-BatchSize {
		t.Errorf("worker 0 handled %d of the flow's %d frames (worker 1 %d): the flow did not move under the backlog", w0, total, byWorker[1].Load())
	}
}

// TestNoMoveWaitInInlineHandler: a handler run inline (DIRECT) that
// re-dispatches a frame of a moving bucket never waits for the move:
// Redispatch never waits, and the old worker may need the state lock the
// handler holds to handle the bucket's last frame. Handler A, under worker
// 0's state, queues frame X of bucket 1 to worker 1 and moves bucket 1 to
// worker 0; handler B, under worker 1's state, re-dispatches another frame
// of bucket 1 while X is still queued.
func TestNoMoveWaitInInlineHandler(t *testing.T) {
	for attempt := 0; attempt < 20; attempt++ {
		var d *Dispatcher
		var xHandled, inconclusive atomic.Bool
		var fX int
		d, _, err := NewPerWorker(Config{Workers: 2, Buckets: 4, Dispatch: DispatchDirect, Hash: HashConfig{Key: hash.MicrosoftKey[:]}},
			func(*Worker) *struct{ n int } { return &struct{ n int }{} },
			func(s *struct{ n int }, p *Packet) {
				s.n++
				switch dtSeq(p) {
				case 1: // A, inline under worker 0's state
					if err := p.Redispatch(dtFrame(fX, 2)); err != nil { // X, queued to worker 1
						t.Error(err)
					}
					if err := d.SetBucket(1, 0); err != nil {
						t.Error(err)
					}
				case 2:
					xHandled.Store(true)
				case 3: // B, inline under worker 1's state
					if xHandled.Load() {
						inconclusive.Store(true)
						return
					}
					if err := p.Redispatch(dtFrame(fX, 4)); err != nil { // bucket 1 moving from worker 1 to 0
						t.Error(err)
					}
				}
			})
		if err != nil {
			t.Fatal(err)
		}
		fA, fB := flowInBucket(t, d, 0), flowInBucket(t, d, 3)
		fX = flowInBucket(t, d, 1)
		in := d.NewInput()
		done := make(chan error, 1)
		go func() { done <- in.Dispatch([]Frame{{Data: dtFrame(fA, 1)}, {Data: dtFrame(fB, 3)}}, nil) }()
		hung := false
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(5 * time.Second):
			hung = true
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		cerr := d.Close(ctx)
		cancel()
		if hung {
			<-done
			t.Fatalf("attempt %d: Dispatch did not return in 5 s: the re-dispatch waited for a move (Close: %v)", attempt, cerr)
		}
		if cerr != nil {
			t.Fatal(cerr)
		}
		if !inconclusive.Load() {
			return
		}
	}
	t.Skip("worker 1 handled X before handler B ran, in every attempt: the case did not arise")
}

// TestRFSNewFlowGoesToDesired: a flow's first frame goes straight to the
// worker its consumer named, even while its policy worker is busy: the
// flow has nothing queued anywhere (no frame went without an RFS entry),
// so nothing holds the move back. It used to be sent after the policy
// worker's whole queue, or, from an input that waits, to wait for it.
func TestRFSNewFlowGoesToDesired(t *testing.T) {
	defer goleak.VerifyNone(t)
	gate := make(chan struct{})
	handled := make(chan int, 1)
	d, err := New(Config{Workers: 2, Buckets: 2, Hash: HashConfig{Key: hash.MicrosoftKey[:]}, RFS: RFSConfig{Enabled: true}},
		func(p *Packet) {
			if dtSeq(p) == 1 { // the gate flow's frame: worker 0 is busy until the gate opens
				<-gate
				return
			}
			handled <- p.Worker
		})
	if err != nil {
		t.Fatal(err)
	}
	gateFlow := flowInBucket(t, d, 0)
	flow := gateFlow + 1
	for ; flowBucket(d, flow) != 0; flow++ {
	}
	var c Classification
	d.cls.Classify(dtFrame(flow, 2), &c)
	if err := d.SetDesired(c.FlowID, 1); err != nil {
		t.Fatal(err)
	}
	in := d.NewInput()
	if err := in.Dispatch([]Frame{{Data: dtFrame(gateFlow, 1)}}, nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- in.Dispatch([]Frame{{Data: dtFrame(flow, 2)}}, nil) }()
	select {
	case w := <-handled:
		if w != 1 {
			t.Errorf("the new flow's first frame was handled by worker %d, want its desired worker 1", w)
		}
	case <-time.After(2 * time.Second):
		t.Error("the new flow's first frame was not handled in 2 s: it went after its policy worker's busy queue instead of to its desired worker")
	}
	close(gate)
	if err := <-done; err != nil {
		t.Error(err)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Error(err)
	}
}

// TestMoveWaitWokenPerBatch: an input waiting for a move is woken after
// every batch its old worker handles, not only once the queue runs low: an
// input that never waits (a live one) keeps that queue full, and the move
// goes as soon as the moving flow's last frame there is handled.
func TestMoveWaitWokenPerBatch(t *testing.T) {
	defer goleak.VerifyNone(t)
	const limit, spin = 256, 50 * time.Microsecond
	gate := make(chan struct{})
	var gateOnce sync.Once
	d, err := New(Config{Workers: 2, Buckets: 4, Hash: HashConfig{Key: hash.MicrosoftKey[:]},
		Queue: QueueConfig{Limit: limit}}, func(p *Packet) {
		<-gate
		for end := time.Now().Add(spin); time.Now().Before(end); {
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer gateOnce.Do(func() { close(gate) })
	moving, staying := flowInBucket(t, d, 0), flowInBucket(t, d, 2)
	if tab := d.Table(); tab[0] != 0 || tab[2] != 0 {
		t.Fatalf("table %v: buckets 0 and 2 are not both on worker 0", tab)
	}
	batchOf := func(flow int) []Frame {
		b := make([]Frame, BatchSize)
		for i := range b {
			b[i] = Frame{Data: dtFrame(flow, uint32(i))}
		}
		return b
	}
	waiting, live := d.NewInput(), d.newInput(false)
	for range limit / BatchSize { // worker 0's queue is full of the moving flow
		if err := waiting.Dispatch(batchOf(moving), nil); err != nil {
			t.Fatal(err)
		}
	}
	// The live input keeps worker 0's queue about full until the move is
	// done, or for 3 s at most.
	moved := make(chan struct{})
	var liveBatches int
	liveDone := make(chan struct{})
	go func() {
		defer close(liveDone)
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
			select {
			case <-moved:
				return
			default:
			}
			if err := live.Dispatch(batchOf(staying), nil); err != nil {
				t.Error(err)
				return
			}
			liveBatches++
		}
	}()
	if err := d.SetTable([]int{1, 0, 0, 1}); err != nil {
		t.Fatal(err)
	}
	gateOnce.Do(func() { close(gate) })
	err = waiting.Dispatch(batchOf(moving), nil) // waits for the move
	handled := d.Stats().Workstreams[0].Handled
	close(moved)
	<-liveDone
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, d, uint64((limit/BatchSize+1+liveBatches)*BatchSize))
	// The flow's last frame on worker 0 was its limit-th; a wake-up after
	// each batch lets the move go within a few batches of it (each takes
	// 64 x 50 us), where waiting for the queue to run low lasts until the
	// live input falls behind.
	if most := uint64(limit + 8*BatchSize); handled > most {
		t.Errorf("the move waited until worker 0 had handled %d frames; the moving flow's last was the %dth", handled, limit)
	}
}
