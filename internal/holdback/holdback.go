package holdback

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpsgo/rps/steer"
)

const (
	// DefaultHoldTimeout is Options.HoldTimeout's default.
	DefaultHoldTimeout = time.Second
	// DefaultMaxHeld is Options.MaxHeld's default: 16 MiB.
	DefaultMaxHeld = 16 << 20
	// holdPoll is how long a reader waits for frames while it holds frames
	// back, so that it notices soon that the hold can be lifted.
	holdPoll = time.Millisecond
)

var (
	// ErrTable is wrapped by the errors of a table SetTable cannot apply (a
	// wrong length, an entry naming no worker) and of a Holder without a
	// dispatcher or one that does not dispatch DIRECT. It wraps
	// steer.ErrConfig.
	ErrTable = fmt.Errorf("holdback: invalid table: %w", steer.ErrConfig)
	// ErrClosed is wrapped by the error of a SetTable that Close woke, and
	// of every SetTable after Close.
	ErrClosed = errors.New("holdback: closed")
	// ErrNoGracePeriod is wrapped by the error of a Kernel's Switch that
	// changed the kernel's table but could not wait for the grace period
	// after it: when the frames steered by the old table are all in their
	// rings is then unknown.
	ErrNoGracePeriod = errors.New("the kernel's table changed, but no grace period could be waited for")
)

// Options tune a [Holder]. The zero value is usable.
type Options struct {
	// HoldTimeout bounds how long a moved bucket's frames are held back in
	// the new worker while the old worker drains what its ring held at the
	// switch; past it the new worker's reader releases them anyway, counted
	// in Stats.HoldTimeouts. A hold still on twice HoldTimeout after the
	// switch (no reader came back to lift it) SetTable lifts itself, also
	// counted. Default DefaultHoldTimeout.
	HoldTimeout time.Duration
	// MaxHeld bounds the bytes of frames held back per worker during a
	// table change; past it the hold is lifted early and counted in
	// Stats.HoldOverflows. Default DefaultMaxHeld.
	MaxHeld int
}

// Stats are a Holder's counters.
type Stats struct {
	TableChanges uint64 // SetTable calls that changed the kernel's table
	BucketsMoved uint64 // buckets whose worker changed, over all SetTable calls
	HeldFrames   uint64 // frames held back in their new worker during a change
	// HoldTimeouts and HoldOverflows count holds lifted before the old
	// worker had drained its ring: the only ways a table change can reorder
	// a flow.
	HoldTimeouts  uint64
	HoldOverflows uint64
}

// Kernel is what SetTable needs of the kernel that steers the group. Its
// methods are called by SetTable only, one call at a time.
type Kernel interface {
	// Table returns the table the kernel steers by now: one worker (socket)
	// per bucket.
	Table() ([]int, error)
	// Switch makes the kernel steer by table and returns once every frame
	// steered with the previous table is in its socket's ring (a grace
	// period). An error means the kernel's table did not change, unless it
	// wraps ErrNoGracePeriod: then it did, and SetTable keeps the holds on
	// until HoldTimeout (counted as timeouts: the order of the moved
	// buckets is no longer guaranteed), sets the dispatcher's table to
	// match, and returns the error. SetTable returns any other error as it
	// is.
	Switch(table []int) error
	// Position returns how many frames socket's ring has received (modulo
	// 2^32: a ring index), in the units its reader passes to
	// Reader.AfterRead; ok false when the socket gets no more frames (it is
	// closed), so there is nothing to wait for.
	Position(socket int) (pos uint32, ok bool)
}

// Holder makes ordered table changes for a dispatcher whose workers read
// one kernel-steered socket each (steer.Dispatcher.RunOnWorkers, DIRECT
// dispatch): worker i reads through Reader(i).
type Holder struct {
	d       *steer.Dispatcher
	cls     *steer.Classifier // hashes as d does
	mask    uint32
	opts    Options
	readers []*Reader

	// turn is a token: a SetTable holds it from the moment it may start
	// until it returns (calls are serialised); it guards pending.
	turn      chan struct{}
	pending   []*holdSet    // holds of the last SetTable, until lifted
	done      chan struct{} // closed by Close
	closeOnce sync.Once

	tableChanges, bucketsMoved, heldFrames, holdTimeouts, holdOverflows atomic.Uint64
}

// New returns a Holder for d, with one Reader per worker of d.
func New(d *steer.Dispatcher, opts Options) (*Holder, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: nil dispatcher", ErrTable)
	}
	if opts.HoldTimeout <= 0 {
		opts.HoldTimeout = DefaultHoldTimeout
	}
	if opts.MaxHeld <= 0 {
		opts.MaxHeld = DefaultMaxHeld
	}
	cfg := d.Config()
	cls, err := steer.NewClassifier(cfg.Hash) // cfg.Hash.Key is the key d uses, a random one too
	if err != nil {
		return nil, fmt.Errorf("holdback: %w", err)
	}
	h := &Holder{d: d, cls: cls, mask: uint32(cfg.Buckets - 1), opts: opts, turn: make(chan struct{}, 1), done: make(chan struct{})}
	for range d.Workers() {
		h.readers = append(h.readers, &Reader{h: h})
	}
	return h, nil
}

// Reader returns worker i's reader (nil when there is no worker i).
func (h *Holder) Reader(i int) *Reader {
	if i < 0 || i >= len(h.readers) {
		return nil
	}
	return h.readers[i]
}

// Stats returns the Holder's counters.
func (h *Holder) Stats() Stats {
	return Stats{
		TableChanges:  h.tableChanges.Load(),
		BucketsMoved:  h.bucketsMoved.Load(),
		HeldFrames:    h.heldFrames.Load(),
		HoldTimeouts:  h.holdTimeouts.Load(),
		HoldOverflows: h.holdOverflows.Load(),
	}
}

// Close wakes every SetTable waiting for holds to be lifted or for its
// turn, which returns an error wrapping ErrClosed; every later SetTable
// returns one at once. The holds stay on until the readers lift them (a
// reader holds its frames until then, as private copies). Close is
// idempotent and returns at once: a SetTable inside a Kernel call returns
// once that call does.
func (h *Holder) Close() {
	h.closeOnce.Do(func() { close(h.done) })
}

// closed reports whether Close was called.
func (h *Holder) closed() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// errClosed is SetTable's error once the Holder is closed.
var errClosed = fmt.Errorf("holdback: set table: %w", ErrClosed)

// SetTable changes the table in the kernel (through k) and in the
// dispatcher without reordering any flow (the protocol of the package
// comment), and returns when every moved bucket is handled by its new
// worker only. A table identical to the kernel's is only set in the
// dispatcher.
//
// Calls are serialised, each starting after the previous one's holds are
// lifted. The readers lift the holds: normally at the old workers' next
// reads, at the latest HoldTimeout after the switch while the new workers
// read. When a
// hold is still on twice HoldTimeout after the switch (its reader did not
// come back: the workers are not running, or one is stuck in its
// handler), SetTable lifts it itself, counts a hold timeout, and goes on;
// frames its reader held back it hands out when it reads again, before
// anything it reads then. So without Close and with ctx never ending, a
// call returns at most about twice HoldTimeout after its switch, plus the
// wait for the previous call's holds (bounded the same way). If ctx ends
// first, SetTable returns its error; the tables are then already switched
// (unless the call was still waiting for its turn or the previous call's
// holds), and the holds are lifted later, by the readers or the next call.
// Close ends the wait with an error wrapping ErrClosed.
func (h *Holder) SetTable(ctx context.Context, table []int, k Kernel) error {
	if h.closed() {
		return errClosed
	}
	n := len(h.readers)
	if d := h.d.Config().Dispatch; d != steer.DispatchDirect {
		return fmt.Errorf("%w: ordered table changes need direct dispatch (set steer.Config.Dispatch = steer.DispatchDirect), not %v", ErrTable, d)
	}
	if len(table) != int(h.mask)+1 {
		return fmt.Errorf("%w: table of %d entries, want %d", ErrTable, len(table), h.mask+1)
	}
	for b, w := range table {
		if w < 0 || w >= n {
			return fmt.Errorf("%w: table entry %d names worker %d of %d", ErrTable, b, w, n)
		}
	}
	select {
	case h.turn <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("holdback: waiting for the previous table change to return: %w", ctx.Err())
	case <-h.done:
		return errClosed
	}
	defer func() { <-h.turn }()
	if h.closed() {
		return errClosed
	}
	if err := h.waitLifted(ctx); err != nil {
		return err
	}
	old, err := k.Table()
	if err != nil {
		return err
	}
	if len(old) != len(table) {
		return fmt.Errorf("%w: the kernel's table has %d entries, want %d", ErrTable, len(old), len(table))
	}
	sets := make([]*holdSet, n)
	moved := 0
	for b, w := range table {
		o := old[b]
		if w == o {
			continue
		}
		moved++
		hs := sets[w]
		if hs == nil {
			hs = &holdSet{worker: w, buckets: make([]bool, len(table)), waitOn: make([]bool, n), targets: make([]uint32, n),
				lifted: make(chan struct{})}
			sets[w] = hs
		}
		hs.buckets[b] = true
		if o >= 0 && o < n {
			hs.waitOn[o] = true
		}
	}
	if moved == 0 {
		return h.d.SetTable(table)
	}
	// 1. Holds first: any frame of a moved bucket the new worker reads from
	// now on is held.
	for w, hs := range sets {
		if hs != nil {
			h.readers[w].holds.Store(hs)
			h.pending = append(h.pending, hs)
		}
	}
	// 2. The switch, and the grace period.
	if err := k.Switch(table); err != nil {
		if !errors.Is(err, ErrNoGracePeriod) {
			h.arm(sets, nil, nil) // nothing moved in the kernel: lift at once
			return err
		}
		// Switched, but with no grace period nothing says when the old
		// workers have drained: the holds run out of time instead.
		_ = h.d.SetTable(table) // validated above
		h.tableChanges.Add(1)
		h.bucketsMoved.Add(uint64(moved))
		for _, hs := range sets {
			if hs != nil {
				hs.blind = true
			}
		}
		h.arm(sets, nil, nil)
		return err
	}
	// 3. The old workers' ring positions.
	targets := make([]uint32, n)
	waits := make([]bool, n)
	for _, hs := range sets {
		if hs == nil {
			continue
		}
		for o, w := range hs.waitOn {
			waits[o] = waits[o] || w
		}
	}
	for o := range targets {
		if waits[o] {
			targets[o], waits[o] = k.Position(o)
		}
	}
	_ = h.d.SetTable(table) // validated above
	h.tableChanges.Add(1)
	h.bucketsMoved.Add(uint64(moved))
	h.arm(sets, targets, waits)
	// 4. Wait for the readers to lift the holds.
	return h.waitLifted(ctx)
}

// arm sets the targets of the holds and starts their clocks. An old
// worker not in waits (all, when waits is nil) is not waited for.
func (h *Holder) arm(sets []*holdSet, targets []uint32, waits []bool) {
	now := time.Now()
	for _, hs := range sets {
		if hs == nil {
			continue
		}
		for o := range hs.waitOn {
			if waits == nil || !waits[o] {
				hs.waitOn[o] = false
			} else {
				hs.targets[o] = targets[o]
			}
		}
		hs.start = now
		hs.armed.Store(true)
	}
}

// waitLifted waits until the holds of the last SetTable are lifted, and
// lifts those still on twice HoldTimeout after their switch.
func (h *Holder) waitLifted(ctx context.Context) error {
	for len(h.pending) > 0 {
		hs := h.pending[0]
		// Every pending hold is armed: SetTable arms its holds before it
		// waits or returns.
		timer := time.NewTimer(time.Until(hs.start.Add(2 * h.opts.HoldTimeout)))
		select {
		case <-hs.lifted:
		case <-timer.C:
			h.abandon(hs)
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("holdback: waiting for the moved buckets' old workers to drain: %w", ctx.Err())
		case <-h.done:
			timer.Stop()
			return errClosed
		}
		timer.Stop()
		h.pending = h.pending[1:]
	}
	return nil
}

// abandon lifts hs for a reader that did not come back: it takes the hold
// off the reader unless the reader has already done so (or another hold
// has replaced it), and counts a hold timeout unless the reader had
// decided to lift it first. The frames the reader held back stay its
// own: it hands them out at its next read (Reader.Hold), so none is lost
// or handed out twice.
func (h *Holder) abandon(hs *holdSet) {
	if hs.decided.CompareAndSwap(false, true) {
		h.holdTimeouts.Add(1)
	}
	h.readers[hs.worker].holds.CompareAndSwap(hs, nil)
	hs.finish()
}

// holdSet is what one new worker holds back during a table change.
type holdSet struct {
	worker  int      // the new worker
	buckets []bool   // the buckets moving to this worker
	waitOn  []bool   // the old workers they come from
	targets []uint32 // per old worker: its ring's position at the switch
	start   time.Time
	// blind, set before armed, says that no position can lift the hold
	// (the switch had no grace period): only HoldTimeout or MaxHeld can.
	blind bool
	armed atomic.Bool // targets, start and blind are set
	// decided is set by whoever first decides to lift the hold (its reader,
	// or SetTable's abandon), which counts a timeout or an overflow.
	decided atomic.Bool
	// ended guards lifted's close: the reader and abandon may both lift.
	ended  atomic.Bool
	lifted chan struct{}
	// delivered, the reader's alone, says that the held frames were handed
	// out: the hold is lifted at the reader's next read, once they are
	// handled.
	delivered bool
}

// finish closes hs.lifted, once.
func (hs *holdSet) finish() {
	if hs.ended.CompareAndSwap(false, true) {
		close(hs.lifted)
	}
}
