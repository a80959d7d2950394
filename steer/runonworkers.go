package steer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// attachReq hands a source to a worker (RunOnWorkers, and Run under
// HYBRID: see hybridReader).
type attachReq struct {
	ctx  context.Context
	src  Source
	done chan error
	// reader: the worker reads the source for Run, as the one reader of
	// the dispatcher that is a worker, with the source id id: it may wait
	// for room in the other workers' queues (a live source as LiveSource
	// says), and handles its own frames inline.
	reader bool
	id     int
}

// readSource is the worker's loop while it reads a source of its own (one
// socket of a kernel fanout group): it reads a batch, dispatches it through
// its own producer (DIRECT: handled here, accounted to this workstream), and
// between batches handles its queue and its tick. The source's ReadBatch
// should return within a bounded time (a poll timeout) so that the queue
// and the tick are served.
func (w *Worker) readSource(req *attachReq, tick <-chan time.Time) error {
	d, ctx, src := w.d, req.ctx, req.src
	if req.reader {
		p := w.prod
		p.prepare()
		limit, batchCap := p.limit, p.batchCap
		p.source, p.readerWaits = req.id, true
		p.wait = d.cfg.Queue.waits(true)
		if l := liveSource(src); l != nil {
			p.setLive(l)
		}
		defer func() {
			p.source, p.readerWaits, p.wait, p.live = p.id, false, false, nil
			p.limit, p.batchCap = limit, batchCap
		}()
	}
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
					d.release(b.Release)
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
			w.control(w.prod, b.ctl)
			putBatch(b)
		} else {
			took := w.prod.lockState(w)
			w.handleBatch(b)
			w.prod.unlockState(w, took)
		}
		w.mu.Lock()
		w.qlen -= n
		if w.waitersDue() {
			w.space.Broadcast()
		}
		w.mu.Unlock()
	}
}

// RunOnWorkers has worker i read srcs[i], as each socket of a kernel fanout
// group can be read on its own CPU; with DIRECT dispatch the worker that
// read a frame handles it. It returns as Run does.
func (d *Dispatcher) RunOnWorkers(ctx context.Context, srcs []Source) error {
	if len(srcs) != len(d.workers) {
		return fmt.Errorf("steer: %d sources for %d workers: %w", len(srcs), len(d.workers), ErrConfig)
	}
	for i, s := range srcs {
		if s == nil {
			return fmt.Errorf("steer: RunOnWorkers: source %d is nil: %w", i, ErrConfig)
		}
	}
	if d.closed.Load() {
		return ErrClosed
	}
	for _, s := range srcs {
		if st, ok := s.(SourceStatser); ok {
			d.addSource(st)
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

// runInWorker is Run reading src in worker w (HYBRID; see Run).
func (d *Dispatcher) runInWorker(ctx context.Context, src Source, w *Worker) error {
	if d.closed.Load() {
		return ErrClosed
	}
	if s, ok := src.(SourceStatser); ok {
		d.addSource(s)
	}
	d.mu.Lock()
	id := d.nextID
	d.nextID++
	d.mu.Unlock()
	req := &attachReq{ctx: ctx, src: src, done: make(chan error, 1), reader: true, id: id}
	if !w.offer(req) {
		return ErrClosed
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		if w.withdraw(req) {
			return ctx.Err()
		}
		return <-req.done // taken: readSource sees ctx end
	}
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
