package steer

import "sync"

// Flow limit, Linux's skb_flow_limit (net/core/dev.c, CONFIG_NET_FLOW_LIMIT).
//
// While a worker's queue holds at least half its qlimit, every frame steered
// to it is recorded in a ring of the last flowHistoryLen flow buckets
// (FLOW_LIMIT_HISTORY, 128), and a frame whose flow bucket then holds more
// than half of that ring is dropped: counted as a flow-limit drop
// (WorkstreamStats.FlowLimitDrops), apart from QueueDrops. One elephant can so
// take at most about half of a backed-up worker, and the small flows that
// share the worker keep finding room in its queue instead of being tail
// dropped with the elephant.
//
// As in Linux's enqueue_to_backlog (every release; checked in 5.15 to
// 6.18), the queue-full test comes first: a frame that finds the queue full
// is never recorded in the history; it is tail dropped (QueueDrops) or, for an
// input that waits, waits for room. A frame the flow limit drops is
// recorded. Below half full nothing is recorded. The queue length is the
// frames queued to the worker plus those of this input's batch still
// pending for it, so the check counts each frame where it will stand,
// although frames travel in batches. The flow bucket is hash_32(flowid, 12),
// the golden-ratio multiplicative hash over 4096 buckets
// (flow_limit_table_len), as Linux has done since 6.16; up to 6.15 Linux
// took the hash's low 12 bits, which here would be the bits the RSS bucket
// already fixed for every flow on one worker. Unlike Linux, whose history
// belongs to the CPU doing the enqueue, each worker keeps its own history,
// so several inputs feeding one worker share it; and Linux counts a
// flow-limit drop in softnet_stat's dropped as well as in flow_limit_count,
// where here it is in FlowLimitDrops alone.
const (
	flowHistoryLen     = 128 // FLOW_LIMIT_HISTORY
	flowHistoryLog     = 12  // log2 of flow_limit_table_len's default, 4096
	flowHistoryBuckets = 1 << flowHistoryLog
	goldenRatio32      = 0x61C88647 // GOLDEN_RATIO_32, the hash_32 multiplier
)

type flowHistory struct {
	mu     sync.Mutex
	ring   [flowHistoryLen]uint16
	head   int
	counts [flowHistoryBuckets]uint8
	n      int // entries of ring in use
}

// flowLimitBucket is Linux's hash_32(hash, bits) with bits = 12.
func flowLimitBucket(flowid uint32) uint16 {
	return uint16(flowid * goldenRatio32 >> (32 - flowHistoryLog))
}

// overLimit reports whether a frame of flowid should be dropped by the flow
// limit, for a producer that fills the queue up to limit and holds pending
// frames for this worker in its batch. A frame that finds the queue full is
// left to the full queue's rule, unrecorded. It costs two atomic loads while
// the queue is less than half full.
func (w *Worker) overLimit(flowid uint32, limit, pending int) bool {
	head := w.head.Load() // before tail: head never passes a later tail
	qlen := w.tail.Load() - head + uint64(pending)
	if qlen < uint64(limit>>1) || qlen >= uint64(limit) {
		return false
	}
	return w.flowHist.record(flowLimitBucket(flowid))
}

// pendingLen is how many frames this producer holds for worker w, not yet
// handed over.
func (p *producer) pendingLen(w int) int {
	if b := p.pending[w]; b != nil {
		return b.n
	}
	return 0
}

// record adds a frame of flow bucket nb to the history and reports whether
// nb now holds more than half of it.
func (h *flowHistory) record(nb uint16) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == flowHistoryLen {
		h.counts[h.ring[h.head]]--
	} else {
		h.n++
	}
	h.ring[h.head] = nb
	h.head = (h.head + 1) % flowHistoryLen
	h.counts[nb]++
	return h.counts[nb] > flowHistoryLen/2
}
