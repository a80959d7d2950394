//go:build linux

package kgroup_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/livetest"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/internal/privdrop"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/kgroup"
)

// dropChildEnv makes the test binary TestDroppedSteering's child: its
// value names the family, and the link is the one of the namespace the
// child runs in.
const dropChildEnv = "KGROUP_DROPPED_CHILD"

func TestMain(m *testing.M) {
	if name, ok := os.LookupEnv(dropChildEnv); ok {
		os.Exit(droppedChild(name, os.Getenv(dropChildEnv+"_LINK")))
	}
	os.Exit(m.Run())
}

// droppedChild opens a group of two sockets of the family name on link
// with a Steering, runs it, drops to uid 65534 and every capability, and
// then changes the table twice (a map update and a grace period each),
// reads the program's counters, stops intake and closes the Steering and
// the group, printing each step's error on its last line.
func droppedChild(name, link string) int {
	var f *family
	for i := range families {
		if families[i].name == name {
			f = &families[i]
		}
	}
	if f == nil {
		fmt.Println("child: no family", name)
		return 1
	}
	d, err := steer.New(steer.Config{Workers: 2, Dispatch: steer.DispatchDirect}, func(*steer.Packet) {})
	if err != nil {
		fmt.Println("child:", err)
		return 1
	}
	defer d.Close(context.Background())
	g, err := f.group(&netns.NS{Link: link}, d, 2, kgroup.Options{HoldTimeout: 20 * time.Millisecond}, groupOpts{small: true})
	if err != nil {
		fmt.Println("child:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- g.st.Run(ctx) }()
	target, err := privdrop.Lookup("65534")
	if err == nil {
		_, err = privdrop.Drop(target)
	}
	if err != nil {
		fmt.Println("child: drop:", err)
		return 1
	}
	table := d.Table()
	swapped := make([]int, len(table))
	for b, w := range table {
		swapped[b] = 1 - w
	}
	e1 := g.st.SetTable(context.Background(), swapped)
	e2 := g.st.SetTable(context.Background(), table)
	kt, e3 := g.st.KernelTable()
	stats := g.st.Stats()
	e4 := g.st.StopIntake()
	cancel()
	e5 := <-done
	if errors.Is(e5, context.Canceled) {
		e5 = nil // what Run returns when its context ends
	}
	e6 := g.st.Close()
	e7 := g.close()
	fmt.Printf("uid %d; set table %v, %v; kernel table %v (agrees %v); counters %d, changes %d; stop intake %v; run %v; close %v, %v\n",
		os.Getuid(), e1, e2, e3, fmt.Sprint(kt) == fmt.Sprint(table), len(stats.Kernel), stats.TableChanges, e4, e5, e6, e7)
	return 0
}

// TestDroppedSteering: once a process with a Steering running has
// dropped to an unprivileged user and every capability, in a child
// process of each family in a namespace of its own, the Steering still
// does what it does later: SetTable (a map update on the descriptor it
// holds, then a grace period) and KernelTable, its program's counters,
// StopIntake, Close, without an error, and it leaves no program on the
// link.
func TestDroppedSteering(t *testing.T) {
	netns.Require(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	forEach(t, func(t *testing.T, f family) {
		p := netns.New(t, netns.Options{})
		cmd := p.A.Command(context.Background(), exe, "-test.run", "^$")
		cmd.Env = append(os.Environ(), dropChildEnv+"="+f.name, dropChildEnv+"_LINK="+p.A.Link)
		out, err := cmd.CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		last := lines[len(lines)-1]
		if err != nil {
			t.Fatalf("child: %v: %s", err, out)
		}
		t.Log(last)
		want := "uid 65534; set table <nil>, <nil>; kernel table <nil> (agrees true); counters "
		if !strings.HasPrefix(last, want) || !strings.HasSuffix(last, "changes 2; stop intake <nil>; run <nil>; close <nil>, <nil>") {
			t.Errorf("child: %q; want %q..., two changes and no error", last, want)
		}
		if f.name == "afxdp" && strings.Contains(last, "counters 0,") {
			t.Errorf("child: no program counters read after the drop: %q", last)
		}
		if livetest.XDPAttached(t, p.A) {
			t.Error("a program is left on the link")
		}
	})
}
