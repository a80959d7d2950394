package steer

import (
	"context"
	"math/rand/v2"
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
