package steer

import (
	"fmt"
	"io"
	"time"
)

// control carries a move hook between the old and the new worker.
type control struct {
	m     Move
	out   bool // MoveOut in the old worker; otherwise MoveIn in the new one
	state any
	ready chan struct{} // closed by the MoveOut side when state is set
	skip  bool          // the MoveOut side could not be queued: no MoveIn
	peer  *control
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
	w.shared = w.state != nil && w.d.cfg.Dispatch == DispatchDirect
}

// lockState takes w's state lock for the goroutine of producer p when the
// state is shared (DIRECT dispatch with per-worker state) and p does not
// hold it already, and reports whether it took it (for unlockState). A
// goroutine holds at most one state lock, so two cannot wait for each
// other: p holds none, or w's (handOff and moveHooks see to it).
func (p *producer) lockState(w *Worker) bool { return w.shared && p.takeState(w) }

// takeState is lockState past the check that inlines.
func (p *producer) takeState(w *Worker) bool {
	if p.stateHeld == w {
		return false
	}
	w.stateMu.Lock()
	p.stateHeld = w
	return true
}

// unlockState releases what lockState took.
func (p *producer) unlockState(w *Worker, took bool) {
	if took {
		p.releaseState(w)
	}
}

// releaseState is unlockState's unlocking half.
func (p *producer) releaseState(w *Worker) {
	p.stateHeld = nil
	w.stateMu.Unlock()
}

// tick runs the state's Tick.
func (w *Worker) tick(now time.Time) {
	if t, ok := w.state.(Ticker); ok {
		took := w.prod.lockState(w)
		w.d.guard(cbTick, w.index, func() { t.Tick(now) })
		w.prod.unlockState(w, took)
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
	took := w.prod.lockState(w)
	w.d.guard(cbStateClose, w.index, func() { err = c.Close() })
	w.prod.unlockState(w, took)
	if err != nil {
		w.d.mu.Lock()
		w.d.closeErrs = append(w.d.closeErrs, fmt.Errorf("steer: worker %d: close state: %w", w.index, err))
		w.d.mu.Unlock()
	}
}

// control runs one side of a move hook in the goroutine of producer p (the
// worker's own, or with DIRECT dispatch the dispatching one), under w's
// state lock while the hook runs. MoveIn first waits for its MoveOut, which
// runs in the old worker, and it waits holding nothing: a worker never waits
// on another worker while it holds something that worker needs (here its
// state's lock, which the old worker may need to run a hook of its own
// inline). The wait ends without MoveIn when Close gives up waiting for the
// workers, since the old worker may then never run its side.
func (w *Worker) control(p *producer, c *control) {
	mv, _ := w.state.(Mover)
	if c.out {
		var carried any
		if mv != nil {
			took := p.lockState(w)
			w.d.guard(cbMoveOut, w.index, func() { carried = mv.MoveOut(c.m) })
			p.unlockState(w, took)
		}
		c.peer.state = carried
		close(c.peer.ready)
		return
	}
	select {
	case <-c.ready:
	case <-w.d.aborted:
		select {
		case <-c.ready:
		default:
			return // Close ran out of time before the old worker's MoveOut
		}
	}
	if mv != nil && !c.skip {
		took := p.lockState(w)
		w.d.guard(cbMoveIn, w.index, func() { mv.MoveIn(c.m, c.state) })
		p.unlockState(w, took)
	}
}

// Ticker is a per-worker state whose Tick runs every Config.TickInterval.
type Ticker interface {
	Tick(now time.Time)
}

// Mover is implemented by per-worker states whose per-flow state follows a
// flow that changes worker: MoveOut runs in the old worker after its last
// frame of the moved flows and returns what to carry, MoveIn in the new one
// with it before its first (once per flow under RFS, per bucket otherwise).
type Mover interface {
	MoveOut(m Move) (carried any)
	MoveIn(m Move, carried any)
}
