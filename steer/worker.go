package steer

import (
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpsgo/rps/internal/affinity"
)

// Worker is one workstream: a goroutine with a queue, maybe pinned to a CPU.
type Worker struct {
	d     *Dispatcher
	index int
	cpu   int // -1 when unpinned

	// The queue, a FIFO of batches, guarded by mu.
	mu      sync.Mutex
	space   sync.Cond // signalled when frames leave the queue (blocking mode)
	waiters int       // producers waiting for space, or for a move (moveWaits)
	wakeAt  int       // wake them once qlen is down to this (wakeLevel)
	ring    []*pbatch
	rhead   int
	rcount  int
	qlen    int // frames queued, including the batch being handled
	wmark   int
	idle    bool
	closing bool
	notify  chan struct{}
	// moveWaits counts the producers among waiters that wait for head to
	// pass a flow's last frame (awaitPassed): they are woken after every
	// batch.
	moveWaits int

	// Queue positions for the last_qtail rule: tail counts frames enqueued,
	// head frames handled. A flow may leave this worker once head has passed
	// the position of its last enqueued frame.
	tail atomic.Uint64
	head atomic.Uint64

	// Counters with netstat -Q's names, and the drops netisr lacks.
	queued, qdrops, handled, dispatched, hdispatched atomic.Uint64
	// wantHandled asks the worker to add the frames of its batch handled
	// so far to handled after its current frame (Stats sets it).
	wantHandled                                    atomic.Bool
	flowDrops, redispatchDrops, closeDrops, panics atomic.Uint64
	stallDrops                                     atomic.Uint64
	badChecksums                                   atomic.Uint64 // frames given ReasonBadChecksum
	// stalledAt is head+1 when a live producer gave up waiting for the
	// queue to move (LiveSource), 0 otherwise: while head stays there, live
	// producers drop at once.
	stalledAt atomic.Uint64
	exited    atomic.Bool // run has returned (for Close's error)

	// The handler and the per-worker state, which bind gives in the
	// worker's goroutine before its first frame.
	bind   func(w *Worker) (Handler, any)
	handle Handler
	state  any
	// With DIRECT dispatch, other goroutines run this worker's handler
	// with its state: shared is set, and stateMu serialises every use of
	// the state (see lockState).
	shared  bool
	stateMu sync.Mutex

	prod     *producer    // re-dispatch from this worker's handlers, and its own source
	attachQ  []*attachReq // sources RunOnWorkers offered, not yet taken; under mu
	gone     bool         // the worker has exited and takes no more sources; under mu
	flowHist flowHistory
	inited   chan struct{}
	err      error  // pinning error, reported by New
	goid     uint64 // the worker goroutine's id (Dispatcher.inWorker)
}

// Index returns the worker's index, 0 to Workers-1 (netstat -Q's WSID).
func (w *Worker) Index() int { return w.index }

// CPU returns the CPU the worker is pinned to, or -1 when unpinned.
func (w *Worker) CPU() int { return w.cpu }

// run is the worker goroutine.
func (w *Worker) run(wg *sync.WaitGroup) {
	defer wg.Done()
	w.goid = goid()
	if w.cpu >= 0 {
		if err := affinity.Pin(w.cpu); err != nil {
			w.err = err
		}
	}
	w.init()
	close(w.inited)
	var tick <-chan time.Time
	if _, ok := w.state.(Ticker); ok {
		t := time.NewTicker(w.d.cfg.TickInterval)
		defer t.Stop()
		tick = t.C
	}
	done := 0 // frames of the last batch, still counted in qlen
	for {
		b, ok := w.next(done, tick)
		if !ok {
			break
		}
		done = w.serve(b)
		if tick != nil {
			select {
			case now := <-tick:
				w.tick(now)
			default:
			}
		}
	}
	w.closeState()
	w.exited.Store(true)
}

// next returns the next batch to serve, once done frames of the last one
// have left the queue (waking a producer waiting for room, or for a move).
// With nothing queued it reads a source RunOnWorkers offered, or waits
// (park); it returns false once Close has told it to exit and the queue is
// empty.
//
// An unpinned worker that wakes a producer, when there are at least as
// many workers as goroutines the Go scheduler runs at once (GOMAXPROCS),
// then yields its CPU to it. Woken, the producer waits in the worker's own
// run slot, and with every CPU busy nothing takes it from there: it would
// run only once the worker had emptied its queue and parked, and the CPU
// would idle between the worker's last frame and the producer's next. A
// pinned worker does not yield: its goroutine is locked to its thread,
// which a yield would hand over and take back. Producers are woken once
// the queue has room for a long run of frames (wakeLevel), so that the
// worker yields seldom.
func (w *Worker) next(done int, tick <-chan time.Time) (*pbatch, bool) {
	for {
		w.mu.Lock()
		w.qlen -= done
		if done > 0 && w.waitersDue() {
			w.space.Broadcast()
			if w.cpu < 0 && len(w.d.workers) >= runtime.GOMAXPROCS(0) {
				w.mu.Unlock()
				runtime.Gosched()
				w.mu.Lock()
			}
		}
		done = 0
		if w.rcount > 0 {
			b := w.pop()
			w.mu.Unlock()
			return b, true
		}
		switch {
		case w.closing:
			w.exit()
			return nil, false
		case len(w.attachQ) > 0:
			req := w.attachQ[0]
			w.attachQ = slices.Delete(w.attachQ, 0, 1) // keeps no finished source alive
			w.mu.Unlock()
			req.done <- w.readSource(req, tick)
		case w.d.spin:
			w.mu.Unlock()
			w.spinThenPark(tick)
		default:
			w.idle = true
			w.mu.Unlock()
			w.park(tick)
		}
	}
}

// spinThenPark waits for work as a pinned worker that owns its CPU: it
// polls a little first (spinWait), since waking a goroutine locked to its
// thread hands the thread over twice, and parks only if nothing came.
func (w *Worker) spinThenPark(tick <-chan time.Time) {
	if w.spinWait() {
		return
	}
	w.mu.Lock()
	if w.rcount > 0 || w.closing || len(w.attachQ) > 0 {
		w.mu.Unlock()
		return
	}
	w.idle = true
	w.mu.Unlock()
	w.park(tick)
}

// exit marks the worker gone, so that it takes no more sources, and
// answers ErrClosed to the sources offered and not taken. w.mu is held on
// entry and released.
func (w *Worker) exit() {
	w.gone = true
	left := w.attachQ
	w.attachQ = nil
	w.mu.Unlock()
	for _, req := range left {
		req.done <- ErrClosed
	}
}

// serve handles one batch from the queue: a move hook's control item, or
// frames (dropped, counted as close drops, once Close ran out of time). It
// returns how many frames leave the queue.
func (w *Worker) serve(b *pbatch) int {
	switch {
	case b.ctl != nil:
		w.control(w.prod, b.ctl)
		putBatch(b)
		return 0
	case w.d.abort.Load():
		n := b.n
		w.head.Add(uint64(n))
		w.drop(b, 0, &w.closeDrops)
		return n
	}
	n := b.n
	took := w.prod.lockState(w)
	w.handleBatch(b)
	w.prod.unlockState(w, took)
	return n
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
// panics, not in handled; once Close has given up waiting, the frames
// not yet handled are dropped (close drops).
func (w *Worker) handleBatch(b *pbatch) {
	i := 0
	for i < b.n {
		next, p := w.handleFrom(b.pkts[:b.n], i)
		stopped := !p && next < b.n // Close gave up waiting
		i = next
		if stopped {
			break
		}
	}
	n := uint64(b.n)
	if i < b.n {
		w.closeDrops.Add(uint64(b.n - i))
	}
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
// per frame. Once Close has given up waiting it stops, and returns the
// index of the first packet not handled. It counts the frames handled on
// return, and after a frame when Stats asked (wantHandled), so that Stats
// sees a slow handler's progress within a batch: an atomic add a frame
// costs a no-op handler's worker a quarter more, one every 8 frames 3-7%,
// the flag's load nothing measurable.
func (w *Worker) handleFrom(pkts []Packet, i int) (next int, panicked bool) {
	h, abort, index, prod, verify := w.handle, &w.d.abort, w.index, w.prod, w.d.cfg.VerifyChecksums
	counted := i // pkts[counted:i] are handled and not yet counted
	defer func() {
		if v := recover(); v != nil {
			w.handled.Add(uint64(i - counted))
			w.recovered(v, &pkts[i])
			next, panicked = i+1, true
		}
	}()
	for ; i < len(pkts) && !abort.Load(); i++ {
		pkt := &pkts[i]
		pkt.Worker, pkt.prod = index, prod // see fillFrame
		if verify {
			w.verifyChecksums(pkt)
		}
		h(pkt)
		if w.wantHandled.Load() { // a plain load; set by Stats
			w.wantHandled.Store(false)
			w.handled.Add(uint64(i + 1 - counted))
			counted = i + 1
		}
	}
	w.handled.Add(uint64(i - counted))
	return i, false
}

// verifyChecksums is Config.VerifyChecksums for a packet about to be
// handled: unless its source said what it knows, its checksums are
// verified, and a bad one gives a packet without a reason
// ReasonBadChecksum, counted.
func (w *Worker) verifyChecksums(p *Packet) {
	if p.Checksum != ChecksumUnknown {
		return
	}
	p.Checksum = verifyChecksums(p.Data)
	if p.Checksum == ChecksumBad && p.Reason == ReasonOK {
		p.Reason = ReasonBadChecksum
		w.badChecksums.Add(1)
	}
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
	if w.d.cfg.VerifyChecksums {
		w.verifyChecksums(p)
	}
	w.handle(p)
	return true
}

// recovered counts and reports a handler's panic over p.
func (w *Worker) recovered(v any, p *Packet) {
	w.panics.Add(1)
	w.d.reportPanic(PanicInfo{Callback: cbHandler.String(), Worker: w.index, Value: v, Summary: p.String(), Stack: debug.Stack()})
}

// goid returns the calling goroutine's id, from the first line of its
// stack ("goroutine 18 [running]:"). It costs a microsecond or so: only a
// worker's start and the rare paths call it.
func goid() uint64 {
	var buf [64]byte
	s := buf[:runtime.Stack(buf[:], false)]
	s = s[len("goroutine "):]
	var id uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}

// inWorker reports whether the calling goroutine is one of d's workers.
func (d *Dispatcher) inWorker() bool {
	id := goid()
	for _, w := range d.workers {
		if w.goid == id {
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
