package steer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestStatsWhileBlocked reads Stats while an input waits for room in blocking
// mode (its lock released): every frame it has counted has its reason
// counted, so the reasons add up to Frames and none wraps.
func TestStatsWhileBlocked(t *testing.T) {
	gate := make(chan struct{})
	d, err := New(Config{Workers: 1, Queue: QueueConfig{Limit: 64, Overflow: OverflowWait}}, func(*Packet) { <-gate })
	if err != nil {
		t.Fatal(err)
	}
	frames := make([]Frame, 3*BatchSize)
	for i := range frames {
		b := make([]byte, 60)
		binary.BigEndian.PutUint16(b[12:], 0x0806) // ARP: ReasonNonIP
		frames[i] = Frame{Data: b}
	}
	in := d.NewInput()
	done := make(chan struct{})
	go func() { in.Dispatch(frames, nil); close(done) }()
	w := d.workers[0]
	for waiting := false; !waiting; {
		time.Sleep(time.Millisecond)
		w.mu.Lock()
		waiting = w.waiters > 0
		w.mu.Unlock()
	}
	s := d.Stats()
	var sum uint64
	for _, n := range s.Reasons {
		sum += n
	}
	if s.Reasons[ReasonOK] > s.Frames || sum != s.Frames || s.Reasons[ReasonNonIP] != s.Frames {
		t.Errorf("while blocked: Frames %d, reasons %v (sum %d); want every frame NonIP", s.Frames, s.Reasons, sum)
	}
	close(gate)
	<-done
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, d, uint64(len(frames)))
}

// TestHandledWithinBatch: Stats counts the frames of a batch handled so
// far, not once the whole batch is done, so that a slow handler's progress
// shows (it once stayed at zero until the batch's last frame): a Stats
// call asks, and the worker adds them after its current frame.
func TestHandledWithinBatch(t *testing.T) {
	defer goleak.VerifyNone(t)
	step := make(chan struct{})
	d, err := New(Config{Workers: 1}, func(*Packet) { <-step })
	if err != nil {
		t.Fatal(err)
	}
	in := d.NewInput()
	const n = 40
	if err := in.Dispatch(dtTraffic(rand.New(rand.NewPCG(5, 5)), 4, n), nil); err != nil { // one batch
		t.Fatal(err)
	}
	in.Close()
	handled := func() uint64 { st := d.Stats(); return st.Handled() }
	for done := uint64(1); done <= 20; done++ {
		handled()          // asks, while the handler of frame done waits
		step <- struct{}{} // frame done returns
		deadline := time.Now().Add(2 * time.Second)
		for handled() < done && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if got := handled(); got != done {
			t.Fatalf("Handled %d with %d frames of the batch handled", got, done)
		}
	}
	close(step)
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, d, n)
}

// TestRedispatchDepthCounted: frames dropped past maxRedispatchDepth count in
// Frames as they do in the drops, so the invariant holds after Close.
func TestRedispatchDepthCounted(t *testing.T) {
	for _, mode := range []DispatchMode{DispatchDeferred, DispatchHybrid, DispatchDirect} {
		var errs []error
		var mu sync.Mutex
		d, err := New(Config{Workers: 2, Dispatch: mode, Queue: QueueConfig{Overflow: OverflowDrop}}, func(p *Packet) {
			if err := p.Redispatch(p.Data); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.NewInput().Dispatch([]Frame{{Data: dtFrame(1, 1)}}, nil); err != nil {
			t.Fatal(err)
		}
		if err := d.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		s := d.Stats()
		if s.Frames != maxRedispatchDepth+2 || s.Frames != s.Handled()+s.Dropped() || len(errs) != 1 || !errors.Is(errs[0], ErrRedispatchDepth) {
			t.Errorf("%v: Frames %d, Handled %d, Dropped %d, errors %v; want %d frames, one dropped too deep",
				mode, s.Frames, s.Handled(), s.Dropped(), errs, maxRedispatchDepth+2)
		}
	}
}

// TestRedispatchChangedWorker: a handler that overwrote Packet.Worker gets
// an error from Redispatch, not a panic.
func TestRedispatchChangedWorker(t *testing.T) {
	var got error
	d, err := New(Config{Workers: 2, Queue: QueueConfig{Overflow: OverflowDrop}}, func(p *Packet) {
		if p.depth == 0 {
			p.Worker = 7
			got = p.Redispatch(p.Data)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	d.NewInput().Dispatch([]Frame{{Data: dtFrame(1, 1)}}, nil)
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got == nil {
		t.Error("Redispatch after the handler set Worker to 7 of 2 returned nil")
	}
	checkAccounting(t, d, 1)
}

// TestRunClosesItsInput: each Run retires the input it makes. The
// dispatcher keeps no producer, flow table or batch of a finished Run, yet
// its counts and top flows stay in Stats.
func TestRunClosesItsInput(t *testing.T) {
	d, err := New(Config{Workers: 4, Queue: QueueConfig{Limit: 4096, Overflow: OverflowWait}, RFS: RFSConfig{Enabled: true}}, func(*Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	frames := dtTraffic(rand.New(rand.NewPCG(1, 2)), 1000, 20000)
	const runs = 5
	// A reader of Stats meanwhile never sees Frames go back (an input's
	// counts moving to the closed inputs' sum is seen once, not twice or
	// not at all).
	stop := make(chan struct{})
	watched := make(chan error, 1)
	go func() {
		var last uint64
		for {
			select {
			case <-stop:
				watched <- nil
				return
			default:
			}
			f := d.Stats().Frames
			if f < last {
				watched <- fmt.Errorf("Stats.Frames went from %d back to %d", last, f)
				return
			}
			last = f
		}
	}()
	for range runs {
		if err := d.Run(context.Background(), &SliceSource{Frames: frames, BatchLen: 256}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-watched; err != nil {
		t.Error(err)
	}
	if err := d.barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	inputs := 0
	for _, p := range d.producers {
		if p.self == nil {
			inputs++
		}
	}
	d.mu.Unlock()
	if inputs != 0 {
		t.Errorf("%d inputs of finished Runs still held", inputs)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := checkAccounting(t, d, uint64(runs*len(frames)))
	if len(s.TopFlows) == 0 {
		t.Error("the top flows of finished Runs are gone")
	}
	in := d.NewInput()
	in.Close()
	in.Close()
	if err := in.Dispatch(frames[:1], nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Dispatch on a closed input: %v, want ErrClosed", err)
	}
}

// TestStockRetired: a retired stock gives every batch to the shared pool,
// those it holds, those back already and those that come back later.
func TestStockRetired(t *testing.T) {
	var s batchStock
	held := s.get()
	s.put(s.get())
	s.free = s.get()
	s.retire()
	s.put(held)
	if s.free != nil || s.returned.Load() != nil || held.home != nil {
		t.Errorf("retired stock still holds batches: free %v, returned %v, home %v", s.free, s.returned.Load(), held.home)
	}
}

// TestKeyAfterDataMoved: a handler that moves Data on before asking for the
// key gets the frame's key in every dispatch mode.
func TestKeyAfterDataMoved(t *testing.T) {
	for _, mode := range []DispatchMode{DispatchDeferred, DispatchHybrid, DispatchDirect} {
		var got FlowKey
		d, err := New(Config{Workers: 2, Dispatch: mode, Queue: QueueConfig{Overflow: OverflowDrop}}, func(p *Packet) {
			p.Data = p.Data[14:] // past the Ethernet header it has parsed
			got = p.Key()
		})
		if err != nil {
			t.Fatal(err)
		}
		f := Frame{Data: dtFrame(7, 1)}
		var want Classification
		d.cls.Classify(f.Data, &want)
		d.NewInput().Dispatch([]Frame{f}, nil)
		if err := d.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got != want.Key {
			t.Errorf("%v: Key() = %+v, classifier gave %+v", mode, got, want.Key)
		}
	}
}

// TestCloseTimeoutWithDispatchInFlight checks a Dispatch call that waits for
// room (blocking mode) while Close runs out of time: once the workers have
// been told to drop what is left, the frames it still hands over are
// dropped and counted too, never queued to a worker that has gone, so a
// second Close returns and the counters add up.
func TestCloseTimeoutWithDispatchInFlight(t *testing.T) {
	defer goleak.VerifyNone(t)
	for round := range 20 {
		gate := make(chan struct{})
		d, err := New(Config{Workers: 1, Queue: QueueConfig{Overflow: OverflowWait, Limit: 64}}, func(*Packet) { <-gate })
		if err != nil {
			t.Fatal(err)
		}
		in := d.NewInput()
		frames := dtTraffic(rand.New(rand.NewPCG(uint64(round), 17)), 20, 640)
		dispatched := make(chan error, 1)
		go func() {
			var err error
			for i := 0; i < len(frames) && err == nil; i += 64 {
				err = in.Dispatch(frames[i:i+64], nil)
			}
			dispatched <- err
		}()
		for w := d.workers[0]; ; time.Sleep(100 * time.Microsecond) { // the input now waits for room
			w.mu.Lock()
			n := w.waiters
			w.mu.Unlock()
			if n > 0 {
				break
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		if err := d.Close(ctx); err == nil {
			t.Fatalf("round %d: Close with a stalled handler returned nil", round)
		}
		cancel()
		close(gate)
		<-dispatched
		done := make(chan error, 1)
		go func() { done <- d.Close(context.Background()) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("round %d: second Close: %v", round, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: second Close still waiting after 5 s: frames were queued to a worker that had gone", round)
		}
		st := d.Stats()
		if got := st.Handled() + st.Dropped(); got != st.Frames {
			t.Fatalf("round %d: handled %d + dropped %d != frames %d", round, st.Handled(), st.Dropped(), st.Frames)
		}
	}
}
