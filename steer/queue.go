package steer

import (
	"sync"
	"sync/atomic"
	"time"
)

// pbatch is a hand-off unit: up to BatchSize packets for one worker, or one
// control item (a move hook) when ctl is set.
type pbatch struct {
	n   int
	ctl *control
	// ref is the source batch of every packet, unless mixed: the worker
	// then releases them all with one operation and reads nothing of the
	// packets themselves, whose cache lines so stay with the producer.
	ref   *batchRef
	mixed bool
	home  *batchStock // where the batch goes back to; nil for the shared pool
	next  *pbatch     // in home's stacks
	// handOver is the number its producer's hand-over of it to its worker
	// will have (producer.bucketSeq), while it is pending.
	handOver uint64
	pkts     [BatchSize]Packet
}

// slot returns the next free packet of b, for a frame of source batch ref.
func (b *pbatch) slot(ref *batchRef) *Packet {
	if b.n == 0 {
		b.ref, b.mixed = ref, false
	} else if ref != b.ref {
		b.mixed = true
	}
	return &b.pkts[b.n]
}

// batchStock is a producer's own supply of batches. The workers push each
// batch they finish back onto returned, a lock-free stack with many pushers
// and one taker; the producer takes the whole stack in one swap when its
// private list runs out. A batch so costs the producer one swap in many,
// where a sync.Pool would steal it from the worker's processor each time.
type batchStock struct {
	returned atomic.Pointer[pbatch]
	free     *pbatch     // the producer's alone
	gone     atomic.Bool // the producer is retired: batches go to the pool
}

// maxStock bounds how many free batches a producer keeps to itself; after a
// burst it passes the rest to the shared pool, which the garbage collector
// trims.
const maxStock = 64

// get returns a free batch of the stock's own.
func (s *batchStock) get() *pbatch {
	if s.free == nil {
		b := s.returned.Swap(nil)
		for i := 0; b != nil && i < maxStock; i++ {
			nx := b.next
			b.next, s.free = s.free, b
			b = nx
		}
		toPool(b) // past maxStock
		if s.free == nil {
			b := getBatch()
			b.home = s
			return b
		}
	}
	b := s.free
	s.free, b.next = b.next, nil
	return b
}

// put gives a finished batch back to its stock, from any goroutine.
func (s *batchStock) put(b *pbatch) {
	for {
		top := s.returned.Load()
		b.next = top
		if s.returned.CompareAndSwap(top, b) {
			break
		}
	}
	if s.gone.Load() {
		s.drain() // retire may have drained before this push
	}
}

// retire gives every batch of a retired producer to the shared pool: those
// it holds, those back now, and, through put, those still to come. The
// producer's goroutine calls it, once done with the stock.
func (s *batchStock) retire() {
	s.gone.Store(true)
	toPool(s.free)
	s.free = nil
	s.drain()
}

// drain moves the returned batches to the shared pool.
func (s *batchStock) drain() { toPool(s.returned.Swap(nil)) }

// toPool gives a list of batches to the shared pool, out of any stock.
func toPool(b *pbatch) {
	for b != nil {
		nx := b.next
		b.next, b.home = nil, nil
		batchPool.Put(b)
		b = nx
	}
}

// batchPool holds the batches of control items.
var batchPool = sync.Pool{New: func() any { return new(pbatch) }}

func getBatch() *pbatch { return batchPool.Get().(*pbatch) }

// putBatch recycles b. Its packets are not cleared: every field is written
// again before the batch is reused, and clearing would cost the worker a
// write to every cache line the producer must then fetch back.
func putBatch(b *pbatch) {
	b.n = 0
	b.ctl = nil
	b.ref, b.mixed = nil, false
	if b.home != nil {
		b.home.put(b)
		return
	}
	batchPool.Put(b)
}

// enqueueControl queues a move hook's control item, and reports false
// when the worker has exited or Close has given up waiting, so that no item
// waits where nothing will run it.
func (w *Worker) enqueueControl(c *control) bool {
	w.mu.Lock()
	if w.gone || w.d.abort.Load() {
		w.mu.Unlock()
		return false
	}
	b := getBatch()
	b.ctl = c
	wake := w.push(b, w.tail.Load(), 0)
	w.mu.Unlock()
	if wake {
		w.wake()
	}
	return true
}

// enqueue appends b, a batch of frames, to the queue, which holds up to
// limit frames. It returns the queue position before b's first frame and
// how many of b's frames were queued; the rest are dropped and released
// here. With a waiter, the producer of an input whose source can wait, it
// blocks until there is room, unlocking the producer meanwhile. Once
// enqueue returns, b belongs to the worker: the caller reads nothing of it.
func (w *Worker) enqueue(b *pbatch, waiter *producer, limit int) (base uint64, n int) {
	n = b.n
	w.mu.Lock()
	wait := waiter != nil
	waited := false
	drops := &w.qdrops // what a frame that finds no room counts as
	var lw liveWait
	for wait && w.qlen+n > limit && w.qlen > 0 && !w.d.abort.Load() {
		if waiter.live != nil {
			if stalled, ok := lw.mayWait(w, waiter); !ok {
				wait = false // drop at the tail, netisr's rule
				if stalled {
					drops = &w.stallDrops
				}
				break
			}
			waiter.waitingOn.Store(w)
			waiter.livePoll.Reset(livePollEvery)
		}
		waited = true
		w.wakeAt = max(w.wakeAt, wakeLevel(limit))
		w.awaitSignal(waiter)
	}
	if waited && w.d.abort.Load() && w.d.inWorker() {
		// Close broke a wait no worker would have ended: this is a
		// worker's goroutine, a handler feeding a waiting input of its
		// own dispatcher. Say so, in Dispatch's error and Close's.
		w.d.selfWaits.Add(1)
		waiter.selfWait = true
	}
	if room := limit - w.qlen; n > room {
		if wait && w.qlen == 0 {
			room = n // a batch larger than qlimit still goes whole
		}
		if n > room {
			n = max(room, 0)
		}
	}
	if waiter != nil && waiter.live != nil {
		waiter.livePoll.Stop()
	}
	base = w.tail.Load()
	if w.d.abort.Load() {
		// Close ran out of time and the workers drop what is left, or
		// have gone: frames handed over now are dropped here, counted
		// as close drops, never queued where nothing would take them.
		w.mu.Unlock()
		w.drop(b, 0, &w.closeDrops)
		return base, 0
	}
	if n == 0 {
		w.mu.Unlock()
		w.drop(b, 0, drops)
		return base, 0
	}
	if n < b.n {
		return w.enqueueCut(b, base, n, drops)
	}
	wake := w.push(b, base, n)
	w.mu.Unlock()
	w.queued.Add(uint64(n))
	if wake {
		w.wake()
	}
	return base, n
}

// awaitSignal is a producer's one way of waiting on the worker, for room
// (enqueue) or for a move (awaitPassed): w.mu held, it waits until the
// worker wakes its waiters (next, drainQueue, dropQueued), letting p's
// locks go meanwhile, and takes them again in the lock order, producer
// then worker.
func (w *Worker) awaitSignal(p *producer) {
	w.waiters++
	p.lockers.Unlock()
	w.space.Wait()
	w.mu.Unlock()
	p.lockers.Lock()
	w.mu.Lock()
	w.waiters--
	if w.waiters == 0 {
		w.wakeAt = 0
	}
}

// waitersDue reports, w.mu held and frames just gone from the queue,
// whether the producers waiting on it are to be woken: those waiting for
// room once the queue is down to wakeAt, those waiting for a move after
// every batch.
func (w *Worker) waitersDue() bool {
	return w.waiters > 0 && (w.qlen <= w.wakeAt || w.moveWaits > 0)
}

// wakeLevel is the queue length at which a worker wakes the producers
// waiting for room in a queue of limit frames: once it has room for three
// quarters of the limit, or for wakeRoom frames if that is less. Each
// wake-up so brings a long run of frames (a worker that wakes a producer
// may yield it its CPU: see Worker.next), and in a deep queue the producer
// is not kept waiting for one worker while the others run dry.
func wakeLevel(limit int) int { return limit - min(3*limit/4, wakeRoom) }

// wakeRoom is the most room a queue makes before it wakes the producers
// waiting for it: six batches.
const wakeRoom = 6 * BatchSize

// enqueueCut finishes enqueue for a batch of which only the first n frames
// fit: the others are cut off before the worker can see b, and their
// buffers released once w.mu, held on entry, is dropped. It is apart from
// enqueue so that the common case does not clear the refs array.
func (w *Worker) enqueueCut(b *pbatch, base uint64, n int, drops *atomic.Uint64) (uint64, int) {
	var cut [BatchSize]*batchRef
	ncut := 0
	for i := n; i < b.n; i++ {
		cut[ncut] = b.pkts[i].ref
		ncut++
		b.pkts[i] = Packet{}
	}
	b.n = n
	wake := w.push(b, base, n)
	w.mu.Unlock()
	w.queued.Add(uint64(n))
	drops.Add(uint64(ncut))
	for _, r := range cut[:ncut] {
		if r != nil {
			r.done(1)
		}
	}
	if wake {
		w.wake()
	}
	return base, n
}

// liveWait is the state of one wait of a live producer for room in a
// worker's queue: the worker's head when it last moved, and when.
type liveWait struct {
	head uint64
	at   time.Time
}

// mayWait decides whether a live producer may go on waiting for room in
// w's queue (LiveSource): not once the worker has stalled (its head has not
// moved for StallTimeout; then, and until it moves, stalled is also true),
// nor once the source's ring is liveRingHighWater full. w.mu is held.
func (lw *liveWait) mayWait(w *Worker, p *producer) (stalled, ok bool) {
	head := w.head.Load()
	if s := w.stalledAt.Load(); s != 0 && s == head+1 {
		return true, false // still stalled since a wait gave up on it
	}
	now := time.Now()
	switch {
	case lw.at.IsZero() || head != lw.head:
		lw.head, lw.at = head, now
	case now.Sub(lw.at) >= p.d.cfg.Queue.StallTimeout:
		w.stalledAt.Store(head + 1)
		return true, false
	}
	var used, size int
	p.d.guard(cbBacklog, w.index, func() { used, size = p.live.Backlog() })
	if size > 0 && float64(used) >= liveRingHighWater*float64(size) {
		return false, false
	}
	return false, true
}

// push puts b, with n frames from queue position base on, at the tail of
// the queue, and reports whether the worker is idle and must be woken.
// w.mu is held.
//
// Once the queue holds mergeAfter batches, a small batch whose frames fit
// in the room left in the batch at the tail, which the worker has not
// taken yet, is copied into it, and b recycled: from there a new batch
// starts only where the last could not take the frames, two batches in a
// row hold more than BatchSize frames, and a queue's memory is bounded by
// its limit in frames (mergeAfter + 2*limit/BatchSize + 1 batches),
// however small the Dispatch calls (one frame each, re-dispatches). A
// shorter queue takes batches as they come: copying the frames would cost
// more than the batch it saves.
func (w *Worker) push(b *pbatch, base uint64, n int) (wake bool) {
	if n > 0 && w.rcount >= mergeAfter && b.ctl == nil {
		if t := w.ring[(w.rhead+w.rcount-1)%len(w.ring)]; t.ctl == nil && t.n+n <= BatchSize {
			w.merge(t, b, n)
			w.tail.Store(base + uint64(n))
			w.qlen += n
			w.wmark = max(w.wmark, w.qlen)
			return false // not idle: t is queued and not taken
		}
	}
	if w.rcount == len(w.ring) {
		w.grow()
	}
	w.ring[(w.rhead+w.rcount)%len(w.ring)] = b
	w.rcount++
	w.tail.Store(base + uint64(n))
	w.qlen += n
	if w.qlen > w.wmark {
		w.wmark = w.qlen
	}
	wake = w.idle
	w.idle = false
	return wake
}

// wake tells an idle worker that it has something to do: frames in its
// queue, a source to read, or Close. A wake-up for a worker that is not
// waiting stays pending (notify holds one), so none is lost.
func (w *Worker) wake() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// drop releases b's frames from index from on, counting them in c, and
// shortens b. When nothing of b remains it is recycled.
func (w *Worker) drop(b *pbatch, from int, c *atomic.Uint64) {
	c.Add(uint64(b.n - from))
	releaseRange(b.pkts[from:b.n])
	if from == 0 {
		putBatch(b)
		return
	}
	for i := from; i < b.n; i++ {
		b.pkts[i] = Packet{}
	}
	b.n = from
}

// releaseRange gives back the buffers of pkts, one atomic operation per run
// of packets from the same source batch.
func releaseRange(pkts []Packet) {
	for i := 0; i < len(pkts); {
		r := pkts[i].ref
		j := i + 1
		for j < len(pkts) && pkts[j].ref == r {
			j++
		}
		if r != nil {
			r.done(int32(j - i))
		}
		i = j
	}
}

// pop takes the oldest batch off the queue, which holds one. w.mu is held.
func (w *Worker) pop() *pbatch {
	b := w.ring[w.rhead]
	w.ring[w.rhead] = nil
	w.rhead = (w.rhead + 1) % len(w.ring)
	w.rcount--
	return b
}

// mergeAfter is the number of batches a queue holds before push merges
// small batches into the one at its tail.
const mergeAfter = 32

// merge appends the n frames of b to t, a frame batch at the tail of the
// queue, and recycles b. w.mu is held.
func (w *Worker) merge(t, b *pbatch, n int) {
	copy(t.pkts[t.n:t.n+n], b.pkts[:n])
	if b.mixed || b.ref != t.ref {
		t.mixed = true
	}
	t.n += n
	putBatch(b)
}

func (w *Worker) grow() {
	n := max(2*len(w.ring), 16)
	ring := make([]*pbatch, n)
	for i := 0; i < w.rcount; i++ {
		ring[i] = w.ring[(w.rhead+i)%len(w.ring)]
	}
	w.ring, w.rhead = ring, 0
}

// dropQueued drops every batch queued now, for a Close that ran out of
// time, and returns how many frames it dropped. A MoveOut dropped so never
// runs, and its MoveIn is skipped. The batch the worker is handling, if
// any, is its own: it drops the rest once its handler returns.
func (w *Worker) dropQueued() int {
	w.mu.Lock()
	var batches []*pbatch
	n := 0
	for w.rcount > 0 {
		b := w.pop()
		batches = append(batches, b)
		if b.ctl == nil {
			n += b.n
		}
	}
	w.qlen -= n
	w.space.Broadcast() // producers held back by a full queue
	w.mu.Unlock()
	for _, b := range batches {
		if c := b.ctl; c != nil {
			if c.out {
				c.peer.skip = true
				close(c.peer.ready)
			}
			putBatch(b)
			continue
		}
		w.head.Add(uint64(b.n))
		w.drop(b, 0, &w.closeDrops)
	}
	return n
}

// queuedBatches reports whether anything waits in the queue (for HYBRID).
func (w *Worker) queuedBatches() bool {
	w.mu.Lock()
	n := w.rcount
	w.mu.Unlock()
	return n > 0
}
