//go:build linux

package afpacket

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rpsgo/rps/internal/bpfsteer"
	"github.com/rpsgo/rps/internal/holdback"
	"github.com/rpsgo/rps/steer"
)

// Steering binds a fanout group to a dispatcher: socket i of the group is
// read by worker i (steer.Dispatcher.RunOnWorkers), so the kernel's choice
// of socket is the choice of worker. With DIRECT dispatch a frame is
// classified once, in the worker that read it, and handled there; the
// dispatcher's stats keep their netstat -Q shape (Disp'd per workstream) and
// show each socket's kernel counters (PACKET_STATISTICS) as a source.
//
// In FanoutEBPF mode NewSteering builds the steering program from the
// dispatcher's indirection table and its whole hash configuration (the
// algorithm, Toeplitz or SipHash, and key, the hash types, Symmetric, and
// the tunnels opened with their VXLAN ports; MPLS and PPPoE are walked
// always, as the classifier walks them) and attaches it, so the kernel
// picks exactly the worker the user-space RSS policy would: for every
// hashed frame, Packet.Worker == Table()[FlowID & (buckets-1)]. SetTable
// then changes the table in the kernel and in the dispatcher together
// without reordering any flow (see SetTable).
type Steering struct {
	d    *steer.Dispatcher
	g    *Group
	opts SteeringOptions
	prog *bpfsteer.Program
	srcs []*steeredSource
	hold *holdback.Holder // the ordered table changes of FanoutEBPF mode
	// closed is set by Close: SetTable and KernelTable then return
	// ErrClosed.
	closed atomic.Bool
}

// NewSteering checks that g fits d (one socket per worker) and, in
// FanoutEBPF mode, loads the steering program for d's configuration and
// attaches it to g (which lifts the group's hold-back filters: frames flow
// from then on). EBPF mode needs the RSS policy, sockets opened without
// FillRxHash (a kernel hash would replace the flowid in user space), CAP_BPF
// and, with HashConfig.Tunnels inner, at most 16 VXLAN ports; a
// configuration the program cannot honour is an error wrapping ErrConfig
// that says what to change, never a group steered otherwise than the
// dispatcher would.
//
// Any dispatch mode steers, but in FanoutEBPF mode SetTable's ordered
// table changes need DIRECT dispatch (steer.Config.Dispatch =
// steer.Direct): with HYBRID or DEFERRED dispatch every SetTable is then
// an error wrapping ErrConfig.
func NewSteering(d *steer.Dispatcher, g *Group, opts SteeringOptions) (*Steering, error) {
	if d == nil || g == nil {
		return nil, fmt.Errorf("%w: nil dispatcher or group", ErrConfig)
	}
	if g.Len() != d.Workers() {
		return nil, fmt.Errorf("%w: a group of %d sockets for %d workers: want one socket per worker", ErrConfig, g.Len(), d.Workers())
	}
	if opts.HoldTimeout <= 0 {
		opts.HoldTimeout = DefaultHoldTimeout
	}
	if opts.MaxHeld <= 0 {
		opts.MaxHeld = 16 << 20
	}
	if opts.Fallback < 0 || opts.Fallback >= g.Len() {
		return nil, fmt.Errorf("%w: fallback socket %d of %d", ErrConfig, opts.Fallback, g.Len())
	}
	cfg := d.Config()
	hold, err := holdback.New(d, holdback.Options{HoldTimeout: opts.HoldTimeout, MaxHeld: opts.MaxHeld})
	if err != nil {
		return nil, fmt.Errorf("afpacket: %w", err)
	}
	st := &Steering{d: d, g: g, opts: opts, hold: hold}
	for i, s := range g.Sources() {
		st.srcs = append(st.srcs, &steeredSource{s: s, r: hold.Reader(i)})
	}
	if g.Mode() != FanoutEBPF {
		return st, nil
	}
	popts, err := programOptions(cfg, d.Table(), opts.Fallback)
	if err != nil {
		return nil, err
	}
	if g.Source(0).Config().FillRxHash {
		return nil, fmt.Errorf("%w: FillRxHash replaces the flowid the eBPF program steers by: open the group without it", ErrConfig)
	}
	prog, err := bpfsteer.New(popts)
	if err != nil {
		return nil, programError(err)
	}
	if err := g.SetEBPF(prog.FD()); err != nil {
		prog.Close()
		return nil, err
	}
	st.prog = prog
	return st, nil
}

// RunGroup steers g's frames through d until ctx ends or d closes: a
// Steering with default options, run and closed. See Steering.
func RunGroup(ctx context.Context, d *steer.Dispatcher, g *Group) error {
	st, err := NewSteering(d, g, SteeringOptions{})
	if err != nil {
		return err
	}
	defer st.Close()
	return st.Run(ctx)
}

// Run reads every socket of the group in its worker until ctx ends or the
// dispatcher closes (steer.Dispatcher.RunOnWorkers over Sources). It does
// not close the group.
func (st *Steering) Run(ctx context.Context) error {
	err := st.d.RunOnWorkers(ctx, st.Sources())
	if errors.Is(err, ErrClosed) || errors.Is(err, steer.ErrClosed) {
		return nil
	}
	return err
}

// Sources returns the group's sockets as their workers read them: worker i
// reads Sources()[i], which also holds frames back during SetTable. Run
// passes them to steer.Dispatcher.RunOnWorkers; a caller that wraps each
// (to stop after a count of frames, to tap them) calls RunOnWorkers with
// the wrapped ones itself; unlike Run, RunOnWorkers then returns the
// sockets' ErrClosed when the group is closed under it.
func (st *Steering) Sources() []steer.Source {
	srcs := make([]steer.Source, len(st.srcs))
	for i, s := range st.srcs {
		srcs[i] = s
	}
	return srcs
}

// Group returns the fanout group.
func (st *Steering) Group() *Group { return st.g }

// KernelTable returns the indirection table the eBPF program uses now, or
// an error outside FanoutEBPF mode.
func (st *Steering) KernelTable() ([]int, error) {
	if st.closed.Load() {
		return nil, fmt.Errorf("afpacket: kernel table: the steering is closed: %w", ErrClosed)
	}
	if st.prog == nil {
		return nil, fmt.Errorf("%w: no eBPF program in %v mode", ErrConfig, st.g.Mode())
	}
	t, err := st.prog.Table()
	if err != nil {
		return nil, fmt.Errorf("afpacket: %w", err)
	}
	out := make([]int, len(t))
	for i, w := range t {
		out[i] = int(w)
	}
	return out, nil
}

// Stats returns the glue's counters.
func (st *Steering) Stats() SteeringStats {
	h := st.hold.Stats()
	return SteeringStats{
		Mode:          st.g.Mode(),
		TableChanges:  h.TableChanges,
		BucketsMoved:  h.BucketsMoved,
		HeldFrames:    h.HeldFrames,
		HoldTimeouts:  h.HoldTimeouts,
		HoldOverflows: h.HoldOverflows,
	}
}

// Close unloads the steering program (the group keeps its own reference to
// it while it is open). A SetTable waiting for its holds to be lifted, or
// for its turn, returns an error wrapping ErrClosed, as does every
// SetTable after Close. It does not close the group or the dispatcher.
// Close is idempotent.
func (st *Steering) Close() error {
	if !st.closed.CompareAndSwap(false, true) {
		return nil
	}
	st.hold.Close()
	if st.prog != nil {
		return st.prog.Close()
	}
	return nil
}

// SetTable reprograms the indirection table in the kernel and in the
// dispatcher at once, without reordering any flow, and returns when every
// moved bucket is handled by its new worker only. It needs FanoutEBPF mode
// and DIRECT dispatch; in other modes the kernel, not the table, picks the
// socket, so with DIRECT dispatch SetTable is an error and with HYBRID or
// DEFERRED it is the dispatcher's own SetTable.
//
// The problem: after the kernel's table changes, frames of a moved bucket
// go to the new worker's socket, but frames that came before may still sit
// in the old socket's ring (in a block the kernel has not handed over yet,
// or one the old worker has not read). Handled at once by the new worker,
// the newer frames would overtake them. So, for each moved bucket:
//
//  1. Before the switch, the new worker is told to hold the bucket's frames
//     back: while a hold is on, its reader classifies each frame it reads
//     (the only time a frame is classified twice) and copies those of held
//     buckets aside instead of dispatching them.
//  2. The kernel's table is updated (one map write), then the program is
//     attached again. The kernel replaces a fanout program only after an
//     RCU grace period (synchronize_net), so once that returns, every frame
//     steered with the old table has been counted by its socket.
//  3. The old worker's position is read from its socket's counters:
//     target = tp_packets - tp_drops, the frames its ring has received
//     (counted under the same lock that places them in the ring, so ring
//     order and count agree).
//  4. The old worker's reader publishes, each time it comes back for more,
//     how many frames it has read and dispatched (DIRECT: handled). Once
//     that reaches the target, the old worker has handled every frame of
//     the bucket it will ever get, and the new worker dispatches the held
//     frames, in arrival order, before anything it reads later.
//
// A hold normally lasts about one block timeout (the kernel hands over a
// partly filled block after Config.BlockTimeout). It is lifted early, and
// counted in SteeringStats, after SteeringOptions.HoldTimeout (an old
// worker that stopped reading) or past SteeringOptions.MaxHeld bytes: the
// only cases in which a flow may be reordered.
//
// Call SetTable while Run runs: the readers lift the holds. What bounds
// the wait: calls are serialised, each starting after the previous one's
// holds are lifted. While Run runs, the new workers' readers lift the
// holds HoldTimeout after the switch at the latest. A hold still on twice
// HoldTimeout after the switch (Run is not running, or a worker is stuck
// in its handler) SetTable lifts itself, counted in
// SteeringStats.HoldTimeouts, and returns: the frames that worker held
// back it dispatches when it reads again, before anything it reads then.
// So a call returns at most about twice HoldTimeout after its switch (plus
// the wait for the previous call's holds, bounded the same way), when ctx
// ends, or when Close is called. If ctx ends first SetTable returns its
// error, the tables are already switched (unless it was still waiting for
// the previous call), and the holds are lifted later. After Close, and
// for a call Close woke, SetTable returns an error wrapping ErrClosed.
func (st *Steering) SetTable(ctx context.Context, table []int) error {
	if st.closed.Load() {
		return errSetTableClosed
	}
	cfg := st.d.Config()
	if st.prog == nil {
		if cfg.Dispatch == steer.Direct {
			return fmt.Errorf("%w: in %v mode with direct dispatch the kernel, not the table, picks the worker", ErrConfig, st.g.Mode())
		}
		return st.d.SetTable(table)
	}
	if cfg.Dispatch != steer.Direct {
		return fmt.Errorf("%w: ordered table changes in ebpf mode need direct dispatch (set steer.Config.Dispatch = steer.Direct), not %v", ErrConfig, cfg.Dispatch)
	}
	err := st.hold.SetTable(ctx, table, (*fanoutKernel)(st))
	return holdback.PackageError(ctx, err, "afpacket", ErrConfig, errSetTableClosed)
}

// errSetTableClosed is SetTable's error once the Steering is closed.
var errSetTableClosed = fmt.Errorf("afpacket: set table: the steering is closed: %w", ErrClosed)

// fanoutKernel is the group's side of SetTable's protocol
// (holdback.Kernel).
type fanoutKernel Steering

// Table returns the program's table.
func (k *fanoutKernel) Table() ([]int, error) { return (*Steering)(k).KernelTable() }

// Switch updates the program's table map, then attaches the program again:
// the kernel replaces a fanout program only after an RCU grace period
// (synchronize_net), so once that returns, every frame steered with the
// old table has been counted by its socket.
func (k *fanoutKernel) Switch(table []int) error {
	if err := k.prog.SetTable(toU32(table)); err != nil {
		return fmt.Errorf("afpacket: switching the kernel's table: %w", err)
	}
	if err := k.g.SetEBPF(k.prog.FD()); err != nil {
		// No grace period from the kernel: wait out any frame in flight.
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// Position returns the frames socket i's ring has received: tp_packets -
// tp_drops of PACKET_STATISTICS, counted under the same lock that places
// them in the ring, so ring order and count agree. A closed socket gets no
// more frames: nothing to wait for.
func (k *fanoutKernel) Position(i int) (uint32, bool) {
	s, err := k.srcs[i].s.Stats()
	if err != nil {
		return 0, false
	}
	return uint32(s.Packets - s.Drops), true
}

// steeredSource is one socket of the group as its worker reads it, through
// its holdback.Reader.
type steeredSource struct {
	s *Source
	r *holdback.Reader
	// read counts the frames read from the socket, by the reader alone: its
	// position in the units of fanoutKernel.Position.
	read uint32
}

// Live reports true, as the socket it reads does.
func (ss *steeredSource) Live() bool { return true }

// Backlog reports the socket's (steer.LiveSource).
func (ss *steeredSource) Backlog() (used, size int) { return ss.s.Backlog() }

// ReadBatch implements steer.Source.
func (ss *steeredSource) ReadBatch(ctx context.Context, b *steer.Batch) error {
	wait := ss.s.cfg.PollTimeout
	if ss.r.BeforeRead() {
		var held bool
		if wait, held = ss.r.Hold(b, wait); held {
			return nil
		}
	}
	err := ss.s.readBatch(ctx, b, wait)
	ss.read += uint32(len(b.Frames))
	ss.r.AfterRead(b, ss.read)
	return err
}

// Close closes the socket.
func (ss *steeredSource) Close() error { return ss.s.Close() }

// SourceStats reports the socket's kernel counters (steer.SourceStatser).
func (ss *steeredSource) SourceStats() (steer.SourceStats, error) { return ss.s.SourceStats() }

var (
	_ steer.Source        = (*steeredSource)(nil)
	_ steer.SourceStatser = (*steeredSource)(nil)
)
