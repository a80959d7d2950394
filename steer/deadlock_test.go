package steer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rpsgo/rps/hash"
	"go.uber.org/goleak"
)

// moverState is a per-worker state whose Mover hooks do nothing.
type moverState struct{ n int }

func (s *moverState) MoveOut(Move) any { return nil }
func (s *moverState) MoveIn(Move, any) {}

// TestDirectMoversNoDeadlock is how a kernel-steered group runs (one source
// a worker, DIRECT dispatch, per-worker states that implement Mover, RFS):
// each handler re-dispatches a copy of its frame once, as a decapsulating
// handler does, while a goroutine moves the flows between the workers
// every 20µs. A worker serving a queued MoveIn used to hold its state's
// lock while it waited for the MoveOut queued on the other worker, which
// itself waited for that lock to run a move's hooks inline: both stopped,
// and RunOnWorkers, Close and Stats with them.
func TestDirectMoversNoDeadlock(t *testing.T) {
	defer goleak.VerifyNone(t)
	for round := 0; round < 3; round++ {
		d, _, err := NewPerWorker(Config{Workers: 2, Dispatch: DispatchDirect, RFS: RFSConfig{Enabled: true},
			Hash: HashConfig{Key: hash.MicrosoftKey[:]}},
			func(*Worker) *moverState { return &moverState{} },
			func(s *moverState, p *Packet) {
				s.n++
				if p.depth == 0 {
					_ = p.Redispatch(append([]byte(nil), p.Data...))
				}
			})
		if err != nil {
			t.Fatal(err)
		}
		srcs := make([]Source, 2)
		var ids []uint32
		for i := range srcs {
			frames := make([]Frame, 16)
			for f := range frames {
				frames[f] = Frame{Data: dtFrame(i*16+f, 1)}
			}
			srcs[i] = &SliceSource{Frames: frames, BatchLen: 8, Loops: -1}
		}
		for f := 0; f < 32; f++ {
			var c Classification
			d.cls.Classify(dtFrame(f, 1), &c)
			ids = append(ids, c.FlowID)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		stop := make(chan struct{})
		movesDone := make(chan struct{})
		go func() {
			defer close(movesDone)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				for _, id := range ids {
					if err := d.SetDesired(id, i%2); err != nil && !errors.Is(err, ErrClosed) {
						t.Error(err)
						return
					}
				}
				time.Sleep(20 * time.Microsecond)
			}
		}()
		runErr := make(chan error, 1)
		go func() { runErr <- d.RunOnWorkers(ctx, srcs) }()
		select {
		case err := <-runErr:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("round %d: RunOnWorkers: %v", round, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: RunOnWorkers did not return 9s after its ctx ended: the workers are stuck", round)
		}
		cancel()
		close(stop)
		<-movesDone
		statsDone := make(chan Stats, 1)
		go func() { statsDone <- d.Stats() }()
		select {
		case st := <-statsDone:
			if st.FlowMoves == 0 {
				t.Errorf("round %d: no flow moved: the test did not test moves", round)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: Stats blocked", round)
		}
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := d.Close(cctx); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		ccancel()
		checkAccounting(t, d, d.Stats().Frames)
	}
}
