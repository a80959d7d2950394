package steer

import (
	"math"
	"unsafe"

	"github.com/rpsgo/rps/internal/rfstable"
)

// handOff is step 4, netisr_dispatch_src: the frame, steered to worker w,
// is handled inline (DIRECT; HYBRID when this producer is w's own and w
// has nothing queued), dropped by the flow limit, or queued to w (queue).
func (p *producer) handOff(f *Frame, c *Classification, ref *batchRef, w int, ent *rfstable.Entry, depth uint8) {
	d := p.d
	mode := d.cfg.Dispatch
	inline := mode == DispatchDirect || (mode == DispatchHybrid && p.self != nil && p.self.index == w && p.idle(depth))
	if inline && p.stateHeld != nil && p.stateHeld != p.inlineWorker(w) {
		// A handler holding its worker's state lock re-dispatched to
		// another shared state: queue the frame, so that no goroutine
		// waits for a second state lock while it holds one.
		inline = false
	}
	drop := !inline && d.cfg.Queue.FlowLimit && d.workers[w].overLimit(c.FlowID, p.limit, p.pendingLen(w))
	if p.tr != nil {
		p.traceHandOff(w, inline, drop, ent != nil)
	}
	switch {
	case inline && d.abort.Load():
		// Close gave up waiting while this Dispatch ran handlers inline:
		// the rest of its frames are left, as a worker leaves the rest of
		// its batch.
		d.workers[w].closeDrops.Add(1)
		if ref != nil {
			ref.done(1)
		}
	case inline:
		p.inline(f, c, ref, w, depth, mode)
	case drop:
		d.workers[w].flowDrops.Add(1)
		if ref != nil {
			ref.done(1)
		}
	default:
		p.queue(f, c, ref, w, ent, depth)
	}
}

// queue puts the frame in the batch pending for worker w, which is handed
// over (flush) when full, and at once for a re-dispatch, which never waits.
func (p *producer) queue(f *Frame, c *Classification, ref *batchRef, w int, ent *rfstable.Entry, depth uint8) {
	b := p.pending[w]
	if b == nil {
		b = p.newPending(w)
	}
	p.fill(b.slot(ref), f, c, ref, w, depth)
	p.markBucket(c, w)
	p.marks[w].ent[b.n] = ent
	b.n++
	if ent != nil {
		// The frame has no queue position until its batch is flushed; until
		// then the entry counts as busy, so no Lookup evicts it and no move
		// skips ahead of the frame (see setTails and the busy check).
		ent.LastTail = tailPending // rfs counted the frame and Lookup set LastSeen
	}
	if depth > 0 {
		p.flush(w, false) // a re-dispatch never waits
	} else if b.n == p.batchCap {
		p.flush(w, p.wait)
	}
}

// queuePlain is steps 3 and 4 for a chunk on the plain path (plainPath):
// a hashed frame whose bucket the table has not moved goes to the bucket's
// worker and into the batch pending for it, as queue would put it; any
// other frame goes through selectWorker and handOff. The table is read
// once for the chunk (viewCurrent): while no bucket is moving, the
// producer's view of it is the answer, and only otherwise does each frame
// check its bucket (rssView). All pending
// batches hold frames of ref alone: dispatch flushes them before it
// returns.
func (p *producer) queuePlain(chunk []Frame, cls []Classification, ref *batchRef) {
	stable := p.viewCurrent()
	for i := range chunk {
		f, r := &chunk[i], &p.res[i]
		bucket := r.flowID & p.mask
		w, current := int(p.bucketWorker[bucket]), stable
		if !stable {
			w, current = p.rssView(bucket)
		}
		if !current || !r.hash.IsHash() {
			c := p.classification(cls, i)
			w, ent := p.selectWorker(f, c)
			p.handOff(f, c, ref, w, ent, 0)
			continue
		}
		b := p.pending[w]
		if b == nil {
			b = p.newPending(w)
			b.ref, b.mixed = ref, false
		}
		pkt := &b.pkts[b.n]
		p.fillFrame(pkt, f, ref, w, 0)
		pkt.FlowID, pkt.HashType, pkt.Reason, pkt.keyed = r.flowID, r.hash, r.reason, false
		p.bucketSeq[bucket] = b.handOver
		b.n++
		if b.n == p.batchCap {
			p.flush(w, p.wait)
		}
	}
}

// newPending starts the batch pending for worker w.
func (p *producer) newPending(w int) *pbatch {
	b := p.stock.get()
	b.handOver = p.handOvers[w] + 1
	p.pending[w] = b
	return b
}

// inline runs the handler in this goroutine: DIRECT dispatch, or HYBRID
// when this producer is the selected worker's own. A worker accounts the
// frame to itself; an input to the selected workstream.
func (p *producer) inline(f *Frame, c *Classification, ref *batchRef, w int, depth uint8, mode DispatchMode) {
	ww := p.inlineWorker(w)
	// One scratch packet per nesting level: a handler may re-dispatch
	// inline while its own packet is still in use.
	pkt := &p.scratch[min(int(depth), len(p.scratch)-1)]
	if depth > 0 {
		// The handler running now, which re-dispatched, keeps the key it
		// may have asked for (Packet.Key): the inner frame's handler uses
		// the same goroutine's key cache.
		outerPkt, outerKey := p.keyPkt, p.keyVal
		defer func() { p.keyPkt, p.keyVal = outerPkt, outerKey }()
	}
	p.fillInline(pkt, f, c, ref, ww.index, depth)
	took := p.lockState(ww)
	p.inHandler++
	ok := ww.call(pkt)
	p.inHandler--
	p.unlockState(ww, took)
	switch {
	case mode == DispatchDirect:
		p.direct[ww.index]++
		if !ok {
			p.directPanics[ww.index]++
		}
	case ok:
		ww.hdispatched.Add(1)
		ww.handled.Add(1)
	default:
		ww.hdispatched.Add(1)
	}
	if ref != nil {
		ref.done(1)
	}
}

// flushDirect publishes the counts of frames handled inline: dispatched,
// and handled unless their handler panicked (counted by the worker).
func (p *producer) flushDirect() {
	for w, n := range p.direct {
		if n > 0 {
			p.d.workers[w].dispatched.Add(n)
			p.d.workers[w].handled.Add(n - p.directPanics[w])
			p.direct[w], p.directPanics[w] = 0, 0
		}
	}
}

// fill writes the Packet of a classified frame for worker w. A handler
// that asks for the key (Packet.Key) gets it derived in its goroutine
// (fillInline hands over a key the classification already has).
func (p *producer) fill(pkt *Packet, f *Frame, c *Classification, ref *batchRef, w int, depth uint8) {
	p.fillFrame(pkt, f, ref, w, depth)
	pkt.FlowID, pkt.HashType, pkt.Reason = c.FlowID, c.HashType, c.Reason
	pkt.keyed = false
}

// fillInline is fill for a packet this producer's goroutine hands to the
// handler itself.
func (p *producer) fillInline(pkt *Packet, f *Frame, c *Classification, ref *batchRef, w int, depth uint8) {
	p.fill(pkt, f, c, ref, w, depth)
	pkt.Worker, pkt.prod = w, p
	if !c.keyless {
		p.keyPkt, p.keyVal, pkt.keyed = pkt, c.Key, true
	}
}

// fillFrame writes what a Packet takes from the frame and the producer. A
// queued packet's Worker and prod are its worker's, which the worker
// writes as it takes the packet (handleFrom): the producer, the one
// goroutine that cannot be spread, writes less.
func (p *producer) fillFrame(pkt *Packet, f *Frame, ref *batchRef, w int, depth uint8) {
	// Field by field: a composite literal would build the packet on the
	// stack and copy it with a bulk write barrier, twice the cost.
	pkt.Data, pkt.frame, pkt.frameLen = f.Data, unsafe.SliceData(f.Data), int32(min(len(f.Data), math.MaxInt32))
	pkt.Timestamp = f.Timestamp
	pkt.WireLen = f.wireLen()
	pkt.IfIndex = f.IfIndex
	pkt.InputID = p.source
	pkt.ref = ref
	pkt.depth = depth
	pkt.vlan, pkt.hasVLAN = f.VLAN, f.HasVLAN
	pkt.Checksum = f.Checksum
}

// flush hands the pending batch for worker w over to its queue. With wait
// (blocking mode) it waits for room; a worker's own producer never waits, so
// workers cannot deadlock on each other's queues.
func (p *producer) flush(w int, wait bool) {
	b := p.pending[w]
	if b == nil || b.n == 0 {
		return
	}
	p.pending[w] = nil
	var waiter *producer
	if wait && (p.self == nil || p.readerWaits && w != p.self.index) {
		waiter = p
	}
	// The queue positions are written once enqueue has told where b went,
	// from marks (b belongs to the worker by then), outside its lock.
	k := b.n
	base, n := p.d.workers[w].enqueue(b, waiter, p.limit)
	p.handedOver(w, base+uint64(n))
	p.setTails(&p.marks[w], k, base, n)
}

func (p *producer) flushAll() {
	p.rfsMiss = false
	for w := range p.pending {
		if p.pending[w] != nil {
			p.flush(w, p.wait)
		}
	}
}

// redispatch steers a frame a handler produced (a decapsulated inner
// frame). It never blocks: the frame is queued, handled inline (HYBRID, same
// worker, empty queue; or DIRECT), or dropped and counted.
// The new frame's packet carries source, the re-dispatching packet's source
// id.
func (p *producer) redispatch(f *Frame, ref *batchRef, depth uint8, from *Worker, source int) error {
	if depth > maxRedispatchDepth {
		if ref != nil {
			ref.done(1)
		}
		// Handed in, then dropped: counted in Frames as in the drops.
		if p.held {
			p.frames++
		} else {
			p.mu.Lock()
			p.frames++
			p.mu.Unlock()
		}
		from.redispatchDrops.Add(1)
		return ErrRedispatchDepth
	}
	if p.held { // called from a handler run inline by this producer
		outer := p.source
		p.source = source
		p.steer(f, ref, depth)
		p.source = outer
		return nil
	}
	p.prepare()
	p.lockers.Lock()
	p.source = source
	p.steer(f, ref, depth)
	p.source = p.id
	p.flushDirect()
	p.lockers.Unlock()
	return nil
}

// idle reports whether this producer's own worker, selected by HYBRID, is
// idle, so that the frame may be handled inline (netisr_dispatch_src: the
// workstream is neither running nor scheduled). A worker that reads the
// dispatcher's source (readerWaits) and is not inside a handler (depth 0)
// makes itself idle first: it handles what is queued to it, in order, as
// its next wake-up would. Within a handler it only looks.
func (p *producer) idle(depth uint8) bool {
	w := p.self
	if !w.queuedBatches() {
		return true
	}
	if depth > 0 || !p.readerWaits {
		return false
	}
	w.drainQueue()
	return true
}

// inlineWorker is the worker whose handler and state a frame selected for
// worker w runs with inline: a worker's own, for its own producer, else w.
func (p *producer) inlineWorker(w int) *Worker {
	if p.self != nil {
		return p.self
	}
	return p.d.workers[w]
}
