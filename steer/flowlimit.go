package steer

import "sync"

// Flow limit, Linux's skb_flow_limit: when a worker's queue is more than half
// full, a ring of the last flowHistoryLen flow buckets enqueued to it is kept,
// and a frame whose flow bucket holds more than half of that history is
// dropped (counted as a flow-limit drop, apart from QDrops), so one elephant
// cannot starve the small flows sharing its worker.
const (
	flowHistoryLen     = 128 // FLOW_LIMIT_HISTORY
	flowHistoryBuckets = 4096
)

type flowHistory struct {
	mu     sync.Mutex
	ring   [flowHistoryLen]uint16
	head   int
	counts [flowHistoryBuckets]uint8
	n      int // entries of ring in use
}

// overLimit reports whether a frame of flowid should be dropped by the flow
// limit. It costs two atomic loads while the queue is at most half full.
func (w *Worker) overLimit(flowid uint32) bool {
	if w.tail.Load()-w.head.Load() <= uint64(w.d.cfg.QLimit/2) {
		return false
	}
	h := &w.flowHist
	h.mu.Lock()
	defer h.mu.Unlock()
	nb := uint16(flowid & (flowHistoryBuckets - 1))
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
