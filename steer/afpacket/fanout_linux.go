//go:build linux

package afpacket

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/rpsgo/rps/steer"
)

// Group is a set of sockets on one interface joined to one kernel fanout
// group (PACKET_FANOUT): the kernel hands each frame to one of them. A
// socket's index in the group, Sources()[i], is its join order, which is the
// index the kernel's demux (and an eBPF program) chooses. When a member
// leaves, the kernel moves the last member into its slot, so indices change:
// close the whole Group rather than single members.
type Group struct {
	sources []*Source
	id      uint16
	mode    FanoutMode
	flags   FanoutFlag

	mu      sync.Mutex
	opened  bool // the hold-back filters were lifted
	closed  bool
	steered atomic.Bool // a Steering has it
}

// OpenGroup opens n sockets on the interface named ifname, each with its own
// ring configured by cfg, and joins them to a new fanout group. The first
// socket asks the kernel for an unused group id
// (PACKET_FANOUT_FLAG_UNIQUEID), which the others then join.
//
// While the sockets join, each carries a filter that drops everything, so
// that no frame reaches a group that is not complete yet (with fewer
// members, HASH would send a flow to a different socket than it will once
// the group is complete). When all have joined the filters are replaced by
// cfg.Filter; in FanoutEBPF mode that waits for SetEBPF, since without a
// program the kernel would send every frame to socket 0. Frames dropped by
// the hold-back filter are not counted anywhere.
func OpenGroup(ifname string, n int, cfg Config, mode FanoutMode, flags FanoutFlag) (*Group, error) {
	if err := validateFanout(n, mode, flags); err != nil {
		return nil, err
	}
	if cfg.IgnoreOutgoing {
		flags |= FanoutFlagIgnoreOutgoing
	}
	g := &Group{mode: mode, flags: flags}
	for i := 0; i < n; i++ {
		s, err := open(ifname, cfg, dropAll)
		if err != nil {
			g.Close()
			return nil, err
		}
		s.name = fmt.Sprintf("afpacket:%s#%d", ifname, i)
		g.sources = append(g.sources, s)
		if err := g.join(s, i == 0); err != nil {
			g.Close()
			return nil, fmt.Errorf("afpacket: joining socket %d of %d to a %v fanout group on %q: %w", i, n, mode, ifname, err)
		}
	}
	if mode != FanoutEBPF {
		if err := g.lift(); err != nil {
			g.Close()
			return nil, err
		}
	}
	return g, nil
}

// join adds s to the group, asking for a new id when first is set.
func (g *Group) join(s *Source, first bool) error {
	return s.withFD(func(fd int) error {
		tf := uint32(g.mode) | uint32(g.flags)
		id := uint32(g.id)
		if first {
			tf |= uint32(fanoutFlagUniqueID)
			id = 0
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_FANOUT, int(id|tf<<16)); err != nil {
			return fmt.Errorf("setting PACKET_FANOUT: %w", err)
		}
		if first {
			// The kernel reports id | mode<<16 | flags<<24.
			v, err := unix.GetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_FANOUT)
			if err != nil {
				return fmt.Errorf("reading PACKET_FANOUT: %w", err)
			}
			g.id = uint16(v)
		}
		return nil
	})
}

// lift replaces the hold-back filters with the configured filter.
func (g *Group) lift() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.opened {
		return nil
	}
	for i, s := range g.sources {
		if err := s.setFilter(); err != nil {
			return fmt.Errorf("afpacket: fanout socket %d: %w", i, err)
		}
	}
	g.opened = true
	return nil
}

// SetEBPF sets the group's eBPF program (PACKET_FANOUT_DATA), a loaded
// BPF_PROG_TYPE_SOCKET_FILTER program whose return value modulo the group's
// size is the index of the socket that gets the frame. The group must be in
// FanoutEBPF mode. The first call also lifts the hold-back filters, so
// frames flow from then on; later calls swap the program atomically. The
// kernel takes its own reference: progFD may be closed afterwards.
func (g *Group) SetEBPF(progFD int) error {
	if g.mode != FanoutEBPF {
		return fmt.Errorf("afpacket: %w: SetEBPF on a %v fanout group", steer.ErrConfig, g.mode)
	}
	if progFD < 0 {
		return fmt.Errorf("afpacket: %w: negative program descriptor %d", steer.ErrConfig, progFD)
	}
	if g.isClosed() || len(g.sources) == 0 {
		return ErrClosed
	}
	err := g.sources[0].withFD(func(fd int) error {
		return unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_FANOUT_DATA, progFD)
	})
	if err != nil {
		return fmt.Errorf("afpacket: setting the fanout eBPF program: %w", err)
	}
	return g.lift()
}

// isClosed reports whether Close was called.
func (g *Group) isClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// ID returns the fanout group id the kernel assigned.
func (g *Group) ID() uint16 { return g.id }

// Mode returns the group's fanout mode.
func (g *Group) Mode() FanoutMode { return g.mode }

// Flags returns the group's fanout flags.
func (g *Group) Flags() FanoutFlag { return g.flags }

// Len returns the number of sockets in the group.
func (g *Group) Len() int { return len(g.sources) }

// Source returns the socket with index i (its join order).
func (g *Group) Source(i int) *Source { return g.sources[i] }

// Sources returns the group's sockets in join order. The slice is shared:
// do not modify it.
func (g *Group) Sources() []*Source { return g.sources }

// Stats returns the sum of the members' counters.
func (g *Group) Stats() (Stats, error) {
	var sum Stats
	var errs []error
	for _, s := range g.sources {
		st, err := s.Stats()
		sum = sum.Add(st)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return sum, errors.Join(errs...)
}

// Close closes every socket of the group (see Source.Close). It is
// idempotent.
func (g *Group) Close() error {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	var errs []error
	for _, s := range g.sources {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
