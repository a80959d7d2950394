//go:build linux

package afxdp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cilium/ebpf/link"

	"github.com/rpsgo/rps/internal/bpfsteer"
	"github.com/rpsgo/rps/internal/holdback"
	"github.com/rpsgo/rps/steer"
)

// Steering binds a Group to a dispatcher and steers the group's queue in
// XDP by the dispatcher's own hash: socket i is read by worker i
// (steer.Dispatcher.RunOnWorkers), and the XDP program NewSteering attaches
// redirects each frame to the socket of the worker the user-space RSS
// policy would pick, Table()[FlowID & (buckets-1)], so with DIRECT dispatch
// a frame is classified once, in the worker that read it, and handled
// there. The program is built from the dispatcher's indirection table and
// its whole hash configuration (the algorithm, Toeplitz or SipHash, and
// key, the hash types, Symmetric, and the tunnels opened with their VXLAN
// ports; MPLS and PPPoE always), as afpacket's FanoutEBPF program is.
// SetTable changes the table in the program and in the dispatcher together
// without reordering any flow.
//
// The dispatcher's stats show each socket's counters as a source
// (SourceStats: XDP_STATISTICS, the attach and bind modes); Stats adds the
// program's own counters.
type Steering struct {
	d    *steer.Dispatcher
	g    *Group
	opts SteeringOptions
	srcs []*steeredSource
	hold *holdback.Holder

	mu     sync.Mutex // guards x, link, last and closed
	x      *bpfsteer.XDP
	link   link.Link
	last   bpfsteer.XDPCounters // the program's counters as last read
	closed bool
}

// NewSteering checks that g fits d (one socket per worker), loads the XDP
// steering program for d's configuration with one XSKMAP slot per socket,
// puts each socket in its slot and attaches the program to the group's
// interface through a BPF link, in the mode g was opened with
// (Config.Attach: native, else generic). From then on the group's queue is
// steered: each of its frames reaches a socket, those the program cannot
// hash socket opts.Fallback (with opts.PassUnhashed, the kernel stack).
// Frames of the interface's other receive queues go to the kernel stack,
// counted (SteeringStats.OtherQueue): a socket takes only frames of the
// queue it is bound to.
//
// Like Open, NewSteering must run in the network namespace the group was
// opened in (a goroutine that changed namespace keeps its OS thread
// locked): an interface index names another interface elsewhere. It needs
// the RSS policy, CAP_BPF and CAP_NET_ADMIN (or root) and, with
// HashConfig.Tunnels inner, at most 16 VXLAN ports; a configuration the
// program cannot honour is an error wrapping ErrConfig that says what to
// change, never a group steered otherwise than the dispatcher would. A
// group has one Steering at a time.
//
// Any dispatch mode steers, but SetTable's ordered table changes need
// DIRECT dispatch (steer.Config.Dispatch = steer.Direct): with HYBRID or
// DEFERRED dispatch every SetTable is an error wrapping ErrConfig.
func NewSteering(d *steer.Dispatcher, g *Group, opts SteeringOptions) (*Steering, error) {
	if d == nil || g == nil {
		return nil, fmt.Errorf("%w: nil dispatcher or group", ErrConfig)
	}
	if g.Len() != d.Workers() {
		return nil, fmt.Errorf("%w: a group of %d sockets for %d workers: want one socket per worker", ErrConfig, g.Len(), d.Workers())
	}
	if opts.Fallback < 0 || opts.Fallback >= g.Len() {
		return nil, fmt.Errorf("%w: fallback socket %d of %d", ErrConfig, opts.Fallback, g.Len())
	}
	first := g.sources[0]
	if first.cfg.Attach == AttachNone {
		return nil, fmt.Errorf("%w: the group was opened with AttachNone: a Steering attaches its program in the group's Config.Attach mode", ErrConfig)
	}
	base := bpfsteer.Options{Hook: bpfsteer.HookXDP, PassUnhashed: opts.PassUnhashed, Fallback: uint32(opts.Fallback),
		Queue: uint32(first.cfg.Queue)}
	popts, err := bpfsteer.DispatcherOptions(d.Config(), d.Table(), base)
	if err != nil {
		return nil, programError(err)
	}
	hold, err := holdback.New(d, holdback.Options{HoldTimeout: opts.HoldTimeout, MaxHeld: opts.MaxHeld})
	if err != nil {
		return nil, fmt.Errorf("afxdp: %w", err)
	}
	if g.closed.Load() {
		return nil, ErrClosed
	}
	if !g.steered.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("%w: the group already has a Steering: close it first", ErrConfig)
	}
	st := &Steering{d: d, g: g, opts: opts, hold: hold}
	for i, s := range g.sources {
		st.srcs = append(st.srcs, &steeredSource{s: s, r: hold.Reader(i)})
	}
	if err := st.attach(popts); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// attach loads the program, fills its XSKMAP and attaches it.
func (st *Steering) attach(popts bpfsteer.Options) error {
	g := st.g
	x, err := bpfsteer.NewXDP(popts, g.Len())
	if err != nil {
		return programError(err)
	}
	st.x = x
	for i, s := range g.sources {
		if err := s.withFD(func(fd int) error { return x.SetSocket(i, fd) }); err != nil {
			return fmt.Errorf("afxdp: steering: socket %d: %w", i, err)
		}
	}
	first := g.sources[0]
	l, mode, err := attachProgram(first.ns, x.Program(), first.ifindex, first.cfg.Attach)
	if err != nil {
		return fmt.Errorf("afxdp: steering %s queue %d: %w", first.ifname, first.cfg.Queue, err)
	}
	st.link = l
	for _, s := range g.sources {
		s.setAttach(mode)
	}
	return nil
}

// programError wraps ErrConfig around the program's refusals of its
// options; other errors (the kernel's) it wraps as they are.
func programError(err error) error {
	if bpfsteer.IsOptionsError(err) {
		return fmt.Errorf("%w: the XDP program cannot steer as the dispatcher's classifier does (change the configuration as said, or open one socket steered in user space): %w", ErrConfig, err)
	}
	return fmt.Errorf("afxdp: building the steering program: %w", err)
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
// dispatcher or the group closes (steer.Dispatcher.RunOnWorkers over
// Sources); it returns ctx's error when ctx ends, nil when the dispatcher
// or the group closes. It does not close the group.
func (st *Steering) Run(ctx context.Context) error {
	st.mu.Lock()
	closed := st.closed
	st.mu.Unlock()
	if closed {
		return fmt.Errorf("afxdp: run: the steering is closed: %w", ErrClosed)
	}
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
// the wrapped ones itself, and must keep each wrapped source's ReadBatch
// the only reader of its socket.
func (st *Steering) Sources() []steer.Source {
	srcs := make([]steer.Source, len(st.srcs))
	for i, s := range st.srcs {
		srcs[i] = s
	}
	return srcs
}

// Group returns the group.
func (st *Steering) Group() *Group { return st.g }

// KernelTable returns the indirection table the XDP program uses now.
func (st *Steering) KernelTable() ([]int, error) {
	st.mu.Lock()
	x := st.x
	st.mu.Unlock()
	if x == nil {
		return nil, fmt.Errorf("afxdp: kernel table: %w", ErrClosed)
	}
	t, err := x.Table()
	if err != nil {
		return nil, fmt.Errorf("afxdp: kernel table: %w", err)
	}
	out := make([]int, len(t))
	for i, w := range t {
		out[i] = int(w)
	}
	return out, nil
}

// Stats returns the glue's counters and the program's. After Close the
// program's counters are those Close read last.
func (st *Steering) Stats() SteeringStats {
	h := st.hold.Stats()
	s := SteeringStats{
		TableChanges:  h.TableChanges,
		BucketsMoved:  h.BucketsMoved,
		HeldFrames:    h.HeldFrames,
		HoldTimeouts:  h.HoldTimeouts,
		HoldOverflows: h.HoldOverflows,
	}
	c := st.counters()
	s.Redirected = append([]uint64(nil), c.Redirected...)
	s.UnhashedPassed, s.UnhashedFallback, s.NoSocket, s.OtherQueue = c.UnhashedPassed, c.UnhashedFallback, c.NoSocket, c.OtherQueue
	return s
}

// counters reads the program's counters, or returns the last read once
// the program is gone.
func (st *Steering) counters() bpfsteer.XDPCounters {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.x != nil {
		if c, err := st.x.Counters(); err == nil {
			st.last = c
		}
	}
	return st.last
}

// StopIntake stops the group's sockets taking frames, so that their RX
// rings can be read dry before Close: it detaches the program (closes the
// link: the interface's frames go to the kernel stack again) and then
// waits for an RCU grace period (bpfsteer.XDP.Sync), so that when it
// returns every frame the program redirected is in its socket's RX ring or
// counted as the kernel's drop, and no frame follows. Run goes on reading
// what the rings hold. The sockets' Info().Attach is then AttachNone (their
// SourceStats keep the mode they received in).
//
// It detaches the program rather than emptying its XSKMAP, so that the
// program stops running on frames no socket will take, and the counters
// keep their meaning: SteeringStats counts the frames the program saw
// while attached (NoSocket still counts only frames that met a closed
// socket), and once the rings are read dry each socket's Stats.Received
// is its Redirected count. The program and its maps stay until Close
// (SetTable still changes the table, which steers nothing more).
// StopIntake cannot be undone; a second call, or a call after Close,
// returns nil.
func (st *Steering) StopIntake() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed || st.link == nil {
		return nil
	}
	err := st.link.Close()
	st.link = nil
	for _, s := range st.g.sources {
		s.setAttach(AttachNone)
	}
	if err != nil {
		return fmt.Errorf("afxdp: stop intake: detaching the steering program: %w", err)
	}
	if err := st.x.Sync(); err != nil {
		return fmt.Errorf("afxdp: stop intake: %w", err)
	}
	return nil
}

// Close detaches the program (the link goes, so the queue's frames go to
// the kernel stack again), empties its XSKMAP slots and unloads it, and
// sets the sockets' Info.Attach back to AttachNone. A SetTable waiting for
// its holds to be lifted, or for its turn, returns an error wrapping
// ErrClosed, as does every SetTable after Close. It does not close the
// group or the dispatcher: a Run still going reads nothing more. Close is
// idempotent.
func (st *Steering) Close() error {
	st.hold.Close()
	st.counters()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil
	}
	st.closed = true
	var errs []error
	if st.link != nil {
		if err := st.link.Close(); err != nil {
			errs = append(errs, fmt.Errorf("afxdp: detaching the steering program: %w", err))
		}
		st.link = nil
	}
	if st.x != nil {
		for i := range st.g.sources {
			if err := st.x.ClearSocket(i); err != nil {
				errs = append(errs, fmt.Errorf("afxdp: %w", err))
			}
		}
		if err := st.x.Close(); err != nil {
			errs = append(errs, fmt.Errorf("afxdp: %w", err))
		}
		st.x = nil
	}
	for _, s := range st.g.sources {
		s.setAttach(AttachNone)
	}
	st.g.steered.Store(false)
	return errors.Join(errs...)
}

// SetTable reprograms the indirection table in the XDP program and in the
// dispatcher at once, without reordering any flow, and returns when every
// moved bucket is handled by its new worker only. It needs DIRECT
// dispatch (steer.Config.Dispatch = steer.Direct), and Run running: the
// readers lift the holds.
//
// After the program's table changes, frames of a moved bucket go to the
// new worker's socket, but frames that came before may still sit in the
// old socket's RX ring, not yet read or handled. SetTable follows the
// protocol afpacket's ordered table changes use (internal/holdback), with
// AF_XDP's primitives:
//
//  1. The new worker is told to hold the bucket's frames back: while a
//     hold is on, its reader classifies each frame it reads and copies
//     those of held buckets aside instead of dispatching them.
//  2. The table map is updated (one map write), then SetTable waits for an
//     RCU grace period: every run of the program that began before has
//     ended, and with it the NAPI poll (or, on the generic hook, the
//     receive) that published its frames in the RX rings, so every frame
//     steered by the old table is in its socket's ring.
//  3. The old worker's position is its RX ring's producer index, read
//     then (an acquire load).
//  4. The old worker's reader publishes its consumer index each time it
//     comes back for more, everything before handled (DIRECT). Once that
//     reaches the target (both wrap at 2^32), the old worker has handled
//     every frame of the bucket it will ever get, and the new worker
//     dispatches the held frames, in arrival order, before anything it
//     reads later.
//
// A hold normally lasts until the old worker's next read. It is lifted
// early, and counted in SteeringStats, after SteeringOptions.HoldTimeout
// (an old worker that stopped reading) or past SteeringOptions.MaxHeld
// bytes: the only cases in which a flow may be reordered.
//
// What bounds the wait: calls are serialised, each starting after the
// previous one's holds are lifted. While Run runs, the new workers' readers
// lift the holds HoldTimeout after the switch at the latest. A hold still
// on twice HoldTimeout after the switch (Run is not running, or a worker
// is stuck in its handler) SetTable lifts itself, counted in
// SteeringStats.HoldTimeouts, and returns: the frames that worker held
// back it dispatches when it reads again, before anything it reads then.
// So a call returns at most about twice HoldTimeout after its switch (plus
// the wait for the previous call's holds, bounded the same way), when ctx
// ends, or when Close is called. If ctx ends first SetTable returns its
// error, the tables are already switched (unless it was still waiting for
// the previous call), and the holds are lifted later. After Close, and
// for a call Close woke, SetTable returns an error wrapping ErrClosed.
func (st *Steering) SetTable(ctx context.Context, table []int) error {
	st.mu.Lock()
	closed := st.closed
	st.mu.Unlock()
	if closed {
		return errSetTableClosed
	}
	if d := st.d.Config().Dispatch; d != steer.Direct {
		return fmt.Errorf("%w: ordered table changes need direct dispatch (set steer.Config.Dispatch = steer.Direct), not %v", ErrConfig, d)
	}
	err := st.hold.SetTable(ctx, table, (*xdpKernel)(st))
	return holdback.PackageError(ctx, err, "afxdp", ErrConfig, errSetTableClosed)
}

// errSetTableClosed is SetTable's error once the Steering is closed.
var errSetTableClosed = fmt.Errorf("afxdp: set table: the steering is closed: %w", ErrClosed)

// xdpKernel is the program's side of SetTable's protocol
// (holdback.Kernel).
type xdpKernel Steering

// Table returns the program's table.
func (k *xdpKernel) Table() ([]int, error) { return (*Steering)(k).KernelTable() }

// Switch updates the program's table map, then waits for a grace period
// (XDP.Sync): once it returns, every frame steered by the old table is in
// its socket's RX ring.
func (k *xdpKernel) Switch(table []int) error {
	k.mu.Lock()
	x := k.x
	k.mu.Unlock()
	if x == nil {
		return fmt.Errorf("afxdp: switching the program's table: %w", ErrClosed)
	}
	if err := x.SetTable(bpfsteer.WorkerTable(table)); err != nil {
		return fmt.Errorf("afxdp: switching the program's table: %w", err)
	}
	if err := x.Sync(); err != nil {
		// The table changed but no grace period was had: wait one out.
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// Position returns socket i's RX ring producer index; ok false once the
// socket is closed (it reads nothing more).
func (k *xdpKernel) Position(i int) (uint32, bool) { return k.srcs[i].s.rxProduced() }

// steeredSource is one socket of the group as its worker reads it, through
// its holdback.Reader.
type steeredSource struct {
	s *Source
	r *holdback.Reader
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
			return nil // the frames a lifted hold kept back
		}
	}
	cons, err := ss.s.readBatch(ctx, b, wait)
	if err == nil {
		ss.r.AfterRead(b, cons)
	}
	return err
}

// Close closes the socket.
func (ss *steeredSource) Close() error { return ss.s.Close() }

// SourceStats reports the socket's counters (steer.SourceStatser).
func (ss *steeredSource) SourceStats() (steer.SourceStats, error) { return ss.s.SourceStats() }

var (
	_ steer.LiveSource    = (*steeredSource)(nil)
	_ steer.SourceStatser = (*steeredSource)(nil)
	_ holdback.Kernel     = (*xdpKernel)(nil)
)
