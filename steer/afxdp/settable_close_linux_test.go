//go:build linux

package afxdp

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

// steerIdle opens a group of two sockets in a fresh namespace and a
// Steering over it for a dispatcher of dispatch mode, without running it.
func steerIdle(t *testing.T, dispatch steer.DispatchMode, opts SteeringOptions) (*steer.Dispatcher, *Group, *Steering) {
	t.Helper()
	p := netns.New(t, netns.Options{})
	d, err := steer.New(steer.Config{Workers: 2, Dispatch: dispatch}, func(*steer.Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	var g *Group
	var st *Steering
	err = p.A.Do(func() (err error) {
		if g, err = OpenGroup(p.A.Link, 2, Config{NumFrames: 64, RingSize: 64}); err != nil {
			return err
		}
		st, err = NewSteering(d, g, opts)
		return err
	})
	if g != nil {
		t.Cleanup(func() { g.Close() })
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return d, g, st
}

// swapped returns table with every bucket on the other of two workers.
func swapped(table []int) []int {
	out := make([]int, len(table))
	for b, w := range table {
		out[b] = 1 - w
	}
	return out
}

// setTableAsync runs st.SetTable(ctx, table) on a goroutine.
func setTableAsync(ctx context.Context, st *Steering, table []int) chan error {
	errc := make(chan error, 1)
	go func() { errc <- st.SetTable(ctx, table) }()
	return errc
}

// waitErr returns what errc yields within limit, or fails the test.
func waitErr(t *testing.T, errc chan error, limit time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(limit):
		t.Fatalf("%s: still blocked after %v", what, limit)
		return nil
	}
}

// TestSetTableWithoutRun: a SetTable while Run is not running (no reader
// lifts the holds) returns on its own twice HoldTimeout after the switch,
// with the tables switched and each abandoned hold counted as a timeout;
// Run then reads on, and the next SetTable's holds are lifted by the
// readers as usual.
func TestSetTableWithoutRun(t *testing.T) {
	const timeout = 250 * time.Millisecond // long enough for the readers under Run to lift the second change's holds
	d, _, st := steerIdle(t, steer.Direct, SteeringOptions{HoldTimeout: timeout})
	table := swapped(d.Table())
	start := time.Now()
	err := waitErr(t, setTableAsync(context.Background(), st, table), 5*time.Second, "SetTable without Run")
	if err != nil {
		t.Fatalf("SetTable without Run: %v", err)
	}
	if e := time.Since(start); e < 2*timeout {
		t.Errorf("SetTable returned after %v, before twice HoldTimeout: were the holds lifted by no one?", e)
	}
	kt, err := st.KernelTable()
	if err != nil {
		t.Fatal(err)
	}
	for b := range table {
		if kt[b] != table[b] || d.Table()[b] != table[b] {
			t.Fatalf("bucket %d: program's table %d, dispatcher's %d, want %d", b, kt[b], d.Table()[b], table[b])
		}
	}
	if s := st.Stats(); s.TableChanges != 1 || s.HoldTimeouts != 2 {
		t.Errorf("stats %+v: want one table change and two hold timeouts (a hold per worker)", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- st.Run(ctx) }()
	if err := waitErr(t, setTableAsync(context.Background(), st, swapped(table)), 5*time.Second, "SetTable under Run"); err != nil {
		t.Fatalf("SetTable under Run: %v", err)
	}
	if s := st.Stats(); s.TableChanges != 2 || s.HoldTimeouts != 2 {
		t.Errorf("stats %+v: want two table changes, no more timeouts", s)
	}
	cancel()
	if err := waitErr(t, runErr, 5*time.Second, "Run after cancel"); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v", err)
	}
}

// TestSetTableClose: a SetTable waiting for holds no reader lifts (Run
// not running, HoldTimeout long), and one waiting for its turn behind it,
// return ErrClosed once the Steering is closed; a SetTable after Close
// returns ErrClosed at once; once the group and the dispatcher are closed
// no goroutine is left.
func TestSetTableClose(t *testing.T) {
	before := runtime.NumGoroutine()
	d, g, st := steerIdle(t, steer.Direct, SteeringOptions{HoldTimeout: time.Minute})
	table := swapped(d.Table())
	orig := d.Table()
	first := setTableAsync(context.Background(), st, table)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if kt, err := st.KernelTable(); err == nil && kt[0] == table[0] {
			break // switched: the first SetTable waits for its holds
		}
		if time.Now().After(deadline) {
			t.Fatal("the first SetTable never switched the program's table")
		}
	}
	second := setTableAsync(context.Background(), st, orig)
	time.Sleep(300 * time.Millisecond)
	for _, errc := range []chan error{first, second} {
		select {
		case err := <-errc:
			t.Fatalf("SetTable returned %v with its holds on and Run not running", err)
		default:
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for i, errc := range []chan error{first, second} {
		// One of the two may have reached the switch while Close ran: then
		// the closed program's error, which wraps ErrClosed too.
		if err := waitErr(t, errc, 5*time.Second, "SetTable after Close"); !errors.Is(err, ErrClosed) {
			t.Errorf("SetTable %d woken by Close: %v, want ErrClosed", i+1, err)
		}
	}
	start := time.Now()
	if err := st.SetTable(context.Background(), table); !errors.Is(err, ErrClosed) {
		t.Errorf("SetTable after Close: %v, want ErrClosed", err)
	}
	if e := time.Since(start); e > time.Second {
		t.Errorf("SetTable after Close took %v", e)
	}
	g.Close()
	d.Close(context.Background())
	livetest.GoroutinesBack(t, before)
}

// TestSetTableNeedsDirect: with another dispatch mode the group is
// steered, and every SetTable is an error wrapping ErrConfig that names
// the field to set.
func TestSetTableNeedsDirect(t *testing.T) {
	d, _, st := steerIdle(t, steer.Deferred, SteeringOptions{})
	err := st.SetTable(context.Background(), d.Table())
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "steer.Config.Dispatch = steer.Direct") {
		t.Errorf("SetTable with deferred dispatch: %v, want ErrConfig naming steer.Config.Dispatch = steer.Direct", err)
	}
}
