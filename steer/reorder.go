package steer

import "github.com/rpsgo/rps/internal/rfstable"

// The no-reorder rule, Linux's last_qtail (get_rps_cpu in net/core/dev.c).
// Every worker counts the frames put on its queue (tail) and those it has
// handled (head). Each producer remembers, for each bucket (bucketTail) and,
// with RFS, for each flow (Entry.LastTail), the tail position of the last
// frame it queued there: setTails writes them when a batch is handed over.
// A bucket or a flow may leave its worker only once that worker's head has
// passed the position (mayLeave); until then its frames keep going to the
// old worker. Table changes, the rebalancer (through rss) and RFS moves
// (rfs) all go through mayLeave, and moveHooks lets per-flow state follow.

// mayLeave is the rule for one move: whether a bucket or flow whose last
// frame from this producer sits at position *lastTail in worker cur's
// queue may now go to worker to. cur's pending frames are handed over
// first, so that they have queue positions to compare, and only then is
// *lastTail read: the hand-over is what writes the positions of the
// pending frames (setTails), and a position read before it would let the
// move skip ahead of them.
func (p *producer) mayLeave(cur int, lastTail *uint64, to int) bool {
	if p.pending[cur] != nil && p.pending[cur].n > 0 {
		p.flush(cur, p.wait)
	}
	old := p.d.workers[cur]
	tail := *lastTail
	ok := old.passed(tail)
	if p.tr != nil {
		p.traceMove(cur, to, old.head.Load(), tail, ok)
	}
	return ok
}

// passed reports whether the worker's head has passed queue position
// lastTail: the frame there, and every one before it, has been handled.
func (w *Worker) passed(lastTail uint64) bool { return w.head.Load() >= lastTail }

// moveHooks queues MoveOut on the old worker and MoveIn on the new one.
func (p *producer) moveHooks(m Move) {
	d := p.d
	if !d.hooks {
		return
	}
	in := &control{m: m, ready: make(chan struct{})}
	out := &control{m: m, out: true, peer: in}
	if d.cfg.Dispatch == Direct && p.stateHeld == nil {
		// DIRECT runs handlers in this goroutine, not in the workers: run
		// the hooks here too, before the moved flow's next frame, each
		// under its state's lock. (A re-dispatch from a handler, which
		// holds its own state's lock, queues them: its frame is queued too,
		// after them.)
		d.workers[m.From].control(p, out)
		d.workers[m.To].control(p, in)
		return
	}
	// A worker that has exited (Close ran out of time) takes no control
	// item: then MoveIn must not wait for a MoveOut that never runs.
	if !d.workers[m.From].enqueueControl(out) {
		in.skip = true
		close(in.ready)
	}
	d.workers[m.To].enqueueControl(in)
}

// tailPending marks a flow entry whose last frame waits in a pending batch.
const tailPending = ^uint64(0)

// tailMarks says, for each frame of a pending batch, which bucket and
// flow entry take its queue position as their last (noBucket and nil for
// none).
type tailMarks struct {
	bucket [BatchSize]uint32
	ent    [BatchSize]*rfstable.Entry
}

// noBucket marks a frame whose position no bucket records.
const noBucket = ^uint32(0)

// bucketMark is the bucket a frame queued to worker w records its position
// for. Only frames queued to the bucket's own worker are the bucket's
// there: a frame RFS sent elsewhere has a position in another worker's
// queue, which rss must never compare with this one's head.
func (p *producer) bucketMark(c *Classification, w int) uint32 {
	bucket := c.FlowID & p.d.table.mask
	if c.HashType.IsHash() && uint32(w) == p.bucketWorker[bucket] {
		return bucket
	}
	return noBucket
}

// setTails records the queue positions of the k frames marked in m, of
// which the first n were queued from position base on. An RFS entry whose
// last frame was cut off takes the tail after the queued ones, which no
// frame of the flow queued here comes after.
func (p *producer) setTails(m *tailMarks, k int, base uint64, n int) {
	for i := 0; i < n; i++ {
		if bk := m.bucket[i]; bk != noBucket {
			p.bucketTail[bk] = base + uint64(i) + 1
		}
	}
	if p.flows == nil {
		return
	}
	for i := 0; i < k; i++ {
		e := m.ent[i]
		if e == nil {
			continue
		}
		m.ent[i] = nil
		if i < n {
			e.LastTail = base + uint64(i) + 1
		} else if e.LastTail == tailPending {
			e.LastTail = base + uint64(n)
		}
	}
}
