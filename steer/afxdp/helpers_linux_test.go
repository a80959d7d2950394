//go:build linux

package afxdp

import (
	"context"
	"fmt"
	"testing"

	"github.com/rpsgo/rps/internal/livetest"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/kgroup"
)

// openIn opens a source on link inside ns and closes it at cleanup. The
// test namespaces' links have addresses: Config.Host HostRefuse becomes
// HostTake, as for a port given over to capture.
func openIn(t testing.TB, ns *netns.NS, cfg Config) *Source {
	t.Helper()
	if cfg.Host == HostRefuse {
		cfg.Host = HostTake
	}
	var s *Source
	err := ns.Do(func() (err error) {
		s, err = Open(ns.Link, cfg)
		return err
	})
	if err != nil {
		t.Fatalf("open in %s: %v", ns.Name, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openSteered opens a group of two sockets on ns's link with cfg and a
// Steering of a two-worker DIRECT dispatcher over it, in ns; the
// dispatcher, the Steering and the group are closed at cleanup.
func openSteered(t testing.TB, ns *netns.NS, cfg Config) (*Group, *kgroup.Steering) {
	t.Helper()
	d, err := steer.New(steer.Config{Workers: 2, Dispatch: steer.DispatchDirect}, func(*steer.Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	var g *Group
	var st *kgroup.Steering
	err = ns.Do(func() (err error) {
		if g, err = OpenGroup(ns.Link, 2, cfg); err != nil {
			return err
		}
		st, err = NewSteering(d, g, kgroup.Options{})
		return err
	})
	if g != nil {
		t.Cleanup(func() { g.Close() })
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return g, st
}

// rxPackets reads the link's rx_packets inside ns.
func rxPackets(t testing.TB, ns *netns.NS) uint64 {
	t.Helper()
	return livetest.LinkRx(t, ns)
}

// settle waits until every frame the interface counted since r0 was
// redirected to the socket and accounted for: rx delta == Stats.Received
// and the reader saw Delivered frames. It fails the test if they do not
// agree within 10s, and returns the final numbers.
func settle(t testing.TB, ns *netns.NS, r0 uint64, s *Source, seen func() uint64) (uint64, Stats) {
	t.Helper()
	return settleStats(t, ns, r0, s.Stats, seen)
}

// settleStats is settle with the counters from stats.
func settleStats(t testing.TB, ns *netns.NS, r0 uint64, stats func() (Stats, error), seen func() uint64) (uint64, Stats) {
	t.Helper()
	var r uint64
	var st Stats
	waitStable(t, func() (string, bool) {
		r = rxPackets(t, ns) - r0
		var err error
		if st, err = stats(); err != nil {
			t.Fatal(err)
		}
		n := seen()
		return fmt.Sprintf("rx delta %d, received %d, %+v, seen %d", r, st.Received(), st, n), r == st.Received() && n == st.Delivered
	})
	return r, st
}

// waitStable polls check until it reports ok with the same state three
// times in a row, 60ms apart, and returns that state; it fails the test
// with the last state if that does not happen within 10s.
func waitStable(t testing.TB, check func() (state string, ok bool)) string {
	t.Helper()
	return livetest.WaitStable(t, check)
}

// trafgenUDP sends count 64-byte UDP frames from B over its link towards
// A's address, with random source ports (many flows), and waits. It
// reports failures with Errorf, so it may run on a goroutine of its own.
func trafgenUDP(t testing.TB, ctx context.Context, p *netns.Pair, count int, extra ...string) {
	t.Helper()
	livetest.TrafgenUDP(t, ctx, p, count, 0, extra...)
}

// openFDs counts this process's open descriptors.
func openFDs(t testing.TB) int { t.Helper(); return livetest.OpenFDs(t) }

// socketMaps counts this process's mappings of sockets (the rings).
func socketMaps(t testing.TB) int { t.Helper(); return livetest.SocketMaps(t) }

// kernelCounter returns the value of ss's kernel counter name; a name
// the socket does not report is a bug of the test, and panics.
func kernelCounter(ss steer.SourceStats, name string) uint64 {
	for _, k := range ss.Kernel {
		if k.Name == name {
			return k.Value
		}
	}
	panic("no kernel counter " + name)
}
