package steer

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"
)

// Close stops intake, drains the queues, closes io.Closer states and waits
// for the workers; it may be called any time, more than once (from a
// handler: ErrCloseInHandler). When ctx ends first, what is queued is
// dropped (CloseDrops), and the error says what handlers still hold.
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
	dropped := 0
	if ctxErr != nil {
		d.setAbort()
		for _, w := range d.workers {
			dropped += w.dropQueued()
		}
	}
	d.quitOnce.Do(func() { close(d.quit) })
	for _, w := range d.workers {
		w.wake()
	}
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	wait := ctx.Done()
	if ctxErr != nil {
		// ctx has ended already: the workers only drop what they hold now,
		// so give them a moment to, and to exit, before telling what is left.
		grace, cancel := context.WithTimeout(context.Background(), closeGrace)
		defer cancel()
		wait = grace.Done()
	}
	exited := false
	select {
	case <-done:
		exited = true
	case <-wait:
		if ctxErr == nil {
			ctxErr = ctx.Err()
		}
	}
	var leftErr error
	if ctxErr != nil {
		leftErr = d.leftError(ctxErr, dropped)
	}
	if !exited {
		return leftErr
	}
	d.flushPanicLog()
	d.mu.Lock()
	closeErr := errors.Join(d.closeErrs...)
	d.mu.Unlock()
	return errors.Join(leftErr, closeErr)
}

// closeGrace is how long a Close whose ctx has ended waits for the workers
// to drop what they hold and exit, before it says what is left.
const closeGrace = 20 * time.Millisecond

// leftError says what a Close that ran out of time left: the queued frames
// it dropped, the frames handlers still hold, the workers that have not
// exited and the inputs still inside Dispatch.
func (d *Dispatcher) leftError(err error, dropped int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d queued frames were left and dropped (close drops)", dropped)
	st := d.Stats()
	if done := st.Handled() + st.Dropped() + st.Panicked(); st.Frames > done {
		fmt.Fprintf(&b, "; %d frames are still held by handlers that have not returned, and end as handled, panicked or close drops when they do", st.Frames-done)
	}
	var busy []int
	for _, w := range d.workers {
		if !w.exited.Load() {
			busy = append(busy, w.index)
		}
	}
	if len(busy) > 0 {
		fmt.Fprintf(&b, "; workers %v have not exited (in a handler, a hook or a state's Close)", busy)
	}
	inside := 0
	d.mu.Lock()
	for _, p := range d.producers {
		if p.self == nil && !p.mu.TryLock() {
			inside++
		} else if p.self == nil {
			p.mu.Unlock()
		}
	}
	d.mu.Unlock()
	if inside > 0 {
		fmt.Fprintf(&b, "; %d inputs are still inside Dispatch (running handlers inline with DIRECT or HYBRID dispatch)", inside)
	}
	if d.selfWaits.Load() > 0 {
		b.WriteString("; a handler of this dispatcher fed an input of it that waits on a full queue, and waited for room only the workers could make " +
			"(re-dispatch with Packet.Redispatch, or feed an input whose Config.Queue.Overflow drops)")
	}
	return fmt.Errorf("steer: close: %w: %s", err, b.String())
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
