package steer

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// holdCase is a dispatcher whose handler waits at a gate, so that the test
// decides when the workers are busy, and an order checker behind the gate.
type holdCase struct {
	d    *Dispatcher
	in   *Input
	gate chan struct{}
	o    *orderChecker
}

func newHoldCase(t *testing.T, workers int, block bool, work time.Duration) *holdCase {
	t.Helper()
	c := &holdCase{gate: make(chan struct{}), o: newOrderChecker()}
	d, err := New(Config{Workers: workers, Block: block, QLimit: 1024}, func(p *Packet) {
		<-c.gate
		// Some work per frame, so that a worker takes its held batch well
		// after its queued frames are handled, and a barrier that forgot
		// held frames would return too early to miss.
		for start := time.Now(); time.Since(start) < work; {
		}
		c.o.handle(p)
	})
	if err != nil {
		t.Fatal(err)
	}
	c.d, c.in = d, d.NewInput()
	return c
}

// held reports how many partial batches the input holds.
func (c *holdCase) held() int {
	c.in.p.mu.Lock()
	defer c.in.p.mu.Unlock()
	n := 0
	for _, h := range c.in.p.holding {
		if h {
			n++
		}
	}
	return n
}

// fill dispatches frames in source batches of k, while the gate is shut:
// every worker gets a first batch and waits in its handler, so what comes
// after finds the workers busy.
func (c *holdCase) fill(t *testing.T, frames []Frame, k int) {
	t.Helper()
	for i := 0; i < len(frames); i += k {
		if err := c.in.Dispatch(frames[i:min(i+k, len(frames))], nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHeldBatchesAreTakenWhenWorkersGoIdle checks the rule of
// producer.holdOrFlush: a partial batch for a busy worker is held past the
// dispatch call, and the worker takes it before it goes idle, with no
// further call from the input (no Sync, no Close), in order per flow.
func TestHeldBatchesAreTakenWhenWorkersGoIdle(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, block := range []bool{true, false} {
		c := newHoldCase(t, 4, block, 20*time.Microsecond)
		frames := dtTraffic(rand.New(rand.NewPCG(7, 8)), 200, 1000)
		// 10 frames per call: every worker gets partial batches only.
		c.fill(t, frames, 10)
		if c.held() == 0 {
			t.Fatalf("block=%v: no batch held while every worker was busy", block)
		}
		close(c.gate)
		deadline := time.Now().Add(10 * time.Second)
		for c.o.handled.Load() < uint64(len(frames)) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if got := c.o.handled.Load(); got != uint64(len(frames)) {
			t.Fatalf("block=%v: %d of %d frames handled without Sync or Close; %d batches still held",
				block, got, len(frames), c.held())
		}
		if c.held() != 0 {
			t.Errorf("block=%v: %d batches still held after every frame was handled", block, c.held())
		}
		for _, w := range c.d.workers {
			w.mu.Lock()
			if len(w.holders) != 0 {
				t.Errorf("block=%v: worker %d still lists %d holders", block, w.index, len(w.holders))
			}
			w.mu.Unlock()
		}
		if err := c.d.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		checkAccounting(t, c.d, uint64(len(frames)))
		for _, e := range c.o.errs {
			t.Errorf("block=%v: %s", block, e)
		}
	}
}

// TestSyncAndCloseCountHeldBatches checks that Sync waits for the frames
// in held batches too, as for queued ones, and that Input.Close and Close
// hand them over rather than lose them.
func TestSyncAndCloseCountHeldBatches(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, end := range []string{"sync", "input-close", "close"} {
		// One slower worker for Sync: its held batch is handled last, at
		// least 200 µs a frame after its queue, which Sync must wait for.
		workers, work := 4, 20*time.Microsecond
		if end == "sync" {
			workers, work = 1, 200*time.Microsecond
		}
		c := newHoldCase(t, workers, true, work)
		frames := dtTraffic(rand.New(rand.NewPCG(9, 10)), 100, 500)
		c.fill(t, frames, 10)
		if c.held() == 0 {
			t.Fatalf("%s: no batch held while every worker was busy", end)
		}
		close(c.gate)
		switch end {
		case "sync":
			if err := c.d.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := c.o.handled.Load(); got != uint64(len(frames)) {
				t.Errorf("sync: %d of %d frames handled when Sync returned", got, len(frames))
			}
		case "input-close":
			c.in.Close()
			if got := c.held(); got != 0 {
				t.Errorf("input-close: %d batches held after Input.Close", got)
			}
		}
		if err := c.d.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := c.o.handled.Load(); got != uint64(len(frames)) {
			t.Errorf("%s: %d of %d frames handled after Close", end, got, len(frames))
		}
		checkAccounting(t, c.d, uint64(len(frames)))
		for _, e := range c.o.errs {
			t.Errorf("%s: %s", end, e)
		}
	}
}

// TestNoHoldingWithTwoFeeders checks that a batch is never held while a
// second input feeds the dispatcher, since that input could keep the worker
// busy for ever: a lone frame from a quiet input is handled while another
// input keeps the one worker's queue full. It also checks that a batch held
// by a lone input is handed over as a second input opens.
func TestNoHoldingWithTwoFeeders(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := newHoldCase(t, 2, true, 0)
	c.fill(t, dtTraffic(rand.New(rand.NewPCG(11, 12)), 50, 200), 10)
	if c.held() == 0 {
		t.Fatal("no batch held by the lone input while its workers were busy")
	}
	other := c.d.NewInput()
	if n := c.held(); n != 0 {
		t.Errorf("%d batches still held after a second input opened", n)
	}
	// The workers are still busy, but with two inputs open nothing is held.
	c.fill(t, dtTraffic(rand.New(rand.NewPCG(15, 16)), 50, 100), 10)
	if n := c.held(); n != 0 {
		t.Errorf("%d batches held with two inputs open", n)
	}
	close(c.gate)
	other.Close()
	if err := c.d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, c.d, 300)

	// A flood from one input, a lone frame from another.
	var lone atomic.Bool
	// A deep queue and a slow handler: the flood keeps milliseconds of
	// work queued, so the worker's queue never runs empty.
	d, err := New(Config{Workers: 1, Block: true, QLimit: 1024}, func(p *Packet) {
		if p.IfIndex == 7 {
			lone.Store(true)
		}
		for start := time.Now(); time.Since(start) < 5*time.Microsecond; {
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	flood, quiet := d.NewInput(), d.NewInput()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		frames := dtTraffic(rand.New(rand.NewPCG(13, 14)), 50, 64)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := flood.Dispatch(frames, nil); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	time.Sleep(20 * time.Millisecond) // the worker's queue is full by now
	if err := quiet.Dispatch([]Frame{{Data: dtFrame(99, 1), IfIndex: 7}}, nil); err != nil {
		t.Fatal(err)
	}
	// Queued behind at most 1,024 frames of 5 µs, the frame is handled
	// within about 10 ms; the bound leaves room for a slow machine.
	deadline := time.Now().Add(250 * time.Millisecond)
	for !lone.Load() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
	close(stop)
	<-done
	if !lone.Load() {
		t.Error("a lone frame from a quiet input waited 250 ms while another input kept its worker busy")
	}
	flood.Close()
	quiet.Close()
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
