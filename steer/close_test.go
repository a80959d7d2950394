package steer

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpsgo/rps/hash"
	"go.uber.org/goleak"
)

// within runs f in a goroutine and fails the test when it has not returned
// within d: a deadlock becomes a failure instead of a hung test.
func within(t *testing.T, d time.Duration, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
		return nil
	}
}

// TestCloseFromHandler: Close called from a handler (queued, inline after
// a re-dispatch, or run by the caller in DIRECT) or from a Tick returns at
// once with ErrCloseInHandler; the workers drain and exit once it returns,
// a Close from outside returns nil, and no goroutine is left.
func TestCloseFromHandler(t *testing.T) {
	for _, mode := range []DispatchMode{DispatchDeferred, DispatchHybrid, DispatchDirect} {
		for _, where := range []string{"handler", "redispatched", "tick"} {
			t.Run(mode.String()+"/"+where, func(t *testing.T) {
				defer goleak.VerifyNone(t)
				var d *Dispatcher
				inner := make(chan error, 1)
				ready := make(chan struct{}) // d is set
				var calls atomic.Int32
				closeOnce := func() {
					<-ready
					if calls.Add(1) == 1 {
						inner <- d.Close(context.Background())
					}
				}
				fn := hookFuncs{}
				tick := time.Hour
				if where == "tick" {
					fn.tick = func(*Worker, time.Time) { closeOnce() }
					tick = time.Millisecond
				}
				var handled atomic.Int64
				d, err := newHooked(Config{Workers: 2, Dispatch: mode, TickInterval: tick, Queue: QueueConfig{Overflow: OverflowWait}}, fn,
					func(p *Packet) {
						handled.Add(1)
						switch {
						case where == "handler":
							closeOnce()
						case where == "redispatched" && len(p.Data) > 64:
							if err := p.Redispatch(p.Data[:64]); err != nil {
								t.Error(err)
							}
						case where == "redispatched":
							closeOnce()
						}
					})
				if err != nil {
					t.Fatal(err)
				}
				close(ready)
				frames := make([]Frame, 10)
				for i := range frames {
					frames[i] = Frame{Data: dtFrame(i, 1)}
					if where == "redispatched" {
						frames[i].Data = append(frames[i].Data, 0)
					}
				}
				in := d.NewInput()
				n := uint64(len(frames))
				if where == "tick" {
					err = within(t, 5*time.Second, "Close from a Tick", func() error { return <-inner })
				} else {
					// In DIRECT the handler runs inside Dispatch.
					err = within(t, 5*time.Second, "Dispatch with a handler that calls Close", func() error {
						if err := in.Dispatch(frames, nil); err != nil {
							return err
						}
						return <-inner
					})
					if where == "redispatched" {
						n *= 2
					}
				}
				if !errors.Is(err, ErrCloseInHandler) {
					t.Errorf("Close from a %s: %v, want ErrCloseInHandler", where, err)
				}
				if err := in.Dispatch(frames[:1], nil); !errors.Is(err, ErrClosed) {
					t.Errorf("Dispatch after Close from a %s: %v, want ErrClosed", where, err)
				}
				err = within(t, 5*time.Second, "Close from outside", func() error { return d.Close(context.Background()) })
				if err != nil {
					t.Errorf("Close from outside after one from a %s: %v", where, err)
				}
				if where == "tick" {
					n = 0
				}
				st := checkAccounting(t, d, n)
				if st.Handled() != n || uint64(handled.Load()) != n {
					t.Errorf("%d handled (handler ran %d times), want all %d", st.Handled(), handled.Load(), n)
				}
				var inline uint64
				for _, w := range st.Workstreams {
					inline += w.HybridDispatched
				}
				if mode == DispatchHybrid && where == "redispatched" && inline == 0 {
					t.Error("HYBRID handled no re-dispatch inline: the inline path went untested")
				}
			})
		}
	}
}

// TestMoveHookAfterCloseTimedOut: after Close ran out of time and the idle
// worker exited, a handler still running moves a bucket away from that
// worker and re-dispatches a frame of it. MoveOut cannot run on a worker
// that has gone, so MoveIn must not wait for it: the handler's worker exits,
// a second Close returns, and no goroutine is left.
func TestMoveHookAfterCloseTimedOut(t *testing.T) {
	defer goleak.VerifyNone(t)
	firstClosed, tableSet := make(chan struct{}), make(chan struct{})
	worker0Gone := make(chan struct{})
	var d *Dispatcher
	var movedOut, movedIn, redispatched atomic.Int64
	var other []byte // a frame of a flow of worker 0
	d, err := newHooked(Config{
		Workers: 2,
		Buckets: 2,
		Hash:    HashConfig{Key: hash.MicrosoftKey[:]},
		Queue:   QueueConfig{Overflow: OverflowWait},
	}, hookFuncs{
		moveOut: func(w *Worker, m Move) any { movedOut.Add(1); return nil },
		moveIn:  func(w *Worker, m Move, carried any) { movedIn.Add(1) },
		close: func(w *Worker) { // the worker's last act before it exits
			if w.Index() == 0 {
				close(worker0Gone)
			}
		},
	}, func(p *Packet) {
		if len(p.Data) != 65 { // not the stalled frame
			return
		}
		// A first re-dispatch (flow a, this worker's bucket) gives this
		// worker's producer its view of the table, bucket 0 on worker 0.
		if err := p.Redispatch(p.Data[:64]); err == nil {
			redispatched.Add(1)
		}
		// Move other's bucket from worker 0 to this worker while the
		// dispatcher is open (SetBucket refuses once Close has begun); the
		// move is made, and its hooks are due, when this worker's producer
		// next steers a frame of the bucket: the re-dispatch below, once
		// Close has given up and worker 0 has exited.
		if err := d.SetBucket(0, p.Worker); err != nil {
			t.Error(err)
		}
		close(tableSet)
		<-firstClosed
		<-worker0Gone
		if err := p.Redispatch(other); err == nil {
			redispatched.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if tab := d.Table(); tab[0] != 0 || tab[1] != 1 {
		t.Fatalf("table %v, want [0 1]", tab)
	}
	// Flow a (bucket 1, worker 1) stalls its handler; flow b is bucket 0's.
	a, b := flowInBucket(t, d, 1), flowInBucket(t, d, 0)
	other = dtFrame(b, 1)
	if err := d.NewInput().Dispatch([]Frame{{Data: append(dtFrame(a, 1), 0)}}, nil); err != nil {
		t.Fatal(err)
	}
	<-tableSet
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := d.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with a stalled handler: %v, want DeadlineExceeded", err)
	}
	close(firstClosed)
	err = within(t, 5*time.Second, "second Close (MoveIn waiting for a MoveOut that never runs?)", func() error {
		return d.Close(context.Background())
	})
	if err != nil {
		t.Errorf("second Close: %v", err)
	}
	st := checkAccounting(t, d, 1+uint64(redispatched.Load()))
	if movedOut.Load() != 0 || movedIn.Load() != 0 {
		t.Errorf("MoveOut ran %d times, MoveIn %d, on a move after worker 0 exited; want neither", movedOut.Load(), movedIn.Load())
	}
	if redispatched.Load() != 2 || st.Handled() != 1 {
		t.Errorf("%d re-dispatched, %d handled; want both re-dispatches counted and dropped", redispatched.Load(), st.Handled())
	}
}

// TestRunContextRule: Run and RunOnWorkers return nil once their sources
// are exhausted, ctx.Err() when ctx ends first, and ErrClosed when the
// dispatcher closes first.
func TestRunContextRule(t *testing.T) {
	defer goleak.VerifyNone(t)
	const workers = 2
	looping := func(seed uint64) *SliceSource {
		return &SliceSource{Frames: dtTraffic(rand.New(rand.NewPCG(61, seed)), 10, 100), Loops: -1}
	}
	run := func(d *Dispatcher, ctx context.Context, onWorkers bool, srcs ...*SliceSource) error {
		if !onWorkers {
			return d.Run(ctx, srcs[0])
		}
		s := make([]Source, len(srcs))
		for i := range srcs {
			s[i] = srcs[i]
		}
		return d.RunOnWorkers(ctx, s)
	}
	for _, onWorkers := range []bool{false, true} {
		name := "Run"
		if onWorkers {
			name = "RunOnWorkers"
		}
		t.Run(name, func(t *testing.T) {
			var handled atomic.Int64
			d, err := New(Config{Workers: workers, Dispatch: DispatchDirect}, func(*Packet) { handled.Add(1) })
			if err != nil {
				t.Fatal(err)
			}
			// Exhausted.
			finite := []*SliceSource{{Frames: dtTraffic(rand.New(rand.NewPCG(62, 1)), 10, 100)}, {Frames: dtTraffic(rand.New(rand.NewPCG(62, 2)), 10, 100)}}
			if err := run(d, context.Background(), onWorkers, finite...); err != nil {
				t.Errorf("%s over exhausted sources: %v, want nil", name, err)
			}
			// ctx ends first.
			ctx, cancel := context.WithCancel(context.Background())
			base := handled.Load()
			go func() {
				for handled.Load() < base+1000 {
					time.Sleep(100 * time.Microsecond)
				}
				cancel()
			}()
			err = within(t, 5*time.Second, name+" with ctx cancelled", func() error {
				return run(d, ctx, onWorkers, looping(1), looping(2))
			})
			if !errors.Is(err, context.Canceled) || errors.Is(err, ErrClosed) {
				t.Errorf("%s with ctx cancelled: %v, want %v", name, err, context.Canceled)
			}
			// The dispatcher closes first.
			closed := make(chan error, 1)
			base = handled.Load()
			go func() {
				for handled.Load() < base+1000 {
					time.Sleep(100 * time.Microsecond)
				}
				closed <- d.Close(context.Background())
			}()
			err = within(t, 5*time.Second, name+" while the dispatcher closes", func() error {
				return run(d, context.Background(), onWorkers, looping(3), looping(4))
			})
			if !errors.Is(err, ErrClosed) || errors.Is(err, context.Canceled) {
				t.Errorf("%s while the dispatcher closes: %v, want %v", name, err, ErrClosed)
			}
			if err := <-closed; err != nil {
				t.Error(err)
			}
			if err := run(d, context.Background(), onWorkers, looping(5), looping(6)); !errors.Is(err, ErrClosed) {
				t.Errorf("%s after Close: %v, want %v", name, err, ErrClosed)
			}
			checkAccounting(t, d, uint64(handled.Load()))
		})
	}
}
