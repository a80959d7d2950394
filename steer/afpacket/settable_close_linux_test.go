//go:build linux

package afpacket

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/livetest"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
)

// idleEBPF opens a FanoutEBPF group of two sockets in a fresh namespace
// and a Steering over it for a dispatcher of dispatch mode, not run.
func idleEBPF(t *testing.T, dispatch steer.DispatchMode, opts SteeringOptions) (*steer.Dispatcher, *Group, *Steering) {
	t.Helper()
	netns.Require(t)
	p := netns.New(t, netns.Options{KeepOffloads: true})
	d, err := steer.New(steer.Config{Workers: 2, Dispatch: dispatch}, func(*steer.Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	g := openGroupIn(t, p.A, 2, Config{BlockSize: 4096, NumBlocks: 2}, FanoutEBPF, 0)
	st, err := NewSteering(d, g, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return d, g, st
}

// otherWorker returns table with every bucket on the other of two workers.
func otherWorker(table []int) []int {
	out := make([]int, len(table))
	for b, w := range table {
		out[b] = 1 - w
	}
	return out
}

// TestSteeringSetTableIdle: with Run not running no reader lifts the
// holds. A SetTable then returns on its own twice HoldTimeout after the
// switch, each abandoned hold counted as a timeout; with a long
// HoldTimeout, a SetTable waiting for its holds and one waiting for its
// turn return ErrClosed once the Steering is closed, a SetTable after
// Close returns ErrClosed at once, and once the group and the dispatcher
// are closed no goroutine is left.
func TestSteeringSetTableIdle(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Run("timeout", func(t *testing.T) {
		const timeout = 100 * time.Millisecond
		d, _, st := idleEBPF(t, steer.Direct, SteeringOptions{HoldTimeout: timeout})
		table := otherWorker(d.Table())
		start := time.Now()
		errc := make(chan error, 1)
		go func() { errc <- st.SetTable(context.Background(), table) }()
		select {
		case err := <-errc:
			if err != nil {
				t.Fatalf("SetTable without Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("SetTable without Run still blocked after 5s")
		}
		if e := time.Since(start); e < 2*timeout {
			t.Errorf("SetTable returned after %v, before twice HoldTimeout", e)
		}
		if s := st.Stats(); s.TableChanges != 1 || s.HoldTimeouts != 2 {
			t.Errorf("stats %+v: want one table change and two hold timeouts (a hold per worker)", s)
		}
		if kt, err := st.KernelTable(); err != nil || kt[0] != table[0] {
			t.Errorf("kernel table %v, %v after SetTable", kt, err)
		}
	})
	t.Run("close", func(t *testing.T) {
		d, g, st := idleEBPF(t, steer.Direct, SteeringOptions{HoldTimeout: time.Minute})
		orig := d.Table()
		table := otherWorker(orig)
		errs := make(chan error, 2)
		go func() { errs <- st.SetTable(context.Background(), table) }()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			if kt, err := st.KernelTable(); err == nil && kt[0] == table[0] {
				break // switched: the first SetTable waits for its holds
			}
			if time.Now().After(deadline) {
				t.Fatal("the first SetTable never switched the kernel's table")
			}
		}
		go func() { errs <- st.SetTable(context.Background(), orig) }()
		time.Sleep(300 * time.Millisecond)
		if len(errs) != 0 {
			t.Fatalf("SetTable returned %v with its holds on and Run not running", <-errs)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			select {
			case err := <-errs:
				if !errors.Is(err, ErrClosed) {
					t.Errorf("SetTable woken by Close: %v, want ErrClosed", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("SetTable still blocked 5s after Close")
			}
		}
		if err := st.SetTable(context.Background(), table); !errors.Is(err, ErrClosed) {
			t.Errorf("SetTable after Close: %v, want ErrClosed", err)
		}
		if err := st.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		g.Close()
		d.Close(context.Background())
	})
	livetest.GoroutinesBack(t, before)
}

// TestSteeringSetTableNeedsDirect: an EBPF group steers with another
// dispatch mode, and every SetTable is an error wrapping ErrConfig that
// names the field to set.
func TestSteeringSetTableNeedsDirect(t *testing.T) {
	d, _, st := idleEBPF(t, steer.Deferred, SteeringOptions{})
	err := st.SetTable(context.Background(), d.Table())
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "steer.Config.Dispatch = steer.Direct") {
		t.Errorf("SetTable with deferred dispatch: %v, want ErrConfig naming steer.Config.Dispatch = steer.Direct", err)
	}
}
