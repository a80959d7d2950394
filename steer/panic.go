package steer

import (
	"fmt"
	"sync"
	"time"
)

// panicLog rate-limits the log of recovered panics: a handler that panics
// on every frame must not flood the log, nor slow the worker to the pace of
// its writes.
type panicLog struct {
	mu      sync.Mutex
	last    time.Time
	skipped int
}

// panicLogEvery is the least time between two logged panics.
const panicLogEvery = time.Second

// reportPanic hands a recovered panic to Config.OnPanic, or logs it (at
// most once a second, saying how many were left out since the last one).
func (d *Dispatcher) reportPanic(pi PanicInfo) {
	if f := d.cfg.OnPanic; f != nil {
		defer func() {
			if v := recover(); v != nil { // OnPanic itself must not kill the worker
				d.cfg.Logger.Error("steer: Config.OnPanic panicked", "panic", fmt.Sprint(v), "reporting", fmt.Sprint(pi.Value))
			}
		}()
		f(pi)
		return
	}
	l := &d.panicLog
	l.mu.Lock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < panicLogEvery {
		l.skipped++
		l.mu.Unlock()
		return
	}
	skipped := l.skipped
	l.last, l.skipped = now, 0
	l.mu.Unlock()
	d.cfg.Logger.Error("steer: recovered a panic; the frame is counted as panicked and the worker goes on",
		"worker", pi.Worker, "panic", fmt.Sprint(pi.Value), "in", pi.Summary,
		"not_logged_since_last", skipped, "stack", string(pi.Stack))
}

// flushPanicLog logs how many panics the rate limit left out since the last
// record, once the workers have exited.
func (d *Dispatcher) flushPanicLog() {
	l := &d.panicLog
	l.mu.Lock()
	n := l.skipped
	l.skipped = 0
	l.mu.Unlock()
	if n > 0 {
		d.cfg.Logger.Error("steer: more recovered panics were not logged (at most one record a second)", "not_logged_since_last", n)
	}
}
