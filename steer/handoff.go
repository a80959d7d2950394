package steer

import (
	"math"
	"sync"
	"unsafe"
)

// inline runs the handler in this goroutine: DIRECT dispatch, or HYBRID
// when this producer is the selected worker's own. A worker accounts the
// frame to itself; an input to the selected workstream.
func (p *producer) inline(f *Frame, c *Classification, ref *batchRef, w int, depth uint8, mode DispatchMode) {
	ww := p.d.workers[w]
	if p.self != nil {
		ww = p.self
	}
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
	ok := ww.call(pkt)
	switch {
	case mode == Direct:
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
	pkt.prod = p
	if !c.keyless {
		p.keyPkt, p.keyVal, pkt.keyed = pkt, c.Key, true
	}
}

// fillFrame writes what a Packet takes from the frame and the producer.
func (p *producer) fillFrame(pkt *Packet, f *Frame, ref *batchRef, w int, depth uint8) {
	// Field by field: a composite literal would build the packet on the
	// stack and copy it with a bulk write barrier, twice the cost.
	pkt.Data, pkt.frame, pkt.frameLen = f.Data, unsafe.SliceData(f.Data), int32(min(len(f.Data), math.MaxInt32))
	pkt.Timestamp = f.Timestamp
	pkt.Length = f.WireLen()
	pkt.IfIndex = f.IfIndex
	pkt.Source = p.source
	pkt.Worker = w
	pkt.ref = ref
	pkt.prod = p.d.workers[w].prod
	pkt.depth = depth
	pkt.vlan, pkt.hasVLAN = f.VLAN, f.HasVLAN
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
	wait = wait && p.self == nil
	var unlock sync.Locker
	if wait {
		unlock = p.lockers
	}
	// The queue positions are written once enqueue has told where b went,
	// from marks (b belongs to the worker by then), outside its lock.
	k := b.n
	base, n := p.d.workers[w].enqueue(b, wait, p.limit, unlock)
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
	if depth > MaxRedispatchDepth {
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
	p.ensureFlows()
	p.lockers.Lock()
	p.source = source
	p.steer(f, ref, depth)
	p.source = p.id
	p.flushDirect()
	p.lockers.Unlock()
	return nil
}
