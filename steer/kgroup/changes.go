package kgroup

import (
	"sync/atomic"

	"github.com/rpsgo/rps/steer"
)

// WorkerChanges counts how often a flow changes worker: a frame handled
// by another worker than the flow's previous frame. When the kernel
// spreads frames by load (an AF_PACKET fanout's LB, RND or ROLLOVER mode,
// or CPU and QM when the receiving CPU or queue changes) every change may
// reorder the flow, because the two workers run at once; when it steers by
// a hash or by the dispatcher's table the count stays zero while the
// table is stable. (steer.Stats.FlowMoves counts something else: the flows
// RFS moved.) Wrap the dispatcher's handler with Handler to count:
//
//	wc := kgroup.NewWorkerChanges(workers, 0)
//	d, err := steer.New(cfg, wc.Handler(h))
//
// Flows are told apart by flowid (FlowID & (slots-1) picks a slot, the
// rest of the flowid tags it), so two flows sharing a slot overwrite each
// other's record and a change between them is missed. Two flows sharing
// the whole flowid are counted as one, and when the kernel steers them by
// a hash of its own they may go to different workers: each such frame
// counts as a change though neither flow moved (about one pair in 2^32
// of flows). Frames without a hash are not counted.
type WorkerChanges struct {
	slots   []atomic.Uint64 // tag<<32 | worker+1
	mask    uint32
	changes []paddedCounter
	seen    []paddedCounter
}

type paddedCounter struct {
	n atomic.Uint64
	_ [56]byte
}

// NewWorkerChanges returns a counter for workers workers with slots flow
// slots (a power of two; zero or less means 65536).
func NewWorkerChanges(workers, slots int) *WorkerChanges {
	if slots <= 0 || slots&(slots-1) != 0 {
		slots = 1 << 16
	}
	workers = max(workers, 1)
	return &WorkerChanges{
		slots:   make([]atomic.Uint64, slots),
		mask:    uint32(slots - 1),
		changes: make([]paddedCounter, workers),
		seen:    make([]paddedCounter, workers),
	}
}

// Handler returns h wrapped so that every hashed frame is counted.
func (m *WorkerChanges) Handler(h steer.Handler) steer.Handler {
	return func(p *steer.Packet) {
		m.Observe(p.FlowID, p.HashType.IsHash(), p.Worker)
		h(p)
	}
}

// Observe records that worker handled a frame of flowid (hashed says
// whether flowid is a hash at all).
func (m *WorkerChanges) Observe(flowid uint32, hashed bool, worker int) {
	if !hashed || worker < 0 {
		return
	}
	c := worker % len(m.changes)
	m.seen[c].n.Add(1)
	v := uint64(flowid)<<32 | uint64(worker+1)
	old := m.slots[flowid&m.mask].Swap(v)
	if old != 0 && old>>32 == uint64(flowid) && old != v {
		m.changes[c].n.Add(1)
	}
}

// Changes returns the number of worker changes counted so far.
func (m *WorkerChanges) Changes() uint64 { return sum(m.changes) }

// Frames returns the number of hashed frames observed.
func (m *WorkerChanges) Frames() uint64 { return sum(m.seen) }

func sum(cs []paddedCounter) uint64 {
	var n uint64
	for i := range cs {
		n += cs[i].n.Load()
	}
	return n
}
