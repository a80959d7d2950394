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

// ErrTable is wrapped by the errors of a table SetTable cannot apply (a
// wrong length, an entry naming no worker) and of a Holder without a
// dispatcher or one that does not dispatch DIRECT.
var ErrTable = errors.New("holdback: invalid table")

// Options tune a [Holder]. The zero value is usable.
type Options struct {
	// HoldTimeout bounds how long a moved bucket's frames are held back in
	// the new worker while the old worker drains what its ring held at the
	// switch; past it they are released anyway and counted in
	// Stats.HoldTimeouts. Default DefaultHoldTimeout.
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
	// period). An error means the kernel's table did not change; SetTable
	// returns it as it is.
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
	mask    uint32
	opts    Options
	readers []*Reader

	mu      sync.Mutex
	pending []*holdSet // holds of the last SetTable, until lifted

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
	h := &Holder{d: d, mask: uint32(d.Config().Buckets - 1), opts: opts}
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

// SetTable changes the table in the kernel (through k) and in the
// dispatcher without reordering any flow (the protocol of the package
// comment), and returns when every moved bucket is handled by its new
// worker only. The workers must be reading (through their Readers) for
// the holds to be lifted. Calls are serialised, each starting after the
// previous one's holds are lifted. If ctx ends first SetTable returns its
// error; the tables are then already switched, and the readers lift the
// holds later. A table identical to the kernel's is only set in the
// dispatcher.
func (h *Holder) SetTable(ctx context.Context, table []int, k Kernel) error {
	n := len(h.readers)
	if d := h.d.Config().Dispatch; d != steer.Direct {
		return fmt.Errorf("%w: ordered table changes need direct dispatch, not %v", ErrTable, d)
	}
	if len(table) != int(h.mask)+1 {
		return fmt.Errorf("%w: table of %d entries, want %d", ErrTable, len(table), h.mask+1)
	}
	for b, w := range table {
		if w < 0 || w >= n {
			return fmt.Errorf("%w: table entry %d names worker %d of %d", ErrTable, b, w, n)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
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
			hs = &holdSet{buckets: make([]bool, len(table)), waitOn: make([]bool, n), targets: make([]uint32, n),
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
		h.arm(sets, nil, nil) // nothing moved in the kernel: lift at once
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

// waitLifted waits until the holds of the last SetTable are lifted.
func (h *Holder) waitLifted(ctx context.Context) error {
	for len(h.pending) > 0 {
		select {
		case <-h.pending[0].lifted:
			h.pending = h.pending[1:]
		case <-ctx.Done():
			return fmt.Errorf("holdback: waiting for the moved buckets' old workers to drain: %w", ctx.Err())
		}
	}
	return nil
}

// holdSet is what one new worker holds back during a table change.
type holdSet struct {
	buckets []bool   // the buckets moving to this worker
	waitOn  []bool   // the old workers they come from
	targets []uint32 // per old worker: its ring's position at the switch
	start   time.Time
	armed   atomic.Bool // targets and start are set
	lifted  chan struct{}
	// delivered, the reader's alone, says that the held frames were handed
	// out: the hold is lifted at the reader's next read, once they are
	// handled.
	delivered bool
}
