package steer

import (
	"math"
	"math/bits"
	"sync"
	"unsafe"

	"github.com/rpsgo/rps/flowtable"
	"github.com/rpsgo/rps/hash"
)

// producer is the state of one feeder of the dispatcher: an Input, or a
// worker re-dispatching from its handlers. It plays the part of one receive
// queue in Linux's RPS: it has its own view of where each bucket (and, with
// RFS, each flow) currently goes and of the queue position of its last frame
// there (rps_dev_flow's cpu and last_qtail), so it can move them without
// reordering. Only its goroutine changes it; mu lets Stats read it.
type producer struct {
	d    *Dispatcher
	id   int
	self *Worker // the worker that owns this producer, nil for an Input

	mu      sync.Mutex
	pending []*pbatch // per worker, not yet handed over
	cls     Classification

	// RSS view: bucket -> worker this producer sends it to, and the queue
	// position of its last frame there.
	bucketWorker []uint32
	bucketTail   []uint64

	flows       *flowtable.Table         // RFS, nil when off
	clsBuf      []Classification         // steerRFS's and steerEach's chunk
	flowBuf     [chunkLen]flowResult     // steerQueued's chunk
	fast        fastChunk                // the chunk's frames on the IPv4 fast path
	ids         [chunkLen]uint32         // steerRFS's flowids to prefetch
	hints       [chunkLen]flowtable.Hint // steerRFS's slots found while prefetching
	hint        flowtable.Hint           // the slot rfs may find its flow in, 0 if none
	rfsMiss     bool                     // a flow went without an entry since the last flush
	desiredGen  uint64                   // the desired table's Gen that steerRFS last saw
	sinceChange int                      // frames steerRFS has steered since desiredGen changed

	counts
	// keyPkt and keyVal keep the key Packet.Key last derived (or
	// fillInline handed over) for a packet whose handler runs in this
	// producer's goroutine: this is the worker's own producer for the
	// packets it handles, an input's for those it runs inline. A nested
	// inline handler (a re-dispatch) gives the outer one its key back.
	keyPkt *Packet
	keyVal FlowKey

	direct       []uint64 // frames handled inline, per worker, since the last flush
	directPanics []uint64 // of which their handler panicked
	scratch      [MaxRedispatchDepth + 2]Packet
	dec          Decision // filled while Config.Trace is set
	batchCap     int
	wait         bool        // a full queue holds this producer back (Config.Queue)
	limit        int         // the queue limit this producer fills to
	source       int         // the source id its packets carry: id, or a re-dispatched packet's
	stock        batchStock  // the batches this producer fills
	marks        []tailMarks // per worker: what each pending frame's queue position is recorded for
	lockers      lockPair
	held         bool // the owner holds the locks (set by lockers only)
}

// counts are what a producer counts, which Stats sums over the inputs,
// closed ones included.
type counts struct {
	frames       uint64
	reasons      [NumReasons]uint64 // all but ReasonOK, which is frames less the rest
	bucketFrames []uint64           // hashed frames per bucket
	bucketMoves  uint64
	flowMoves    uint64
}

// addTo adds c to sum.
func (c *counts) addTo(sum *counts) {
	sum.frames += c.frames
	for i, n := range c.reasons {
		sum.reasons[i] += n
	}
	for b, n := range c.bucketFrames {
		sum.bucketFrames[b] += n
	}
	sum.bucketMoves += c.bucketMoves
	sum.flowMoves += c.flowMoves
}

// lockPair unlocks and relocks the producer (and its flow table) while it
// waits for room in a queue.
type lockPair struct{ p *producer }

func (l lockPair) Lock() {
	l.p.mu.Lock()
	if l.p.flows != nil {
		l.p.flows.Lock()
	}
	l.p.held = true
}

func (l lockPair) Unlock() {
	l.p.held = false
	if l.p.flows != nil {
		l.p.flows.Unlock()
	}
	l.p.mu.Unlock()
}

// newProducer returns the producer of an input with source id id (whose
// source can or cannot wait), or of worker -1-id. A worker's producer never
// waits, so that workers cannot deadlock on each other's queues, and fills
// queues as deep as any input may.
func (d *Dispatcher) newProducer(id int, canWait bool) *producer {
	n := len(d.workers)
	if n == 0 {
		n = d.cfg.Workers
	}
	p := &producer{
		d:            d,
		id:           id,
		pending:      make([]*pbatch, n),
		bucketWorker: make([]uint32, len(d.table.ents)),
		bucketTail:   make([]uint64, len(d.table.ents)),
		counts:       counts{bucketFrames: make([]uint64, len(d.table.ents))},
		direct:       make([]uint64, n),
		directPanics: make([]uint64, n),
		marks:        make([]tailMarks, n),
	}
	q := &d.cfg.Queue
	p.source = id
	if id >= 0 {
		p.wait = q.waits(canWait)
		p.limit = q.limit(p.wait)
	} else {
		p.limit = q.limit(q.Overflow != OverflowDrop)
	}
	p.batchCap = min(BatchSize, p.limit)
	p.lockers = lockPair{p}
	for b := range p.bucketWorker {
		p.bucketWorker[b] = d.table.ents[b].Load()
	}
	if d.cfg.RFS.Enabled && id >= 0 {
		// A worker's own producer gets its table when it first re-dispatches.
		p.initFlows()
	}
	d.mu.Lock()
	d.producers = append(d.producers, p)
	d.mu.Unlock()
	return p
}

// initFlows gives the producer its RFS flow table.
func (p *producer) initFlows() {
	wk := p.d.workers
	// A flow with frames still queued must keep its entry: losing its
	// LastTail would let a move skip ahead of them.
	p.flows, _ = flowtable.New(p.d.cfg.RFS.TableSize, func(e *flowtable.Entry) bool {
		return e.Current >= 0 && int(e.Current) < len(wk) && wk[e.Current].head.Load() < e.LastTail
	})
}

// ensureFlows gives a worker's producer its flow table on first use (RFS).
func (p *producer) ensureFlows() {
	if p.flows == nil && p.d.cfg.RFS.Enabled {
		p.mu.Lock() // Stats reads p.flows under p.mu
		p.initFlows()
		p.mu.Unlock()
	}
}

// dispatch steers one source batch. The caller holds d.intake shared.
func (p *producer) dispatch(frames []Frame, release func()) {
	var ref *batchRef
	if release != nil {
		ref = getRef()
		ref.release = release
		ref.n.Store(int32(len(frames)) + 1) // +1 until the loop is done
	}
	p.ensureFlows()
	p.lockers.Lock()
	switch {
	case p.queuedOnly():
		p.steerQueued(frames, ref)
	case p.flows == nil:
		p.steerEach(frames, ref)
	default:
		p.steerRFS(frames, ref)
	}
	p.flushAll()
	p.flushDirect()
	p.lockers.Unlock()
	if ref != nil {
		ref.done(1)
	}
}

// queuedOnly reports whether every frame of a source batch goes to a queue
// with no per-frame option in the way (no trace, no flow limit, no RFS,
// no inline dispatch): then steerQueued does the work.
func (p *producer) queuedOnly() bool {
	d := p.d
	return p.flows == nil && d.cfg.Trace == nil && !d.cfg.Queue.FlowLimit &&
		(d.cfg.Dispatch == Deferred || (d.cfg.Dispatch == Hybrid && p.self == nil))
}

// steerQueued is steer for a source batch when queuedOnly holds: the same
// steps, with the options that cannot apply taken out of the loop.
func (p *producer) steerQueued(frames []Frame, ref *batchRef) {
	d := p.d
	mask := d.table.mask
	rss := d.cfg.Policy == PolicyRSS
	classifier := d.cls
	c := &p.cls
	for start := 0; start < len(frames); start += chunkLen {
		chunk := frames[start:min(start+chunkLen, len(frames))]
		res := p.flowBuf[:len(chunk)]
		// Classify the chunk first, counting it and keeping only what
		// steering needs, then steer it. Plain IPv4 packets stop at their
		// hash input (Packet.Key derives the key later) and are hashed in one
		// batch (fastChunk); the others one by one. The counts come first:
		// while a full queue holds the loop back, Stats may read them.
		p.frames += uint64(len(chunk))
		fc := &p.fast
		slow := fc.run(classifier, chunk)
		for k, i := range fc.at[:fc.n] {
			res[i] = flowResult{fc.sums[k], fc.types[k], ReasonOK}
		}
		for ; slow != 0; slow &= slow - 1 {
			i := bits.TrailingZeros64(slow)
			p.classify(&chunk[i], c)
			if c.Reason != ReasonOK {
				p.reasons[c.Reason]++
			}
			res[i] = flowResult{c.FlowID, c.HashType, c.Reason}
		}
		for i := range chunk {
			f, r := &chunk[i], &res[i]
			bucket := r.flowID & mask
			var w int
			mark := noBucket
			switch {
			case !r.hash.IsHash():
				w = p.sourceWorker(f)
			case rss:
				p.bucketFrames[bucket]++
				cur, current := p.rssView(bucket)
				if !current {
					cur = p.rss(bucket)
				}
				w, mark = cur, bucket
			default:
				p.bucketFrames[bucket]++
				pc := Classification{FlowID: r.flowID, HashType: r.hash}
				w = p.policyWorker(&pc, f, bucket)
				mark = p.bucketMark(&pc, w, bucket)
			}
			b := p.pending[w]
			if b == nil {
				// Every pending batch is flushed before dispatch returns, so
				// the batches filled here hold frames of ref alone.
				b = p.stock.get()
				b.ref, b.mixed = ref, false
				p.pending[w] = b
			}
			pkt := &b.pkts[b.n]
			p.fillFrame(pkt, f, ref, w, 0)
			pkt.FlowID, pkt.HashType, pkt.Reason, pkt.keyed = r.flowID, r.hash, r.reason, false
			p.marks[w].bucket[b.n] = mark
			b.n++
			if b.n == p.batchCap {
				p.flush(w, p.wait)
			}
		}
	}
}

// fastChunk is the classifier's IPv4 fast path over a chunk of frames,
// with one batch hash for all of them: where frames are classified one at
// a time, the hash is a call per frame and the larger part of the cost.
type fastChunk struct {
	n      int
	at     [chunkLen]uint8 // which frame of the chunk each fast one is
	types  [chunkLen]hash.HashType
	tuples [chunkLen][hash.IPv4Tuple4Len]byte
	sums   [chunkLen]uint32
}

// run takes the frames of chunk that the fast path covers (untagged, with
// no hash from their source, simple IPv4: see Classifier.ipv4Tuple),
// records them and their hashes in fc, and returns a mask of the others,
// which the caller classifies one by one. A fast frame's Classification is
// ReasonOK, EtherType IPv4, keyless, with fc's hash type and sum.
func (fc *fastChunk) run(cls *Classifier, chunk []Frame) (slow uint64) {
	n := 0
	for i := range chunk {
		f := &chunk[i]
		if !f.HasVLAN && f.HashType == hash.None {
			if ht, ok := cls.ipv4Tuple(f.Data, &fc.tuples[n]); ok {
				fc.at[n], fc.types[n] = uint8(i), ht
				n++
				continue
			}
		}
		slow |= 1 << i
	}
	fc.n = n
	cls.h.SumIPv4Tuples(fc.sums[:n], fc.tuples[:n])
	return slow
}

// flowResult is what the queued path keeps of a frame's classification
// between its two passes.
type flowResult struct {
	flowID uint32
	hash   hash.HashType
	reason Reason
}

// steer takes one frame through classify, hash, select and hand-off. The
// producer's locks are held.
func (p *producer) steer(f *Frame, ref *batchRef, depth uint8) {
	c := &p.cls
	p.classify(f, c)
	p.steerClassified(f, c, ref, depth)
}

// classify is steps 1 and 2: the classifier, then the source's own hash
// when it has one. Unless a trace wants the whole classification, a plain
// IPv4 packet is classified only as far as its hash (Classifier.flowOnly):
// Packet.Key derives the key if the handler asks for it.
func (p *producer) classify(f *Frame, c *Classification) {
	switch {
	case f.HasVLAN:
		p.d.cls.ClassifyVLAN(f.Data, f.VLAN, c)
	case p.d.cfg.Trace == nil:
		p.d.cls.flowOnly(f.Data, c)
	default:
		p.d.cls.Classify(f.Data, c)
	}
	if f.HashType != hash.None { // the source (a NIC, a kernel program) hashed it
		c.FlowID, c.HashType = f.Hash, f.HashType
	}
}

// chunkLen is how many frames steerQueued, steerEach and steerRFS classify
// before they steer them. fastChunk's masks hold at most 64.
const chunkLen = BatchSize

var _ [64 - chunkLen]struct{} // chunkLen <= 64

// steerEach steers frames that may each go inline or to a queue, with no
// RFS: classified a chunk at a time (classifyChunk), then steered one by
// one.
func (p *producer) steerEach(frames []Frame, ref *batchRef) {
	for start := 0; start < len(frames); start += chunkLen {
		chunk := frames[start:min(start+chunkLen, len(frames))]
		cls := p.chunkCls(len(chunk))
		p.classifyChunk(chunk, cls)
		for i := range chunk {
			p.steerClassified(&chunk[i], &cls[i], ref, 0)
		}
	}
}

// chunkCls returns n Classifications for a chunk's frames, from a buffer
// made on first use (a worker's producer may never need one).
func (p *producer) chunkCls(n int) []Classification {
	if p.clsBuf == nil {
		p.clsBuf = make([]Classification, chunkLen)
	}
	return p.clsBuf[:n]
}

// classifyChunk is classify for each frame of chunk into cls, with the
// IPv4 fast path's hashes done in one batch (fastChunk) unless a trace
// wants every frame's whole classification.
func (p *producer) classifyChunk(chunk []Frame, cls []Classification) {
	slow := ^uint64(0) >> (64 - len(chunk))
	if p.d.cfg.Trace == nil {
		fc := &p.fast
		slow = fc.run(p.d.cls, chunk)
		for k, i := range fc.at[:fc.n] {
			c := &cls[i]
			c.EtherType, c.Reason, c.HashType, c.keyless, c.FlowID = etherTypeIPv4, ReasonOK, fc.types[k], true, fc.sums[k]
		}
	}
	for ; slow != 0; slow &= slow - 1 {
		i := bits.TrailingZeros64(slow)
		p.classify(&chunk[i], &cls[i])
	}
}

// steerRFS steers frames with RFS on. Each flow costs three cache misses:
// its desired slot, its flow-table set, then its entry, which can be found
// only once the set's tags are in. So the frames are classified a chunk at
// a time, the slots and sets of the whole chunk are prefetched, then the
// entries, and only then are the frames steered: the misses overlap
// instead of following one another. Finding the entries to prefetch is the
// flow table's search; its hints let rfs skip doing it again.
func (p *producer) steerRFS(frames []Frame, ref *batchRef) {
	for start := 0; start < len(frames); start += chunkLen {
		chunk := frames[start:min(start+chunkLen, len(frames))]
		cls := p.chunkCls(len(chunk))
		ids := p.ids[:len(chunk)]
		p.classifyChunk(chunk, cls)
		for i := range chunk {
			ids[i] = cls[i].FlowID // unhashed frames' are prefetched for nothing
		}
		hints := p.hints[:len(chunk)]
		// The entries keep their flows' desired workers until one changes:
		// the slots are needed only after a change, until each flow has
		// read its slot again (and for new flows). Those reads are taken as
		// done after as many frames as the flow table has entries.
		if g := p.d.desired.Gen(); g != p.desiredGen {
			p.desiredGen, p.sinceChange = g, 0
		}
		if p.sinceChange < p.flows.Capacity() {
			p.sinceChange += len(chunk)
			p.d.desired.Prefetch(ids)
		}
		p.flows.Prefetch(ids)
		p.flows.PrefetchEntries(ids, hints)
		for i := range chunk {
			p.hint = hints[i] // rfs takes it; a frame with no hash leaves it
			p.steerClassified(&chunk[i], &cls[i], ref, 0)
		}
		p.hint = 0
	}
}

// steerClassified is steps 3 and 4 for a classified frame.
func (p *producer) steerClassified(f *Frame, c *Classification, ref *batchRef, depth uint8) {
	d := p.d
	p.frames++
	if c.Reason != ReasonOK {
		p.reasons[c.Reason]++
	}
	bucket := c.FlowID & d.table.mask
	if c.HashType.IsHash() {
		p.bucketFrames[bucket]++
	}
	var ent *flowtable.Entry
	tr := d.cfg.Trace != nil
	if tr {
		p.dec = Decision{Frame: f, Class: c, Source: p.source, Key: d.keyName, Policy: d.cfg.Policy,
			Bucket: bucket, Mask: d.table.mask, TableWorker: int(d.table.ents[bucket].Load()), Desired: -1,
			Fallback: !c.HashType.IsHash()}
	}
	w := p.selectWorker(c, f, bucket, &ent)

	mode := d.cfg.Dispatch
	inline := mode == Direct || (mode == Hybrid && p.self != nil && p.self.index == w && !p.self.queuedBatches())
	drop := !inline && d.cfg.Queue.FlowLimit && d.workers[w].overLimit(c.FlowID, p.limit)
	if tr {
		p.dec.Worker, p.dec.CPU, p.dec.Inline, p.dec.Dropped, p.dec.RFS = w, d.workers[w].cpu, inline, drop, ent != nil
		d.cfg.Trace(&p.dec)
	}
	if inline {
		p.inline(f, c, ref, w, depth, mode)
		return
	}

	if drop {
		d.workers[w].flowDrops.Add(1)
		if ref != nil {
			ref.done(1)
		}
		return
	}
	b := p.pending[w]
	if b == nil {
		b = p.stock.get()
		p.pending[w] = b
	}
	p.fill(b.slot(ref), f, c, ref, w, depth)
	p.marks[w].bucket[b.n] = p.bucketMark(c, w, bucket)
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

// moveHooks queues MoveOut on the old worker and MoveIn on the new one.
func (p *producer) moveHooks(m Move) {
	d := p.d
	if !d.hooks {
		return
	}
	in := &control{m: m, ready: make(chan struct{})}
	out := &control{m: m, out: true, peer: in}
	if d.cfg.Dispatch == Direct {
		// DIRECT runs handlers in this goroutine, not in the workers: run
		// the hooks here too, before the moved flow's next frame.
		d.workers[m.From].control(out)
		d.workers[m.To].control(in)
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

// tailPending marks a flow entry whose last frame waits in a pending batch.
const tailPending = ^uint64(0)

// tailMarks says, for each frame of a pending batch, which bucket and
// flow entry take its queue position as their last (noBucket and nil for
// none).
type tailMarks struct {
	bucket [BatchSize]uint32
	ent    [BatchSize]*flowtable.Entry
}

// noBucket marks a frame whose position no bucket records.
const noBucket = ^uint32(0)

// bucketMark is the bucket a frame queued to worker w records its position
// for. Only frames queued to the bucket's own worker are the bucket's
// there: a frame RFS sent elsewhere has a position in another worker's
// queue, which rss must never compare with this one's head.
func (p *producer) bucketMark(c *Classification, w int, bucket uint32) uint32 {
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
