package steer

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"
)

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
		return fmt.Errorf("%w: intake is stopped; the workers drain and exit after the handler returns, not waited for", ErrCloseInHandler)
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
		d.setAbort()
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
			if !w.exited.Load() {
				busy = append(busy, w.index)
			}
		}
		return fmt.Errorf("steer: close: %w: %d frames were left queued or in a handler; workers %v have not exited (in a handler, a hook or a state's Close)", ctx.Err(), left, busy)
	}
	d.flushPanicLog()
	d.mu.Lock()
	closeErr := errors.Join(d.closeErrs...)
	d.mu.Unlock()
	if ctxErr != nil {
		return errors.Join(fmt.Errorf("steer: close: %w: %d frames were left queued or in a handler; the queued ones were dropped", ctxErr, left), closeErr)
	}
	return closeErr
}

// setAbort tells the workers and the producers that Close has given up
// waiting: what is left is dropped, and no one waits any more for a worker
// to serve its queue.
func (d *Dispatcher) setAbort() {
	if !d.abort.Swap(true) {
		close(d.aborted)
	}
}

// barrier waits until every frame queued before the call has been handled
// (or dropped), without closing the dispatcher. Frames queued meanwhile are
// not waited for.
func (d *Dispatcher) barrier(ctx context.Context) error {
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

// handlerFrames are the functions through which the library runs user code
// (a handler, a hook, a state's constructor, a batch's release, Trace,
// CPUFunc, OnPanic or the Logger): a goroutine with one of them on its
// stack is inside user code the dispatcher called.
var handlerFrames = []string{
	"steer.(*Worker).handleFrom",
	"steer.(*Worker).call",
	"steer.(*Worker).init",
	"steer.(*Dispatcher).guard",
	"steer.(*Dispatcher).reportPanic",
}

// calledFromHandler reports whether the calling goroutine is running user
// code the dispatcher called. It walks the stack, so only Close calls it.
func calledFromHandler() bool {
	pcs := make([]uintptr, 256)
	for {
		n := runtime.Callers(2, pcs)
		if n < len(pcs) {
			pcs = pcs[:n]
			break
		}
		pcs = make([]uintptr, 2*len(pcs))
	}
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		for _, h := range handlerFrames {
			if strings.HasSuffix(f.Function, h) {
				return true
			}
		}
		if !more {
			return false
		}
	}
}
