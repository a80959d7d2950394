//go:build linux

package kgroup_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rpsgo/rps/internal/livetest"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/internal/xsk"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/afpacket"
	"github.com/rpsgo/rps/steer/afxdp"
	"github.com/rpsgo/rps/steer/kgroup"
)

// family is one socket family under the shared tests: how to open its
// sockets and its kernel-steered groups, and what its program counts.
type family struct {
	name string
	// errClosed is what a socket's ReadBatch returns after Close.
	errClosed error
	// open opens one socket on ns's link (in ns) for the close stress;
	// with wait set, one that no frame reaches, whose reader can only
	// wait in poll.
	open func(ns *netns.NS, wait, copying bool) (livetest.Source, error)
	// live opens one socket on ns's link (in ns) with the family's
	// defaults, as a user would; with copying, one that copies each batch
	// out of the ring (Config.Copy).
	live func(ns *netns.NS, copying bool) (liveSocket, error)
	// group opens a group of n sockets on ns's link (in ns) and a Steering
	// of d over it; it returns the Steering, the sockets' stats and the
	// group's Close.
	group func(ns *netns.NS, d *steer.Dispatcher, n int, o kgroup.Options, g groupOpts) (*group, error)
	// tap says that the kernel stack gets every frame the sockets get (an
	// AF_PACKET socket is a tap); otherwise the sockets take their frames
	// from it (AF_XDP).
	tap bool
	// passed returns the frames the program left to the kernel stack
	// (none reached a socket).
	passed func(kgroup.Stats) uint64
	// bySocket returns the frames the program sent to each socket, nil
	// when it does not count them.
	bySocket func(kgroup.Stats) []uint64
}

// liveSocket is one socket of a family, opened by family.live.
type liveSocket interface {
	steer.LiveSource
	steer.SourceStatser
}

// groupOpts are a test's wishes for a group.
type groupOpts struct {
	defaults bool // the family's defaults, as a user would open the group
	small    bool // small rings, for tests that send little
	queue    int  // the receive queue, for a family that binds to one
	generic  bool // the generic hook, for a family that has a choice
}

// group is an open group and its Steering.
type group struct {
	st    *kgroup.Steering
	stats func() []steer.SourceStats // the sockets' own counters
	close func() error
	// again is NewSteering over the same group, in its namespace.
	again func(d *steer.Dispatcher, o kgroup.Options) (*kgroup.Steering, error)
	// fed reports whether the sockets say that a program feeds them, for
	// a family whose sockets say so (nil for the others).
	fed func() bool
}

var families = []family{
	{
		name:      "afpacket",
		errClosed: afpacket.ErrClosed,
		tap:       true,
		open: func(ns *netns.NS, wait, copying bool) (livetest.Source, error) {
			cfg := afpacket.Config{BlockSize: 16 << 10, NumBlocks: 4, BlockTimeout: time.Millisecond, PollTimeout: 5 * time.Millisecond,
				BatchSize: 16, Copy: copying}
			if wait {
				cfg.Filter = []afpacket.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 0}} // drops every frame
				cfg.PollTimeout = -1
			}
			return afpacket.Open(ns.Link, cfg)
		},
		live: func(ns *netns.NS, copying bool) (liveSocket, error) {
			return afpacket.Open(ns.Link, afpacket.Config{Copy: copying})
		},
		group: func(ns *netns.NS, d *steer.Dispatcher, n int, o kgroup.Options, g groupOpts) (*group, error) {
			cfg := afpacket.Config{IgnoreOutgoing: true, BlockTimeout: 2 * time.Millisecond}
			if g.defaults {
				cfg = afpacket.Config{}
			}
			if g.small {
				cfg.BlockSize, cfg.NumBlocks = 4096, 2
			}
			pg, err := afpacket.OpenGroup(ns.Link, n, cfg, afpacket.FanoutEBPF, 0)
			if err != nil {
				return nil, err
			}
			st, err := afpacket.NewSteering(d, pg, o)
			if err != nil {
				pg.Close()
				return nil, err
			}
			return &group{st: st, close: pg.Close, stats: func() []steer.SourceStats { return sourceStats(pg.Sources()) },
				again: func(d *steer.Dispatcher, o kgroup.Options) (st *kgroup.Steering, err error) {
					err = ns.Do(func() (err error) { st, err = afpacket.NewSteering(d, pg, o); return err })
					return st, err
				}}, nil
		},
		passed:   func(kgroup.Stats) uint64 { return 0 },
		bySocket: func(kgroup.Stats) []uint64 { return nil },
	},
	{
		name:      "afxdp",
		errClosed: afxdp.ErrClosed,
		open: func(ns *netns.NS, wait, copying bool) (livetest.Source, error) {
			cfg := afxdp.Config{NumFrames: 128, RingSize: 64, BatchSize: 16, PollTimeout: 5 * time.Millisecond, Copy: copying,
				Host: afxdp.HostTake}
			if wait {
				cfg.Attach = afxdp.AttachNone // no program feeds it
				cfg.PollTimeout = -1
			}
			return afxdp.Open(ns.Link, cfg)
		},
		// The test namespaces' links have addresses: the sockets take the
		// host's frames too, as on a port given over to capture.
		live: func(ns *netns.NS, copying bool) (liveSocket, error) {
			return afxdp.Open(ns.Link, afxdp.Config{Host: afxdp.HostTake, Copy: copying})
		},
		group: func(ns *netns.NS, d *steer.Dispatcher, n int, o kgroup.Options, g groupOpts) (*group, error) {
			cfg := afxdp.Config{Queue: g.queue, Host: afxdp.HostTake}
			if g.small {
				cfg.NumFrames, cfg.RingSize = 64, 64
			}
			if g.generic {
				cfg.Attach = afxdp.AttachGeneric
			}
			xg, err := afxdp.OpenGroup(ns.Link, n, cfg)
			if err != nil {
				return nil, err
			}
			st, err := afxdp.NewSteering(d, xg, o)
			if err != nil {
				xg.Close()
				return nil, err
			}
			return &group{st: st, close: xg.Close, stats: func() []steer.SourceStats { return sourceStats(xg.Sources()) },
				fed: func() bool { return xg.Info().Attach != afxdp.AttachNone },
				again: func(d *steer.Dispatcher, o kgroup.Options) (st *kgroup.Steering, err error) {
					err = ns.Do(func() (err error) { st, err = afxdp.NewSteering(d, xg, o); return err })
					return st, err
				}}, nil
		},
		passed: func(s kgroup.Stats) uint64 {
			return s.Counter("unhashed_passed") + s.Counter("host_passed") + s.Counter("no_socket") + s.Counter("other_queue")
		},
		bySocket: func(s kgroup.Stats) []uint64 {
			var out []uint64
			for i := 0; ; i++ {
				name := fmt.Sprintf("redirected_%d", i)
				if !hasCounter(s, name) {
					return out
				}
				out = append(out, s.Counter(name))
			}
		},
	},
}

// hasCounter reports whether s has the program's counter name.
func hasCounter(s kgroup.Stats, name string) bool {
	for _, k := range s.Kernel {
		if k.Name == name {
			return true
		}
	}
	return false
}

// sourceStats returns the sockets' SourceStats.
func sourceStats[S steer.SourceStatser](srcs []S) []steer.SourceStats {
	var out []steer.SourceStats
	for _, s := range srcs {
		st, _ := s.SourceStats()
		out = append(out, st)
	}
	return out
}

// forEach runs test once per family, as a subtest named by it.
func forEach(t *testing.T, test func(t *testing.T, f family)) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) { test(t, f) })
	}
}

// resources is what a test must leave as it found: the process's
// descriptors, socket mappings and UMEM areas.
type resources struct {
	fds, maps int
	areas     int64
}

func taken(t testing.TB) resources {
	t.Helper()
	return resources{livetest.OpenFDs(t), livetest.SocketMaps(t), xsk.MappedAreas()}
}

// leftBehind describes what is open now that was not at r, and the XDP
// programs left on the links of nss; empty when nothing is.
func (r resources) leftBehind(t testing.TB, nss ...*netns.NS) string {
	t.Helper()
	var b strings.Builder
	if now := taken(t); now != r {
		fmt.Fprintf(&b, "%d descriptors, %d socket and %d UMEM mappings, had %d, %d and %d; ", now.fds, now.maps, now.areas, r.fds, r.maps, r.areas)
	}
	for _, ns := range nss {
		if livetest.XDPAttached(t, ns) {
			fmt.Fprintf(&b, "an XDP program on %s in %s; ", ns.Link, ns.Name)
		}
	}
	return b.String()
}
