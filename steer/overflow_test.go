package steer

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// liveSlice is a SliceSource that says whether it is live (LiveSource).
type liveSlice struct {
	SliceSource
	live bool
}

func (s *liveSlice) Live() bool { return s.live }

// stallGate holds every handler until it is opened: by open, or, when
// after is set, that long after the first frame reached a handler.
type stallGate struct {
	ch          chan struct{}
	after       time.Duration
	once, first sync.Once
}

func newStallGate(after time.Duration) *stallGate {
	return &stallGate{ch: make(chan struct{}), after: after}
}

func (g *stallGate) open() { g.once.Do(func() { close(g.ch) }) }

func (g *stallGate) handle(*Packet) {
	if g.after > 0 {
		g.first.Do(func() { time.AfterFunc(g.after, g.open) })
	}
	<-g.ch
}

// maxWMark is the deepest any workstream's queue has been.
func maxWMark(st Stats) int {
	m := 0
	for _, w := range st.Workstreams {
		m = max(m, w.WMark)
	}
	return m
}

// stallFor is how long the handlers stall from the first frame on when the
// input should wait: long enough to fill a waiting queue.
const stallFor = 30 * time.Millisecond

// overflowFrames is enough frames that every worker's share overruns a
// dropping queue many times and fills a waiting one.
func overflowFrames(workers int) int {
	return max(12000, min(workers*6000, 48000))
}

// runAndClose runs frames through d (a SliceSource), closes d and checks
// the accounting.
func runAndClose(t *testing.T, d *Dispatcher, frames []Frame) Stats {
	t.Helper()
	if err := d.Run(context.Background(), &SliceSource{Frames: frames}); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return checkAccounting(t, d, uint64(len(frames)))
}

// waitIdle waits until every frame handed to d has its outcome and every
// queue is empty (Len counts a batch until its frames have left the queue),
// as a caller sees it through Stats. It counts outcomes with >=, so that a
// miscount fails the test that checks it, not this wait.
func waitIdle(t *testing.T, d *Dispatcher) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := d.Stats()
		idle := st.Handled()+st.Dropped()+st.Panicked() >= st.Frames
		for _, w := range st.Workstreams {
			idle = idle && w.Len == 0
		}
		if idle {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not idle after 10 s: %d frames, %d handled, %d dropped, %d panicked", st.Frames, st.Handled(), st.Dropped(), st.Panicked())
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// TestZeroConfigWaitsForSlice: the zero Config drops nothing from a source
// that can wait, however slow the handler, and lets its queues grow past
// the live default (DefaultQLimit) up to DefaultWaitQLimit.
func TestZeroConfigWaitsForSlice(t *testing.T) {
	defer goleak.VerifyNone(t)
	frames := dtTraffic(rand.New(rand.NewPCG(21, 1)), 64, overflowFrames(DefaultWorkers()))
	// The handlers stall while the source is read: a source that can wait
	// must be held back, not dropped from.
	gate := newStallGate(stallFor)
	d, err := New(Config{}, gate.handle)
	if err != nil {
		t.Fatal(err)
	}
	st := runAndClose(t, d, frames)
	if st.Dropped() != 0 || st.Handled() != st.Frames {
		t.Errorf("zero Config over a slice: %d frames, %d handled, %d dropped; want every frame handled", st.Frames, st.Handled(), st.Dropped())
	}
	if got := st.Config.Queue.Overflow; got != OverflowAuto {
		t.Errorf("zero Config: Overflow %v, want %v", got, OverflowAuto)
	}
	if m := maxWMark(st); m <= DefaultQLimit || m > DefaultWaitQLimit {
		t.Errorf("zero Config over a slice: deepest queue %d frames, want more than DefaultQLimit %d and at most DefaultWaitQLimit %d",
			m, DefaultQLimit, DefaultWaitQLimit)
	}
}

// TestOverflow: what a full queue does to each kind of input under each
// Overflow rule, and how deep the queues get.
func TestOverflow(t *testing.T) {
	type input int
	const (
		slice    input = iota // a SliceSource through Run: can wait
		live                  // a LiveSource that says it is live
		notLive               // a LiveSource that says it is not
		newInput              // Dispatcher.NewInput fed by the test: can wait
	)
	cases := []struct {
		name      string
		queue     QueueConfig
		in        input
		drops     bool
		wmarkOver int // the deepest queue is more than this
		wmarkMax  int // and at most this
	}{
		{"auto/slice", QueueConfig{}, slice, false, DefaultQLimit, DefaultWaitQLimit},
		{"auto/live", QueueConfig{}, live, true, DefaultQLimit - 1, DefaultQLimit},
		{"auto/not-live", QueueConfig{}, notLive, false, DefaultQLimit, DefaultWaitQLimit},
		{"auto/input", QueueConfig{}, newInput, false, DefaultQLimit, DefaultWaitQLimit},
		{"drop/slice", QueueConfig{Overflow: OverflowDrop}, slice, true, DefaultQLimit - 1, DefaultQLimit},
		{"drop/input", QueueConfig{Overflow: OverflowDrop}, newInput, true, DefaultQLimit - 1, DefaultQLimit},
		{"wait/live", QueueConfig{Overflow: OverflowWait}, live, false, DefaultQLimit, DefaultWaitQLimit},
		{"drop/limit", QueueConfig{Overflow: OverflowDrop, Limit: 100}, slice, true, 99, 100},
		{"wait/limit", QueueConfig{Overflow: OverflowWait, Limit: 100}, live, false, 0, 100},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			frames := dtTraffic(rand.New(rand.NewPCG(22, uint64(c.in))), 64, overflowFrames(2))
			// An input that waits is held back until the handlers move
			// again; one that drops is not, and the handlers stay stalled
			// until it is done.
			var after time.Duration
			if !c.drops {
				after = stallFor
			}
			gate := newStallGate(after)
			d, err := New(Config{Workers: 2, Queue: c.queue}, gate.handle)
			if err != nil {
				t.Fatal(err)
			}
			if c.drops {
				// An input that waits where it should drop fails the test
				// below instead of waiting for ever.
				timer := time.AfterFunc(2*time.Second, gate.open)
				defer timer.Stop()
			}
			switch c.in {
			case slice:
				err = d.Run(context.Background(), &SliceSource{Frames: frames})
			case live, notLive:
				err = d.Run(context.Background(), &liveSlice{SliceSource: SliceSource{Frames: frames}, live: c.in == live})
			case newInput:
				in := d.NewInput()
				for i := 0; i < len(frames) && err == nil; i += BatchSize {
					err = in.Dispatch(frames[i:min(i+BatchSize, len(frames))], nil)
				}
				in.Close()
			}
			if err != nil {
				t.Fatal(err)
			}
			// An input that drops never waited: the handlers are still
			// stalled, so its queues overflowed.
			gate.open()
			if err := d.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := checkAccounting(t, d, uint64(len(frames)))
			var qdrops uint64
			for _, w := range st.Workstreams {
				qdrops += w.QDrops
			}
			if c.drops && (qdrops == 0 || qdrops != st.Dropped()) {
				t.Errorf("%d QDrops of %d drops; want tail drops only, and some", qdrops, st.Dropped())
			}
			if !c.drops && st.Dropped() != 0 {
				t.Errorf("%d frames dropped (%d QDrops), want none: the input should have waited", st.Dropped(), qdrops)
			}
			if m := maxWMark(st); m <= c.wmarkOver || m > c.wmarkMax {
				t.Errorf("deepest queue %d frames, want more than %d and at most %d", m, c.wmarkOver, c.wmarkMax)
			}
		})
	}
}
