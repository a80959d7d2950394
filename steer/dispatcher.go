package steer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpsgo/rps/flowtable"
	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/affinity"
)

// ErrClosed is returned by dispatch calls after Close has begun.
var ErrClosed = errors.New("steer: dispatcher closed")

// ErrCloseInHandler is wrapped by the error of a Close called from inside a
// handler or a per-worker hook, which cannot wait for its own frame.
var ErrCloseInHandler = errors.New("steer: Close called from inside a handler")

// Handler processes one packet. It runs in the goroutine of the worker the
// packet was steered to (or, with Direct dispatch, in the caller's).
type Handler func(p *Packet)

// Ticker is implemented by per-worker states ([NewPerWorker]) that want to
// run periodically: Tick runs in the worker's goroutine every
// Config.TickInterval, between batches.
type Ticker interface {
	Tick(now time.Time)
}

// Mover is implemented by per-worker states whose per-flow state follows a
// flow when it changes worker (an RFS move, a reprogrammed bucket, the
// rebalancer). MoveOut runs in the old worker after its last frame of the
// moved flows and returns what to carry; MoveIn runs in the new worker with
// that value before its first frame of them. With RFS on, they run once per
// flow move (Move.Bucket == -1), not per bucket; with DIRECT dispatch they
// run in the dispatching goroutine, before the flow's next frame. States
// that do not implement Mover make moves free.
type Mover interface {
	MoveOut(m Move) (carried any)
	MoveIn(m Move, carried any)
}

// Dispatcher steers frames to per-worker goroutines: netisr for user space.
// See the package documentation for the path a frame takes.
type Dispatcher struct {
	cfg     Config
	keyName string // the key's fingerprint, for reports
	cls     *Classifier
	keyCls  *Classifier // cls without the hash, for Packet.Key
	workers []*Worker
	table   *indirection
	desired *flowtable.Desired // RFS: where each flow's consumer runs
	hooks   bool               // the states implement Mover
	wg      sync.WaitGroup

	intake   sync.RWMutex // dispatch calls hold it shared; Close exclusively
	closed   atomic.Bool
	abort    atomic.Bool
	quit     chan struct{}
	quitOnce sync.Once
	panicLog panicLog

	mu         sync.Mutex
	producers  []*producer
	retired    counts      // what closed inputs counted
	retiredTop []FlowStats // and their top flows (RFS), as they closed
	nextID     int
	sources    []sourceStatser
	reb        *rebalancer
	closeErrs  []error // from the states' Close

	created time.Time
	// spin lets idle pinned workers poll before parking: only when each
	// has a CPU of its own and at least one CPU is left to the sources.
	spin bool
}

// New starts a dispatcher with cfg's workers, which run h for every frame.
// Configuration errors wrap ErrConfig and say what to change. For state
// per worker, use [NewPerWorker].
func New(cfg Config, h Handler) (*Dispatcher, error) {
	if h == nil {
		return nil, fmt.Errorf("steer: nil handler: %w", ErrConfig)
	}
	return start(cfg, func(*Worker) (Handler, any) { return h, nil })
}

// NewPerWorker starts a dispatcher whose workers each have a state of
// their own: newState runs in each worker's goroutine before its first
// frame, and h receives that worker's state with every packet, so the
// state needs no locks. The returned slice holds the states, states[i]
// being worker i's; read them from other goroutines only after Close. A
// state may implement [Ticker], [Mover] and io.Closer (Close runs in the
// worker before it exits; its errors are joined into Close's).
func NewPerWorker[S any](cfg Config, newState func(w *Worker) S, h func(state S, p *Packet)) (*Dispatcher, []S, error) {
	if newState == nil || h == nil {
		return nil, nil, fmt.Errorf("steer: NewPerWorker needs a state constructor and a handler: %w", ErrConfig)
	}
	var states []S
	d, err := start(cfg, func(w *Worker) (Handler, any) {
		s := newState(w)
		return func(p *Packet) { h(s, p) }, s
	})
	if err != nil {
		return nil, nil, err
	}
	states = make([]S, len(d.workers))
	for i, w := range d.workers {
		states[i], _ = w.state.(S)
	}
	return d, states, nil
}

// start builds the dispatcher and starts its workers; bind runs in each
// worker's goroutine and gives it its handler and state.
func start(cfg Config, bind func(w *Worker) (Handler, any)) (*Dispatcher, error) {
	generated := cfg.Hash.Key == nil
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	hasher, err := hash.NewToeplitz(cfg.Hash.Key)
	if err != nil {
		return nil, fmt.Errorf("steer: %w", err)
	}
	cls, err := NewClassifier(ClassifierConfig{Hasher: hasher, Symmetric: cfg.Hash.Symmetric, UDP4Tuple: cfg.Hash.UDP4Tuple})
	if err != nil {
		return nil, err
	}
	d := &Dispatcher{
		cfg:     cfg,
		keyName: keyFingerprint(cfg.Hash.Key),
		cls:     cls,
		keyCls:  cls.keyOnly(),
		table:   newIndirection(cfg.Buckets, cfg.Workers),
		retired: counts{bucketFrames: make([]uint64, cfg.Buckets)},
		quit:    make(chan struct{}),
		created: time.Now(),
	}
	if generated {
		d.keyName = "random " + d.keyName
	}
	if allowed, err := affinity.Allowed(); err == nil && len(cfg.CPUs) > 0 {
		used := map[int]bool{}
		for _, c := range cfg.CPUs[:min(len(cfg.CPUs), cfg.Workers)] {
			used[c] = true
		}
		// Each worker has a CPU of its own, and a CPU is left for the
		// sources.
		d.spin = cfg.Workers <= len(used) && len(used) < len(allowed)
	}
	if cfg.RFS.Enabled {
		d.desired, err = flowtable.NewDesired(cfg.RFS.TableSize)
		if err != nil {
			return nil, fmt.Errorf("steer: RFS: %w: %w", err, ErrConfig)
		}
	}
	d.workers = make([]*Worker, cfg.Workers)
	for i := range d.workers {
		w := &Worker{d: d, index: i, cpu: -1, notify: make(chan struct{}, 1), inited: make(chan struct{}),
			ring: make([]*pbatch, 16), bind: bind}
		w.space.L = &w.mu
		if len(cfg.CPUs) > 0 {
			w.cpu = cfg.CPUs[i%len(cfg.CPUs)]
		}
		w.prod = d.newProducer(-1-i, false)
		w.prod.self = w
		d.workers[i] = w
	}
	for _, w := range d.workers {
		d.wg.Add(1)
		go w.run(&d.wg)
	}
	var startErr error
	for _, w := range d.workers {
		<-w.inited
		if w.err != nil && startErr == nil {
			startErr = fmt.Errorf("steer: worker %d: %w", w.index, w.err)
		}
		if _, ok := w.state.(Mover); ok {
			d.hooks = true
		}
	}
	if startErr != nil {
		d.Close(context.Background())
		return nil, startErr
	}
	if cfg.Rebalance.Interval > 0 {
		d.startRebalancer()
	}
	return d, nil
}

// Config returns the dispatcher's configuration with defaults filled in.
func (d *Dispatcher) Config() Config { return d.cfg }

// Classifier returns the classifier the dispatcher uses.
func (d *Dispatcher) Classifier() *Classifier { return d.cls }

// Workers returns the number of workers.
func (d *Dispatcher) Workers() int { return len(d.workers) }

// Input is one feeder of a dispatcher with its own source id. One goroutine
// uses an Input at a time; several Inputs may feed one dispatcher at once.
// Order is kept per input and flow.
type Input struct {
	p      *producer
	closed bool
}

// NewInput returns an input with the next free source id. Its caller can
// wait, so under OverflowAuto a full queue holds Dispatch back rather than
// drop: a caller feeding frames it cannot hold back (a live capture) sets
// Config.Queue.Overflow to OverflowDrop.
func (d *Dispatcher) NewInput() *Input { return d.newInput(true) }

// newInput returns an input for a source that can (or cannot) wait.
func (d *Dispatcher) newInput(canWait bool) *Input {
	d.mu.Lock()
	id := d.nextID
	d.nextID++
	d.mu.Unlock()
	return &Input{p: d.newProducer(id, canWait)}
}

// ID returns the input's source id (used by the SOURCE policy).
func (in *Input) ID() int { return in.p.id }

// Dispatch classifies, hashes and steers frames. release, when not nil, is
// called once every frame has been handled or dropped. The frames slice may
// be reused once Dispatch returns; the bytes must live until release.
//
// Each call costs a lock, a hand-off per worker and a wake-up, shared by the
// frames it carries: call it with batches (up to BatchSize frames or more),
// not one frame at a time, which is several times slower per frame.
func (in *Input) Dispatch(frames []Frame, release func()) error {
	d := in.p.d
	d.intake.RLock()
	defer d.intake.RUnlock()
	if d.closed.Load() || in.closed {
		if release != nil {
			release()
		}
		return ErrClosed
	}
	in.p.dispatch(frames, release)
	return nil
}

// retire takes a closed input's producer out of the dispatcher, keeping
// its counts. Stats and bucketLoad sum under d.mu, so they see the counts
// once, either in the producer or in d.retired.
func (d *Dispatcher) retire(p *producer) {
	var top []FlowStats
	if flows := p.flows; flows != nil {
		top = topFlows(flows)
	}
	d.mu.Lock()
	if i := slices.Index(d.producers, p); i >= 0 {
		d.producers = slices.Delete(d.producers, i, i+1)
		p.mu.Lock()
		p.counts.addTo(&d.retired)
		p.flows = nil
		p.mu.Unlock()
		d.retiredTop = bestFlows(append(d.retiredTop, top...))
	}
	d.mu.Unlock()
	p.stock.retire()
}

// sumCounts returns the counts of every input, open and closed, the flow
// tables of the open ones and the top flows of the closed ones.
func (d *Dispatcher) sumCounts() (counts, []*flowtable.Table, []FlowStats) {
	sum := counts{bucketFrames: make([]uint64, len(d.table.ents))}
	var tables []*flowtable.Table
	d.mu.Lock()
	defer d.mu.Unlock()
	d.retired.addTo(&sum)
	top := append([]FlowStats(nil), d.retiredTop...)
	for _, p := range d.producers {
		p.mu.Lock()
		p.counts.addTo(&sum)
		if p.flows != nil {
			tables = append(tables, p.flows)
		}
		p.mu.Unlock()
	}
	return sum, tables, top
}

// Close retires the input once its goroutine is done feeding it: its
// counters stay in Stats, and its flow table and batches are let go, so a
// program that makes an input per capture file does not keep them all.
// Dispatch on a closed input returns ErrClosed. Call Close from the
// goroutine that calls Dispatch, never during a Dispatch; a second Close
// does nothing. Run closes the input it makes.
func (in *Input) Close() {
	if in.closed {
		return
	}
	in.closed = true
	in.p.d.retire(in.p)
}

// Run reads src and dispatches every batch through a new Input. It returns
// nil once src is exhausted (io.EOF), ctx.Err() when ctx ends first, and
// ErrClosed when the dispatcher closes first: a caller that cancels ctx to
// stop reading sees that the source was not read to its end. A source that
// implements [LiveSource] and says it is live is dropped from on a full
// queue under OverflowAuto; any other source is held back. Run registers a
// source's own counters ([SourceStatser]) with the stats. It does not close
// src.
func (d *Dispatcher) Run(ctx context.Context, src Source) error {
	in := d.newInput(!isLive(src))
	defer in.Close()
	if s, ok := src.(sourceStatser); ok {
		d.mu.Lock()
		d.sources = append(d.sources, s)
		d.mu.Unlock()
	}
	var b Batch
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		b.Frames, b.Release = b.Frames[:0], nil
		err := src.ReadBatch(ctx, &b)
		if len(b.Frames) > 0 || b.Release != nil {
			if derr := in.Dispatch(b.Frames, b.Release); derr != nil {
				return derr
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			return fmt.Errorf("steer: read source: %w", err)
		}
	}
}

// SetDesired records that the consumer of flowid runs on worker (RFS, the
// analogue of rps_record_sock_flow). The dispatcher moves the flow there as
// soon as the old worker has handled every frame of it already queued; until
// then frames keep going to the old worker. Any goroutine may call it,
// handlers included. Without Config.RFS.Enabled it records nothing and
// returns an error wrapping ErrConfig.
func (d *Dispatcher) SetDesired(flowid uint32, worker int) error {
	if d.desired == nil {
		return fmt.Errorf("steer: SetDesired needs Config.RFS.Enabled: %w", ErrConfig)
	}
	if worker < 0 || worker >= len(d.workers) {
		return fmt.Errorf("steer: desired worker %d of %d: %w", worker, len(d.workers), ErrConfig)
	}
	return d.desired.Set(flowid, worker)
}

// ClearDesired forgets the desired worker of flowid; the flow then follows
// the policy again (moving under the same rule).
func (d *Dispatcher) ClearDesired(flowid uint32) {
	if d.desired != nil {
		d.desired.Clear(flowid)
	}
}

// Close stops intake, lets every worker drain its queue, closes each
// per-worker state that implements io.Closer (in its worker), and waits for
// the workers to exit. When ctx ends first, the workers drop what is left
// (counted as close drops) and Close returns an error saying what was left.
// Close may be called more than once, and at any moment; dispatch calls made
// after it return ErrClosed. Called from inside a handler or a hook, which
// cannot wait for its own frame, Close stops intake, lets the workers drain
// and exit once the handler returns, and returns at once with an error
// wrapping ErrCloseInHandler; a later Close from outside waits for the rest.
// Errors from the states' Close are joined into the result.
func (d *Dispatcher) Close(ctx context.Context) error {
	if !d.closed.Swap(true) && d.reb != nil {
		d.reb.stop()
	}
	if calledFromHandler() {
		go d.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("steer: close: %w: intake is stopped; the workers drain and exit after the handler returns, not waited for", ErrCloseInHandler)
	}
	var ctxErr error
	// Wait for dispatch calls in flight; a producer blocked on a full queue
	// finishes as the workers drain.
	intakeDone := make(chan struct{})
	go func() {
		d.intake.Lock() // every dispatch call in flight has returned
		close(intakeDone)
		d.intake.Unlock()
	}()
	select {
	case <-intakeDone:
	case <-ctx.Done():
		ctxErr = ctx.Err()
	}
	// Drain: wait until every frame enqueued has been handled. Heads are
	// read before tails, so a re-dispatch in flight (which raises a tail
	// before its own frame's head) is never missed.
	if ctxErr == nil {
		tick := time.NewTicker(200 * time.Microsecond)
		for ctxErr == nil && !d.drained() {
			select {
			case <-ctx.Done():
				ctxErr = ctx.Err()
			case <-tick.C:
			}
		}
		tick.Stop()
	}
	var left uint64
	if ctxErr != nil {
		for _, w := range d.workers {
			left += w.tail.Load() - w.head.Load()
		}
		d.abort.Store(true)
		for _, w := range d.workers { // release producers blocked on a full queue
			w.mu.Lock()
			w.space.Broadcast()
			w.mu.Unlock()
		}
	}
	d.quitOnce.Do(func() { close(d.quit) })
	for _, w := range d.workers {
		w.wake()
	}
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		var busy []int
		for _, w := range d.workers {
			if w.tail.Load() != w.head.Load() {
				busy = append(busy, w.index)
			}
		}
		return fmt.Errorf("steer: close: %w: %d frames were left queued; workers %v are still running", ctx.Err(), left, busy)
	}
	d.mu.Lock()
	closeErr := errors.Join(d.closeErrs...)
	d.mu.Unlock()
	if ctxErr != nil {
		return errors.Join(fmt.Errorf("steer: close: %w: %d frames were left queued and dropped", ctxErr, left), closeErr)
	}
	return closeErr
}

// Sync waits until every frame queued before the call has been handled (or
// dropped), without closing the dispatcher: a barrier for tests, examples
// and reconfiguration. Frames queued meanwhile are not waited for.
func (d *Dispatcher) Sync(ctx context.Context) error {
	want := make([]uint64, len(d.workers))
	for i, w := range d.workers {
		want[i] = w.tail.Load()
	}
	tick := time.NewTicker(100 * time.Microsecond)
	defer tick.Stop()
	for i, w := range d.workers {
		for w.head.Load() < want[i] {
			select {
			case <-ctx.Done():
				return fmt.Errorf("steer: sync: %w", ctx.Err())
			case <-tick.C:
			}
		}
	}
	return nil
}

func (d *Dispatcher) drained() bool {
	heads := make([]uint64, len(d.workers))
	for i, w := range d.workers {
		heads[i] = w.head.Load()
	}
	for i, w := range d.workers {
		if w.tail.Load() != heads[i] {
			return false
		}
	}
	return true
}
