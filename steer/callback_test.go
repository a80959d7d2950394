package steer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpsgo/rps/hash"
	"go.uber.org/goleak"
)

// usable checks that d still works after its callbacks panicked: Stats and
// NewInput return, and a dispatch is handled.
func usable(t *testing.T, d *Dispatcher, handled *atomic.Uint64) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Stats()
		in := d.NewInput()
		before := handled.Load()
		if err := in.Dispatch([]Frame{{Data: dtFrame(1, 1)}}, nil); err != nil {
			t.Error(err)
		}
		in.Close()
		for handled.Load() == before {
			time.Sleep(100 * time.Microsecond)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the dispatcher is wedged: Stats, NewInput or a dispatch did not return")
	}
}

// TestCallbackPanicsRecovered: a panic in Trace, CPUFunc, a batch's release
// callback or OnPanic itself is recovered, counted under the callback's
// name, reported to OnPanic, and leaves the dispatcher usable; the frame
// goes on (a panicking CPUFunc declines, so SOURCE places the frame).
func TestCallbackPanicsRecovered(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, cb := range []string{"Trace", "CPUFunc", "release", "OnPanic"} {
		t.Run(cb, func(t *testing.T) {
			var handled atomic.Uint64
			var reported atomic.Int64
			cfg := Config{Workers: 2, Hash: HashConfig{Key: hash.MicrosoftKey[:]}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			cfg.OnPanic = func(pi PanicInfo) {
				if pi.Callback != cb && cb != "OnPanic" {
					t.Errorf("PanicInfo.Callback %q, want %q", pi.Callback, cb)
				}
				reported.Add(1)
				if cb == "OnPanic" {
					panic("on panic boom")
				}
			}
			var release func()
			h := func(p *Packet) { handled.Add(1) }
			switch cb {
			case "Trace":
				cfg.Trace = func(*Decision) { panic("trace boom") }
			case "CPUFunc":
				cfg.Policy = PolicyCPU
				cfg.CPUFunc = func(uint32, hash.HashType) (int, bool) { panic("cpufunc boom") }
			case "release":
				release = func() { panic("release boom") }
			case "OnPanic":
				h = func(p *Packet) { handled.Add(1); panic("handler boom") }
			}
			d, err := New(cfg, h)
			if err != nil {
				t.Fatal(err)
			}
			in := d.NewInput()
			frames := dtTraffic(rand.New(rand.NewPCG(1, 1)), 8, 40)
			for i := 0; i < 4; i++ {
				if err := in.Dispatch(frames[i*10:(i+1)*10], release); err != nil {
					t.Fatal(err)
				}
			}
			in.Close()
			usable(t, d, &handled)
			if err := d.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := checkAccounting(t, d, 41)
			want := map[string]uint64{"Trace": 41, "CPUFunc": 41, "release": 4, "OnPanic": 41}[cb]
			if got := st.CallbackPanics[cb]; got != want {
				t.Errorf("CallbackPanics[%q] = %d, want %d (all: %v)", cb, got, want, st.CallbackPanics)
			}
			if cb == "OnPanic" {
				if st.Panicked() != 41 {
					t.Errorf("%d frames panicked, want 41", st.Panicked())
				}
			} else if st.Handled() != 41 {
				t.Errorf("%d frames handled, want 41: a panicking %s must not cost the frame", st.Handled(), cb)
			}
			if reported.Load() == 0 {
				t.Error("OnPanic was not called")
			}
		})
	}
}

// TestCPUFuncOutOfRange: a CPUFunc answer outside 0..Workers-1 is taken
// modulo Workers, as netisr_get_cpuid does, and counted.
func TestCPUFuncOutOfRange(t *testing.T) {
	defer goleak.VerifyNone(t)
	var answer atomic.Int64
	on := make([]atomic.Uint64, 3)
	d, err := New(Config{Workers: 3, Policy: PolicyCPU, Hash: HashConfig{Key: hash.MicrosoftKey[:]},
		CPUFunc: func(uint32, hash.HashType) (int, bool) { return int(answer.Load()), true }},
		func(p *Packet) { on[p.Worker].Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	in := d.NewInput()
	for _, a := range []int64{99, -5, 2} {
		answer.Store(a)
		if err := in.Dispatch([]Frame{{Data: dtFrame(int(a&7), 1)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	in.Close()
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := checkAccounting(t, d, 3)
	// 99 % 3 = 0; -5 from the end is 1; 2 is in range.
	got := fmt.Sprint(on[0].Load(), on[1].Load(), on[2].Load())
	if got != "1 1 1" || st.CPUFuncRemapped != 2 {
		t.Errorf("frames on workers %s and %d remapped; want 1 1 1 and 2", got, st.CPUFuncRemapped)
	}
}

// TestStatsNeverWaitsOnHandler: with DIRECT dispatch the handler runs in
// the dispatching goroutine, inside Dispatch; a blocked handler must not
// block Stats (a metrics scrape) nor the rebalancer.
func TestStatsNeverWaitsOnHandler(t *testing.T) {
	defer goleak.VerifyNone(t)
	release := make(chan struct{})
	in := make(chan struct{})
	var handled atomic.Uint64
	d, err := New(Config{Workers: 2, Dispatch: DispatchDirect, Rebalance: RebalanceConfig{Interval: time.Millisecond}},
		func(p *Packet) {
			if handled.Add(1) == 20 {
				close(in)
				<-release
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	input := d.NewInput()
	dispatched := make(chan error, 1)
	go func() { dispatched <- input.Dispatch(dtTraffic(rand.New(rand.NewPCG(2, 2)), 4, 64), nil) }()
	<-in
	for i := 0; i < 3; i++ {
		got := make(chan Stats, 1)
		go func() { got <- d.Stats() }()
		select {
		case st := <-got:
			if st.Frames > 64 {
				t.Errorf("Frames %d, more than were dispatched", st.Frames)
			}
		case <-time.After(5 * time.Second):
			close(release)
			t.Fatal("Stats waited for a blocked handler")
		}
	}
	close(release)
	if err := <-dispatched; err != nil {
		t.Fatal(err)
	}
	input.Close()
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, d, 64)
}

// TestCloseTimeoutDirect: a Close that runs out of time while an input's
// Dispatch runs a blocked handler inline (DIRECT) says that the input is
// still inside Dispatch; once the handler returns the rest of the call's
// frames are dropped, and the counters add up.
func TestCloseTimeoutDirect(t *testing.T) {
	defer goleak.VerifyNone(t)
	release := make(chan struct{})
	in := make(chan struct{})
	var calls atomic.Uint64
	d, err := New(Config{Workers: 2, Dispatch: DispatchDirect}, func(p *Packet) {
		if calls.Add(1) == 10 {
			close(in)
			<-release
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	input := d.NewInput()
	dispatched := make(chan error, 1)
	go func() { dispatched <- input.Dispatch(dtTraffic(rand.New(rand.NewPCG(3, 3)), 4, 64), nil) }()
	<-in
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err = d.Close(ctx)
	if err == nil || !strings.Contains(err.Error(), "1 inputs are still inside Dispatch") {
		t.Errorf("Close = %v; want it to say an input is still inside Dispatch", err)
	}
	close(release)
	if err := <-dispatched; err != nil {
		t.Fatal(err)
	}
	input.Close()
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := checkAccounting(t, d, 64)
	if st.Handled() != 10 || calls.Load() != 10 {
		t.Errorf("handled %d (handler ran %d times); want 10: the rest of the call is dropped once Close gave up", st.Handled(), calls.Load())
	}
}

// TestSetDesiredAfterClose: SetDesired after Close returns ErrClosed, as
// SetTable and SetBucket do.
func TestSetDesiredAfterClose(t *testing.T) {
	defer goleak.VerifyNone(t)
	d, err := New(Config{Workers: 2, RFS: RFSConfig{Enabled: true}}, func(*Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := d.SetDesired(1, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("SetDesired after Close = %v, want ErrClosed", err)
	}
}

// TestDispatchFromHandlerIntoWaitingInput: a handler that feeds a waiting
// input of its own dispatcher waits for room only its worker can make.
// Close breaks the wait when its ctx ends, and both Dispatch's error and
// Close's say what happened and what to do instead.
func TestDispatchFromHandlerIntoWaitingInput(t *testing.T) {
	defer goleak.VerifyNone(t)
	var d *Dispatcher
	var inner *Input
	dispatchErr := make(chan error, 1)
	var once sync.Once
	d, err := New(Config{Workers: 1, Queue: QueueConfig{Limit: 4, Overflow: OverflowWait}}, func(p *Packet) {
		once.Do(func() {
			var err error
			for i := 0; i < 4 && err == nil; i++ {
				err = inner.Dispatch(dtTraffic(rand.New(rand.NewPCG(5, uint64(i))), 2, 8), nil)
			}
			dispatchErr <- err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	inner = d.NewInput()
	outer := d.NewInput()
	if err := outer.Dispatch(dtTraffic(rand.New(rand.NewPCG(4, 4)), 2, 4), nil); err != nil {
		t.Fatal(err)
	}
	outer.Close()
	for w := d.workers[0]; ; time.Sleep(time.Millisecond) { // the handler waits in Dispatch
		w.mu.Lock()
		n := w.waiters
		w.mu.Unlock()
		if n > 0 {
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	cerr := d.Close(ctx)
	if cerr == nil || !strings.Contains(cerr.Error(), "Packet.Redispatch") {
		t.Errorf("Close = %v; want it to name the handler's wait and Packet.Redispatch", cerr)
	}
	select {
	case err := <-dispatchErr:
		if !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "Packet.Redispatch") {
			t.Errorf("the handler's Dispatch = %v; want ErrClosed saying to use Packet.Redispatch", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler's Dispatch did not return after Close gave up")
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, d, d.Stats().Frames)
}
