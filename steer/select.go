package steer

import "github.com/rpsgo/rps/flowtable"

// selectWorker is netisr_select_cpuid: it picks the worker by policy, with
// SOURCE for frames that have no hash, then lets RFS override it.
func (p *producer) selectWorker(c *Classification, f *Frame, bucket uint32, ent **flowtable.Entry) int {
	if !c.HashType.IsHash() {
		return p.sourceWorker(f)
	}
	if p.flows != nil {
		if w, ok := p.rfs(c, bucket, f, ent); ok {
			return w
		}
	}
	return p.policyWorker(c, f, bucket)
}

// policyWorker applies the configured policy to a hashed frame.
func (p *producer) policyWorker(c *Classification, f *Frame, bucket uint32) int {
	d := p.d
	n := len(d.workers)
	switch d.cfg.Policy {
	case PolicyFlow:
		return int(c.FlowID % uint32(n))
	case PolicySource:
		return p.sourceWorker(f)
	case PolicyCPU:
		if w, ok := d.cfg.CPUFunc(c.FlowID, c.HashType); ok && w >= 0 && w < n {
			return w
		}
		return p.sourceWorker(f)
	}
	return p.rss(bucket)
}

// sourceWorker is NETISR_POLICY_SOURCE: (source id + ingress interface) %
// workers. Workers re-dispatching use their own index as the source.
func (p *producer) sourceWorker(f *Frame) int {
	id := p.id
	if p.self != nil {
		id = p.self.index
	}
	s := id + f.IfIndex
	if s < 0 {
		s = -s
	}
	return s % len(p.d.workers)
}

// rssView returns this producer's view of bucket's worker, and whether the
// indirection table still agrees with it: then the view is rss's answer.
// It is small enough to inline, so the hot loops call rss only for a bucket
// the table has moved.
func (p *producer) rssView(bucket uint32) (w int, current bool) {
	v := p.bucketWorker[bucket]
	return int(v), v == p.d.table.ents[bucket].Load()
}

// rss is rss_m2cpuid with the no-reorder rule: the bucket follows the
// indirection table only once its old worker has handled this producer's
// last frame of the bucket.
func (p *producer) rss(bucket uint32) int {
	cur, current := p.rssView(bucket)
	if current {
		return cur
	}
	want := p.d.table.ents[bucket].Load()
	if uint32(cur) == want { // the table moved the bucket back meanwhile
		return cur
	}
	if p.pending[cur] != nil && p.pending[cur].n > 0 {
		p.flush(cur, p.wait) // its frames need queue positions before the check
	}
	old := p.d.workers[cur]
	head := old.head.Load()
	if p.d.cfg.Trace != nil {
		p.dec.Moving, p.dec.MoveFrom, p.dec.MoveTo, p.dec.Head, p.dec.LastTail = true, cur, int(want), head, p.bucketTail[bucket]
		p.dec.Moved = head >= p.bucketTail[bucket]
	}
	if head < p.bucketTail[bucket] {
		return cur // frames of this bucket still queued on the old worker
	}
	p.bucketWorker[bucket] = want
	p.bucketMoves++
	if p.flows == nil {
		// With RFS on, every flow with an entry moves on its own, under its
		// own last_qtail, with its own hooks (rfs): a bucket hook would also
		// carry off the state of flows whose consumer keeps them on the old
		// worker.
		p.moveHooks(Move{Bucket: int(bucket), Mask: p.d.table.mask, From: cur, To: int(want)})
	}
	return int(want)
}
