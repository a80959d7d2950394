package steer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpsgo/rps/internal/affinity"
)

// Worker is one workstream: a goroutine with a bounded queue, optionally
// pinned to a CPU (FreeBSD's per-CPU netisr thread and its nws). A
// per-worker state's constructor receives it ([NewPerWorker]).
type Worker struct {
	d     *Dispatcher
	index int
	cpu   int // -1 when unpinned

	// The queue, a FIFO of batches, guarded by mu.
	mu      sync.Mutex
	space   sync.Cond // signalled when frames leave the queue (blocking mode)
	waiters int       // producers waiting for space
	ring    []*pbatch
	rhead   int
	rcount  int
	qlen    int // frames queued, including the batch being handled
	wmark   int
	idle    bool
	closing bool
	notify  chan struct{}

	// Queue positions for the last_qtail rule: tail counts frames enqueued,
	// head frames handled. A flow may leave this worker once head has passed
	// the position of its last enqueued frame.
	tail atomic.Uint64
	head atomic.Uint64

	// Counters with netstat -Q's names, and the drops netisr lacks.
	queued, qdrops, handled, dispatched, hdispatched atomic.Uint64
	flowDrops, redispatchDrops, closeDrops, panics   atomic.Uint64
	hookPanics                                       atomic.Uint64

	// The handler and the per-worker state, which bind gives in the
	// worker's goroutine before its first frame.
	bind   func(w *Worker) (Handler, any)
	handle Handler
	state  any

	prod     *producer    // re-dispatch from this worker's handlers, and its own source
	attachQ  []*attachReq // sources RunOnWorkers offered, not yet taken; under mu
	gone     bool         // the worker has exited and takes no more sources; under mu
	flowHist flowHistory
	inited   chan struct{}
	err      error // pinning error, reported by New
}

// Index returns the workstream id (netstat -Q's WSID), 0 to Workers-1.
func (w *Worker) Index() int { return w.index }

// CPU returns the CPU the worker is pinned to, or -1 when unpinned.
func (w *Worker) CPU() int { return w.cpu }

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
	pkts  [BatchSize]Packet
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

// control carries a move hook between the old and the new worker.
type control struct {
	m     Move
	out   bool // MoveOut in the old worker; otherwise MoveIn in the new one
	state any
	ready chan struct{} // closed by the MoveOut side when state is set
	skip  bool          // the MoveOut side could not be queued: no MoveIn
	peer  *control
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
// here. With wait set, it blocks until there is room (an input whose
// source can wait), unlocking unlock meanwhile. Once enqueue returns, b
// belongs to the worker: the caller reads nothing of it.
func (w *Worker) enqueue(b *pbatch, wait bool, limit int, unlock sync.Locker) (base uint64, n int) {
	n = b.n
	w.mu.Lock()
	for wait && w.qlen+n > limit && w.qlen > 0 && !w.d.abort.Load() {
		w.waiters++
		if unlock != nil {
			unlock.Unlock()
		}
		w.space.Wait()
		if unlock != nil {
			// Lock order is producer then worker; take them again in
			// that order.
			w.mu.Unlock()
			unlock.Lock()
			w.mu.Lock()
		}
		w.waiters--
	}
	if room := limit - w.qlen; n > room {
		if wait && w.qlen == 0 {
			room = n // a batch larger than qlimit still goes whole
		}
		if n > room {
			n = max(room, 0)
		}
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
		w.drop(b, 0, &w.qdrops)
		return base, 0
	}
	if n < b.n {
		return w.enqueueCut(b, base, n)
	}
	wake := w.push(b, base, n)
	w.mu.Unlock()
	w.queued.Add(uint64(n))
	if wake {
		w.wake()
	}
	return base, n
}

// enqueueCut finishes enqueue for a batch of which only the first n frames
// fit: the others are cut off before the worker can see b, and their
// buffers released once w.mu, held on entry, is dropped. It is apart from
// enqueue so that the common case does not clear the refs array.
func (w *Worker) enqueueCut(b *pbatch, base uint64, n int) (uint64, int) {
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
	w.qdrops.Add(uint64(ncut))
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

// push puts b, with n frames from queue position base on, at the tail of
// the queue, and reports whether the worker is idle and must be woken.
// w.mu is held.
func (w *Worker) push(b *pbatch, base uint64, n int) (wake bool) {
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

func (w *Worker) grow() {
	n := max(2*len(w.ring), 16)
	ring := make([]*pbatch, n)
	for i := 0; i < w.rcount; i++ {
		ring[i] = w.ring[(w.rhead+i)%len(w.ring)]
	}
	w.ring, w.rhead = ring, 0
}

// run is the worker goroutine.
func (w *Worker) run(wg *sync.WaitGroup) {
	defer wg.Done()
	d := w.d
	if w.cpu >= 0 {
		if err := affinity.Pin(w.cpu); err != nil {
			w.err = err
		}
	}
	w.init()
	close(w.inited)
	var tick <-chan time.Time
	if _, ok := w.state.(Ticker); ok {
		t := time.NewTicker(d.cfg.TickInterval)
		defer t.Stop()
		tick = t.C
	}
	done := 0 // frames of the last batch, still counted in qlen
	for {
		w.mu.Lock()
		w.qlen -= done
		if done > 0 && w.waiters > 0 {
			w.space.Broadcast()
		}
		done = 0
		if w.rcount == 0 {
			if w.closing {
				w.gone = true
				left := w.attachQ
				w.attachQ = nil
				w.mu.Unlock()
				for _, req := range left {
					req.done <- ErrClosed
				}
				break
			}
			if len(w.attachQ) > 0 {
				req := w.attachQ[0]
				w.attachQ = slices.Delete(w.attachQ, 0, 1) // keeps no finished source alive
				w.mu.Unlock()
				req.done <- w.readSource(req.ctx, req.src, tick)
				continue
			}
			if w.d.spin {
				// A pinned worker owns its CPU: poll a little before
				// parking, since waking a goroutine locked to its thread
				// hands the thread over twice.
				w.mu.Unlock()
				if w.spinWait() {
					continue
				}
				w.mu.Lock()
				if w.rcount > 0 || w.closing || len(w.attachQ) > 0 {
					w.mu.Unlock()
					continue
				}
			}
			w.idle = true
			w.mu.Unlock()
			w.park(tick)
			continue
		}
		b := w.pop()
		abort := d.abort.Load()
		w.mu.Unlock()

		switch {
		case b.ctl != nil:
			w.control(b.ctl)
			putBatch(b)
		case abort:
			done = b.n
			w.head.Add(uint64(b.n))
			w.drop(b, 0, &w.closeDrops)
		default:
			done = b.n
			w.handleBatch(b)
		}
		if tick != nil {
			select {
			case now := <-tick:
				w.tick(now)
			default:
			}
		}
	}
	w.closeState()
}

// init gives the worker its handler and state. A state constructor that
// panics fails New.
func (w *Worker) init() {
	defer func() {
		if v := recover(); v != nil {
			w.handle, w.state = func(*Packet) {}, nil
			if w.err == nil {
				w.err = fmt.Errorf("state constructor panicked: %v", v)
			}
		}
	}()
	w.handle, w.state = w.bind(w)
}

// tick runs the state's Tick.
func (w *Worker) tick(now time.Time) {
	if t, ok := w.state.(Ticker); ok {
		w.guard("Tick", func() { t.Tick(now) })
	}
}

// closeState runs the state's Close, before the worker exits; an error
// goes to the dispatcher's Close.
func (w *Worker) closeState() {
	c, ok := w.state.(io.Closer)
	if !ok {
		return
	}
	var err error
	w.guard("Close", func() { err = c.Close() })
	if err != nil {
		w.d.mu.Lock()
		w.d.closeErrs = append(w.d.closeErrs, fmt.Errorf("steer: worker %d: close state: %w", w.index, err))
		w.d.mu.Unlock()
	}
}

// guard runs a per-worker hook, recovering and reporting its panic (what
// names the hook). Hook panics are counted apart from frames.
func (w *Worker) guard(what string, f func()) {
	defer func() {
		if v := recover(); v != nil {
			w.hookPanics.Add(1)
			w.d.reportPanic(PanicInfo{Worker: w.index, Value: v, Summary: what, Stack: debug.Stack()})
		}
	}()
	f()
}

// park waits, idle, for a wake-up (see wake) or a tick, and notes Close.
// Frames, a source to read (RunOnWorkers, through attachQ) and Close all
// wake the worker through one channel, so the wait is a plain receive, or
// a select of two with a tick: a wait is most often for more frames, and a
// select over a channel for each would lock every one of them on every
// wait.
func (w *Worker) park(tick <-chan time.Time) {
	d := w.d
	if tick == nil {
		<-w.notify
	} else {
		select {
		case <-w.notify:
		case now := <-tick:
			w.tick(now)
		}
	}
	select {
	case <-d.quit:
		w.mu.Lock()
		w.closing = true
		w.mu.Unlock()
	default:
	}
}

// handleBatch runs the handler over a queued batch, then advances head and
// releases the buffers. A frame whose handler panicked is counted in
// panics, not in handled.
func (w *Worker) handleBatch(b *pbatch) {
	panicked := 0
	for i := 0; i < b.n; {
		var p bool
		if i, p = w.handleFrom(b.pkts[:b.n], i); p {
			panicked++
		}
	}
	n := uint64(b.n)
	w.handled.Add(n - uint64(panicked))
	if b.mixed {
		releaseRange(b.pkts[:b.n])
	} else if b.ref != nil {
		b.ref.done(int32(b.n))
	}
	putBatch(b)
	w.head.Add(n)
}

// handleFrom runs the handler for pkts[i:] and returns len(pkts), or,
// after a recovered panic, the index of the packet after the one that
// panicked, and panicked set: one deferred recover per batch instead of one
// per frame.
func (w *Worker) handleFrom(pkts []Packet, i int) (next int, panicked bool) {
	h := w.handle
	defer func() {
		if v := recover(); v != nil {
			w.recovered(v, &pkts[i])
			next, panicked = i+1, true
		}
	}()
	for ; i < len(pkts); i++ {
		h(&pkts[i])
	}
	return i, false
}

// call runs the handler for one packet and reports whether it returned
// (false: it panicked, and the panic was recovered).
func (w *Worker) call(p *Packet) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			w.recovered(v, p)
			ok = false
		}
	}()
	w.handle(p)
	return true
}

// recovered counts and reports a handler's panic over p.
func (w *Worker) recovered(v any, p *Packet) {
	w.panics.Add(1)
	w.d.reportPanic(PanicInfo{Worker: w.index, Value: v, Summary: p.String(), Stack: debug.Stack()})
}

// control runs one side of a move hook.
func (w *Worker) control(c *control) {
	mv, _ := w.state.(Mover)
	if c.out {
		var carried any
		if mv != nil {
			w.guard("MoveOut", func() { carried = mv.MoveOut(c.m) })
		}
		c.peer.state = carried
		close(c.peer.ready)
		return
	}
	<-c.ready
	if mv != nil && !c.skip {
		w.guard("MoveIn", func() { mv.MoveIn(c.m, c.state) })
	}
}

// queuedBatches reports whether anything waits in the queue (for HYBRID).
func (w *Worker) queuedBatches() bool {
	w.mu.Lock()
	n := w.rcount
	w.mu.Unlock()
	return n > 0
}

// attachReq hands a source to a worker (RunOnWorkers).
type attachReq struct {
	ctx  context.Context
	src  Source
	done chan error
}

// readSource is the worker's loop while it reads a source of its own (one
// socket of a kernel fanout group): it reads a batch, dispatches it through
// its own producer (DIRECT: handled here, accounted to this workstream), and
// between batches handles its queue and its tick. The source's ReadBatch
// should return within a bounded time (a poll timeout) so that the queue
// and the tick are served.
func (w *Worker) readSource(ctx context.Context, src Source, tick <-chan time.Time) error {
	d := w.d
	var b Batch
	for {
		w.drainQueue()
		if tick != nil {
			select {
			case now := <-tick:
				w.tick(now)
			default:
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.closed.Load() { // Close has stopped intake: read nothing more
			return ErrClosed
		}
		b.Frames, b.Release = b.Frames[:0], nil
		err := src.ReadBatch(ctx, &b)
		if len(b.Frames) > 0 || b.Release != nil {
			// Never wait behind Close's intake.Lock: an input in blocking
			// mode, which holds intake shared, may be waiting for room in
			// this worker's queue, which only this worker empties.
			// TryRLock fails only once Close has begun.
			locked := d.intake.TryRLock()
			if !locked || d.closed.Load() {
				if locked {
					d.intake.RUnlock()
				}
				if b.Release != nil {
					b.Release()
				}
				return ErrClosed
			}
			w.prod.dispatch(b.Frames, b.Release)
			d.intake.RUnlock()
		}
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			return fmt.Errorf("steer: worker %d: read source: %w", w.index, err)
		}
	}
}

// drainQueue handles whatever is queued now, without waiting.
func (w *Worker) drainQueue() {
	for {
		w.mu.Lock()
		if w.rcount == 0 {
			w.mu.Unlock()
			return
		}
		b := w.pop()
		w.mu.Unlock()
		n := b.n
		if b.ctl != nil {
			w.control(b.ctl)
			putBatch(b)
		} else {
			w.handleBatch(b)
		}
		w.mu.Lock()
		w.qlen -= n
		if w.waiters > 0 {
			w.space.Broadcast()
		}
		w.mu.Unlock()
	}
}

// RunOnWorkers gives each worker a source of its own to read: srcs[i] is
// read by worker i in its own goroutine, as each socket of a kernel fanout
// group is read by the CPU the kernel steered its frames to. With DIRECT
// dispatch a frame is classified and handled in the worker that read it,
// so the kernel's steering stands and the stats keep their shape; with
// HYBRID or DEFERRED the worker steers it on like any input. Between
// batches each worker serves its queue and its tick. A worker takes its
// source once its queue is empty and any source it was given before is
// done; a source not yet taken when ctx ends is never read. As Run does,
// RunOnWorkers returns nil once every source is exhausted (io.EOF),
// ctx.Err() when ctx ends first, and ErrClosed when the dispatcher closes
// first: otherwise the first error a source returned. It does not close
// the sources.
func (d *Dispatcher) RunOnWorkers(ctx context.Context, srcs []Source) error {
	if len(srcs) != len(d.workers) {
		return fmt.Errorf("steer: %d sources for %d workers: %w", len(srcs), len(d.workers), ErrConfig)
	}
	if d.closed.Load() {
		return ErrClosed
	}
	for _, s := range srcs {
		if st, ok := s.(SourceStatser); ok {
			d.AddSource(st)
		}
	}
	reqs := make([]*attachReq, 0, len(srcs))
	var first error
	for i, s := range srcs {
		req := &attachReq{ctx: ctx, src: s, done: make(chan error, 1)}
		if !d.workers[i].offer(req) {
			first = ErrClosed
			break
		}
		reqs = append(reqs, req)
	}
	for i, req := range reqs {
		var err error
		select {
		case err = <-req.done:
		case <-ctx.Done():
			if d.workers[i].withdraw(req) {
				err = ctx.Err()
			} else {
				err = <-req.done // taken: readSource sees ctx end
			}
		}
		if err != nil && first == nil {
			first = err
		}
	}
	if first == nil {
		first = ctx.Err() // a source that ended as ctx did
	}
	return first
}

// offer queues a source for the worker to read when its queue is next
// empty, and wakes it. It reports false when the worker has exited.
func (w *Worker) offer(req *attachReq) bool {
	w.mu.Lock()
	if w.gone {
		w.mu.Unlock()
		return false
	}
	w.attachQ = append(w.attachQ, req)
	w.mu.Unlock()
	w.wake()
	return true
}

// withdraw takes back an offered source the worker has not taken yet, and
// reports whether it did.
func (w *Worker) withdraw(req *attachReq) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, r := range w.attachQ {
		if r == req {
			w.attachQ = slices.Delete(w.attachQ, i, i+1)
			return true
		}
	}
	return false
}

// spinWait polls the queue for up to spinFor and reports whether a batch
// was queued meanwhile. It reads the tail and head counters only.
func (w *Worker) spinWait() bool {
	deadline := time.Now().Add(spinFor)
	for {
		for i := 0; i < 256; i++ {
			if w.tail.Load() != w.head.Load() {
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// spinFor is how long a pinned worker polls before it parks.
const spinFor = 50 * time.Microsecond
