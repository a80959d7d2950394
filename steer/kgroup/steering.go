package kgroup

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/rpsgo/rps/internal/holdback"
	"github.com/rpsgo/rps/steer"
)

// Steering binds a Kernel's group of sockets to a dispatcher: socket i is
// read by worker i, and the kernel's program picks each frame's socket.
// See the package documentation. Its methods are safe for concurrent use.
type Steering struct {
	d    *steer.Dispatcher
	k    Kernel
	prog Program // nil when the kernel steers by a rule of its own
	srcs []*source
	hold *holdback.Holder

	mu     sync.Mutex // held through every call into k; guards closed and last
	closed bool
	last   []steer.KernelCounter // the program's counters as last read
}

// New checks that k's group fits d (one socket per worker) and o, and has
// k attach its program for d's configuration and table (Kernel.Attach):
// frames flow from then on. A socket family's NewSteering calls it; its
// errors wrap steer.ErrConfig for a group or options that cannot steer d.
//
// Any dispatch mode steers, but SetTable's ordered table changes need
// DIRECT dispatch (steer.Config.Dispatch = steer.DispatchDirect): with HYBRID or
// DEFERRED dispatch every SetTable is then an error wrapping
// steer.ErrConfig.
func New(d *steer.Dispatcher, k Kernel, o Options) (*Steering, error) {
	if d == nil || k == nil {
		return nil, fmt.Errorf("kgroup: %w: nil dispatcher or group", steer.ErrConfig)
	}
	socks := k.Sockets()
	if len(socks) != d.Workers() {
		return nil, fmt.Errorf("kgroup: %w: a group of %d sockets for %d workers: want one socket per worker", steer.ErrConfig, len(socks), d.Workers())
	}
	if o.Fallback < 0 || o.Fallback >= len(socks) {
		return nil, fmt.Errorf("kgroup: %w: fallback socket %d of %d", steer.ErrConfig, o.Fallback, len(socks))
	}
	hold, err := holdback.New(d, holdback.Options{HoldTimeout: o.HoldTimeout, MaxHeld: o.MaxHeld})
	if err != nil {
		return nil, fmt.Errorf("kgroup: %w", err)
	}
	prog, err := k.Attach(d.Config(), d.Table(), o)
	if err != nil {
		return nil, err
	}
	st := &Steering{d: d, k: k, prog: prog, hold: hold}
	for i, s := range socks {
		st.srcs = append(st.srcs, &source{s: s, r: hold.Reader(i)})
	}
	return st, nil
}

// Run reads every socket of the group in its worker until ctx ends or the
// dispatcher or the group closes (steer.Dispatcher.RunOnWorkers over
// Sources); it returns ctx's error when ctx ends, nil when the dispatcher
// or the group closes, and an error wrapping ErrClosed after Close. It
// does not close the group.
func (st *Steering) Run(ctx context.Context) error {
	if st.isClosed() {
		return fmt.Errorf("kgroup: run: %w", ErrClosed)
	}
	err := st.d.RunOnWorkers(ctx, st.Sources())
	if errors.Is(err, net.ErrClosed) || errors.Is(err, steer.ErrClosed) {
		return nil
	}
	return err
}

// Sources returns the group's sockets as their workers read them: worker i
// reads Sources()[i], which also holds frames back during SetTable. Run
// passes them to steer.Dispatcher.RunOnWorkers; a caller that wraps each
// (to stop after a count of frames, to tap them) calls RunOnWorkers with
// the wrapped ones itself, and must keep each wrapped source's ReadBatch
// the only reader of its socket; unlike Run, RunOnWorkers then returns
// the sockets' error when the group is closed under it.
func (st *Steering) Sources() []steer.Source {
	srcs := make([]steer.Source, len(st.srcs))
	for i, s := range st.srcs {
		srcs[i] = s
	}
	return srcs
}

// isClosed reports whether Close was called.
func (st *Steering) isClosed() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.closed
}

// KernelTable returns the indirection table the program steers by now, an
// error wrapping steer.ErrConfig when the kernel steers by a rule of its
// own, or one wrapping ErrClosed after Close.
func (st *Steering) KernelTable() ([]int, error) {
	t, err := (*tableKernel)(st).Table()
	if err != nil {
		return nil, fmt.Errorf("kgroup: kernel table: %w", err)
	}
	return t, nil
}

// Stats returns the Steering's counters. It waits for a table switch in
// progress (a grace period, milliseconds).
func (st *Steering) Stats() Stats {
	h := st.hold.Stats()
	s := Stats{
		TableChanges:  h.TableChanges,
		BucketsMoved:  h.BucketsMoved,
		HeldFrames:    h.HeldFrames,
		HoldTimeouts:  h.HoldTimeouts,
		HoldOverflows: h.HoldOverflows,
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.readCounters()
	s.Kernel = slices.Clone(st.last)
	return s
}

// readCounters keeps the program's counters in last while it is there;
// st.mu is held.
func (st *Steering) readCounters() {
	if !st.closed {
		if c, err := st.k.Counters(); err == nil {
			st.last = c
		}
	}
}

// StopIntake stops the kernel passing frames to the group's sockets and
// returns once none can reach their rings (Kernel.StopIntake), so that the
// rings can be read dry before Close: Run goes on reading what they hold.
// It cannot be undone; a second call, or a call after Close, returns nil.
func (st *Steering) StopIntake() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil
	}
	if err := st.k.StopIntake(); err != nil {
		return fmt.Errorf("kgroup: stop intake: %w", err)
	}
	return nil
}

// Close detaches the program (Kernel.Close), after a last read of its
// counters. A SetTable waiting for its holds to be lifted, or for its
// turn, returns an error wrapping ErrClosed, as does every SetTable (and
// Run, KernelTable) after Close. It does not close the group or the
// dispatcher: a Run still going reads on, but the kernel steers nothing
// more to the sockets unless the family says otherwise. Close is
// idempotent.
func (st *Steering) Close() error {
	st.hold.Close()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil
	}
	st.readCounters()
	st.closed = true
	return st.k.Close()
}

// SetTable reprograms the indirection table in the kernel and in the
// dispatcher at once, without reordering any flow (see the package
// documentation), and returns when every moved bucket is handled by its
// new worker only. It needs a program that steers by the table and DIRECT
// dispatch; when the kernel steers by a rule of its own, SetTable is an
// error with DIRECT dispatch and the dispatcher's own SetTable with
// HYBRID or DEFERRED.
//
// Call SetTable while Run runs: the readers lift the holds. What bounds
// the wait: calls are serialised, each starting after the previous one's
// holds are lifted. While Run runs, the new workers' readers lift the
// holds HoldTimeout after the switch at the latest. A hold still on twice
// HoldTimeout after the switch (Run is not running, or a worker is stuck
// in its handler) SetTable lifts itself, counted in Stats.HoldTimeouts,
// and returns: the frames that worker held back it dispatches when it
// reads again, before anything it reads then. So a call returns at most
// about twice HoldTimeout after its switch (plus the wait for the
// previous call's holds, bounded the same way), when ctx ends, or when
// Close is called. If ctx ends first SetTable returns its error, the
// tables are already switched (unless it was still waiting for the
// previous call), and the holds are lifted later. A switch that could not
// wait for its grace period returns an error wrapping ErrNoGracePeriod
// with both tables switched. After Close, and for a call Close woke,
// SetTable returns an error wrapping ErrClosed.
func (st *Steering) SetTable(ctx context.Context, table []int) error {
	if st.isClosed() {
		return errSetTableClosed
	}
	cfg := st.d.Config()
	switch {
	case st.prog == nil && cfg.Dispatch == steer.DispatchDirect:
		return fmt.Errorf("kgroup: set table: %w: with direct dispatch the kernel, not the table, picks the worker", steer.ErrConfig)
	case st.prog == nil:
		return st.d.SetTable(table)
	case cfg.Dispatch != steer.DispatchDirect:
		return fmt.Errorf("kgroup: set table: %w: ordered table changes need direct dispatch (set steer.Config.Dispatch = steer.DispatchDirect), not %v",
			steer.ErrConfig, cfg.Dispatch)
	}
	err := st.hold.SetTable(ctx, table, (*tableKernel)(st))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, holdback.ErrClosed):
		return errSetTableClosed
	}
	return fmt.Errorf("kgroup: set table: %w", err)
}

// errSetTableClosed is SetTable's error once the Steering is closed.
var errSetTableClosed = fmt.Errorf("kgroup: set table: %w", ErrClosed)

// tableKernel is the Steering as holdback's Kernel: the calls into the
// Kernel under st.mu, none after Close.
type tableKernel Steering

// Table returns the program's table.
func (tk *tableKernel) Table() ([]int, error) {
	st := (*Steering)(tk)
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case st.closed:
		return nil, ErrClosed
	case st.prog == nil:
		return nil, fmt.Errorf("%w: the kernel picks each frame's socket by a rule of its own, not a table", steer.ErrConfig)
	}
	t, err := st.prog.Table()
	if err != nil {
		return nil, err
	}
	out := make([]int, len(t))
	for i, w := range t {
		out[i] = int(w)
	}
	return out, nil
}

// Switch makes the program steer by table, then waits for a grace period
// (Program.Sync): once that returns, every frame steered by the old table
// is in its socket's ring, counted. A table that changed without a grace
// period is an error wrapping ErrNoGracePeriod.
func (tk *tableKernel) Switch(table []int) error {
	st := (*Steering)(tk)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return ErrClosed
	}
	t := make([]uint32, len(table))
	for i, w := range table {
		t[i] = uint32(w)
	}
	if err := st.prog.SetTable(t); err != nil {
		return fmt.Errorf("switching the program's table: %w", err)
	}
	if err := st.prog.Sync(); err != nil {
		return fmt.Errorf("%w: %w", ErrNoGracePeriod, err)
	}
	return nil
}

// Position returns socket i's position.
func (tk *tableKernel) Position(i int) (uint32, bool) { return tk.srcs[i].s.Position() }

// source is one socket of the group as its worker reads it, through its
// holdback.Reader.
type source struct {
	s Socket
	r *holdback.Reader
}

// ReadBatch reads the socket, holding frames back during a table change.
func (ss *source) ReadBatch(ctx context.Context, b *steer.Batch) error {
	limit := time.Duration(-1)
	if ss.r.BeforeRead() {
		var held bool
		if limit, held = ss.r.Hold(b, limit); held {
			return nil // the frames a lifted hold kept back
		}
	}
	pos, err := ss.s.Read(ctx, b, limit)
	if err != nil {
		return err
	}
	ss.r.AfterRead(b, pos)
	return nil
}

// Live reports true, as the socket it reads does.
func (ss *source) Live() bool { return true }

// Backlog reports the socket's (steer.LiveSource).
func (ss *source) Backlog() (used, size int) { return ss.s.Backlog() }

// Close closes the socket.
func (ss *source) Close() error { return ss.s.Close() }

// SourceStats reports the socket's counters.
func (ss *source) SourceStats() (steer.SourceStats, error) { return ss.s.SourceStats() }

var (
	_ steer.LiveSource    = (*source)(nil)
	_ steer.SourceStatser = (*source)(nil)
	_ holdback.Kernel     = (*tableKernel)(nil)
)
