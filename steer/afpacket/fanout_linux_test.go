//go:build linux

package afpacket

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/rpsgo/rps/internal/livetest"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
)

func openGroupIn(t testing.TB, ns *netns.NS, n int, cfg Config, mode FanoutMode, flags FanoutFlag) *Group {
	t.Helper()
	var g *Group
	err := ns.Do(func() (err error) {
		g, err = OpenGroup(ns.Link, n, cfg, mode, flags)
		return err
	})
	if err != nil {
		t.Fatalf("OpenGroup in %s: %v", ns.Name, err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// TestFanoutHash checks that a HASH group keeps every TCP flow on one
// socket and that the members' counters add up to the interface's.
func TestFanoutHash(t *testing.T) {
	netns.Require(t, "iperf3", "ethtool")
	p := netns.New(t, netns.Options{})
	for n := 2; n <= 4; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			g := openGroupIn(t, p.A, n, Config{IgnoreOutgoing: true}, FanoutHash, 0)
			if g.Flags()&FanoutFlagIgnoreOutgoing == 0 {
				t.Errorf("IgnoreOutgoing did not set the fanout flag: %#x", g.Flags())
			}
			var mu sync.Mutex
			owners := map[flow]map[int]int{}
			cs := make([]*collector, n)
			for i, s := range g.Sources() {
				cs[i] = collect(s, func(f *steer.Frame) {
					k, ok := parseFlow(f.Data)
					if !ok || k.proto != 6 {
						return
					}
					mu.Lock()
					if owners[k] == nil {
						owners[k] = map[int]int{}
					}
					owners[k][i]++
					mu.Unlock()
				})
			}
			seen := func() uint64 { return livetest.Total(cs) }
			r0 := rx(t, p.A)
			iperf(t, p, "-P", "8", "-t", "1")
			r, st := settle(t, p.A, r0, g.Stats, seen)
			per := make([]uint64, n)
			for i, c := range cs {
				c.Stop(t)
				per[i] = c.Frames()
			}
			split := 0
			for k, o := range owners {
				if len(o) != 1 {
					split++
					t.Errorf("flow %v seen on %d sockets: %v", k, len(o), o)
				}
			}
			t.Logf("group %d: rx %d, delivered %d, drops %d, per socket %v, %d TCP flows, %d split",
				g.ID(), r, st.Delivered, st.Drops, per, len(owners), split)
			if len(owners) < 9 {
				t.Errorf("saw %d TCP flows, want the 8 streams and the control connection", len(owners))
			}
		})
	}
}

// TestFanoutUniqueIDs opens two groups on one interface: the kernel gives
// each its own id.
func TestFanoutUniqueIDs(t *testing.T) {
	p := netns.New(t, netns.Options{KeepOffloads: true})
	g1 := openGroupIn(t, p.A, 2, Config{BlockSize: 4096, NumBlocks: 2}, FanoutHash, 0)
	g2 := openGroupIn(t, p.A, 3, Config{BlockSize: 4096, NumBlocks: 2}, FanoutLB, FanoutFlagDefrag)
	if g1.ID() == g2.ID() {
		t.Fatalf("two groups share id %d", g1.ID())
	}
	if g1.Len() != 2 || g2.Len() != 3 || g2.Mode() != FanoutLB {
		t.Fatalf("group shape: %d %d %v", g1.Len(), g2.Len(), g2.Mode())
	}
	if err := g1.SetEBPF(3); !errors.Is(err, steer.ErrConfig) {
		t.Fatalf("SetEBPF on a HASH group: %v", err)
	}
	if err := g2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g2.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestFanoutEBPF holds frames back until the program is set, then lets a
// program that always answers 1 send everything to the second socket.
func TestFanoutEBPF(t *testing.T) {
	netns.Require(t, "trafgen", "ethtool")
	p := netns.New(t, netns.Options{})
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.SocketFilter,
		License:      "GPL",
		Instructions: asm.Instructions{asm.LoadImm(asm.R0, 1, asm.DWord), asm.Return()},
	})
	if err != nil {
		netns.SkipOrFatal(t, "cannot load an eBPF socket filter: "+err.Error())
	}
	defer prog.Close()
	g := openGroupIn(t, p.A, 2, Config{IgnoreOutgoing: true, BlockTimeout: 2 * time.Millisecond}, FanoutEBPF, 0)
	ctx := context.Background()

	// Without a program the group is held back: nothing reaches a ring.
	trafgenUDP(t, ctx, p, 100)
	time.Sleep(50 * time.Millisecond)
	if st, err := g.Stats(); err != nil || st.Packets != 0 {
		t.Fatalf("frames passed before SetEBPF: %+v, %v", st, err)
	}

	if err := g.SetEBPF(prog.FD()); err != nil {
		t.Fatal(err)
	}
	c0, c1 := collect(g.Source(0), nil), collect(g.Source(1), nil)
	r0 := rx(t, p.A)
	const n = 2000
	trafgenUDP(t, ctx, p, n)
	r, st := settle(t, p.A, r0, g.Stats, func() uint64 { return c0.Frames() + c1.Frames() })
	c0.Stop(t)
	c1.Stop(t)
	t.Logf("rx %d, socket 0 %d, socket 1 %d, drops %d", r, c0.Frames(), c1.Frames(), st.Drops)
	if c0.Frames() != 0 || c1.Frames()+st.Drops != uint64(n) {
		t.Fatalf("program answering 1 did not steer all %d frames to socket 1", n)
	}
}
