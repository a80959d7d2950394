package steer

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpsgo/rps/internal/rfstable"
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

	// RSS view: bucket -> worker this producer sends it to, and which of
	// this producer's hand-overs to that worker carried the bucket's last
	// frame there (see lastTail); viewGen is the table generation the view
	// was last compared with, differ how many buckets then differed.
	bucketWorker []uint32
	bucketSeq    []uint64
	viewGen      uint64
	differ       int
	// Per worker: the hand-overs made to it, and the queue positions they
	// ended at, the last tailRing of them.
	handOvers []uint64
	tailAt    [][tailRing]uint64

	flows       *rfstable.Table          // RFS, nil when off
	frags       *fragTable               // FragmentsFollow's datagrams, made on the first fragment
	fast        fastChunk                // the chunk's frames on the IPv4 fast path
	clsBuf      [chunkLen]Classification // the chunk's classifications
	res         [chunkLen]flowResult     // the plain path's compact results (classifyChunk)
	resFast     uint64                   // frames whose Classification is left to res
	ids         [chunkLen]uint32         // the chunk's flowids, for RFS's prefetch
	hints       [chunkLen]rfstable.Hint  // RFS: the slots found while prefetching
	hint        rfstable.Hint            // the slot rfs may find its flow in, 0 if none
	rfsMiss     bool                     // a flow went without an entry since the last flush
	missSeq     []uint64                 // per worker: the hand-over of the last frame steered there without an entry (missTail)
	desiredGen  uint64                   // the desired table's Gen that prefetchFlows last saw
	sinceChange int                      // frames steered since desiredGen changed

	counts
	// What Stats reads of the counts while this producer's goroutine holds
	// mu (see Dispatcher.sumCounts): pubWant asks for a copy, which the
	// goroutine publishes in pub as it next lets mu go.
	pubWant atomic.Bool
	pub     atomic.Pointer[countsCopy]
	// keyPkt and keyVal keep the key Packet.Key last derived (or
	// fillInline handed over) for a packet whose handler runs in this
	// producer's goroutine: this is the worker's own producer for the
	// packets it handles, an input's for those it runs inline. A nested
	// inline handler (a re-dispatch) gives the outer one its key back.
	keyPkt *Packet
	keyVal FlowKey

	direct       []uint64 // frames handled inline, per worker, since the last flush
	directPanics []uint64 // of which their handler panicked
	scratch      [maxRedispatchDepth + 2]Packet
	dec          Decision  // filled while Config.Trace is set
	tr           *Decision // &dec while Config.Trace is set, else nil
	mask         uint32    // buckets - 1
	batchCap     int
	wait         bool        // a full queue holds this producer back (Config.Queue)
	live         LiveSource  // the live source it reads, whose ring bounds the waits (setLive); nil for others
	livePoll     *time.Timer // wakes a live producer's wait to look at the ring again
	waitingOn    atomic.Pointer[Worker]
	selfWait     bool        // it waited in a worker's goroutine until Close gave up (enqueue)
	readerWaits  bool        // a worker's, reading Run's source under HYBRID: it waits for room in other workers' queues
	stateHeld    *Worker     // the shared state this goroutine holds the lock of (lockState)
	inHandler    int         // handlers this producer's goroutine is running inline (inline), nested
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
	reasons      [numReasons]uint64 // all but ReasonOK, which is frames less the rest
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
	p := l.p
	p.held = false
	if p.flows != nil {
		p.flows.Unlock()
	}
	if p.pubWant.Load() {
		p.publish(true)
	}
	p.mu.Unlock()
}

// countsCopy is a producer's counts and top flows as it published them.
type countsCopy struct {
	counts
	top []FlowStats
}

// publish copies the counts (and with top the top flows, else it keeps
// the last copy's) for a Stats that may find the producer busy later, and
// returns the copy. p.mu is held, the flow table's lock is not. Copies are
// made under p.mu, so each is at least as new as the one before: a counter
// read from them never goes down.
func (p *producer) publish(top bool) *countsCopy {
	c := &countsCopy{counts: counts{bucketFrames: make([]uint64, len(p.d.table.ents))}}
	p.counts.addTo(&c.counts)
	switch {
	case top && p.flows != nil:
		c.top = topFlows(p.flows)
	case !top:
		if last := p.pub.Load(); last != nil {
			c.top = last.top
		}
	}
	p.pubWant.Store(false)
	p.pub.Store(c)
	return c
}

// newProducer returns the producer of an input with source id id (whose
// source can or cannot wait), or of worker -1-id. A worker's producer never
// waits, so that workers cannot deadlock on each other's queues, and fills
// queues as deep as any input may.
//
// Its tables, per worker and per bucket, are made by prepare: at once for
// an input, on first use for a worker's producer, since a worker that never
// re-dispatches nor reads a source of its own never needs them (and with
// many workers they would take memory growing with the square of their
// number).
func (d *Dispatcher) newProducer(id int, canWait bool) *producer {
	p := &producer{d: d, id: id}
	q := &d.cfg.Queue
	p.source = id
	if id >= 0 {
		p.wait = q.waits(canWait)
		p.limit = q.limit(p.wait)
	} else {
		p.limit = q.limit(q.Overflow != OverflowDrop)
	}
	p.batchCap = min(BatchSize, p.limit)
	p.mask = d.table.mask
	if d.cfg.Trace != nil {
		p.tr = &p.dec
	}
	p.lockers = lockPair{p}
	if id >= 0 {
		p.prepare()
	}
	d.mu.Lock()
	d.producers = append(d.producers, p)
	d.mu.Unlock()
	return p
}

// setLive makes an input's producer that of a live source: under
// OverflowAuto a full queue holds it back only while the source's ring has
// room and the worker is not stalled (see LiveSource), and its queue limit
// is the one for inputs that drop, a latency bound: the ring is the
// buffer. Under OverflowWait it waits as any input; under OverflowDrop it
// drops.
func (p *producer) setLive(l LiveSource) {
	q := &p.d.cfg.Queue
	if q.Overflow != OverflowAuto {
		return
	}
	p.live = l
	p.limit = q.limit(false)
	p.batchCap = min(BatchSize, p.limit)
	p.livePoll = time.AfterFunc(time.Hour, func() {
		if w := p.waitingOn.Load(); w != nil {
			w.mu.Lock()
			w.space.Broadcast()
			w.mu.Unlock()
		}
	})
	p.livePoll.Stop()
}

// livePollEvery is how often a live producer held back by a full queue
// looks at its ring and at the worker's progress again.
const livePollEvery = time.Millisecond

// prepare makes the producer's tables, once: the batches pending per
// worker, its view of the indirection table (taken from the table now: it
// has queued nothing yet, so no move can reorder), its counts and, with
// RFS, its flow table. Stats reads them under p.mu.
func (p *producer) prepare() {
	if p.pending == nil {
		p.makeTables()
	}
}

// makeTables is prepare's first call.
func (p *producer) makeTables() {
	d := p.d
	n, nb := len(d.workers), len(d.table.ents)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = make([]*pbatch, n)
	p.direct, p.directPanics = make([]uint64, n), make([]uint64, n)
	p.marks = make([]tailMarks, n)
	p.handOvers, p.tailAt = make([]uint64, n), make([][tailRing]uint64, n)
	p.bucketWorker, p.bucketSeq = make([]uint32, nb), make([]uint64, nb)
	p.bucketFrames = make([]uint64, nb)
	p.viewGen = d.table.gen.Load()
	for b := range p.bucketWorker {
		p.bucketWorker[b] = d.table.ents[b].Load()
	}
	if d.cfg.RFS.Enabled {
		p.initFlows()
	}
}

// initFlows gives the producer its RFS flow table.
func (p *producer) initFlows() {
	wk := p.d.workers
	p.missSeq = make([]uint64, len(wk))
	// A flow with frames still queued must keep its entry: losing its
	// LastTail would let a move skip ahead of them.
	// New cannot fail: RFSConfig.normalize checked the size against the
	// same bounds.
	p.flows, _ = rfstable.New(p.d.cfg.RFS.TableSize, func(e *rfstable.Entry) bool {
		return e.Current >= 0 && int(e.Current) < len(wk) && !wk[e.Current].passed(e.LastTail)
	})
}

// The path of a frame, as the package documentation tells it: dispatch
// takes a source batch a chunk at a time through the four steps, each a
// function of its own, which every way in (an Input, a worker's own source,
// a handler's re-dispatch) and every mode (DEFERRED, HYBRID, DIRECT, RFS,
// trace) goes through:
//
//	1, 2  classifyChunk  classify and hash            chunk.go
//	3     selectWorker   netisr_select_cpuid, with    select.go
//	                     RFS as a stage of it         rfs.go
//	      mayLeave       the no-reorder rule          reorder.go
//	4     handOff        netisr_dispatch_src          handoff.go
//
// One specialised variant exists, because BenchmarkDispatch shows it pays
// (4 to 7 ns a frame): queuePlain, steps 3 and 4 for a chunk on the plain
// path, which is the bulk of the traffic with the default options (RSS,
// DEFERRED, no RFS, no trace, no flow limit). It is chosen once per batch
// (plainPath), and a frame it cannot take (no hash, a bucket the table has
// moved) goes the whole way.

// dispatch steers one source batch. The caller holds d.intake shared.
func (p *producer) dispatch(frames []Frame, release func()) {
	ref := newBatchRef(p.d, release, len(frames))
	p.prepare()
	p.lockers.Lock()
	plain := p.plainPath()
	for start := 0; start < len(frames); start += chunkLen {
		chunk := frames[start:min(start+chunkLen, len(frames))]
		cls := p.classifyChunk(chunk, plain)
		if plain {
			p.queuePlain(chunk, cls, ref)
			continue
		}
		if p.flows != nil {
			p.prefetchFlows(cls)
		}
		for i := range chunk {
			p.hint = p.hints[i] // rfs's slot hint, zero without RFS
			w, ent := p.selectWorker(&chunk[i], &cls[i])
			p.handOff(&chunk[i], &cls[i], ref, w, ent, 0)
		}
	}
	p.hint = 0
	p.flushAll()
	p.flushDirect()
	p.lockers.Unlock()
	if ref != nil {
		ref.done(1)
	}
}

// steer takes one frame through the four steps: a handler's re-dispatch.
// The producer's locks are held.
func (p *producer) steer(f *Frame, ref *batchRef, depth uint8) {
	c := &p.cls
	p.classify(f, c)
	p.frames++
	p.count(c)
	w, ent := p.selectWorker(f, c)
	p.handOff(f, c, ref, w, ent, depth)
}

// plainPath reports whether the frames of a source batch need none of the
// per-frame options (RFS, trace, flow limit, inline dispatch) and the
// policy is RSS, so that they may take the plain path.
func (p *producer) plainPath() bool {
	d := p.d
	return p.flows == nil && p.tr == nil && !d.cfg.Queue.FlowLimit && d.cfg.Policy == PolicyRSS &&
		(d.cfg.Dispatch == DispatchDeferred || (d.cfg.Dispatch == DispatchHybrid && p.self == nil))
}
