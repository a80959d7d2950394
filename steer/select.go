package steer

import "github.com/rpsgo/rps/internal/rfstable"

// selectWorker is step 3, netisr_select_cpuid: the worker for a classified
// frame. A frame with no hash goes by SOURCE; RFS, when on, is the first
// stage for hashed frames (rfs); then the policy decides. It also returns
// the flow's RFS entry, if it has one.
func (p *producer) selectWorker(f *Frame, c *Classification) (int, *rfstable.Entry) {
	bucket := c.FlowID & p.d.table.mask
	if p.tr != nil {
		p.traceSelect(f, c, bucket)
	}
	if !c.HashType.IsHash() {
		return p.sourceWorker(f), nil
	}
	if p.flows != nil {
		if w, ent := p.rfs(c, bucket, f); ent != nil {
			return w, ent
		}
	}
	w := p.policyWorker(c, f, bucket)
	if p.flows != nil {
		// No RFS entry: the frame's hand-over is remembered, for the
		// flow's entry when it gets one (missTail).
		p.missSeq[w] = p.handOvers[w] + 1
	}
	return w, nil
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
		w, ok := p.callCPUFunc(c)
		if !ok {
			return p.sourceWorker(f)
		}
		if w < 0 || w >= n {
			// netisr_get_cpuid takes a CPU id modulo the thread count;
			// counted, since it is most likely a bug of the CPUFunc.
			d.cpuRemapped.Add(1)
			w = (w%n + n) % n
		}
		return w
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
func (p *producer) rssView(bucket uint32) (w int, current bool) {
	v := p.bucketWorker[bucket]
	return int(v), v == p.d.table.ents[bucket].Load()
}

// rss is rss_hash2cpuid's lookup (table[bucket]) with the no-reorder rule: the bucket
// follows a reprogrammed table only once its old worker has handled this
// producer's last frame of the bucket (mayLeave).
func (p *producer) rss(bucket uint32) int {
	cur, current := p.rssView(bucket)
	if current {
		return cur
	}
	want := int(p.d.table.ents[bucket].Load())
	if cur == want { // the table moved the bucket back meanwhile
		return cur
	}
	p.flushTo(cur)
	if !p.mayLeave(cur, p.lastTail(bucket, cur), want) {
		return cur // frames of this bucket still queued on the old worker
	}
	p.bucketWorker[bucket] = uint32(want)
	p.bucketSeq[bucket] = 0 // nothing of it queued on want yet
	p.differ--
	p.bucketMoves++
	if p.flows == nil {
		// With RFS on, every flow with an entry moves on its own, under its
		// own last_qtail, with its own hooks (rfs): a bucket hook would also
		// carry off the state of flows whose consumer keeps them on the old
		// worker.
		p.moveHooks(Move{Bucket: int(bucket), Mask: p.d.table.mask, From: cur, To: want})
	}
	return want
}

// callCPUFunc calls Config.CPUFunc under the callback rule: a panic is a
// CPUFunc that declined.
func (p *producer) callCPUFunc(c *Classification) (w int, ok bool) {
	if !p.d.guard(cbCPUFunc, -1, func() { w, ok = p.d.cfg.CPUFunc(c.FlowID, c.HashType) }) {
		return 0, false
	}
	return w, ok
}
