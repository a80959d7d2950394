package steer

import (
	"fmt"
	"sync/atomic"
)

// indirection is the RSS indirection table (FreeBSD's rss_table, a NIC's
// RETA): bucket = flowid & mask, worker = ents[bucket]. Entries are atomic so
// the table can be reprogrammed while inputs read it; each input moves its
// own view of a bucket only under the last_qtail rule (see producer.rss).
type indirection struct {
	ents []atomic.Uint32
	mask uint32
	// gen counts the changes: an input whose view agreed with the table at
	// generation gen reads the table no more until gen moves (viewCurrent).
	gen atomic.Uint64
}

// set points bucket b at worker w; the caller bumps gen once done.
func (t *indirection) set(b, w int) { t.ents[b].Store(uint32(w)) }

func newIndirection(buckets, workers int) *indirection {
	t := &indirection{ents: make([]atomic.Uint32, buckets), mask: uint32(buckets - 1)}
	for b := range t.ents {
		// FreeBSD's rss_init assigns bucket b to CPU b % ncpus.
		t.ents[b].Store(uint32(b % workers))
	}
	return t
}

func (t *indirection) snapshot() []int {
	out := make([]int, len(t.ents))
	for i := range t.ents {
		out[i] = int(t.ents[i].Load())
	}
	return out
}

// Table returns the indirection table: entry b is bucket b's worker.
func (d *Dispatcher) Table() []int { return d.table.snapshot() }

// SetTable reprograms the indirection table (`ethtool -X`); a bucket moves
// only once its old worker has handled its queued frames, with Mover states.
func (d *Dispatcher) SetTable(table []int) error {
	if d.closed.Load() {
		return ErrClosed
	}
	if len(table) != len(d.table.ents) {
		return fmt.Errorf("steer: table of %d entries, want %d: %w", len(table), len(d.table.ents), ErrConfig)
	}
	for b, w := range table {
		if w < 0 || w >= len(d.workers) {
			return fmt.Errorf("steer: table entry %d names worker %d of %d: %w", b, w, len(d.workers), ErrConfig)
		}
	}
	for b, w := range table {
		d.table.set(b, w)
	}
	d.table.gen.Add(1)
	return nil
}

// SetBucket points one bucket at a worker (see SetTable).
func (d *Dispatcher) SetBucket(bucket, worker int) error {
	if d.closed.Load() {
		return ErrClosed
	}
	if bucket < 0 || bucket >= len(d.table.ents) {
		return fmt.Errorf("steer: bucket %d of %d: %w", bucket, len(d.table.ents), ErrConfig)
	}
	if worker < 0 || worker >= len(d.workers) {
		return fmt.Errorf("steer: worker %d of %d: %w", worker, len(d.workers), ErrConfig)
	}
	d.table.set(bucket, worker)
	d.table.gen.Add(1)
	return nil
}

// Move is a change of worker for some flows: a bucket (a reprogrammed
// table, the rebalancer) or one flowid (RFS).
type Move struct {
	Bucket   int    // the bucket moved, or -1 for an RFS flow move
	Mask     uint32 // buckets - 1: flowid & Mask is a flowid's bucket
	FlowID   uint32 // the flowid moved, when Bucket is -1
	From, To int    // the old and the new worker
}

// Contains reports whether the frames of flowid move with m.
func (m Move) Contains(flowid uint32) bool {
	if m.Bucket < 0 {
		return flowid == m.FlowID
	}
	return int(flowid&m.Mask) == m.Bucket
}
