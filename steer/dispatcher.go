package steer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpsgo/rps/internal/affinity"
	"github.com/rpsgo/rps/internal/rfstable"
)

// ErrClosed is returned by dispatch calls after Close has begun.
var ErrClosed = errors.New("steer: dispatcher closed")

// ErrCloseInHandler is wrapped by the error of a Close called from a handler.
var ErrCloseInHandler = errors.New("steer: Close called from inside a handler")

// Handler processes a packet, in its worker (with DIRECT, in the caller).
type Handler func(p *Packet)

// Dispatcher steers frames to per-worker goroutines: netisr in user space.
type Dispatcher struct {
	cfg     Config
	keyName string // the key's fingerprint, for reports
	cls     *Classifier
	keyCls  *Classifier // cls without the hash, for Packet.Key
	workers []*Worker
	table   *indirection
	desired *rfstable.Desired // RFS: where each flow's consumer runs
	hooks   bool              // the states implement Mover
	wg      sync.WaitGroup

	intake sync.RWMutex // dispatch calls hold it shared; Close exclusively
	closed atomic.Bool
	// abort says Close ran out of time: what is left is dropped. The
	// workers read it for every frame, so it has a cache line of its own,
	// away from intake, which every dispatch call writes.
	_       [64]byte
	abort   atomic.Bool
	_       [63]byte
	aborted chan struct{} // closed with abort set
	// selfWaits counts the waits for room that Close broke in a worker's
	// goroutine: a handler feeding a waiting input of its own dispatcher.
	selfWaits atomic.Int64
	quit      chan struct{}
	quitOnce  sync.Once
	panicLog  panicLog

	callbackPanics [numCallbacks]atomic.Uint64 // recovered, by callback (not the handler's)
	cpuRemapped    atomic.Uint64               // CPUFunc answers out of range, taken modulo Workers

	mu         sync.Mutex
	producers  []*producer
	retired    counts      // what closed inputs counted
	retiredTop []FlowStats // and their top flows (RFS), as they closed
	nextID     int
	sources    []sourceStatser
	reb        *rebalancer
	closeErrs  []error // from the states' Close

	created time.Time
	// hybridReader is set while a Run reads its source in a worker (HYBRID).
	hybridReader atomic.Bool
	// spin lets idle pinned workers poll before parking: only when each
	// has a CPU of its own and at least one CPU is left to the sources.
	spin bool
}

// Locks and waits. The rule: a worker never waits on another worker while
// it holds anything that worker needs, and nothing waits for a handler but
// what must (Close, and a DIRECT caller for a state another handler uses).
//
//   - d.intake: every dispatch call holds it shared; Close takes it alone,
//     in a goroutine of its own, only to learn that the calls in flight
//     have returned. A worker reading its own source (RunOnWorkers) only
//     tries it, so a worker never waits behind Close.
//   - producer.mu (with its RFS flow table): its goroutine holds it for a
//     whole dispatch call, handlers run inline included, and lets it go
//     while it waits for room in a queue. Stats and the rebalancer only try
//     it and otherwise take the copy the producer publishes as it lets go
//     (Dispatcher.sumCounts), so they never wait for a handler.
//   - Worker.mu guards a queue; it is held for a few instructions, or
//     given up in space.Wait.
//   - Worker.stateMu serialises the uses of a worker's state with DIRECT
//     dispatch. A goroutine holds at most one (lockState), and it holds one
//     only while a handler or hook runs with that state, never while it
//     waits on a queue, a control item or another state's lock: a MoveIn
//     waits for its MoveOut holding nothing (Worker.control), a handler that
//     re-dispatches to another state queues the frame.
//   - d.mu guards the dispatcher's lists; no one waits for anything while
//     holding it, but Stats, for an input's counts, at most statsWait.
//
// The waits are then: a producer of a waiting input for room in a queue
// (it holds d.intake shared, which no worker needs); a MoveIn for its
// MoveOut; a DIRECT caller for a state's lock; Close for the rest. Once
// Close gives up waiting (Dispatcher.aborted), every one of them ends.

// New starts a dispatcher; configuration errors wrap ErrConfig.
func New(cfg Config, h Handler) (*Dispatcher, error) {
	if h == nil {
		return nil, fmt.Errorf("steer: nil handler: %w", ErrConfig)
	}
	return start(cfg, func(*Worker) (Handler, any) { return h, nil })
}

// NewPerWorker starts a dispatcher whose workers each have a state, made by
// newState in the worker's goroutine and passed to h with every packet, so
// it needs no locks. S must be a reference type. states[i] is worker i's,
// to read elsewhere after Close; a state may implement Ticker, Mover and
// io.Closer.
func NewPerWorker[S any](cfg Config, newState func(w *Worker) S, h func(state S, p *Packet)) (*Dispatcher, []S, error) {
	if newState == nil || h == nil {
		return nil, nil, fmt.Errorf("steer: NewPerWorker needs a state constructor and a handler: %w", ErrConfig)
	}
	if k := reflect.TypeFor[S]().Kind(); k == reflect.Struct || k == reflect.Array {
		// The handler would get a copy each time, and lose what it changed.
		return nil, nil, fmt.Errorf("steer: NewPerWorker with state type %v, passed by value: make the state a pointer (*%v): %w",
			reflect.TypeFor[S](), reflect.TypeFor[S](), ErrConfig)
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
	cls, err := NewClassifier(cfg.Hash)
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
		aborted: make(chan struct{}),
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
		d.desired, err = rfstable.NewDesired(cfg.RFS.TableSize)
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

// Config returns the configuration with defaults (and the key) filled in.
func (d *Dispatcher) Config() Config {
	c := d.cfg
	c.CPUs = slices.Clone(c.CPUs)
	c.Hash.Key = slices.Clone(c.Hash.Key)
	c.Hash.VXLANPorts = slices.Clone(c.Hash.VXLANPorts)
	return c
}

// Workers returns the number of workers.
func (d *Dispatcher) Workers() int { return len(d.workers) }

// Run reads src and dispatches its batches through a new Input until io.EOF
// (nil), ctx ends or Close (ErrClosed), without closing src. Under HYBRID it
// reads in worker 0, unless another Run does or the states implement Mover.
func (d *Dispatcher) Run(ctx context.Context, src Source) error {
	if src == nil {
		return fmt.Errorf("steer: Run: nil source: %w", ErrConfig)
	}
	if d.cfg.Dispatch == DispatchHybrid && !d.hooks && d.hybridReader.CompareAndSwap(false, true) {
		defer d.hybridReader.Store(false)
		return d.runInWorker(ctx, src, d.workers[0])
	}
	in := d.newInput(true)
	if l := liveSource(src); l != nil {
		in.p.setLive(l)
	}
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

// SetDesired records that flowid's consumer runs on worker (RFS): the flow
// moves there under the no-reorder rule. It needs Config.RFS.Enabled.
func (d *Dispatcher) SetDesired(flowid uint32, worker int) error {
	if d.closed.Load() {
		return ErrClosed
	}
	if d.desired == nil {
		return fmt.Errorf("steer: SetDesired needs Config.RFS.Enabled: %w", ErrConfig)
	}
	if worker < 0 || worker >= len(d.workers) {
		return fmt.Errorf("steer: desired worker %d of %d: %w", worker, len(d.workers), ErrConfig)
	}
	return d.desired.Set(flowid, worker)
}

// ClearDesired forgets flowid's desired worker (RFS).
func (d *Dispatcher) ClearDesired(flowid uint32) {
	if d.desired != nil {
		d.desired.Clear(flowid)
	}
}
