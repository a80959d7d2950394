package steer

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rpsgo/rps/hash"
	"go.uber.org/goleak"
)

// TestCloseFromCallbacks: Close called from any user code the dispatcher
// runs (Trace, CPUFunc, a batch's release, OnPanic) returns at once with
// ErrCloseInHandler instead of waiting for the call that is running it.
func TestCloseFromCallbacks(t *testing.T) {
	defer goleak.VerifyNone(t)
	cases := map[string]func(d **Dispatcher, got chan<- error) (Config, Handler, func() func()){
		"trace": func(d **Dispatcher, got chan<- error) (Config, Handler, func() func()) {
			return Config{Trace: func(*Decision) { closeOnce(*d, got) }}, func(*Packet) {}, nil
		},
		"cpufunc": func(d **Dispatcher, got chan<- error) (Config, Handler, func() func()) {
			return Config{Policy: PolicyCPU, CPUFunc: func(uint32, hash.HashType) (int, bool) { closeOnce(*d, got); return 0, true }},
				func(*Packet) {}, nil
		},
		"release": func(d **Dispatcher, got chan<- error) (Config, Handler, func() func()) {
			return Config{}, func(*Packet) {}, func() func() { return func() { closeOnce(*d, got) } }
		},
		"onpanic": func(d **Dispatcher, got chan<- error) (Config, Handler, func() func()) {
			return Config{OnPanic: func(PanicInfo) { closeOnce(*d, got) }}, func(*Packet) { panic("boom") }, nil
		},
	}
	for name, mk := range cases {
		for _, mode := range []DispatchMode{DispatchDeferred, DispatchDirect} {
			t.Run(name+"/"+mode.String(), func(t *testing.T) {
				var d *Dispatcher
				got := make(chan error, 1)
				cfg, h, rel := mk(&d, got)
				cfg.Workers, cfg.Dispatch = 2, mode
				var err error
				if d, err = New(cfg, h); err != nil {
					t.Fatal(err)
				}
				var release func()
				if rel != nil {
					release = rel()
				}
				go d.NewInput().Dispatch(dtTraffic(rand.New(rand.NewPCG(1, 1)), 4, 64), release)
				select {
				case err := <-got:
					if !errors.Is(err, ErrCloseInHandler) {
						t.Errorf("Close from %s: %v, want ErrCloseInHandler", name, err)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("Close from %s did not return", name)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := d.Close(ctx); err != nil {
					t.Errorf("Close from outside afterwards: %v", err)
				}
			})
		}
	}
}

// closeOnce closes d and sends the result, the first time it is called.
func closeOnce(d *Dispatcher, got chan<- error) {
	err := d.Close(context.Background())
	select {
	case got <- err:
	default:
	}
}
