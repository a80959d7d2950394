//go:build linux

package afxdp

import (
	"errors"
	"fmt"
	"github.com/rpsgo/rps/internal/livesock"
	"runtime"
	"sync/atomic"
)

// Group is n AF_XDP sockets bound to one queue of one interface, sharing
// one UMEM (XDP_SHARED_UMEM): the first socket registered it and owns its
// FILL and COMPLETION rings, the others bind with its descriptor. Each
// socket has an RX ring of its own, read by its own Source; every Source's
// releases go back to the one FILL ring, one at a time. No program is
// attached: a Steering attaches one that picks the socket of each frame by
// its XSKMAP slot.
type Group struct {
	sources []*Source
	promisc *promisc // Config.Promisc's, held until Close
	closed  atomic.Bool
	steered atomic.Bool // a Steering has it
}

// OpenGroup opens n sockets (1 to MaxGroupSize) on queue cfg.Queue of the
// interface named ifname, sharing one UMEM of cfg.NumFrames chunks. As for
// Open, the caller must be in the interface's network namespace.
// cfg.Attach is not used here: it is the mode in which a Steering attaches
// its program.
func OpenGroup(ifname string, n int, cfg Config) (*Group, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := validateGroup(n); err != nil {
		return nil, err
	}
	runtime.LockOSThread() // one namespace for the lookup and every socket
	defer runtime.UnlockOSThread()
	ifi, err := livesock.Interface(ifname)
	if err != nil {
		return nil, fmt.Errorf("afxdp: %w", err)
	}
	g := &Group{sources: make([]*Source, 0, n)}
	for i := 0; i < n; i++ {
		var shared *Source
		if i > 0 {
			shared = g.sources[0]
		}
		s, err := openSocket(ifi, cfg, shared)
		if err != nil {
			g.Close()
			return nil, fmt.Errorf("afxdp: group of %d on %q queue %d: socket %d: %w", n, ifname, cfg.Queue, i, err)
		}
		s.name = fmt.Sprintf("afxdp:%s:%d/%d", ifi.Name, cfg.Queue, i)
		s.grouped = true
		g.sources = append(g.sources, s)
	}
	if cfg.Promisc {
		if g.promisc, err = openPromisc(ifi.Index); err != nil {
			g.Close()
			return nil, fmt.Errorf("afxdp: group of %d on %q queue %d: %w", n, ifname, cfg.Queue, err)
		}
	}
	return g, nil
}

// Len returns the number of sockets.
func (g *Group) Len() int { return len(g.sources) }

// Source returns socket i, or nil if i is out of range.
func (g *Group) Source(i int) *Source {
	if i < 0 || i >= len(g.sources) {
		return nil
	}
	return g.sources[i]
}

// Sources returns the sockets in order (a new slice).
func (g *Group) Sources() []*Source { return append([]*Source(nil), g.sources...) }

// Info returns the first socket's Info (every socket of the group has the
// same interface, queue and mode).
func (g *Group) Info() Info { return g.sources[0].Info() }

// Stats returns the sum of the sockets' counters. RxFillRingEmptyDescs is
// the one FILL ring's count, which the first socket alone reports.
func (g *Group) Stats() (Stats, error) {
	var sum Stats
	var errs []error
	for _, s := range g.sources {
		st, err := s.Stats()
		if err != nil {
			errs = append(errs, err)
		}
		sum = sum.Add(st)
	}
	return sum, errors.Join(errs...)
}

// Close closes every socket (see Source.Close) and, with Config.Promisc,
// gives the interface's promiscuous mode back. The UMEM, its rings and
// the first socket stay until the last batch of every socket is released.
// Close is idempotent.
func (g *Group) Close() error {
	if !g.closed.CompareAndSwap(false, true) {
		return nil
	}
	var errs []error
	for _, s := range g.sources {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := g.promisc.close(); err != nil {
		errs = append(errs, fmt.Errorf("afxdp: close: %w", err))
	}
	return errors.Join(errs...)
}
