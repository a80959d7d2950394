package steer

import "github.com/rpsgo/rps/flowtable"

// RFS in this package, and where it differs from Linux.
//
// d.desired (flowtable.Desired) is rps_sock_flow_table: one global table,
// written by SetDesired/ClearDesired from any goroutine. Linux reads it for
// every packet; here a flow's entry keeps the worker it read (Desired,
// DesiredGen) and reads the slot again only after some desired worker has
// changed (Desired.Gen), which saves a cache line per frame while the
// consumers stay put.
// Each producer (an Input, or a worker re-dispatching) has its own
// flowtable.Table, as each receive queue has its rps_dev_flow_table: the
// flow's current worker (rps_dev_flow.cpu) and LastTail (last_qtail), the
// tail position of the producer's last frame of the flow in that worker's
// queue. Unlike Linux, entries are keyed by the full flowid (no two flows
// share one), and an entry whose frame still waits in a pending batch has
// LastTail == tailPending, so it counts as busy and is never evicted.
//
// Moves and hooks. With RFS on, every flow that has an entry moves on its
// own, under its own LastTail, and Config.MoveOut/MoveIn run once per flow
// move (Move.Bucket == -1): for a changed desired worker, and also when a
// reprogrammed or rebalanced bucket takes a flow along (the producer's
// bucket view moves without hooks of its own, since a bucket hook would
// also carry off the state of flows whose consumer keeps them on the old
// worker). Per-flow state so follows every flow exactly, with two limits:
// a flow that got no entry (all sixteen candidate entries busy) is steered
// by the policy and its moves run no hook; and a flow whose entry was
// evicted (more active flows than FlowTableSize) starts over from the
// policy's worker, so state it left on a desired worker stays there. With
// DIRECT dispatch the hooks run in the dispatching goroutine, where the
// handlers run.

// rfs is receive flow steering for one frame: Linux's get_rps_cpu with the
// producer's flow table standing for rps_dev_flow_table and d.desired for
// rps_sock_flow_table. It returns the flow's worker, or ok=false when the
// flow has no entry (the table is full of flows with frames queued), in
// which case the policy decides.
func (p *producer) rfs(c *Classification, bucket uint32, f *Frame, ent **flowtable.Entry) (int, bool) {
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
		return 0, false
	}
	*ent = e
	// Counted here, not at the hand-off, so that frames handled inline
	// (DIRECT) and frames the flow limit drops count too.
	e.Packets++
	e.Bytes += uint64(f.WireLen())
	if inserted {
		// The flow has no frame queued under an entry (an entry is never
		// evicted while it has), but it may have frames queued through the
		// policy path: take the policy's worker and, conservatively, that
		// worker's whole queue as the flow's last position.
		if p.rfsMiss {
			p.flushAll()
		}
		cur := p.policyWorker(c, f, bucket)
		e.Current = int32(cur)
		e.LastTail = d.workers[cur].tail.Load()
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
		if d.cfg.Trace != nil {
			p.dec.Desired = want
		}
	} else if w, current := p.rssView(bucket); current && d.cfg.Policy == PolicyRSS {
		want = w
	} else {
		want = p.policyWorker(c, f, bucket)
	}
	cur := int(e.Current)
	if cur == want {
		return cur, true
	}
	// The last_qtail rule: leave the old worker only once its head has
	// passed this flow's last enqueued frame.
	if p.pending[cur] != nil && p.pending[cur].n > 0 {
		p.flush(cur, p.wait)
	}
	head := d.workers[cur].head.Load()
	if d.cfg.Trace != nil {
		p.dec.Moving, p.dec.MoveFrom, p.dec.MoveTo, p.dec.Head, p.dec.LastTail = true, cur, want, head, e.LastTail
		p.dec.Moved = head >= e.LastTail
	}
	if head < e.LastTail {
		return cur, true
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
	return want, true
}
