package steer

import (
	"fmt"
	"slices"
)

// Input is one feeder of a dispatcher, with its own source id, used by one
// goroutine at a time. Order is kept per input and flow.
type Input struct {
	p      *producer
	closed bool
}

// NewInput returns an input with the next source id, which a full queue
// holds back under OverflowAuto (a handler uses Packet.Redispatch instead).
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

// Dispatch steers frames; release, when not nil, is called once they are
// all done. One frame per call costs ten times as much per frame as
// BatchSize (docs/performance.md).
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

// Close retires the input once done; its counts stay in Stats.
func (in *Input) Close() {
	if in.closed {
		return
	}
	in.closed = true
	in.p.d.retire(in.p)
}
