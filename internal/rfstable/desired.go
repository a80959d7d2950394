package rfstable

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
)

// MaxWorkers bounds the worker numbers [Desired] can record: a worker is
// valid when 0 <= worker < MaxWorkers. The encoding keeps worker+1 in 16
// bits so that a zero word means "empty".
const MaxWorkers = 65535

// MaxDesiredCapacity is the largest capacity [NewDesired] accepts (the same
// order as the largest value Linux allows for net.core.rps_sock_flow_entries).
const MaxDesiredCapacity = 1 << 29

// Sentinel errors, tested with errors.Is.
var (
	// ErrCapacity reports a capacity that is not a power of two or is out
	// of the accepted range.
	ErrCapacity = errors.New("capacity must be a power of two in range")
	// ErrWorker reports a worker number outside [0, MaxWorkers).
	ErrWorker = errors.New("worker out of range")
)

// Desired records, per flowid, the worker on which the flow's consumer runs:
// the analogue of Linux's global rps_sock_flow_table, which the socket layer
// writes (rps_record_sock_flow) and get_rps_cpu reads to find the CPU a flow
// should be steered to.
//
// It is a fixed array of slots indexed by flowid & (capacity-1). Each slot
// is one atomic 64-bit word holding the full 32-bit flowid as a tag in its
// upper half and worker+1 in its lower half (0 means empty). Linux packs a
// partial tag and the CPU into 32 bits and tolerates a false match; the wider
// word makes [Desired.Get] exact: a slot overwritten by another flowid is
// reported as absent rather than as the other flow's worker.
//
// All methods are safe for concurrent use by any number of goroutines, never
// block and never allocate. When two flowids share a slot the last Set wins,
// as in Linux; the loser simply has no desired worker until it is set again.
type Desired struct {
	slots []atomic.Uint64
	mask  uint32
	_     [64 - 24 - 4]byte // gen on a line of its own: writers change it
	gen   atomic.Uint64
	_     [56]byte // 128 bytes in all, a size class whose objects are line-aligned
}

// NewDesired returns an empty table with capacity slots. The capacity is
// fixed; it must be a power of two between 1 and [MaxDesiredCapacity],
// otherwise the error wraps [ErrCapacity]. Size it at least to the number of
// concurrently active flows (Linux suggests 32768 for a moderately loaded
// server): each slot costs 8 bytes.
func NewDesired(capacity int) (*Desired, error) {
	if capacity <= 0 || capacity&(capacity-1) != 0 || capacity > MaxDesiredCapacity ||
		uint64(capacity) > math.MaxInt/8 {
		return nil, fmt.Errorf("rfstable: new desired table of capacity %d: %w", capacity, ErrCapacity)
	}
	return &Desired{slots: hugeSlice[atomic.Uint64](capacity), mask: uint32(capacity - 1)}, nil
}

// Gen returns the table's generation: a number, never zero, that every
// change of a recorded worker (a Set that writes, a Clear that removes)
// increases after making the change. A reader that records Gen before it
// reads slots, and finds Gen unchanged later, knows that none of the
// workers it read has changed since: a per-flow cache of Get (such as
// [Entry.Desired] with [Entry.DesiredGen]) stays valid while Gen does.
// Linux reads its sock flow table for every packet; the dispatcher reads a
// flow's slot only after a change. Changes are rare next to frames, since
// Set writes only when the worker changes.
func (d *Desired) Gen() uint64 { return d.gen.Load() + 1 }

// Capacity returns the number of slots.
func (d *Desired) Capacity() int { return len(d.slots) }

func encodeDesired(flowid uint32, worker int) uint64 {
	return uint64(flowid)<<32 | uint64(worker+1)
}

// Set records that the consumer of flowid runs on worker. It overwrites
// whatever the slot held, including another flowid's record. The slot is
// written only when its value changes, so that repeated calls from the same
// worker do not bounce the cache line (Linux does the same). A worker
// outside [0, MaxWorkers) leaves the table unchanged and returns an error
// wrapping [ErrWorker].
func (d *Desired) Set(flowid uint32, worker int) error {
	if worker < 0 || worker >= MaxWorkers {
		return fmt.Errorf("rfstable: set desired worker of flowid %#x to %d: %w", flowid, worker, ErrWorker)
	}
	w := encodeDesired(flowid, worker)
	s := &d.slots[flowid&d.mask]
	if s.Load() != w {
		// The slot first, then Gen: a reader that sees the new Gen (and
		// reads the slot after it, as Gen's doc says) sees the new worker.
		// The other order would let it cache the old worker under the new
		// Gen, until the next change.
		s.Store(w)
		d.gen.Add(1)
	}
	return nil
}

// Get returns the worker recorded for flowid. ok is false when the slot is
// empty or holds another flowid's record.
func (d *Desired) Get(flowid uint32) (worker int, ok bool) {
	w := d.slots[flowid&d.mask].Load()
	if w == 0 || uint32(w>>32) != flowid {
		return -1, false
	}
	return int(uint32(w)) - 1, true
}

// Clear forgets flowid's record. A slot that holds another flowid's record is
// left alone, so clearing a flow can never erase a different flow's entry.
func (d *Desired) Clear(flowid uint32) {
	s := &d.slots[flowid&d.mask]
	for {
		old := s.Load()
		if old == 0 || uint32(old>>32) != flowid {
			return
		}
		if s.CompareAndSwap(old, 0) {
			d.gen.Add(1)
			return
		}
	}
}
