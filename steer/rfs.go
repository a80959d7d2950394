package steer

import "github.com/rpsgo/rps/internal/rfstable"

// RFS in this package, and where it differs from Linux.
//
// d.desired (rfstable.Desired) is rps_sock_flow_table: one global table,
// written by SetDesired/ClearDesired from any goroutine. Linux reads it for
// every packet; here a flow's entry keeps the worker it read (Desired,
// DesiredGen) and reads the slot again only after some desired worker has
// changed (Desired.Gen), which saves a cache line per frame while the
// consumers stay put.
// Each producer (an Input, or a worker re-dispatching) has its own
// rfstable.Table, as each receive queue has its rps_dev_flow_table: the
// flow's current worker (rps_dev_flow.cpu) and LastTail (last_qtail), the
// tail position of the producer's last frame of the flow in that worker's
// queue. Unlike Linux, entries are keyed by the full flowid (no two flows
// share one), and an entry whose frame still waits in a pending batch has
// LastTail == tailPending, so it counts as busy and is never evicted.
//
// Moves and hooks. With RFS on, every flow that has an entry moves on its
// own, under its own LastTail, and a Mover state's MoveOut and MoveIn run
// once per flow move (Move.Bucket == -1): for a changed desired worker, and also when a
// reprogrammed or rebalanced bucket takes a flow along (the producer's
// bucket view moves without hooks of its own, since a bucket hook would
// also carry off the state of flows whose consumer keeps them on the old
// worker). Per-flow state so follows every flow exactly, with three
// limits: a flow that got no entry (all sixteen candidate entries busy) is
// steered by the policy and its moves run no hook; a flow whose entry was
// evicted (more active flows than RFSConfig.TableSize) starts over from the
// policy's worker, so state it left on a desired worker stays there; and
// the table is an input's, so a flow whose frames come through several
// inputs has an entry in each, moved by each on its own, and its state can
// be split between the workers they moved it to at different times. With
// DIRECT dispatch the hooks run in the dispatching goroutine, where the
// handlers run.

// rfs is receive flow steering for one frame, the first stage of
// selectWorker: Linux's get_rps_cpu with the producer's flow table standing
// for rps_dev_flow_table and d.desired for rps_sock_flow_table. It returns
// the flow's worker and entry, or a nil entry when the flow has none (the
// table is full of flows with frames queued), in which case the policy
// decides.
func (p *producer) rfs(c *Classification, bucket uint32, f *Frame) (int, *rfstable.Entry) {
	d := p.d
	flowid := c.FlowID
	now := f.Timestamp.UnixNano()
	e, inserted := p.flows.Hit(flowid, p.hint, now), false
	p.hint = 0
	if e == nil {
		e, inserted = p.flows.Lookup(flowid, now)
	}
	if e == nil {
		p.rfsMiss = true
		return 0, nil
	}
	// Counted here, not at the hand-off, so that frames handled inline
	// (DIRECT) and frames the flow limit drops count too.
	e.Packets++
	e.Bytes += uint64(f.wireLen())
	if inserted {
		// The flow has no frame queued under an entry (an entry is never
		// evicted while it has), but it may have frames queued through the
		// policy path, steered while the table had no entry to give it:
		// take the policy's worker and, as the flow's last position, that
		// of the last frame steered there without an entry (missTail).
		if p.rfsMiss {
			p.flushAll()
		}
		cur := p.policyWorker(c, f, bucket)
		e.Current = int32(cur)
		e.LastTail = p.missTail(cur)
	}
	// The desired worker: the entry's copy while no desired worker has
	// changed since it was read (Desired.Gen), else the flow's slot.
	if gen := d.desired.Gen(); e.DesiredGen != gen {
		w, ok := d.desired.Get(flowid)
		if !ok || w >= len(d.workers) {
			w = -1
		}
		e.Desired, e.DesiredGen = int32(w), gen
	}
	want := int(e.Desired)
	if want >= 0 {
		if p.tr != nil {
			p.tr.desired = want
		}
	} else if w, current := p.rssView(bucket); current && d.cfg.Policy == PolicyRSS {
		want = w
	} else {
		want = p.policyWorker(c, f, bucket)
	}
	cur := int(e.Current)
	if cur == want {
		return cur, e
	}
	p.flushTo(cur)
	if !p.mayLeave(cur, e.LastTail, want) {
		return cur, e
	}
	e.Current = int32(want)
	// LastTail named a position in the old worker's queue; nothing of the
	// flow is queued on the new one yet. (The frame being steered sets it to
	// tailPending when it is queued; when it is dropped by the flow limit or
	// handled inline it stays 0, so a stale position on another worker can
	// never hold the next move back or let it skip ahead.)
	e.LastTail = 0
	p.flowMoves++
	p.moveHooks(Move{Bucket: -1, Mask: d.table.mask, FlowID: flowid, From: cur, To: want})
	return want, e
}

// missTail is a position in worker w's queue at or after that of every
// frame this producer steered to w without an RFS entry (selectWorker),
// 0 if there was none. Pending batches must have been handed over.
func (p *producer) missTail(w int) uint64 {
	seq := min(p.missSeq[w], p.handOvers[w]) // a later hand-over only makes it later
	if seq == 0 {
		return 0
	}
	return p.tailAt[w][seq%tailRing]
}

// prefetchFlows starts the loads RFS will need for a classified chunk.
// Each flow costs three cache misses: its desired slot, its flow-table set,
// then its entry, which can be found only once the set's tags are in. So
// the slots and sets of the whole chunk are prefetched, then the entries,
// and only then are the frames steered: the misses overlap instead of
// following one another. Finding the entries to prefetch is the flow
// table's search; its hints (p.hints) let rfs skip doing it again.
func (p *producer) prefetchFlows(cls []Classification) {
	ids := p.ids[:len(cls)]
	for i := range cls {
		ids[i] = cls[i].FlowID // unhashed frames' are prefetched for nothing
	}
	// The entries keep their flows' desired workers until one changes: the
	// slots are needed only after a change, until each flow has read its
	// slot again (and for new flows). Those reads are taken as done after
	// as many frames as the flow table has entries.
	if g := p.d.desired.Gen(); g != p.desiredGen {
		p.desiredGen, p.sinceChange = g, 0
	}
	if p.sinceChange < p.flows.Capacity() {
		p.sinceChange += len(cls)
		p.d.desired.Prefetch(ids)
	}
	p.flows.Prefetch(ids)
	p.flows.PrefetchEntries(ids, p.hints[:len(cls)])
}
