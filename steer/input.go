package steer

import (
	"fmt"
	"slices"
)

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
// Config.Queue.Overflow to OverflowDrop. A handler must not feed an input
// of its own dispatcher that waits (it would wait for room its own worker
// has to make): it re-dispatches with Packet.Redispatch, which never waits.
// Feeding another dispatcher's input, a pipeline, is fine.
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
// Each call costs a lock, a hand-off per worker and a wake-up, shared by
// the frames it carries: call it with batches of BatchSize frames or more.
// One frame per call costs about ten times as much per frame as 64-frame
// batches (docs/performance.md has the figures).
func (in *Input) Dispatch(frames []Frame, release func()) error {
	d := in.p.d
	d.intake.RLock()
	defer d.intake.RUnlock()
	if d.closed.Load() || in.closed {
		if release != nil {
			d.release(release)
		}
		return ErrClosed
	}
	in.p.dispatch(frames, release)
	if in.p.selfWait {
		in.p.selfWait = false
		return fmt.Errorf("steer: Dispatch from inside a handler of this dispatcher waited on a full queue, for room only "+
			"its workers could make, until Close gave up waiting; a handler re-dispatches with Packet.Redispatch, or feeds "+
			"an input whose Config.Queue.Overflow drops: %w", ErrClosed)
	}
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
