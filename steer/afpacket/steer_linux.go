//go:build linux

package afpacket

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpsgo/rps/internal/bpfsteer"
	"github.com/rpsgo/rps/steer"
)

// holdPoll is how long a reader waits for a block while it holds frames
// back, so that it notices soon that the hold can be lifted.
const holdPoll = time.Millisecond

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
	mask uint32

	setMu   sync.Mutex
	pending []*holdSet // holds of the last SetTable, until lifted

	tableChanges, bucketsMoved, heldFrames, holdTimeouts, holdOverflows atomic.Uint64
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
	st := &Steering{d: d, g: g, opts: opts, mask: uint32(cfg.Buckets - 1)}
	for i, s := range g.Sources() {
		st.srcs = append(st.srcs, &steeredSource{s: s, st: st, idx: i})
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
	return SteeringStats{
		Mode:          st.g.Mode(),
		TableChanges:  st.tableChanges.Load(),
		BucketsMoved:  st.bucketsMoved.Load(),
		HeldFrames:    st.heldFrames.Load(),
		HoldTimeouts:  st.holdTimeouts.Load(),
		HoldOverflows: st.holdOverflows.Load(),
	}
}

// Close unloads the steering program (the group keeps its own reference to
// it while it is open). It does not close the group or the dispatcher.
func (st *Steering) Close() error {
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
// only cases in which a flow may be reordered. Call SetTable while Run
// runs; calls are serialised, each starting after the previous one's holds
// are lifted. If ctx ends first SetTable returns its error, the tables are
// already switched, and the readers lift the holds later.
func (st *Steering) SetTable(ctx context.Context, table []int) error {
	cfg := st.d.Config()
	if st.prog == nil {
		if cfg.Dispatch == steer.Direct {
			return fmt.Errorf("%w: in %v mode with direct dispatch the kernel, not the table, picks the worker", ErrConfig, st.g.Mode())
		}
		return st.d.SetTable(table)
	}
	if cfg.Dispatch != steer.Direct {
		return fmt.Errorf("%w: ordered table changes in ebpf mode need direct dispatch, not %v", ErrConfig, cfg.Dispatch)
	}
	n := len(st.srcs)
	if len(table) != cfg.Buckets {
		return fmt.Errorf("%w: table of %d entries, want %d", ErrConfig, len(table), cfg.Buckets)
	}
	for b, w := range table {
		if w < 0 || w >= n {
			return fmt.Errorf("%w: table entry %d names worker %d of %d", ErrConfig, b, w, n)
		}
	}
	st.setMu.Lock()
	defer st.setMu.Unlock()
	if err := st.waitLifted(ctx); err != nil {
		return err
	}
	old, err := st.KernelTable()
	if err != nil {
		return err
	}
	sets := make([]*holdSet, n)
	moved := 0
	for b, w := range table {
		if w == old[b] {
			continue
		}
		moved++
		hs := sets[w]
		if hs == nil {
			hs = &holdSet{buckets: make([]bool, len(table)), waitOn: make([]bool, n), targets: make([]uint64, n),
				lifted: make(chan struct{})}
			sets[w] = hs
		}
		hs.buckets[b] = true
		hs.waitOn[old[b]] = true
	}
	if moved == 0 {
		return st.d.SetTable(table)
	}
	// 1. Holds first: any frame of a moved bucket the new worker reads from
	// now on is held.
	for w, hs := range sets {
		if hs != nil {
			st.srcs[w].holds.Store(hs)
			st.pending = append(st.pending, hs)
		}
	}
	// 2. The switch, and the grace period.
	if err := st.prog.SetTable(toU32(table)); err != nil {
		st.arm(sets, nil) // nothing moved in the kernel: lift at once
		return fmt.Errorf("afpacket: switching the kernel's table: %w", err)
	}
	if err := st.g.SetEBPF(st.prog.FD()); err != nil {
		// No grace period from the kernel: wait out any frame in flight.
		time.Sleep(50 * time.Millisecond)
	}
	// 3. The old workers' ring positions.
	targets := make([]uint64, n)
	for o := range targets {
		s, err := st.srcs[o].s.Stats()
		if err != nil {
			// A closed socket gets no more frames: nothing to wait for.
			continue
		}
		targets[o] = s.Packets - s.Drops
	}
	_ = st.d.SetTable(table) // validated above
	st.tableChanges.Add(1)
	st.bucketsMoved.Add(uint64(moved))
	st.arm(sets, targets)
	// 4. Wait for the readers to lift the holds.
	return st.waitLifted(ctx)
}

// arm sets the targets of the holds and starts their clocks; nil targets
// lift them at the next read.
func (st *Steering) arm(sets []*holdSet, targets []uint64) {
	now := time.Now()
	for _, hs := range sets {
		if hs == nil {
			continue
		}
		for o := range hs.waitOn {
			if targets == nil {
				hs.waitOn[o] = false
			} else {
				hs.targets[o] = targets[o]
			}
		}
		hs.start = now
		hs.armed.Store(true)
	}
}

// waitLifted waits until the holds of the last SetTable are lifted.
func (st *Steering) waitLifted(ctx context.Context) error {
	for len(st.pending) > 0 {
		select {
		case <-st.pending[0].lifted:
			st.pending = st.pending[1:]
		case <-ctx.Done():
			return fmt.Errorf("afpacket: waiting for the moved buckets' old workers to drain: %w", ctx.Err())
		}
	}
	return nil
}

// holdSet is what one new worker holds back during a table change.
type holdSet struct {
	buckets []bool   // the buckets moving to this worker
	waitOn  []bool   // the old workers they come from
	targets []uint64 // per old worker: frames its ring received up to the switch
	start   time.Time
	armed   atomic.Bool // targets and start are set
	lifted  chan struct{}
}

// steeredSource is one socket of the group as its worker reads it.
type steeredSource struct {
	s   *Source
	st  *Steering
	idx int

	// read counts the frames read from the socket, by the reader alone;
	// done publishes it when the reader comes back for more, by which time
	// every frame before was dispatched (DIRECT: handled) or held.
	read uint64
	done atomic.Uint64

	holds     atomic.Pointer[holdSet]
	lifting   *holdSet // lifted, its held frames handed out by the last ReadBatch
	cls       steer.Classification
	held      []steer.Frame
	heldOffs  []int
	heldBuf   []byte
	heldBytes int
}

// Live reports true, as the socket it reads does.
func (ss *steeredSource) Live() bool { return true }

// ReadBatch implements steer.Source.
func (ss *steeredSource) ReadBatch(ctx context.Context, b *steer.Batch) error {
	ss.done.Store(ss.read)
	if ss.lifting != nil {
		// The held frames handed out last time are handled now: only now
		// may the next table change start (and count them as done).
		close(ss.lifting.lifted)
		ss.lifting = nil
	}
	wait := ss.s.cfg.PollTimeout
	if hs := ss.holds.Load(); hs != nil {
		if ss.liftable(hs) {
			ss.holds.Store(nil)
			if len(ss.held) > 0 {
				ss.lifting = hs
				ss.deliverHeld(b)
				return nil
			}
			close(hs.lifted)
		} else if wait < 0 || wait > holdPoll {
			wait = holdPoll
		}
	}
	err := ss.s.readBatch(ctx, b, wait)
	if n := len(b.Frames); n > 0 {
		ss.read += uint64(n)
		if hs := ss.holds.Load(); hs != nil {
			ss.filter(hs, b)
		}
	}
	return err
}

// liftable reports whether every old worker hs waits on has handled what
// its ring held at the switch, or the hold ran out of time or room.
func (ss *steeredSource) liftable(hs *holdSet) bool {
	if !hs.armed.Load() {
		return false
	}
	st := ss.st
	if time.Since(hs.start) > st.opts.HoldTimeout {
		st.holdTimeouts.Add(1)
		return true
	}
	if ss.heldBytes > st.opts.MaxHeld {
		st.holdOverflows.Add(1)
		return true
	}
	for o, w := range hs.waitOn {
		if w && st.srcs[o].done.Load() < hs.targets[o] {
			return false
		}
	}
	return true
}

// filter copies the frames of held buckets aside and keeps the others in b.
func (ss *steeredSource) filter(hs *holdSet, b *steer.Batch) {
	cls := ss.st.d.Classifier()
	c := &ss.cls
	keep := b.Frames[:0]
	for i := range b.Frames {
		f := b.Frames[i]
		if f.HasVLAN {
			cls.ClassifyVLAN(f.Data, f.VLAN, c)
		} else {
			cls.Classify(f.Data, c)
		}
		if c.HashType.IsHash() && hs.buckets[c.FlowID&ss.st.mask] {
			ss.heldOffs = append(ss.heldOffs, len(ss.heldBuf))
			ss.heldBuf = append(ss.heldBuf, f.Data...)
			ss.heldBytes += len(f.Data)
			f.Data = nil
			ss.held = append(ss.held, f)
			ss.st.heldFrames.Add(1)
			continue
		}
		keep = append(keep, f)
	}
	b.Frames = keep
}

// deliverHeld puts the held frames, in arrival order, in b. Their bytes
// are a private copy, left to the garbage collector once handled.
func (ss *steeredSource) deliverHeld(b *steer.Batch) {
	for i := range ss.held {
		lo, hi := ss.heldOffs[i], len(ss.heldBuf)
		if i+1 < len(ss.heldOffs) {
			hi = ss.heldOffs[i+1]
		}
		ss.held[i].Data = ss.heldBuf[lo:hi:hi]
	}
	b.Frames = append(b.Frames[:0], ss.held...)
	b.Release = nil
	ss.held, ss.heldOffs, ss.heldBuf, ss.heldBytes = nil, nil, nil, 0
}

// Close closes the socket.
func (ss *steeredSource) Close() error { return ss.s.Close() }

// SourceStats reports the socket's kernel counters (steer.SourceStatser).
func (ss *steeredSource) SourceStats() (steer.SourceStats, error) { return ss.s.SourceStats() }

var (
	_ steer.Source        = (*steeredSource)(nil)
	_ steer.SourceStatser = (*steeredSource)(nil)
)
