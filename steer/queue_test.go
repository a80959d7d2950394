package steer

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rpsgo/rps/hash"
	"go.uber.org/goleak"
)

// TestQueueLimitSmallBatches: an input fed one frame per call hands over
// batches of one frame. The queue still holds its limit in frames, not
// fewer (it once held at most 256 batches, so a limit of 1,000 held 256
// one-frame batches and dropped the rest), and its memory stays bounded:
// small batches are packed into the one at the tail, so the queue holds
// at most 2*limit/BatchSize+1 batches.
func TestQueueLimitSmallBatches(t *testing.T) {
	defer goleak.VerifyNone(t)
	const limit = 1000
	for _, over := range []Overflow{OverflowWait, OverflowDrop} {
		t.Run(over.String(), func(t *testing.T) {
			gate := make(chan struct{})
			d, err := New(Config{Workers: 1, Queue: QueueConfig{Limit: limit, Overflow: over}}, func(*Packet) { <-gate })
			if err != nil {
				t.Fatal(err)
			}
			frames := dtTraffic(rand.New(rand.NewPCG(1, 2)), 10, 2*limit)
			done := make(chan struct{})
			go func() {
				defer close(done)
				in := d.NewInput()
				for i := range frames {
					in.Dispatch(frames[i:i+1], nil)
				}
				in.Close()
			}()
			if over == OverflowDrop {
				<-done // every frame handed in: what did not fit was dropped
			} else {
				deadline := time.Now().Add(10 * time.Second)
				for d.Stats().Workstreams[0].QueueLen < limit && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
			}
			w := d.workers[0]
			w.mu.Lock()
			qlen, batches := w.qlen, w.rcount
			w.mu.Unlock()
			if qlen != limit {
				t.Errorf("queue full at %d frames of one-frame batches, want the limit, %d", qlen, limit)
			}
			if bound := mergeAfter + 2*limit/BatchSize + 1; batches > bound {
				t.Errorf("%d batches queued for %d frames, want at most %d", batches, qlen, bound)
			}
			close(gate)
			<-done
			if err := d.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := checkAccounting(t, d, uint64(len(frames)))
			ws := st.Workstreams[0]
			if ws.QueuePeak != limit {
				t.Errorf("QueuePeak %d, want the limit, %d", ws.QueuePeak, limit)
			}
			switch {
			case over == OverflowWait && st.Dropped() != 0:
				t.Errorf("a waiting input lost %d frames", st.Dropped())
			case over == OverflowDrop && ws.QueueDrops != uint64(len(frames)-limit):
				t.Errorf("QueueDrops %d, want %d: the frames past the limit", ws.QueueDrops, len(frames)-limit)
			}
		})
	}
}

// TestNewPerWorkerRefusesValueState: a struct state would be copied into
// every handler call, which would lose whatever the handler changed.
func TestNewPerWorkerRefusesValueState(t *testing.T) {
	type counter struct{ n int }
	_, _, err := NewPerWorker(Config{Workers: 1}, func(*Worker) counter { return counter{} }, func(c counter, _ *Packet) { c.n++ })
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "make the state a pointer") {
		t.Errorf("struct state: err %v, want ErrConfig saying to use a pointer", err)
	}
	d, states, err := NewPerWorker(Config{Workers: 1}, func(*Worker) *counter { return &counter{} }, func(c *counter, _ *Packet) { c.n++ })
	if err != nil {
		t.Fatal(err)
	}
	in := d.NewInput()
	in.Dispatch(dtTraffic(rand.New(rand.NewPCG(3, 3)), 4, 100), nil)
	in.Close()
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if states[0].n != 100 {
		t.Errorf("pointer state counted %d frames, want 100", states[0].n)
	}
}

// TestNilSources: a nil source is a configuration error, not a panic (in
// RunOnWorkers it would crash a worker goroutine, beyond the caller's
// recover).
func TestNilSources(t *testing.T) {
	defer goleak.VerifyNone(t)
	d, err := New(Config{Workers: 2}, func(*Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	if err := d.RunOnWorkers(context.Background(), []Source{nil, nil}); !errors.Is(err, ErrConfig) {
		t.Errorf("RunOnWorkers with nil sources: %v, want ErrConfig", err)
	}
	if err := d.Run(context.Background(), nil); !errors.Is(err, ErrConfig) {
		t.Errorf("Run with a nil source: %v, want ErrConfig", err)
	}
}

// TestManyWorkersMemory: a worker's producer, which only a re-dispatch or a
// source of its own needs, makes its per-worker and per-bucket tables on
// first use. Made at New, they took memory growing with the square of the
// worker count (829 MB after New with 1024 workers).
func TestManyWorkersMemory(t *testing.T) {
	defer goleak.VerifyNone(t)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	d, err := New(Config{Workers: 1024}, func(*Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 128<<20 {
		t.Errorf("New with 1024 workers took %d MB of heap", grown>>20)
	}
}

// TestConfigIsACopy: the slices of the Config a dispatcher returns (and
// Stats.Config) are its caller's: changing the key there changes neither
// the next Config nor what the kernel program would be given.
func TestConfigIsACopy(t *testing.T) {
	d, err := New(Config{Workers: 1, Hash: HashConfig{Key: hash.MicrosoftKey[:]}}, func(*Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	c := d.Config()
	c.Hash.Key[0] ^= 0xff
	st := d.Stats()
	st.Config.Hash.Key[1] ^= 0xff
	if got := d.Config().Hash.Key; !bytes.Equal(got, hash.MicrosoftKey[:]) {
		t.Errorf("the dispatcher's key changed through a returned Config: %x", got)
	}
}

// TestWakeLevel pins when a worker wakes the producers waiting for room:
// at a quarter of the library's default limits, with room for six batches
// in deeper queues.
func TestWakeLevel(t *testing.T) {
	for _, c := range []struct{ limit, want int }{
		{DefaultQLimit, DefaultQLimit / 4},
		{DefaultWaitQLimit, DefaultWaitQLimit / 4},
		{1024, 1024 - 6*BatchSize},
		{MaxQLimit, MaxQLimit - 6*BatchSize},
		{4, 1},
		{1, 1},
	} {
		if got := wakeLevel(c.limit); got != c.want {
			t.Errorf("wakeLevel(%d) = %d, want %d", c.limit, got, c.want)
		}
	}
}
