//go:build linux

package afpacket

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rpsgo/rps/internal/bpfsteer"
	"github.com/rpsgo/rps/internal/livesock"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/kgroup"
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
// While the sockets join, each drops every frame (uncounted), so that no
// flow reaches a smaller group, whose HASH would pick another socket; then
// cfg.Filter replaces the hold-back, in FanoutEBPF mode at SetEBPF (with
// no program the kernel sends every frame to socket 0).
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

// NewSteering binds the fanout group g to the dispatcher d (kgroup.New):
// socket i is read by worker i, so the kernel's choice of socket is the
// choice of worker. In FanoutEBPF mode it loads the library's steering
// program for d's configuration and table and attaches it to g
// (PACKET_FANOUT_DATA, which lifts the group's hold-back filters), so that
// for every hashed frame Packet.Worker == Table()[FlowID & (buckets-1)];
// that needs the RSS policy, sockets opened without FillRxHash and
// CAP_BPF. In the other modes the kernel picks the socket by the mode's
// rule. o.PassUnhashed is refused: the stack gets every frame anyway. A
// group has one Steering at a time; its Close gives the group back.
func NewSteering(d *steer.Dispatcher, g *Group, o kgroup.Options) (*kgroup.Steering, error) {
	if g == nil {
		return nil, fmt.Errorf("afpacket: %w: nil group", steer.ErrConfig)
	}
	k := &fanoutKernel{g: g}
	for _, s := range g.sources {
		k.socks = append(k.socks, member{s})
	}
	return kgroup.New(d, k, o)
}

// fanoutKernel is a fanout group as a kgroup.Kernel.
type fanoutKernel struct {
	g     *Group
	socks []kgroup.Socket
	prog  *bpfsteer.Program // FanoutEBPF mode's
}

// Sockets returns the group's sockets.
func (k *fanoutKernel) Sockets() []kgroup.Socket { return k.socks }

// Attach loads and attaches the steering program in FanoutEBPF mode; in
// the other modes the kernel picks the socket by the mode's rule.
func (k *fanoutKernel) Attach(cfg steer.Config, table []int, o kgroup.Options) (kgroup.Program, error) {
	g := k.g
	if g.isClosed() {
		return nil, fmt.Errorf("afpacket: steering: %w", ErrClosed)
	}
	if !g.steered.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("afpacket: %w: the group already has a Steering: close it first", steer.ErrConfig)
	}
	if err := k.attach(cfg, table, o); err != nil {
		g.steered.Store(false)
		return nil, err
	}
	if k.prog == nil {
		return nil, nil
	}
	return k.prog, nil
}

func (k *fanoutKernel) attach(cfg steer.Config, table []int, o kgroup.Options) error {
	if k.g.mode != FanoutEBPF {
		if o.PassUnhashed {
			return fmt.Errorf("afpacket: %w: PassUnhashed: a packet socket is a tap beside the kernel stack, which gets every frame anyway", steer.ErrConfig)
		}
		return nil
	}
	if k.g.sources[0].cfg.FillRxHash {
		return fmt.Errorf("afpacket: %w: FillRxHash replaces the flowid the eBPF program steers by: open the group without it", steer.ErrConfig)
	}
	popts, err := bpfsteer.DispatcherOptions(cfg, table, bpfsteer.Options{Fallback: uint32(o.Fallback), PassUnhashed: o.PassUnhashed})
	if err != nil {
		return fmt.Errorf("afpacket: the eBPF program cannot steer as the dispatcher's classifier does (change the configuration as said, or use another fanout mode): %w", err)
	}
	// The program's Sync is a grace period after which every frame it
	// steered by the old table has been counted by its socket: the fanout
	// runs the program and delivers the frame to the socket it picked
	// (tpacket_rcv counts it in tp_packets) in one RCU read-side section.
	prog, err := bpfsteer.New(popts)
	if err != nil {
		return fmt.Errorf("afpacket: loading the steering program: %w", livesock.Explain(err, livesock.NeedBPF))
	}
	if err := k.g.SetEBPF(prog.FD()); err != nil {
		prog.Close()
		return err
	}
	k.prog = prog
	return nil
}

// StopIntake gives every socket a filter that drops every frame, then
// waits for a grace period: a frame already past a socket's old filter
// is in its ring, and counted, when it returns.
func (k *fanoutKernel) StopIntake() error {
	for i, s := range k.g.sources {
		if err := s.withFD(func(fd int) error { return attachFilter(fd, dropAll) }); err != nil {
			return fmt.Errorf("afpacket: stopping socket %d: %w", i, err)
		}
	}
	if k.prog != nil {
		return k.prog.Sync()
	}
	return bpfsteer.GracePeriod()
}

// Counters returns nil: the program keeps none.
func (k *fanoutKernel) Counters() ([]steer.KernelCounter, error) { return nil, nil }

// Close unloads the program (the group keeps its own reference to it, and
// steers by its last table, while it is open) and gives the group back.
func (k *fanoutKernel) Close() error {
	var err error
	if k.prog != nil {
		err = k.prog.Close()
	}
	k.g.steered.Store(false)
	return err
}

// member is a socket of the fanout group as its Steering reads it
// (kgroup.Socket).
type member struct{ *Source }

// Read reads a batch, waiting at most limit when it is positive, and
// returns the frames handed out so far.
func (m member) Read(ctx context.Context, b *steer.Batch, limit time.Duration) (uint32, error) {
	if err := m.readBatch(ctx, b, livesock.Cap(m.cfg.PollTimeout, limit)); err != nil {
		return 0, err
	}
	return uint32(m.delivered.Load()), nil
}

// Position returns the frames the socket's ring has received: tp_packets
// - tp_drops of PACKET_STATISTICS, counted under the same lock that
// places them in the ring, so that ring order and count agree.
func (m member) Position() (uint32, bool) {
	if m.sock.Closed() {
		return 0, false
	}
	s, err := m.Stats()
	if err != nil {
		return 0, false
	}
	return uint32(s.Packets - s.Drops), true
}

var _ kgroup.Kernel = (*fanoutKernel)(nil)
