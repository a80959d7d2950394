//go:build linux

package afpacket

import (
	"context"
	"fmt"
	"time"

	"github.com/rpsgo/rps/internal/bpfsteer"
	"github.com/rpsgo/rps/internal/livesock"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/kgroup"
)

// NewSteering binds the fanout group g to the dispatcher d (kgroup.New):
// socket i of the group is read by worker i, so the kernel's choice of
// socket is the choice of worker, and the dispatcher's stats show each
// socket's PACKET_STATISTICS as a source.
//
// In FanoutEBPF mode it loads the library's steering program for d's
// configuration and table and attaches it to g (PACKET_FANOUT_DATA, which
// lifts the group's hold-back filters: frames flow from then on), so that
// for every hashed frame Packet.Worker == Table()[FlowID & (buckets-1)],
// and the Steering's SetTable changes the table without reordering any
// flow. EBPF mode needs the RSS policy, sockets opened without FillRxHash
// (a kernel hash would replace the flowid in user space) and CAP_BPF. In
// the other modes the kernel picks the socket by the mode's rule
// (FanoutMode.KeepsFlows says what it promises). A packet socket is a tap
// beside the kernel stack, which gets every frame anyway: o.PassUnhashed
// is refused. A group has one Steering at a time; Close gives it back.
func NewSteering(d *steer.Dispatcher, g *Group, o kgroup.Options) (*kgroup.Steering, error) {
	if g == nil {
		return nil, fmt.Errorf("afpacket: %w: nil group", steer.ErrConfig)
	}
	return kgroup.New(d, &fanoutKernel{g: g}, o)
}

// fanoutKernel is a fanout group as a kgroup.Kernel.
type fanoutKernel struct {
	g    *Group
	prog *bpfsteer.Program // FanoutEBPF mode's
}

// Sockets returns the group's sockets.
func (k *fanoutKernel) Sockets() []kgroup.Socket {
	socks := make([]kgroup.Socket, len(k.g.sources))
	for i, s := range k.g.sources {
		socks[i] = member{s}
	}
	return socks
}

// Attach loads and attaches the steering program in FanoutEBPF mode.
func (k *fanoutKernel) Attach(cfg steer.Config, table []int, o kgroup.Options) (bool, error) {
	g := k.g
	if g.isClosed() {
		return false, fmt.Errorf("afpacket: steering: %w", ErrClosed)
	}
	if !g.steered.CompareAndSwap(false, true) {
		return false, fmt.Errorf("afpacket: %w: the group already has a Steering: close it first", steer.ErrConfig)
	}
	byTable, err := k.attach(cfg, table, o)
	if err != nil {
		g.steered.Store(false)
	}
	return byTable, err
}

func (k *fanoutKernel) attach(cfg steer.Config, table []int, o kgroup.Options) (bool, error) {
	if k.g.mode != FanoutEBPF {
		if o.PassUnhashed {
			return false, fmt.Errorf("afpacket: %w: PassUnhashed: a packet socket is a tap beside the kernel stack, which gets every frame anyway", steer.ErrConfig)
		}
		return false, nil
	}
	if k.g.sources[0].cfg.FillRxHash {
		return false, fmt.Errorf("afpacket: %w: FillRxHash replaces the flowid the eBPF program steers by: open the group without it", steer.ErrConfig)
	}
	popts, err := bpfsteer.DispatcherOptions(cfg, table, bpfsteer.Options{Fallback: uint32(o.Fallback), PassUnhashed: o.PassUnhashed})
	if err != nil {
		return false, fmt.Errorf("afpacket: the eBPF program cannot steer as the dispatcher's classifier does (change the configuration as said, or use another fanout mode): %w", err)
	}
	prog, err := bpfsteer.New(popts)
	if err != nil {
		return false, fmt.Errorf("afpacket: loading the steering program: %w", livesock.Explain(err, livesock.NeedBPF))
	}
	if err := k.g.SetEBPF(prog.FD()); err != nil {
		prog.Close()
		return false, err
	}
	k.prog = prog
	return true, nil
}

// Table returns the program's table.
func (k *fanoutKernel) Table() ([]int, error) {
	t, err := k.prog.Table()
	if err != nil {
		return nil, fmt.Errorf("afpacket: %w", err)
	}
	return tableInts(t), nil
}

// tableInts returns a program's table as a dispatcher's.
func tableInts(t []uint32) []int {
	out := make([]int, len(t))
	for i, w := range t {
		out[i] = int(w)
	}
	return out
}

// Switch updates the program's table map, then waits for a grace period
// (bpfsteer.Program.Sync): the fanout runs the program and delivers its
// frame to the socket it picked (counting it in tp_packets) in one RCU
// read-side section, so once that returns every frame steered by the old
// table has been counted by its socket.
func (k *fanoutKernel) Switch(table []int) error {
	if err := k.prog.SetTable(bpfsteer.WorkerTable(table)); err != nil {
		return fmt.Errorf("afpacket: switching the program's table: %w", err)
	}
	if err := k.prog.Sync(); err != nil {
		return fmt.Errorf("afpacket: %w: %w", kgroup.ErrNoGracePeriod, err)
	}
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

// member is a socket of a group as a kgroup.Socket.
type member struct{ *Source }

// Read reads a batch, waiting at most limit when it is positive, and
// returns the frames handed out so far.
func (m member) Read(ctx context.Context, b *steer.Batch, limit time.Duration) (uint32, error) {
	wait := m.cfg.PollTimeout
	if limit > 0 && (wait < 0 || wait > limit) {
		wait = limit
	}
	if err := m.readBatch(ctx, b, wait); err != nil {
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
