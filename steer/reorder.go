package steer

import "github.com/rpsgo/rps/internal/rfstable"

// The no-reorder rule, Linux's last_qtail (get_rps_cpu in net/core/dev.c).
// Every worker counts the frames put on its queue (tail) and those it has
// handled (head). Each producer remembers where its last frame of each
// bucket and, with RFS, of each flow (Entry.LastTail) sits in its worker's
// queue. A bucket or a flow may leave its worker only once that worker's
// head has passed that position (mayLeave); until then its frames keep
// going to the old worker. Table changes, the rebalancer (through rss) and
// RFS moves (rfs) all go through mayLeave, and moveHooks lets per-flow
// state follow.
//
// A worker's head moves a whole batch at a time (handleBatch), so a
// position inside a batch is worth no more than the batch's end: a bucket
// records only which of the producer's hand-overs to its worker carried
// its last frame (bucketSeq, the hand-over's number), and each hand-over
// records the queue position it ended at (handedOver, in a ring of the
// last tailRing per worker). That costs one store per frame, where a
// position per frame would cost a mark per frame and a pass over every
// batch. An RFS entry, which the slow path alone keeps, takes its frame's
// own position (setTails).

// tailRing is how many hand-overs per worker a producer remembers the
// queue position of. A bucket whose last hand-over is older finds its slot
// taken by a later hand-over, whose position is later: the rule only grows
// stricter for it.
const tailRing = 64

// handedOver records that the producer's next hand-over to worker w ended
// at queue position end (nothing of it queued: the tail before it).
func (p *producer) handedOver(w int, end uint64) {
	p.handOvers[w]++
	p.tailAt[w][p.handOvers[w]%tailRing] = end
}

// lastTail is the queue position in worker w's queue that bucket's last
// frame from this producer is at or before, 0 when none is queued there.
// w's pending batch must have been handed over.
func (p *producer) lastTail(bucket uint32, w int) uint64 {
	seq := p.bucketSeq[bucket]
	if seq == 0 {
		return 0
	}
	return p.tailAt[w][seq%tailRing]
}

// markBucket records, for a frame queued to worker w, that it is the last
// of its bucket there. Only frames queued to the bucket's own worker are
// the bucket's: a frame RFS sent elsewhere sits in another worker's queue,
// which rss must never compare with this one's head.
func (p *producer) markBucket(c *Classification, w int) {
	bucket := c.FlowID & p.d.table.mask
	if c.HashType.IsHash() && uint32(w) == p.bucketWorker[bucket] {
		p.bucketSeq[bucket] = p.pending[w].handOver
	}
}

// viewCurrent reports whether this producer's view of every bucket agrees
// with the indirection table, so that a chunk may be steered by the view
// alone. It reads the table's generation, and the whole table only when
// the generation moved; until the buckets that then differed have all
// moved (rss), each frame checks its own.
func (p *producer) viewCurrent() bool {
	t := p.d.table
	if g := t.gen.Load(); g != p.viewGen {
		p.viewGen, p.differ = g, 0
		for b := range p.bucketWorker {
			if p.bucketWorker[b] != t.ents[b].Load() {
				p.differ++
			}
		}
	}
	return p.differ <= 0
}

// flushTo hands worker cur's pending batch over, so that its frames have
// queue positions to compare: a move's rule reads the positions only
// after it.
func (p *producer) flushTo(cur int) {
	if p.pending[cur] != nil && p.pending[cur].n > 0 {
		p.flush(cur, p.wait)
	}
}

// mayLeave is the rule for one move: whether a bucket or flow whose last
// frame from this producer sits at position lastTail in worker cur's queue
// may now go to worker to. The caller has handed cur's pending batch over
// (flushTo) before reading lastTail. A producer that waits for room in
// cur's queue waits for the move too (waitsForMove).
func (p *producer) mayLeave(cur int, lastTail uint64, to int) bool {
	old := p.d.workers[cur]
	ok := old.passed(lastTail)
	if !ok && lastTail != tailPending && p.waitsForMove(cur) {
		ok = old.awaitPassed(lastTail, p)
	}
	if p.tr != nil {
		p.traceMove(cur, to, old.head.Load(), lastTail, ok)
	}
	return ok
}

// waitsForMove reports whether the producer, held back from a move by its
// last frame still queued on worker cur, waits for cur to handle it
// rather than send the frame after the others. A producer that waits for
// room does (an input whose source can wait, or the worker that reads
// Run's source under HYBRID, for the other workers): it keeps their queues
// full, and a busy flow, whose last frame is then always still queued,
// would never move. Any other keeps the flow where it is for now, as Linux
// does: a live input's queues run empty often, and a worker's own producer
// never waits. So does a producer inside a handler it runs inline (DIRECT,
// HYBRID), whose worker, or whose state's lock, the move may need, and an
// input fed from a handler of this dispatcher, which would wait for its
// own worker.
func (p *producer) waitsForMove(cur int) bool {
	switch {
	case !p.held || p.inHandler > 0 || p.live != nil:
		return false
	case p.self != nil:
		return p.readerWaits && cur != p.self.index
	}
	return p.wait && !p.d.inWorker()
}

// passed reports whether the worker's head has passed queue position
// lastTail: the frame there, and every one before it, has been handled.
func (w *Worker) passed(lastTail uint64) bool { return w.head.Load() >= lastTail }

// awaitPassed waits until the worker's head has passed lastTail, for a move
// of producer p (mayLeave), and reports whether it has: not when Close gave
// up waiting first (awaitSignal, as for room); the worker wakes its
// waiters after every batch while a move waits (next, drainQueue).
func (w *Worker) awaitPassed(lastTail uint64, p *producer) bool {
	w.mu.Lock()
	for !w.passed(lastTail) && !w.d.abort.Load() {
		w.moveWaits++
		w.awaitSignal(p)
		w.moveWaits--
	}
	ok := w.passed(lastTail)
	w.mu.Unlock()
	return ok
}

// moveHooks queues MoveOut on the old worker and MoveIn on the new one.
func (p *producer) moveHooks(m Move) {
	d := p.d
	if !d.hooks {
		return
	}
	in := &control{m: m, ready: make(chan struct{})}
	out := &control{m: m, out: true, peer: in}
	if d.cfg.Dispatch == DispatchDirect && p.stateHeld == nil {
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

// tailMarks says, for each frame of a pending batch, which RFS flow entry
// takes its queue position as its last (nil for none).
type tailMarks struct {
	ent [BatchSize]*rfstable.Entry
}

// setTails records the queue positions of the RFS entries of the k frames
// marked in m, of which the first n were queued from position base on. An
// entry whose last frame was cut off takes the tail after the queued ones,
// which no frame of the flow queued here comes after.
func (p *producer) setTails(m *tailMarks, k int, base uint64, n int) {
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
