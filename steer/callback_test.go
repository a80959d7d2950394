package steer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
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
