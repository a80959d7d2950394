package steer

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rpsgo/rps/hash"
	"go.uber.org/goleak"
)

// directState counts its uses; the race detector checks that no two
// goroutines use it at once.
type directState struct{ frames, ticks int }

func (s *directState) Tick(time.Time) { s.ticks++ }

// TestDirectSharedState: with DIRECT dispatch a frame's handler runs in
// the goroutine that dispatched it, with the selected worker's state.
// Several inputs, the worker's Tick and a handler's re-dispatch to another
// worker all touch states; each state is used by one goroutine at a time,
// nothing deadlocks, and every frame is counted once.
func TestDirectSharedState(t *testing.T) {
	defer goleak.VerifyNone(t)
	d, states, err := NewPerWorker(Config{Workers: 3, Dispatch: DispatchDirect, TickInterval: 200 * time.Microsecond},
		func(*Worker) *directState { return &directState{} },
		func(s *directState, p *Packet) {
			s.frames++
			if len(p.Data) > 64 { // an outer frame: re-dispatch its inner one
				p.Redispatch(p.Data[64:])
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	const inputs, rounds = 3, 40
	var wg sync.WaitGroup
	for i := range inputs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 9))
			frames := dtTraffic(rng, 50, 64)
			for k := range frames {
				if k%4 == 0 { // an outer frame carrying an inner frame of another flow
					frames[k].Data = append(append([]byte(nil), frames[k].Data...), dtFrame(k+1000, 1)...)
				}
			}
			in := d.NewInput()
			for range rounds {
				in.Dispatch(frames, nil)
				time.Sleep(100 * time.Microsecond)
			}
			in.Close()
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("DIRECT dispatch with shared states deadlocked")
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := checkAccounting(t, d, inputs*rounds*(64+16))
	total := 0
	for _, s := range states {
		total += s.frames
	}
	if uint64(total) != st.Handled() {
		t.Errorf("states counted %d frames, the dispatcher handled %d", total, st.Handled())
	}
}

// TestTraceShowsLayers: the trace of a tunnelled frame names the layers
// the classifier walked and how deep the hashed tuple is.
func TestTraceShowsLayers(t *testing.T) {
	var out strings.Builder
	d, err := New(Config{Workers: 1, Hash: HashConfig{Tunnels: TunnelsInner},
		Trace: func(dc *Decision) { dc.WriteTo(&out) }}, func(*Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	in := d.NewInput()
	in.Dispatch([]Frame{{Data: vxlan4(42, inner4())}}, nil)
	in.Close()
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "layers walked: vxlan:42") || !strings.Contains(s, "1 tunnel(s) deep") {
		t.Errorf("trace of a VXLAN frame:\n%s", s)
	}
}

// TestHybridRunReadsInWorker: under HYBRID, Run reads its source in worker
// 0, which handles its own frames inline when idle (HDisp'd), queues the
// others, and waits for room rather than drop a source that can wait. With
// Mover states, a worker that waited could deadlock with a MoveIn, so Run
// reads in its own goroutine and nothing is handled inline.
func TestHybridRunReadsInWorker(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, movers := range []bool{false, true} {
		oc := newOrderChecker()
		cfg := Config{Workers: 3, Dispatch: DispatchHybrid, Hash: HashConfig{Key: hash.MicrosoftKey[:]}, Queue: QueueConfig{Limit: 64}}
		var d *Dispatcher
		var err error
		if movers {
			d, err = newHooked(cfg, hookFuncs{}, oc.handle)
		} else {
			d, err = New(cfg, oc.handle)
		}
		if err != nil {
			t.Fatal(err)
		}
		frames := dtTraffic(rand.New(rand.NewPCG(41, 1)), 300, 30000)
		if err := d.Run(context.Background(), &SliceSource{Frames: frames}); err != nil {
			t.Fatal(err)
		}
		if err := d.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := checkAccounting(t, d, uint64(len(frames)))
		if st.Dropped() != 0 {
			t.Errorf("movers %v: %d frames dropped from a source that can wait", movers, st.Dropped())
		}
		for _, e := range oc.errs {
			t.Errorf("movers %v: %s", movers, e)
		}
		w0 := st.Workstreams[0]
		switch {
		case !movers && (w0.HybridDispatched == 0 || st.Workstreams[1].HybridDispatched != 0 || st.Workstreams[2].HybridDispatched != 0):
			t.Errorf("HDisp'd %d, %d, %d; want worker 0, which reads the source, to handle its frames inline, and no other",
				w0.HybridDispatched, st.Workstreams[1].HybridDispatched, st.Workstreams[2].HybridDispatched)
		case movers && w0.HybridDispatched != 0:
			t.Errorf("with Mover states HDisp'd %d, want 0: Run reads in its own goroutine", w0.HybridDispatched)
		}
		t.Logf("movers %v: worker 0 HDisp'd %d of %d handled", movers, w0.HybridDispatched, w0.Handled)
	}
}
