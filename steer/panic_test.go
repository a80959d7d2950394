package steer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpsgo/rps/hash"
	"go.uber.org/goleak"
)

// TestPanickedFramesAccounted: a frame whose handler panicked is counted in
// Panics, not in Handled, whether it was queued, handled inline (HYBRID, a
// re-dispatch to the same worker) or handled by the caller (DIRECT).
func TestPanickedFramesAccounted(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, mode := range []DispatchMode{DispatchDeferred, DispatchHybrid, DispatchDirect} {
		t.Run(mode.String(), func(t *testing.T) {
			// Frame i of the input: i%3 == 0 panics; i%3 == 1 re-dispatches
			// its first 64 bytes, a frame of the same flow (so the same
			// worker: inline under HYBRID), whose handler panics; i%3 == 2
			// returns.
			const n = 300
			var returned, panicked, reported atomic.Int64
			d, err := New(Config{
				Workers:  2,
				Dispatch: mode,
				Queue:    QueueConfig{Overflow: OverflowWait},
				OnPanic:  func(PanicInfo) { reported.Add(1) },
			}, func(p *Packet) {
				switch {
				case len(p.Data) == 64: // re-dispatched
					panicked.Add(1)
					panic("inner")
				case p.Data[64]%3 == 0:
					panicked.Add(1)
					panic("outer")
				case p.Data[64]%3 == 1:
					if err := p.Redispatch(p.Data[:64]); err != nil {
						t.Error(err)
					}
				}
				returned.Add(1)
			})
			if err != nil {
				t.Fatal(err)
			}
			frames := make([]Frame, n)
			for i := range frames {
				frames[i] = Frame{Data: append(dtFrame(i, 1), byte(i%3))}
			}
			// At most one batch per worker at a time: each worker's queue is
			// empty while it handles it, so HYBRID re-dispatches run inline.
			in := d.NewInput()
			for i := 0; i < n; i += 50 {
				if err := in.Dispatch(frames[i:i+50], nil); err != nil {
					t.Fatal(err)
				}
				waitIdle(t, d)
			}
			if err := d.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := checkAccounting(t, d, n+n/3)
			if st.Dropped() != 0 {
				t.Errorf("%d frames dropped, want none", st.Dropped())
			}
			if st.Handled() != uint64(returned.Load()) || st.Panicked() != uint64(panicked.Load()) {
				t.Errorf("Handled %d, Panicked %d; the handler returned %d times and panicked %d times",
					st.Handled(), st.Panicked(), returned.Load(), panicked.Load())
			}
			if st.Panicked() != 2*n/3 || reported.Load() != int64(st.Panicked()) {
				t.Errorf("Panicked %d, OnPanic called %d times; want %d", st.Panicked(), reported.Load(), 2*n/3)
			}
			var inline uint64
			for _, w := range st.Workstreams {
				inline += w.HybridDispatched
			}
			if mode == DispatchHybrid && inline == 0 {
				t.Error("HYBRID handled no re-dispatch inline: the inline path went untested")
			}
		})
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// records returns the JSON records written so far.
func (s *syncBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("log record %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// hasNumber reports whether one of r's attributes is the number n.
func hasNumber(r map[string]any, n float64) bool {
	for _, v := range r {
		if f, ok := v.(float64); ok && f == n {
			return true
		}
	}
	return false
}

// TestPanicLogRateLimited: with a Logger and no OnPanic, handler panics are
// logged at most once a second; the next record says how many were left
// out.
func TestPanicLogRateLimited(t *testing.T) {
	defer goleak.VerifyNone(t)
	var buf syncBuffer
	d, err := New(Config{
		Workers: 1,
		Logger:  slog.New(slog.NewJSONHandler(&buf, nil)),
		Queue:   QueueConfig{Overflow: OverflowWait},
	}, func(p *Packet) { panic(fmt.Sprintf("boom %d", dtSeq(p))) })
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	const burst = 50
	frames := make([]Frame, burst)
	for i := range frames {
		frames[i] = Frame{Data: dtFrame(1, uint32(i+1))}
	}
	in := d.NewInput()
	start := time.Now()
	if err := in.Dispatch(frames, nil); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, d)
	burstTook := time.Since(start)
	recs := buf.records(t)
	if len(recs) != 1 {
		t.Fatalf("%d panics in %v gave %d log records, want 1", burst, burstTook, len(recs))
	}
	if r := recs[0]; r["level"] != "ERROR" || !strings.Contains(fmt.Sprint(r), "boom 1") {
		t.Errorf("first record %v: want an error naming the first panic (boom 1)", r)
	}
	// After the interval, the next panic is logged with the count of those
	// left out.
	time.Sleep(time.Until(start.Add(time.Second + 20*time.Millisecond)))
	if err := in.Dispatch([]Frame{{Data: dtFrame(1, 99)}}, nil); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, d)
	recs = buf.records(t)
	if len(recs) != 2 {
		t.Fatalf("a panic a second after the first: %d log records, want 2", len(recs))
	}
	if r := recs[1]; !strings.Contains(fmt.Sprint(r), "boom 99") || !hasNumber(r, burst-1) {
		delete(r, "stack")
		t.Errorf("second record %v: want the panic boom 99 and the %d panics not logged", r, burst-1)
	}
	st := d.Stats()
	if st.Panicked() != burst+1 || st.Handled() != 0 {
		t.Errorf("Panicked %d, Handled %d; want %d panicked, none handled", st.Panicked(), st.Handled(), burst+1)
	}
}

// TestOnPanicReplacesLog: OnPanic receives every panic, and the Logger none.
func TestOnPanicReplacesLog(t *testing.T) {
	defer goleak.VerifyNone(t)
	var buf syncBuffer
	var mu sync.Mutex
	var got []PanicInfo
	d, err := New(Config{
		Workers: 2,
		Logger:  slog.New(slog.NewJSONHandler(&buf, nil)),
		OnPanic: func(pi PanicInfo) {
			mu.Lock()
			got = append(got, pi)
			mu.Unlock()
		},
		Queue: QueueConfig{Overflow: OverflowWait},
	}, func(p *Packet) { panic("boom") })
	if err != nil {
		t.Fatal(err)
	}
	st := runAndClose(t, d, dtTraffic(rand.New(rand.NewPCG(31, 1)), 10, 100))
	if len(got) != 100 || st.Panicked() != 100 {
		t.Errorf("OnPanic called %d times, Panicked %d; want 100", len(got), st.Panicked())
	}
	for _, pi := range got {
		if pi.Value != "boom" || pi.Summary == "" || len(pi.Stack) == 0 || pi.Worker < 0 || pi.Worker > 1 {
			t.Errorf("PanicInfo %+v: want the value, the frame's summary, a stack and the worker", pi)
			break
		}
	}
	if recs := buf.records(t); len(recs) != 0 {
		t.Errorf("with OnPanic set, the Logger got %d records: %v", len(recs), recs[0])
	}
}

// TestHookPanicsCounted: panics in a state's Tick, MoveOut, MoveIn and
// Close are counted in CallbackPanics by name (not in Panics, which counts
// frames), reported, and leave the worker running.
func TestHookPanicsCounted(t *testing.T) {
	defer goleak.VerifyNone(t)
	var ticks, handled atomic.Int64
	var mu sync.Mutex
	hooks := map[string]int{}
	var handledOn [2]atomic.Int64
	d, err := newHooked(Config{
		Workers:      2,
		Buckets:      2,
		TickInterval: time.Millisecond,
		Hash:         HashConfig{Key: hash.MicrosoftKey[:]},
		Queue:        QueueConfig{Overflow: OverflowWait},
		OnPanic: func(pi PanicInfo) {
			mu.Lock()
			hooks[pi.Callback]++
			mu.Unlock()
		},
	}, hookFuncs{
		tick: func(w *Worker, _ time.Time) {
			ticks.Add(1)
			panic("tick")
		},
		moveOut: func(w *Worker, m Move) any { panic("move out") },
		moveIn:  func(w *Worker, m Move, carried any) { panic("move in") },
		close:   func(w *Worker) { panic("close") },
	}, func(p *Packet) {
		handled.Add(1)
		handledOn[p.Worker].Add(1)
	})
	if err != nil {
		t.Fatal(err)
	}
	// A flow of bucket 0, which starts on worker 0.
	flow := flowInBucket(t, d, 0)
	in := d.NewInput()
	for ticks.Load() < 4 { // ticks go on after a Tick panicked
		time.Sleep(time.Millisecond)
	}
	if err := in.Dispatch([]Frame{{Data: dtFrame(flow, 1)}}, nil); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, d)
	if err := d.SetBucket(0, 1); err != nil {
		t.Fatal(err)
	}
	// The bucket moves with this frame: MoveOut on worker 0, MoveIn on 1.
	if err := in.Dispatch([]Frame{{Data: dtFrame(flow, 2)}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := checkAccounting(t, d, 2)
	if st.Handled() != 2 || handledOn[0].Load() != 1 || handledOn[1].Load() != 1 || st.BucketMoves != 1 {
		t.Errorf("handled %d (worker 0: %d, worker 1: %d), %d bucket moves; want each worker to handle one frame after one move",
			st.Handled(), handledOn[0].Load(), handledOn[1].Load(), st.BucketMoves)
	}
	want := map[string]uint64{"Tick": uint64(ticks.Load()), "MoveOut": 1, "MoveIn": 1, "Close": 2}
	if !maps.Equal(st.CallbackPanics, want) || st.Panicked() != 0 {
		t.Errorf("CallbackPanics %v, Panics %d; want %v (every Tick, MoveOut, MoveIn and both Closes) and no panicked frame",
			st.CallbackPanics, st.Panicked(), want)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range []string{"MoveOut", "MoveIn", "Close"} {
		if n := hooks[name]; n != int(want[name]) {
			t.Errorf("OnPanic got %d panics of %s, want %d (all: %v)", n, name, want[name], hooks)
		}
	}
}

// flowBucket is the indirection-table bucket of dtFrame's flow f.
func flowBucket(d *Dispatcher, f int) int {
	var c Classification
	d.cls.Classify(dtFrame(f, 1), &c)
	return int(c.FlowID) & (d.Config().Buckets - 1)
}

// maxFlowSearch bounds flowInBucket's search, which takes one or two flows
// with the tests' key (MicrosoftKey, two buckets): a degenerate key, one
// that hashes every flow into another bucket, fails the test instead of
// spinning until its timeout.
const maxFlowSearch = 1 << 20

// flowInBucket returns the first of dtFrame's flows in bucket. When none of
// the first maxFlowSearch is, it closes d, so that a goroutine-leak check
// reports nothing more, and fails t.
func flowInBucket(t *testing.T, d *Dispatcher, bucket int) int {
	t.Helper()
	for f := range maxFlowSearch {
		if flowBucket(d, f) == bucket {
			return f
		}
	}
	d.Close(context.Background())
	t.Fatalf("no dtFrame flow in bucket %d of %d among the first %d, with key %x", bucket, d.Config().Buckets, maxFlowSearch, d.Config().Hash.Key)
	return -1
}
