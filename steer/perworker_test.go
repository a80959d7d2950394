package steer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/affinity"
	"go.uber.org/goleak"
)

// pwState is a per-worker state that checks where it is used. Only its
// worker touches it, so nothing in it is locked: the race detector checks
// that promise.
type pwState struct {
	index, cpu int    // from the Worker given to the constructor
	gid        uint64 // the goroutine the constructor ran in
	frames     int
	wrongPlace []string // frames or ticks seen off the state's worker or goroutine
	ticks      []time.Time
	closes     int
	closeErr   error
	carried    []string // MoveIn's values
	movedOut   int
}

func (s *pwState) here(what string, worker int) {
	if worker != s.index || goid() != s.gid {
		s.wrongPlace = append(s.wrongPlace, fmt.Sprintf("%s for worker %d in goroutine %d", what, worker, goid()))
	}
}

func (s *pwState) Tick(now time.Time) {
	s.here("Tick", s.index)
	s.ticks = append(s.ticks, now)
}

func (s *pwState) Close() error {
	s.here("Close", s.index)
	s.closes++
	return s.closeErr
}

func newPWState(w *Worker) *pwState { return &pwState{index: w.Index(), cpu: w.CPU(), gid: goid()} }

// TestNewPerWorkerStates: each state is built in its worker's goroutine,
// the slice holds them in worker order, and each worker's handler, ticks and
// Close get its own state, in its goroutine, with no lock.
func TestNewPerWorkerStates(t *testing.T) {
	defer goleak.VerifyNone(t)
	const workers = 3
	const tick = 5 * time.Millisecond
	d, states, err := NewPerWorker(Config{Workers: workers, TickInterval: tick, Queue: QueueConfig{Overflow: OverflowWait}},
		newPWState, func(s *pwState, p *Packet) {
			s.here("frame", p.Worker)
			s.frames++
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != workers || d.Workers() != workers {
		t.Fatalf("%d states for %d workers, want %d", len(states), d.Workers(), workers)
	}
	start := time.Now()
	frames := dtTraffic(rand.New(rand.NewPCG(41, 1)), 200, 3000)
	if err := d.Run(context.Background(), &SliceSource{Frames: frames}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(12 * tick)
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	checkAccounting(t, d, uint64(len(frames)))
	total := 0
	for i, s := range states {
		if s == nil || s.index != i || s.cpu != -1 {
			t.Fatalf("states[%d] is worker %d's (CPU %d), want worker %d's, unpinned", i, s.index, s.cpu, i)
		}
		if n := len(s.wrongPlace); n > 0 {
			t.Errorf("state of worker %d (built in goroutine %d): %d uses elsewhere, the first %s", i, s.gid, n, s.wrongPlace[0])
		}
		if s.closes != 1 {
			t.Errorf("state of worker %d closed %d times, want once", i, s.closes)
		}
		// time.Ticker never ticks more often than its interval, and 12
		// intervals went by.
		if n := len(s.ticks); n < 2 || n > int(elapsed/tick)+1 {
			t.Errorf("state of worker %d ticked %d times in %v, want every %v", i, n, elapsed, tick)
		}
		total += s.frames
	}
	if total != len(frames) {
		t.Errorf("states saw %d frames, want %d", total, len(frames))
	}
}

// TestNewPerWorkerCloseErrors: the states' Close errors are joined into
// Dispatcher.Close's, which returns after every Close ran, once.
func TestNewPerWorkerCloseErrors(t *testing.T) {
	defer goleak.VerifyNone(t)
	errs := []error{errors.New("state 0 failed"), nil, errors.New("state 2 failed")}
	d, states, err := NewPerWorker(Config{Workers: 3}, func(w *Worker) *pwState {
		s := newPWState(w)
		s.closeErr = errs[w.Index()]
		return s
	}, func(*pwState, *Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	err = d.Close(context.Background())
	if !errors.Is(err, errs[0]) || !errors.Is(err, errs[2]) {
		t.Errorf("Close = %v, want both states' errors joined", err)
	}
	for i, s := range states {
		if s.closes != 1 {
			t.Errorf("state %d closed %d times before Close returned, want once", i, s.closes)
		}
	}
	if err := d.Close(context.Background()); err != nil && !errors.Is(err, errs[0]) {
		t.Errorf("second Close = %v", err)
	}
	for i, s := range states {
		if s.closes != 1 {
			t.Errorf("state %d closed %d times after a second Close, want once", i, s.closes)
		}
	}
}

// mvState carries a value per bucket across moves.
type mvState struct {
	pwState
	mode DispatchMode
}

func (s *mvState) MoveOut(m Move) any {
	if s.mode != DispatchDirect {
		s.here("MoveOut", m.From)
	} else if s.index != m.From {
		s.wrongPlace = append(s.wrongPlace, fmt.Sprintf("MoveOut of %+v in worker %d's state", m, s.index))
	}
	s.movedOut++
	return fmt.Sprintf("bucket %d from %d after %d frames", m.Bucket, s.index, s.frames)
}

func (s *mvState) MoveIn(m Move, carried any) {
	if s.mode != DispatchDirect {
		s.here("MoveIn", m.To)
	} else if s.index != m.To {
		s.wrongPlace = append(s.wrongPlace, fmt.Sprintf("MoveIn of %+v in worker %d's state", m, s.index))
	}
	c, _ := carried.(string)
	s.carried = append(s.carried, c)
}

// TestNewPerWorkerMover: a state that implements Mover gives, on a bucket
// move (SetBucket), MoveOut in the old worker's state after its last frame
// of the bucket, and MoveIn in the new one's with the value MoveOut
// returned, before its first.
func TestNewPerWorkerMover(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, mode := range []DispatchMode{DispatchDeferred, DispatchDirect} {
		t.Run(mode.String(), func(t *testing.T) {
			d, states, err := NewPerWorker(Config{Workers: 2, Buckets: 2, Dispatch: mode, TickInterval: time.Hour,
				Hash: HashConfig{Key: hash.MicrosoftKey[:]}, Queue: QueueConfig{Overflow: OverflowWait}},
				func(w *Worker) *mvState { return &mvState{pwState: *newPWState(w), mode: mode} },
				func(s *mvState, p *Packet) {
					if mode != DispatchDirect {
						s.here("frame", p.Worker)
					}
					s.frames++
				})
			if err != nil {
				t.Fatal(err)
			}
			flow := flowInBucket(t, d, 0)
			in := d.NewInput()
			send := func(seq uint32) {
				if err := in.Dispatch([]Frame{{Data: dtFrame(flow, seq)}}, nil); err != nil {
					t.Fatal(err)
				}
			}
			send(1)
			send(2)
			waitIdle(t, d) // else the bucket waits for them
			if err := d.SetBucket(0, 1); err != nil {
				t.Fatal(err)
			}
			send(3)
			if err := d.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := checkAccounting(t, d, 3)
			for i, s := range states {
				if n := len(s.wrongPlace); n > 0 {
					t.Errorf("state %d: %d uses elsewhere, the first %s", i, n, s.wrongPlace[0])
				}
			}
			s0, s1 := states[0], states[1]
			want := "bucket 0 from 0 after 2 frames"
			if st.BucketMoves != 1 || s0.movedOut != 1 || len(s1.carried) != 1 || s1.carried[0] != want {
				t.Errorf("%d bucket moves, MoveOut ran %d times, MoveIn got %q; want one move carrying %q",
					st.BucketMoves, s0.movedOut, s1.carried, want)
			}
			if s0.frames != 2 || s1.frames != 1 {
				t.Errorf("worker 0 handled %d, worker 1 %d; want 2 before the move and 1 after", s0.frames, s1.frames)
			}
		})
	}
}

// TestNewPerWorkerConstructorPanics: a state constructor that panics makes
// NewPerWorker fail, with no worker left running.
func TestNewPerWorkerConstructorPanics(t *testing.T) {
	defer goleak.VerifyNone(t)
	d, states, err := NewPerWorker(Config{Workers: 3}, func(w *Worker) *pwState {
		if w.Index() == 1 {
			panic("no state for worker 1")
		}
		return newPWState(w)
	}, func(*pwState, *Packet) {})
	if err == nil || d != nil || states != nil {
		if d != nil {
			d.Close(context.Background())
		}
		t.Fatalf("NewPerWorker with a panicking constructor: dispatcher %t, %d states, error %v; want only an error", d != nil, len(states), err)
	}
	if !strings.Contains(err.Error(), "no state for worker 1") {
		t.Errorf("error %q does not give the constructor's panic", err)
	}
	if _, _, err := NewPerWorker[int](Config{}, nil, func(int, *Packet) {}); !errors.Is(err, ErrConfig) {
		t.Errorf("nil constructor: %v, want ErrConfig", err)
	}
	if _, _, err := NewPerWorker(Config{}, func(*Worker) int { return 0 }, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("nil handler: %v, want ErrConfig", err)
	}
}

// TestNewPerWorkerDefaultWorkers: with GOMAXPROCS 1 and Workers 0, the
// workers are DefaultWorkers() (the CPUs the process may run on, not
// GOMAXPROCS) and every frame reaches a state.
func TestNewPerWorkerDefaultWorkers(t *testing.T) {
	defer goleak.VerifyNone(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	allowed, err := affinity.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	if DefaultWorkers() != len(allowed) {
		t.Errorf("DefaultWorkers() = %d with GOMAXPROCS 1, want the %d CPUs the process may use", DefaultWorkers(), len(allowed))
	}
	d, states, err := NewPerWorker(Config{}, newPWState, func(s *pwState, p *Packet) { s.frames++ })
	if err != nil {
		t.Fatal(err)
	}
	frames := dtTraffic(rand.New(rand.NewPCG(42, 1)), 500, 5000)
	st := runAndClose(t, d, frames)
	if d.Workers() != DefaultWorkers() || len(states) != d.Workers() || st.Config.Workers != d.Workers() {
		t.Errorf("%d workers, %d states, Stats.Config.Workers %d; want DefaultWorkers() = %d",
			d.Workers(), len(states), st.Config.Workers, DefaultWorkers())
	}
	total := 0
	for _, s := range states {
		total += s.frames
	}
	if total != len(frames) || st.Handled() != uint64(len(frames)) {
		t.Errorf("states saw %d frames, %d handled; want all %d", total, st.Handled(), len(frames))
	}
}
