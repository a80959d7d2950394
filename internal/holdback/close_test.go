package holdback

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/synth"
	"github.com/rpsgo/rps/steer"
)

// TestCloseWakesSetTable: a SetTable waiting for a hold no reader lifts,
// and one waiting for its turn behind it, both return ErrClosed once the
// Holder is closed; a SetTable after Close returns ErrClosed at once,
// without touching the kernel.
func TestCloseWakesSetTable(t *testing.T) {
	r := newRig(t, Options{HoldTimeout: time.Minute})
	r.k.setPos(0, 1)
	first := r.setTable(context.Background(), r.moved)
	r.waitArmed(1)
	second := make(chan error, 1)
	go func() { second <- r.h.SetTable(context.Background(), r.d.Table(), r.k) }()
	time.Sleep(20 * time.Millisecond)
	r.noResult(1, first)
	select {
	case err := <-second:
		t.Fatalf("the second SetTable returned %v while the first waits", err)
	default:
	}
	r.h.Close()
	for i, errc := range []chan error{first, second} {
		if err := result(t, errc); !errors.Is(err, ErrClosed) {
			t.Errorf("SetTable %d after Close: %v, want ErrClosed", i+1, err)
		}
	}
	switches := r.k.switches
	start := time.Now()
	if err := r.h.SetTable(context.Background(), r.d.Table(), r.k); !errors.Is(err, ErrClosed) {
		t.Errorf("SetTable on a closed Holder: %v, want ErrClosed", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("SetTable on a closed Holder took %v", d)
	}
	if r.k.switches != switches {
		t.Error("SetTable on a closed Holder switched the kernel's table")
	}
	r.h.Close() // idempotent
}

// TestQueuedSetTableContext: a SetTable waiting for its turn behind one
// whose hold is on returns when its own ctx ends.
func TestQueuedSetTableContext(t *testing.T) {
	r := newRig(t, Options{HoldTimeout: time.Minute})
	r.k.setPos(0, 1)
	first := r.setTable(context.Background(), r.moved)
	r.waitArmed(1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	second := make(chan error, 1)
	go func() { second <- r.h.SetTable(ctx, r.d.Table(), r.k) }()
	if err := result(t, second); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("queued SetTable: %v, want its ctx's error", err)
	}
	r.h.Close()
	if err := result(t, first); !errors.Is(err, ErrClosed) {
		t.Errorf("first SetTable after Close: %v, want ErrClosed", err)
	}
}

// TestAbandonedHold: when the new worker's reader does not come back,
// SetTable lifts the hold itself twice HoldTimeout after the switch,
// counts a timeout and returns; the frame the reader held back before it
// went away it hands out when it comes back, once, before what it reads
// then; the next SetTable runs as usual.
func TestAbandonedHold(t *testing.T) {
	const timeout = 30 * time.Millisecond
	r := newRig(t, Options{HoldTimeout: timeout})
	r.k.setPos(0, 1)
	start := time.Now()
	errc := r.setTable(context.Background(), r.moved)
	r.waitArmed(1)
	if got := r.read(1, 1, r.frame(r.fa, 1, 64)); len(got) != 0 {
		t.Fatal("worker 1 dispatched a frame of the held bucket")
	}
	// Worker 1 goes away; worker 0 never reads.
	if err := result(t, errc); err != nil {
		t.Fatalf("SetTable without readers: %v", err)
	}
	if d := time.Since(start); d < 2*timeout {
		t.Errorf("SetTable returned after %v, before twice the hold timeout", d)
	}
	if s := r.h.Stats(); s.HoldTimeouts != 1 || s.TableChanges != 1 {
		t.Errorf("stats %+v, want one table change and one timeout", s)
	}
	if r.h.readers[1].holds.Load() != nil {
		t.Error("the abandoned hold is still on")
	}
	// Worker 1 comes back: the held frame first, then reads as usual.
	b := &steer.Batch{Release: func() {}}
	if _, held := r.before(1, b, time.Second); !held {
		t.Fatal("the frame held back before the reader went away was not handed out")
	}
	a := uint32(r.frame(r.fa, 1, 64)[14+12+3])
	if got := seqs(t, b.Frames); len(got) != 1 || got[0] != [2]uint32{a, 1} {
		t.Fatalf("handed out %v, want flow a's frame 1", got)
	}
	if b.Release != nil {
		t.Error("held frames delivered with a Release of the ring's")
	}
	if got := r.read(1, 2, r.frame(r.fa, 2, 64)); len(got) != 1 {
		t.Fatalf("after the hold worker 1 dispatched %d of 1 frames", len(got))
	}
	if _, held := r.before(1, &steer.Batch{}, time.Second); held {
		t.Error("held frames handed out twice")
	}
	// The next change (the bucket back to worker 0) waits for the readers
	// again: worker 1 has handled its 2 frames.
	r.k.setPos(1, 2)
	errc = r.setTable(context.Background(), make([]int, len(r.moved)))
	r.waitArmed(0)
	r.read(1, 2)
	r.read(0, 1)
	if err := result(t, errc); err != nil {
		t.Fatal(err)
	}
	if s := r.h.Stats(); s.HoldTimeouts != 1 || s.TableChanges != 2 {
		t.Errorf("stats %+v, want two table changes and one timeout", s)
	}
}

// TestAbandonAfterDecided: a hold whose reader had found its old workers
// drained and handed the held frames out, but did not come back to lift
// it, SetTable lifts without counting a timeout.
func TestAbandonAfterDecided(t *testing.T) {
	const timeout = 30 * time.Millisecond
	r := newRig(t, Options{HoldTimeout: timeout})
	r.k.setPos(0, 1)
	errc := r.setTable(context.Background(), r.moved)
	r.waitArmed(1)
	r.read(1, 1, r.frame(r.fa, 1, 64))
	r.read(0, 1)
	r.read(0, 1) // worker 0 has handled its frame
	b := &steer.Batch{}
	if _, held := r.before(1, b, time.Second); !held || len(b.Frames) != 1 {
		t.Fatalf("held %v, %d frames: want the held frame handed out", held, len(b.Frames))
	}
	// Worker 1 does not come back to lift the hold.
	if err := result(t, errc); err != nil {
		t.Fatal(err)
	}
	if s := r.h.Stats(); s.HoldTimeouts != 0 {
		t.Errorf("stats %+v: a drained hold counted as a timeout", s)
	}
	if _, held := r.before(1, &steer.Batch{}, time.Second); held {
		t.Error("held frames handed out twice")
	}
}

// TestAbandonRace runs readers that now and then stay away for longer than
// twice HoldTimeout, so that SetTable lifts holds while they are away or
// coming back, over a ringKernel under a stream of numbered frames: every
// frame reaches the handler exactly once (order is not checked: lifted
// holds may reorder, and are counted).
func TestAbandonRace(t *testing.T) {
	const workers, flows, frames, timeout = 3, 32, 20000, 2 * time.Millisecond
	var mu sync.Mutex
	seen := make(map[[2]uint32]int)
	var handled atomic.Int64
	handle := func(fs []steer.Frame) {
		mu.Lock()
		defer mu.Unlock()
		for _, f := range fs {
			seq, _ := synth.Seq(f.Data, false)
			seen[[2]uint32{uint32(f.Data[len(f.Data)-1]), seq}]++
		}
		handled.Add(int64(len(fs)))
	}
	// Away now and then, more often with frames held back, at times past
	// twice HoldTimeout. r.held is the reader's own: pause runs on its
	// goroutine.
	pause := func(r *Reader, rng *rand.Rand) {
		if rng.IntN(50) == 0 || len(r.held) > 0 && rng.IntN(4) == 0 {
			time.Sleep(time.Duration(rng.IntN(4)) * timeout)
		}
	}
	rr := startRingRun(t, workers, frames, Options{HoldTimeout: timeout}, pause, handle)
	rr.send(frames, flows)
	rr.changeTables(t, 40)
	s := rr.stop(&handled, frames)
	mu.Lock()
	defer mu.Unlock()
	twice := 0
	for _, n := range seen {
		if n != 1 {
			twice++
		}
	}
	t.Logf("%d frames handled, %+v", handled.Load(), s)
	if handled.Load() != frames || len(seen) != frames || twice != 0 {
		t.Errorf("%d handled, %d distinct of %d frames, %d handed out more than once", handled.Load(), len(seen), frames, twice)
	}
	if s.TableChanges != 40 || s.HeldFrames == 0 {
		t.Errorf("stats %+v: want 40 changes and frames held", s)
	}
}
