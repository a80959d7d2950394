package steer

import (
	"math/bits"
	"sync"

	"github.com/rpsgo/rps/flowtable"
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

// steer takes one frame through classify, hash, select and hand-off. The
// producer's locks are held.
func (p *producer) steer(f *Frame, ref *batchRef, depth uint8) {
	c := &p.cls
	p.classify(f, c)
	p.steerClassified(f, c, ref, depth)
}

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
