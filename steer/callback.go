package steer

import (
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// User callbacks, and the one rule for all of them.
//
// The dispatcher runs code it does not own: the handler; a per-worker
// state's constructor, Tick, MoveOut, MoveIn and Close; Config.Trace,
// Config.CPUFunc and Config.OnPanic; the release callback of a batch; a
// live source's Backlog. Every
// one of them is run through a recover: a panic is counted under the name
// of the callback (a handler's in WorkstreamStats.Panics, as one per frame;
// the others in Stats.CallbackPanics), reported to Config.OnPanic (or
// logged), and the dispatcher goes on as if the callback had returned: a
// panicking Trace leaves the frame's decision as it was, a panicking CPUFunc
// is a CPUFunc that declined (SOURCE places the frame), a panicking MoveOut
// carries nothing, a panicking release has still released its batch as far
// as the dispatcher is concerned. No lock of the dispatcher is left held.
// The one exception is a state constructor: its panic fails New, which then
// returns an error saying so.

// callback names a kind of user callback, for counting and reporting.
type callback uint8

const (
	cbHandler callback = iota
	cbTick
	cbMoveOut
	cbMoveIn
	cbStateClose
	cbTrace
	cbCPUFunc
	cbRelease
	cbOnPanic
	cbBacklog
	numCallbacks
)

// callbackNames are the names Stats.CallbackPanics and PanicInfo.Callback
// use.
var callbackNames = [numCallbacks]string{
	cbHandler:    "handler",
	cbTick:       "Tick",
	cbMoveOut:    "MoveOut",
	cbMoveIn:     "MoveIn",
	cbStateClose: "Close",
	cbTrace:      "Trace",
	cbCPUFunc:    "CPUFunc",
	cbRelease:    "release",
	cbOnPanic:    "OnPanic",
	cbBacklog:    "Backlog",
}

func (c callback) String() string { return callbackNames[c] }

// guard runs f, a callback of kind cb for worker (-1 when none), and
// reports whether it returned; a panic is recovered, counted and reported.
func (d *Dispatcher) guard(cb callback, worker int, f func()) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			d.callbackPanics[cb].Add(1)
			d.reportPanic(PanicInfo{Callback: cb.String(), Worker: worker, Value: v, Summary: cb.String(), Stack: debug.Stack()})
			ok = false
		}
	}()
	f()
	return true
}

// release gives a batch's buffer back through the source's callback.
func (d *Dispatcher) release(rel func()) {
	d.guard(cbRelease, -1, rel)
}

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
// A panic of OnPanic itself is counted and logged.
func (d *Dispatcher) reportPanic(pi PanicInfo) {
	if f := d.cfg.OnPanic; f != nil {
		defer func() {
			if v := recover(); v != nil {
				d.callbackPanics[cbOnPanic].Add(1)
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
	d.cfg.Logger.Error("steer: recovered a panic; the dispatcher goes on",
		"callback", pi.Callback, "worker", pi.Worker, "panic", fmt.Sprint(pi.Value), "in", pi.Summary,
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
