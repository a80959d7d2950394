package kgroup_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/synth"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/kgroup"
)

// fakeSocket is a ring the test fills: frames go in with put, and its
// reader takes them out; a read fails with readErr when that is set.
type fakeSocket struct {
	mu       sync.Mutex
	ring     [][]byte
	produced uint32 // frames put in, ever
	taken    uint32 // frames read out, ever
	readErr  error
	closed   bool
}

func (s *fakeSocket) put(frames ...[]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ring = append(s.ring, frames...)
	s.produced += uint32(len(frames))
}

func (s *fakeSocket) Read(ctx context.Context, b *steer.Batch, limit time.Duration) (uint32, error) {
	b.Frames, b.Release = b.Frames[:0], nil
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, net.ErrClosed
	}
	if s.readErr != nil {
		return 0, s.readErr
	}
	for _, f := range s.ring {
		b.Frames = append(b.Frames, steer.Frame{Data: f})
	}
	s.taken += uint32(len(s.ring))
	s.ring = nil
	return s.taken, nil
}

func (s *fakeSocket) ReadBatch(ctx context.Context, b *steer.Batch) error {
	_, err := s.Read(ctx, b, 0)
	return err
}

func (s *fakeSocket) Position() (uint32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.produced, !s.closed
}

func (s *fakeSocket) Live() bool { return true }

func (s *fakeSocket) Backlog() (used, size int) { return 0, 0 }

func (s *fakeSocket) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

func (s *fakeSocket) SourceStats() (steer.SourceStats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return steer.SourceStats{Name: "fake", Received: uint64(s.produced)}, nil
}

// fakeKernel is a Kernel, and its Program, without a kernel: a table,
// sockets the test fills, and counters of its calls. A call after Close
// fails the test.
type fakeKernel struct {
	t         testing.TB
	mu        sync.Mutex
	socks     []*fakeSocket
	byTable   bool
	attachErr error
	syncErr   error
	table     []uint32
	closed    bool
	calls     int
}

func newFakeKernel(t testing.TB, n int) *fakeKernel {
	k := &fakeKernel{t: t, byTable: true}
	for range n {
		k.socks = append(k.socks, &fakeSocket{})
	}
	return k
}

func (k *fakeKernel) call(what string) {
	k.calls++
	if k.closed {
		k.t.Errorf("%s after Close", what)
	}
}

func (k *fakeKernel) Sockets() []kgroup.Socket {
	out := make([]kgroup.Socket, len(k.socks))
	for i, s := range k.socks {
		out[i] = s
	}
	return out
}

func (k *fakeKernel) Attach(cfg steer.Config, table []int, o kgroup.Options) (kgroup.Program, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.call("Attach")
	for _, w := range table {
		k.table = append(k.table, uint32(w))
	}
	if k.attachErr != nil || !k.byTable {
		return nil, k.attachErr
	}
	return k, nil
}

func (k *fakeKernel) Table() ([]uint32, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.call("Table")
	return slices.Clone(k.table), nil
}

func (k *fakeKernel) SetTable(table []uint32) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.call("SetTable")
	k.table = slices.Clone(table)
	return nil
}

func (k *fakeKernel) Sync() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.call("Sync")
	return k.syncErr
}

func (k *fakeKernel) StopIntake() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.call("StopIntake")
	return nil
}

func (k *fakeKernel) Counters() ([]steer.KernelCounter, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.call("Counters")
	return []steer.KernelCounter{{Name: "calls", Value: uint64(k.calls)}}, nil
}

func (k *fakeKernel) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.call("Close")
	k.closed = true
	return nil
}

// newDispatcher returns a DIRECT dispatcher of n workers, every bucket on
// worker 0, handling into handled.
func newDispatcher(t testing.TB, n int, dispatch steer.DispatchMode, handled *[]steer.Frame) *steer.Dispatcher {
	t.Helper()
	var mu sync.Mutex
	d, err := steer.New(steer.Config{Workers: n, Dispatch: dispatch}, func(p *steer.Packet) {
		mu.Lock()
		*handled = append(*handled, steer.Frame{Data: p.Data})
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	if err := d.SetTable(make([]int, d.Config().Buckets)); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestNew checks New's refusals, all configuration errors, and that an
// Attach error comes back as it is.
func TestNew(t *testing.T) {
	var handled []steer.Frame
	d := newDispatcher(t, 2, steer.DispatchDirect, &handled)
	for _, c := range []struct {
		name string
		d    *steer.Dispatcher
		k    kgroup.Kernel
		o    kgroup.Options
	}{
		{"nil dispatcher", nil, newFakeKernel(t, 2), kgroup.Options{}},
		{"nil kernel", d, nil, kgroup.Options{}},
		{"three sockets for two workers", d, newFakeKernel(t, 3), kgroup.Options{}},
		{"fallback 2 of 2", d, newFakeKernel(t, 2), kgroup.Options{Fallback: 2}},
		{"negative fallback", d, newFakeKernel(t, 2), kgroup.Options{Fallback: -1}},
	} {
		if _, err := kgroup.New(c.d, c.k, c.o); !errors.Is(err, steer.ErrConfig) {
			t.Errorf("%s: %v, want steer.ErrConfig", c.name, err)
		}
	}
	k := newFakeKernel(t, 2)
	k.attachErr = errors.New("the kernel says no")
	if _, err := kgroup.New(d, k, kgroup.Options{}); err != k.attachErr {
		t.Errorf("Attach's error: %v", err)
	}
}

// TestClosed: after Close, Run, SetTable and KernelTable fail with
// ErrClosed (which wraps net.ErrClosed), StopIntake and a second Close
// return nil, Stats keeps the counters Close read last, and the Kernel is
// never called again. (Run after Close used to read on in one of the two
// copies this package replaced.)
func TestClosed(t *testing.T) {
	var handled []steer.Frame
	d := newDispatcher(t, 2, steer.DispatchDirect, &handled)
	k := newFakeKernel(t, 2)
	st, err := kgroup.New(d, k, kgroup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	last := st.Stats().Counter("calls")
	if last == 0 {
		t.Error("Close did not read the counters")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := st.Run(ctx); !errors.Is(err, kgroup.ErrClosed) || !errors.Is(err, net.ErrClosed) {
		t.Errorf("Run after Close: %v, want ErrClosed at once", err)
	}
	if err := st.SetTable(context.Background(), d.Table()); !errors.Is(err, kgroup.ErrClosed) {
		t.Errorf("SetTable after Close: %v", err)
	}
	if _, err := st.KernelTable(); !errors.Is(err, kgroup.ErrClosed) {
		t.Errorf("KernelTable after Close: %v", err)
	}
	if err := st.StopIntake(); err != nil {
		t.Errorf("StopIntake after Close: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if n := st.Stats().Counter("calls"); n != last {
		t.Errorf("counters after Close: %d, want the last read %d", n, last)
	}
}

// TestByRule: when the kernel picks sockets by a rule of its own, SetTable
// is a configuration error with DIRECT dispatch and the dispatcher's own
// SetTable otherwise; KernelTable is a configuration error.
func TestByRule(t *testing.T) {
	for _, dispatch := range []steer.DispatchMode{steer.DispatchDirect, steer.DispatchDeferred} {
		var handled []steer.Frame
		d := newDispatcher(t, 2, dispatch, &handled)
		k := newFakeKernel(t, 2)
		k.byTable = false
		st, err := kgroup.New(d, k, kgroup.Options{})
		if err != nil {
			t.Fatal(err)
		}
		table := d.Table()
		table[0] = 1
		err = st.SetTable(context.Background(), table)
		switch {
		case dispatch == steer.DispatchDirect && !errors.Is(err, steer.ErrConfig):
			t.Errorf("direct: SetTable %v, want steer.ErrConfig", err)
		case dispatch != steer.DispatchDirect && (err != nil || d.Table()[0] != 1):
			t.Errorf("deferred: SetTable %v, dispatcher's table %v", err, d.Table()[:4])
		}
		if _, err := st.KernelTable(); !errors.Is(err, steer.ErrConfig) {
			t.Errorf("%v: KernelTable %v, want steer.ErrConfig", dispatch, err)
		}
		if dispatch != steer.DispatchDirect {
			if err := st.SetTable(context.Background(), table); err != nil {
				t.Errorf("deferred: %v", err)
			}
		}
		st.Close()
	}
	var handled []steer.Frame
	d := newDispatcher(t, 2, steer.DispatchDeferred, &handled)
	st, err := kgroup.New(d, newFakeKernel(t, 2), kgroup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.SetTable(context.Background(), d.Table()); !errors.Is(err, steer.ErrConfig) {
		t.Errorf("a table-steering kernel with deferred dispatch: %v, want steer.ErrConfig", err)
	}
}

// moveRig is a Steering over a fake kernel of two sockets with every
// bucket on worker 0, and the frames of a flow whose bucket moves to
// worker 1.
type moveRig struct {
	t       *testing.T
	d       *steer.Dispatcher
	k       *fakeKernel
	st      *kgroup.Steering
	srcs    []steer.Source
	moved   []int
	frame   func(seq uint32) []byte
	handled *[]steer.Frame
}

func newMoveRig(t *testing.T, o kgroup.Options) *moveRig {
	t.Helper()
	r := &moveRig{t: t, handled: &[]steer.Frame{}}
	r.d = newDispatcher(t, 2, steer.DispatchDirect, r.handled)
	r.k = newFakeKernel(t, 2)
	st, err := kgroup.New(r.d, r.k, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r.st, r.srcs = st, st.Sources()
	r.frame = func(seq uint32) []byte {
		b := make([]byte, 64)
		synth.Build(b, 1, seq, false)
		return b
	}
	cls, err := steer.NewClassifier(r.d.Config().Hash) // the key in use, a random one too
	if err != nil {
		t.Fatal(err)
	}
	var c steer.Classification
	cls.Classify(r.frame(1), &c)
	r.moved = r.d.Table()
	r.moved[c.FlowID&uint32(len(r.moved)-1)] = 1
	return r
}

// read is one ReadBatch of worker w, which must not fail; it returns the
// frames read.
func (r *moveRig) read(w int) []steer.Frame {
	r.t.Helper()
	var b steer.Batch
	if err := r.srcs[w].ReadBatch(context.Background(), &b); err != nil {
		r.t.Fatalf("worker %d: %v", w, err)
	}
	return b.Frames
}

// setTable runs SetTable on a goroutine and waits until the kernel's
// table is switched.
func (r *moveRig) setTable() chan error {
	errc := make(chan error, 1)
	go func() { errc <- r.st.SetTable(context.Background(), r.moved) }()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if kt, err := r.st.KernelTable(); err == nil && slices.Equal(kt, r.moved) {
			return errc
		}
		if time.Now().After(deadline) {
			r.t.Fatal("the kernel's table never switched")
		}
	}
}

// TestFailedReadKeepsPosition: a read that fails leaves the reader's
// position where it was, so that a hold waiting for that reader is lifted
// as soon as it comes back. (One of the two copies this package replaced
// published position 0 after a failed read: the hold then ran out of time
// instead, counted as a timeout.)
func TestFailedReadKeepsPosition(t *testing.T) {
	r := newMoveRig(t, kgroup.Options{HoldTimeout: time.Minute})
	old := r.k.socks[0]
	old.put(r.frame(1), r.frame(2))
	if got := r.read(0); len(got) != 2 {
		t.Fatalf("worker 0 read %d frames, want 2", len(got))
	}
	errc := r.setTable()
	old.mu.Lock()
	old.readErr = errors.New("EINTR")
	old.mu.Unlock()
	var b steer.Batch
	if err := r.srcs[0].ReadBatch(context.Background(), &b); err == nil {
		t.Fatal("the failing read did not fail")
	}
	old.mu.Lock()
	old.readErr = nil
	old.mu.Unlock()
	r.read(0) // comes back: it has handled everything up to its position
	r.k.socks[1].put(r.frame(3))
	if got := r.read(1); len(got) != 1 {
		t.Errorf("worker 1 held the moved bucket's frame (%d dispatched) though worker 0 had drained", len(got))
	}
	r.read(1)
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("SetTable did not return")
	}
	if s := r.st.Stats(); s.HoldTimeouts != 0 || s.TableChanges != 1 {
		t.Errorf("stats %+v: want one change, no timeout", s)
	}
}

// TestNoGracePeriod: a switch that changed the table but could not wait
// for its grace period is an error, never a silent sleep: SetTable
// returns it, with both tables switched, and the moved bucket's hold runs
// out of time, counted. (One of the two copies this package replaced
// slept 50ms and reported success.)
func TestNoGracePeriod(t *testing.T) {
	const timeout = 50 * time.Millisecond
	r := newMoveRig(t, kgroup.Options{HoldTimeout: timeout})
	r.k.syncErr = errors.New("fake: no grace period")
	err := r.st.SetTable(context.Background(), r.moved)
	if !errors.Is(err, kgroup.ErrNoGracePeriod) {
		t.Fatalf("SetTable: %v, want ErrNoGracePeriod", err)
	}
	if kt, _ := r.st.KernelTable(); !slices.Equal(kt, r.moved) || !slices.Equal(r.d.Table(), r.moved) {
		t.Fatal("the tables were not both switched")
	}
	r.k.socks[1].put(r.frame(1))
	r.read(1)
	r.read(0)
	deadline := time.Now().Add(5 * time.Second)
	for r.st.Stats().HoldTimeouts == 0 && time.Now().Before(deadline) {
		r.read(0)
		r.read(1)
		time.Sleep(5 * time.Millisecond)
	}
	if s := r.st.Stats(); s.HoldTimeouts != 1 || s.TableChanges != 1 {
		t.Errorf("stats %+v: want one change whose hold timed out", s)
	}
}

// TestCloseRaces closes a Steering while SetTable, Stats and StopIntake
// run on other goroutines: every call returns, none reaches the Kernel
// after its Close (fakeKernel fails the test then), and the SetTable
// calls end with nil or ErrClosed.
func TestCloseRaces(t *testing.T) {
	for round := range 50 {
		r := newMoveRig(t, kgroup.Options{HoldTimeout: 20 * time.Millisecond})
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := range 4 {
			wg.Go(func() {
				table := r.moved
				if i%2 == 1 {
					table = r.d.Table()
				}
				errs <- r.st.SetTable(context.Background(), table)
			})
		}
		wg.Go(func() { r.st.Stats() })
		wg.Go(func() { _ = r.st.StopIntake() })
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		if err := r.st.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil && !errors.Is(err, kgroup.ErrClosed) {
				t.Errorf("round %d: SetTable: %v", round, err)
			}
		}
	}
}

// TestWorkerChanges counts a flow's frames handled by a worker other than
// its previous frame's, and ignores frames without a hash.
func TestWorkerChanges(t *testing.T) {
	wc := kgroup.NewWorkerChanges(2, 0)
	for _, w := range []int{0, 0, 1, 1, 0} {
		wc.Observe(7, true, w)
	}
	wc.Observe(7, false, 1)
	wc.Observe(9, true, 1)
	if wc.Changes() != 2 || wc.Frames() != 6 {
		t.Errorf("changes %d over %d frames, want 2 over 6", wc.Changes(), wc.Frames())
	}
}
