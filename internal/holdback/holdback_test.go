package holdback

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/synth"
	"github.com/rpsgo/rps/steer"
)

// fakeKernel is a Kernel without a kernel: a table, and positions the test
// sets.
type fakeKernel struct {
	mu        sync.Mutex
	table     []int
	pos       []uint32
	closed    []bool
	switchErr error
	switches  int
	switched  chan struct{} // gets a value at each Switch (when not nil)
}

func (k *fakeKernel) Table() ([]int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.table), nil
}

func (k *fakeKernel) Switch(table []int) error {
	k.mu.Lock()
	err := k.switchErr
	if err == nil || errors.Is(err, ErrNoGracePeriod) {
		k.table = slices.Clone(table)
		k.switches++
	}
	k.mu.Unlock()
	if k.switched != nil {
		k.switched <- struct{}{}
	}
	return err
}

func (k *fakeKernel) Position(i int) (uint32, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.pos[i], !k.closed[i]
}

func (k *fakeKernel) setPos(i int, p uint32) {
	k.mu.Lock()
	k.pos[i] = p
	k.mu.Unlock()
}

// rig is a Holder over a DIRECT dispatcher of two workers whose every
// bucket starts on worker 0, and the frames of two TCP flows: a, whose
// bucket moves to worker 1, and b, whose bucket stays.
type rig struct {
	t      *testing.T
	d      *steer.Dispatcher
	h      *Holder
	k      *fakeKernel
	moved  []int // the table with a's bucket on worker 1
	fa, fb int   // the flows
}

// maxFlowSearch bounds newRig's search for flow b, which takes two or three
// flows with a random key: a degenerate key, one that hashes every flow into
// one bucket, fails the test instead of spinning until its timeout.
const maxFlowSearch = 1 << 20

func newRig(t *testing.T, opts Options) *rig {
	t.Helper()
	d, err := steer.New(steer.Config{Workers: 2, Dispatch: steer.DispatchDirect}, func(*steer.Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	table := make([]int, d.Config().Buckets)
	if err := d.SetTable(table); err != nil {
		t.Fatal(err)
	}
	h, err := New(d, opts)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, d: d, h: h, k: &fakeKernel{table: slices.Clone(table), pos: make([]uint32, 2), closed: make([]bool, 2),
		switched: make(chan struct{}, 1)}}
	r.fa, r.fb = -1, -1
	ba := -1
	for f := 0; r.fb < 0; f++ {
		if f == maxFlowSearch {
			t.Fatalf("no synth flow outside flow %d's bucket %d among the first %d, with key %x", r.fa, ba, maxFlowSearch, d.Config().Hash.Key)
		}
		bk := r.bucket(r.frame(f, 1, 64))
		switch {
		case r.fa < 0:
			r.fa, ba = f, bk
		case bk != ba:
			r.fb = f
		}
	}
	r.moved = slices.Clone(table)
	r.moved[ba] = 1
	return r
}

func (r *rig) frame(f int, seq uint32, size int) []byte {
	b := make([]byte, size)
	synth.Build(b, f, seq, false)
	return b
}

func (r *rig) bucket(frame []byte) int {
	var c steer.Classification
	r.h.cls.Classify(frame, &c)
	if !c.HashType.IsHash() {
		r.t.Fatal("synthetic frame without a hash")
	}
	return int(c.FlowID & r.h.mask)
}

// setTable runs SetTable in the background and waits until the kernel's
// table is switched (the holds are on).
func (r *rig) setTable(ctx context.Context, table []int) chan error {
	r.t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- r.h.SetTable(ctx, table, r.k) }()
	select {
	case <-r.k.switched:
	case err := <-errc:
		// A switch that fails returns at once: both may be ready, and
		// select picks either.
		select {
		case <-r.k.switched:
			errc <- err
		default:
			r.t.Fatalf("SetTable returned before switching: %v", err)
		}
	}
	return errc
}

// waitArmed waits until worker w's hold has its targets.
func (r *rig) waitArmed(w int) {
	r.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if hs := r.h.readers[w].holds.Load(); hs != nil && hs.armed.Load() {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatal("hold never armed")
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// before is what a source does before it reads: BeforeRead, and Hold
// when a hold is on.
func (r *rig) before(w int, b *steer.Batch, wait time.Duration) (time.Duration, bool) {
	rd := r.h.Reader(w)
	if rd.BeforeRead() {
		return rd.Hold(b, wait)
	}
	return wait, false
}

// read is one read of worker w that returns frames and leaves the reader
// at pos; it returns what the dispatcher would get.
func (r *rig) read(w int, pos uint32, frames ...[]byte) []steer.Frame {
	r.t.Helper()
	b := &steer.Batch{}
	rd := r.h.Reader(w)
	if _, held := r.before(w, b, 100*time.Millisecond); held {
		r.t.Fatalf("worker %d: held frames delivered when a read was expected", w)
	}
	for _, f := range frames {
		b.Frames = append(b.Frames, steer.Frame{Data: f})
	}
	rd.AfterRead(b, pos)
	return b.Frames
}

// seqs returns the flow and sequence number of each frame.
func seqs(t *testing.T, fs []steer.Frame) [][2]uint32 {
	t.Helper()
	var out [][2]uint32
	for _, f := range fs {
		s, ok := synth.Seq(f.Data, false)
		if !ok {
			t.Fatalf("frame of %d bytes without a sequence number", len(f.Data))
		}
		out = append(out, [2]uint32{uint32(f.Data[14+12+3]), s}) // the source address's last byte tells the flows apart
	}
	return out
}

// noResult checks that worker w still holds and SetTable has not
// returned.
func (r *rig) noResult(w int, errc chan error) {
	t := r.t
	t.Helper()
	if r.h.readers[w].holds.Load() == nil {
		t.Fatalf("worker %d lifted its hold", w)
	}
	select {
	case err := <-errc:
		t.Fatalf("SetTable returned %v while a hold is on", err)
	default:
	}
}

func result(t *testing.T, errc chan error) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("SetTable did not return")
		return nil
	}
}

// TestHeldInOrder moves a bucket from worker 0 to worker 1: worker 1 holds
// the bucket's frames (passing the others) until worker 0 has read up to
// its ring's position at the switch, then hands them out in arrival order,
// from private copies, before reading on; SetTable returns once they are
// handled.
func TestHeldInOrder(t *testing.T) {
	r := newRig(t, Options{})
	r.read(0, 5) // worker 0 has read 5 frames
	r.k.setPos(0, 9)
	errc := r.setTable(context.Background(), r.moved)

	b := &steer.Batch{}
	wait, held := r.before(1, b, 100*time.Millisecond)
	if held || wait != holdPoll {
		t.Fatalf("while holding: wait %v, held %v; want %v, false", wait, held, holdPoll)
	}
	buf := [][]byte{r.frame(r.fa, 1, 64), r.frame(r.fb, 1, 64), r.frame(r.fa, 2, 64)}
	b.Frames = []steer.Frame{{Data: buf[0]}, {Data: buf[1]}, {Data: buf[2]}}
	r.h.Reader(1).AfterRead(b, 3)
	if got := seqs(t, b.Frames); len(got) != 1 || got[0] != seqs(t, []steer.Frame{{Data: buf[1]}})[0] {
		t.Fatalf("worker 1 dispatched %v, want only flow b's frame", got)
	}
	for _, f := range buf {
		clear(f) // the ring block is reused: the held frames must be copies
	}
	r.waitArmed(1)
	r.read(0, 8)
	if got := r.read(1, 4, r.frame(r.fa, 3, 64)); len(got) != 0 {
		t.Fatalf("worker 1 dispatched %d frames of the held bucket before worker 0 drained", len(got))
	}
	r.noResult(1, errc)
	r.read(0, 9)
	if got := r.read(1, 4); len(got) != 0 {
		t.Fatal("worker 1 lifted the hold before worker 0 came back for more after its last read")
	}
	r.read(0, 9) // worker 0 comes back for more: it has handled 9 frames
	b = &steer.Batch{Release: func() {}}
	if _, held := r.before(1, b, 100*time.Millisecond); !held {
		t.Fatal("worker 1 did not hand out the held frames once worker 0 drained")
	}
	a := uint32(r.frame(r.fa, 1, 64)[14+12+3])
	if got, want := seqs(t, b.Frames), [][2]uint32{{a, 1}, {a, 2}, {a, 3}}; !slices.Equal(got, want) {
		t.Fatalf("held frames %v, want %v", got, want)
	}
	if b.Release != nil {
		t.Error("held frames delivered with a Release of the ring's")
	}
	r.noResult(1, errc) // not before the held frames are handled
	r.read(1, 4)
	if err := result(t, errc); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.d.Table(), r.moved) || !slices.Equal(r.k.table, r.moved) {
		t.Error("tables not switched")
	}
	want := Stats{TableChanges: 1, BucketsMoved: 1, HeldFrames: 3}
	if s := r.h.Stats(); s != want {
		t.Errorf("stats %+v, want %+v", s, want)
	}
	if wait, _ := r.before(1, &steer.Batch{}, 100*time.Millisecond); wait != 100*time.Millisecond {
		t.Errorf("wait %v after the hold, want the caller's", wait)
	}
}

// TestHoldTimeout lifts a hold whose old worker never reads after
// HoldTimeout, and counts it.
func TestHoldTimeout(t *testing.T) {
	const timeout = 30 * time.Millisecond
	r := newRig(t, Options{HoldTimeout: timeout})
	r.k.setPos(0, 1)
	start := time.Now()
	errc := r.setTable(context.Background(), r.moved)
	r.read(1, 1, r.frame(r.fa, 1, 64))
	deadline := time.Now().Add(5 * time.Second)
	for {
		b := &steer.Batch{}
		if _, held := r.before(1, b, time.Second); held {
			if len(b.Frames) != 1 {
				t.Fatalf("%d held frames, want 1", len(b.Frames))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("hold not lifted after its timeout")
		}
		time.Sleep(time.Millisecond)
	}
	if d := time.Since(start); d < timeout {
		t.Errorf("hold lifted after %v, before its timeout %v", d, timeout)
	}
	r.read(1, 1)
	if err := result(t, errc); err != nil {
		t.Fatal(err)
	}
	if s := r.h.Stats(); s.HoldTimeouts != 1 || s.HoldOverflows != 0 {
		t.Errorf("stats %+v, want one timeout", s)
	}
}

// TestHoldOverflow lifts a hold past MaxHeld bytes, and counts it.
func TestHoldOverflow(t *testing.T) {
	r := newRig(t, Options{MaxHeld: 100, HoldTimeout: time.Minute})
	r.k.setPos(0, 1)
	errc := r.setTable(context.Background(), r.moved)
	r.waitArmed(1)
	r.read(1, 1, r.frame(r.fa, 1, 64))
	b := &steer.Batch{}
	if _, held := r.before(1, b, time.Second); held {
		t.Fatal("hold lifted at 64 of 100 bytes")
	}
	b.Frames = append(b.Frames[:0], steer.Frame{Data: r.frame(r.fa, 2, 64)})
	r.h.Reader(1).AfterRead(b, 2)
	if _, held := r.before(1, b, time.Second); !held || len(b.Frames) != 2 {
		t.Fatalf("past MaxHeld: held %v, %d frames; want the 2 held frames", held, len(b.Frames))
	}
	r.read(1, 2)
	if err := result(t, errc); err != nil {
		t.Fatal(err)
	}
	if s := r.h.Stats(); s.HoldOverflows != 1 || s.HoldTimeouts != 0 {
		t.Errorf("stats %+v, want one overflow", s)
	}
}

// TestSetTableContext: when ctx ends during the hold, SetTable returns its
// error with the tables switched; the next SetTable waits for the hold.
func TestSetTableContext(t *testing.T) {
	r := newRig(t, Options{HoldTimeout: time.Minute})
	r.k.setPos(0, 1)
	ctx, cancel := context.WithCancel(context.Background())
	errc := r.setTable(ctx, r.moved)
	r.waitArmed(1)
	cancel()
	if err := result(t, errc); !errors.Is(err, context.Canceled) {
		t.Fatalf("SetTable after ctx ended: %v, want context.Canceled", err)
	}
	if !slices.Equal(r.d.Table(), r.moved) || !slices.Equal(r.k.table, r.moved) {
		t.Error("tables not switched")
	}
	short, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if err := r.h.SetTable(short, r.moved, r.k); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SetTable during the last one's hold: %v, want it to wait", err)
	}
	r.read(0, 1)
	r.read(0, 1)
	r.read(1, 0) // lifts: nothing was held
	if err := r.h.SetTable(context.Background(), r.moved, r.k); err != nil {
		t.Fatal(err)
	}
}

// TestSwitchError: a failed switch is returned, leaves the dispatcher's
// table as it was, and its holds are lifted at the next read.
func TestSwitchError(t *testing.T) {
	r := newRig(t, Options{HoldTimeout: time.Minute})
	fail := errors.New("map update failed")
	r.k.switchErr = fail
	errc := r.setTable(context.Background(), r.moved)
	if err := result(t, errc); !errors.Is(err, fail) {
		t.Fatalf("SetTable: %v, want the switch's error", err)
	}
	if slices.Equal(r.d.Table(), r.moved) {
		t.Error("dispatcher's table changed though the kernel's did not")
	}
	r.read(1, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	table, _ := r.k.Table()
	if err := r.h.SetTable(ctx, table, r.k); err != nil {
		t.Fatalf("SetTable after the failed one's holds were lifted: %v", err)
	}
	if s := r.h.Stats(); s.TableChanges != 0 || s.BucketsMoved != 0 {
		t.Errorf("stats %+v after a failed switch", s)
	}
}

// TestSwitchNoGracePeriod: a switch that changed the kernel's table but
// had no grace period returns its error at once, with the dispatcher's
// table switched too; the new worker holds the moved bucket's frames
// although the old worker has read past its position (no position can
// lift the hold), until HoldTimeout, counted as a timeout.
func TestSwitchNoGracePeriod(t *testing.T) {
	const timeout = 50 * time.Millisecond
	r := newRig(t, Options{HoldTimeout: timeout})
	r.k.switchErr = fmt.Errorf("fake: %w", ErrNoGracePeriod)
	start := time.Now()
	errc := r.setTable(context.Background(), r.moved)
	if err := result(t, errc); !errors.Is(err, ErrNoGracePeriod) {
		t.Fatalf("SetTable: %v, want the switch's error", err)
	}
	if !slices.Equal(r.d.Table(), r.moved) || !slices.Equal(r.k.table, r.moved) {
		t.Fatal("the dispatcher's table does not follow the kernel's")
	}
	r.read(1, 1, r.frame(r.fa, 1, 64))
	r.read(0, 100)
	r.read(0, 100)
	for {
		b := &steer.Batch{}
		_, held := r.before(1, b, time.Second)
		if held {
			if d := time.Since(start); d < timeout {
				t.Fatalf("hold lifted after %v, before its timeout %v", d, timeout)
			}
			if len(b.Frames) != 1 {
				t.Fatalf("%d held frames, want 1", len(b.Frames))
			}
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("hold not lifted after its timeout")
		}
		time.Sleep(time.Millisecond)
	}
	r.read(1, 1)
	if s := r.h.Stats(); s.TableChanges != 1 || s.BucketsMoved != 1 || s.HoldTimeouts != 1 {
		t.Errorf("stats %+v, want one change, one moved bucket, one timeout", s)
	}
	r.k.switchErr = nil
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.h.SetTable(ctx, r.moved, r.k); err != nil {
		t.Fatalf("SetTable after the hold ran out: %v", err)
	}
}

// TestClosedSocket: an old socket that gets no more frames is not waited
// for.
func TestClosedSocket(t *testing.T) {
	r := newRig(t, Options{HoldTimeout: time.Minute})
	r.k.pos[0], r.k.closed[0] = 100, true
	errc := r.setTable(context.Background(), r.moved)
	r.waitArmed(1)
	r.read(1, 0)
	if err := result(t, errc); err != nil {
		t.Fatal(err)
	}
}

// TestPositionWraps: positions are compared modulo 2^32.
func TestPositionWraps(t *testing.T) {
	r := newRig(t, Options{HoldTimeout: time.Minute})
	r.read(0, 0xfffffff0)
	r.k.setPos(0, 5) // 21 frames on, past the wrap
	errc := r.setTable(context.Background(), r.moved)
	r.waitArmed(1)
	r.read(1, 0)
	r.read(0, 0xfffffffe)
	r.read(0, 5) // done 0xfffffffe: 2^32-2 is before 5, modulo 2^32
	r.read(1, 0)
	r.noResult(1, errc)
	r.read(0, 5)
	r.read(1, 0)
	if err := result(t, errc); err != nil {
		t.Fatal(err)
	}
}

// TestSetTableNoMove: a table the kernel has already only goes to the
// dispatcher.
func TestSetTableNoMove(t *testing.T) {
	r := newRig(t, Options{})
	table, _ := r.k.Table()
	if err := r.h.SetTable(context.Background(), table, r.k); err != nil {
		t.Fatal(err)
	}
	if r.k.switches != 0 {
		t.Error("switched the kernel's table to the same table")
	}
}

// TestBadInput: tables and dispatchers SetTable cannot use are errors
// wrapping ErrTable, not panics.
func TestBadInput(t *testing.T) {
	r := newRig(t, Options{})
	bad := [][]int{nil, make([]int, 3), append(slices.Clone(r.moved[1:]), 2), append(slices.Clone(r.moved[1:]), -1)}
	for _, tab := range bad {
		if err := r.h.SetTable(context.Background(), tab, r.k); !errors.Is(err, ErrTable) {
			t.Errorf("table %v: %v, want ErrTable", tab, err)
		}
	}
	r.k.table = r.k.table[1:]
	if err := r.h.SetTable(context.Background(), r.moved, r.k); !errors.Is(err, ErrTable) {
		t.Errorf("kernel table of the wrong length: %v, want ErrTable", err)
	}
	if _, err := New(nil, Options{}); !errors.Is(err, ErrTable) {
		t.Errorf("New(nil): %v", err)
	}
	d, err := steer.New(steer.Config{Workers: 2, Dispatch: steer.DispatchDeferred}, func(*steer.Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	h, err := New(d, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.SetTable(context.Background(), d.Table(), r.k); !errors.Is(err, ErrTable) {
		t.Errorf("deferred dispatch: %v, want ErrTable", err)
	}
	if h.Reader(2) != nil || h.Reader(-1) != nil {
		t.Error("Reader of a worker that does not exist")
	}
}
