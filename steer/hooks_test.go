package steer

import "time"

// hookFuncs are per-worker hooks given as functions, for tests that check
// where and when hooks run.
type hookFuncs struct {
	init    func(w *Worker)
	tick    func(w *Worker, now time.Time)
	moveOut func(w *Worker, m Move) any
	moveIn  func(w *Worker, m Move, carried any)
	close   func(w *Worker)
}

// hookState is a per-worker state that implements every hook with fn.
type hookState struct {
	w  *Worker
	fn *hookFuncs
}

func (s *hookState) Tick(now time.Time) {
	if s.fn.tick != nil {
		s.fn.tick(s.w, now)
	}
}

func (s *hookState) MoveOut(m Move) any {
	if s.fn.moveOut != nil {
		return s.fn.moveOut(s.w, m)
	}
	return nil
}

func (s *hookState) MoveIn(m Move, carried any) {
	if s.fn.moveIn != nil {
		s.fn.moveIn(s.w, m, carried)
	}
}

func (s *hookState) Close() error {
	if s.fn.close != nil {
		s.fn.close(s.w)
	}
	return nil
}

// newHooked is New with hooks: a dispatcher whose workers' states run fn.
func newHooked(cfg Config, fn hookFuncs, h Handler) (*Dispatcher, error) {
	d, _, err := NewPerWorker(cfg, func(w *Worker) *hookState {
		if fn.init != nil {
			fn.init(w)
		}
		return &hookState{w: w, fn: &fn}
	}, func(_ *hookState, p *Packet) { h(p) })
	return d, err
}

// overflowOf is the overflow rule of the old Block switch: wait or drop.
func overflowOf(block bool) Overflow {
	if block {
		return OverflowWait
	}
	return OverflowDrop
}
