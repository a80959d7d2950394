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

// DefaultFlowTableSize is the default capacity of the RFS flow tables.
const DefaultFlowTableSize = 1 << 16

// Handler processes one packet. It runs in the goroutine of the worker the
// packet was steered to (or, with Direct dispatch, in the caller's).
type Handler func(p *Packet)

// Dispatcher steers frames to per-worker goroutines: netisr for user space.
// See the package documentation for the path a frame takes.
type Dispatcher struct {
	cfg     Config
	handler Handler
	cls     *Classifier
	keyCls  *Classifier // cls without the hash, for Packet.Key
	workers []*Worker
	table   *indirection
	desired *flowtable.Desired // RFS: where each flow's consumer runs
	wg      sync.WaitGroup

	intake   sync.RWMutex // dispatch calls hold it shared; Close exclusively
	closed   atomic.Bool
	abort    atomic.Bool
	quit     chan struct{}
	quitOnce sync.Once

	mu         sync.Mutex
	producers  []*producer
	retired    counts      // what closed inputs counted
	retiredTop []FlowStats // and their top flows (RFS), as they closed
	nextID     int
	sources    []sourceStatser
	reb        *rebalancer

	created time.Time
	// spin lets idle pinned workers poll before parking: only when each
	// has a CPU of its own and at least one CPU is left to the sources.
	spin bool
}

// New starts a dispatcher with cfg's workers, which run h for every frame.
// Configuration errors wrap ErrConfig.
func New(cfg Config, h Handler) (*Dispatcher, error) {
	if h == nil {
		return nil, fmt.Errorf("steer: nil handler: %w", ErrConfig)
	}
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	hasher, err := hash.NewToeplitz(cfg.Key)
	if err != nil {
		return nil, fmt.Errorf("steer: %w", err)
	}
	cls, err := NewClassifier(ClassifierConfig{Hasher: hasher, Symmetric: cfg.Symmetric, UDP4Tuple: cfg.UDP4Tuple})
	if err != nil {
		return nil, err
	}
	d := &Dispatcher{
		cfg:     cfg,
		handler: h,
		cls:     cls,
		keyCls:  cls.keyOnly(),
		table:   newIndirection(cfg.Buckets, cfg.Workers),
		retired: counts{bucketFrames: make([]uint64, cfg.Buckets)},
		quit:    make(chan struct{}),
		created: time.Now(),
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
	if cfg.RFS {
		d.desired, err = flowtable.NewDesired(cfg.FlowTableSize)
		if err != nil {
			return nil, fmt.Errorf("steer: %w", err)
		}
	}
	d.workers = make([]*Worker, cfg.Workers)
	for i := range d.workers {
		w := &Worker{d: d, index: i, cpu: -1, notify: make(chan struct{}, 1), inited: make(chan struct{}),
			ring: make([]*pbatch, 16)}
		w.space.L = &w.mu
		if len(cfg.CPUs) > 0 {
			w.cpu = cfg.CPUs[i%len(cfg.CPUs)]
		}
		w.prod = d.newProducer(-1 - i)
		w.prod.self = w
		d.workers[i] = w
	}
	for _, w := range d.workers {
		d.wg.Add(1)
		go w.run(&d.wg)
	}
	var pinErr error
	for _, w := range d.workers {
		<-w.inited
		if w.err != nil && pinErr == nil {
			pinErr = fmt.Errorf("steer: worker %d: %w", w.index, w.err)
		}
	}
	if pinErr != nil {
		d.Close(context.Background())
		return nil, pinErr
	}
	if cfg.Expvar != "" {
		if err := d.publish(cfg.Expvar); err != nil {
			d.Close(context.Background())
			return nil, err
		}
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

// NewInput returns an input with the next free source id.
func (d *Dispatcher) NewInput() *Input {
	d.mu.Lock()
	id := d.nextID
	d.nextID++
	d.mu.Unlock()
	return &Input{p: d.newProducer(id)}
}

// ID returns the input's source id (used by the SOURCE policy).
func (in *Input) ID() int { return in.p.id }

// Dispatch classifies, hashes and steers frames. release, when not nil, is
// called once every frame has been handled or dropped. The frames slice may
// be reused once Dispatch returns; the bytes must live until release.
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

// Run reads src until it is exhausted (io.EOF, which Run turns into nil), ctx
// ends, or the dispatcher closes, dispatching every batch through a new
// Input. It does not close src.
func (d *Dispatcher) Run(ctx context.Context, src Source) error {
	in := d.NewInput()
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
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("steer: read source: %w", err)
		}
	}
}

// SetDesired records that the consumer of flowid runs on worker (RFS, the
// analogue of rps_record_sock_flow). The dispatcher moves the flow there as
// soon as the old worker has handled every frame of it already queued; until
// then frames keep going to the old worker. Any goroutine may call it,
// handlers included. It is a no-op unless Config.RFS is set.
func (d *Dispatcher) SetDesired(flowid uint32, worker int) error {
	if d.desired == nil {
		return fmt.Errorf("steer: SetDesired without Config.RFS: %w", ErrConfig)
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

// Close stops intake, lets every worker drain its queue, runs OnClose in each
// worker, and waits for the workers to exit. When ctx ends first, the
// workers drop what is left (counted as close drops) and Close returns an
// error saying what was left. Close may be called more than once, and at any
// moment; dispatch calls made after it return ErrClosed.
func (d *Dispatcher) Close(ctx context.Context) error {
	if !d.closed.Swap(true) && d.reb != nil {
		d.reb.stop()
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
	d.unpublish()
	if ctxErr != nil {
		return fmt.Errorf("steer: close: %w: %d frames were left queued and dropped", ctxErr, left)
	}
	return nil
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
