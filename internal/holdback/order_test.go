package holdback

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/synth"
	"github.com/rpsgo/rps/steer"
)

// ringKernel steers frames into one ring per socket by its table, as the
// kernel's program would, with the frame's count per ring as its position.
type ringKernel struct {
	cls   *steer.Classifier
	mask  uint32
	mu    sync.Mutex
	table []int
	rings []chan []byte
	pos   []uint32
}

func (k *ringKernel) Table() ([]int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.table), nil
}

// Switch changes the table under the lock that steers each frame: once it
// returns, every frame steered with the old table is in its ring.
func (k *ringKernel) Switch(table []int) error {
	k.mu.Lock()
	k.table = slices.Clone(table)
	k.mu.Unlock()
	return nil
}

func (k *ringKernel) Position(i int) (uint32, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.pos[i], true
}

func (k *ringKernel) receive(frame []byte) {
	var c steer.Classification
	k.cls.Classify(frame, &c)
	k.mu.Lock()
	w := k.table[c.FlowID&k.mask]
	k.rings[w] <- frame
	k.pos[w]++
	k.mu.Unlock()
}

// ringRun is a Holder over a DIRECT dispatcher whose workers read the
// rings of a ringKernel through their Readers, each in its goroutine.
type ringRun struct {
	d      *steer.Dispatcher
	h      *Holder
	k      *ringKernel
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startRingRun starts workers readers over rings of room frames: before
// each read a reader calls pause (when not nil) with its own random
// source, and after it hands the batch to handle.
func startRingRun(t *testing.T, workers, room int, opts Options, pause func(r *Reader, rng *rand.Rand), handle func(fs []steer.Frame)) *ringRun {
	t.Helper()
	d, err := steer.New(steer.Config{Workers: workers, Dispatch: steer.DispatchDirect}, func(*steer.Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	h, err := New(d, opts)
	if err != nil {
		t.Fatal(err)
	}
	rr := &ringRun{d: d, h: h, k: &ringKernel{cls: h.cls, mask: h.mask, table: d.Table(), pos: make([]uint32, workers)}}
	for range workers {
		rr.k.rings = append(rr.k.rings, make(chan []byte, room))
	}
	ctx, cancel := context.WithCancel(context.Background())
	rr.cancel = cancel
	for w := range workers {
		rr.wg.Go(func() {
			r, ring := h.Reader(w), rr.k.rings[w]
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			var pos uint32
			b := &steer.Batch{}
			for ctx.Err() == nil {
				if pause != nil {
					pause(r, rng)
				}
				wait, held := 5*time.Millisecond, false
				if r.BeforeRead() {
					wait, held = r.Hold(b, wait)
				}
				if !held {
					b.Frames = b.Frames[:0]
					timer := time.NewTimer(wait)
				fill:
					for len(b.Frames) < 64 {
						var f []byte
						if len(b.Frames) == 0 {
							select { // wait for the first frame
							case f = <-ring:
							case <-timer.C:
								break fill
							}
						} else {
							select { // take what is there
							case f = <-ring:
							default:
								break fill
							}
						}
						b.Frames = append(b.Frames, steer.Frame{Data: f})
						pos++
					}
					timer.Stop()
					r.AfterRead(b, pos)
				}
				handle(b.Frames)
			}
		})
	}
	return rr
}

// send streams frames numbered frames of flows random flows into the
// kernel from a goroutine (each frame's last byte is its flow), pausing
// briefly after every 64th frame of a flow.
func (rr *ringRun) send(frames, flows int) {
	rr.wg.Go(func() {
		seq := make([]uint32, flows)
		rng := rand.New(rand.NewPCG(1, 2))
		for range frames {
			f := rng.IntN(flows)
			seq[f]++
			b := make([]byte, 64)
			synth.Build(b, f, seq[f], false)
			b[len(b)-1] = byte(f) // padding: the test's flow label
			rr.k.receive(b)
			if seq[f]%64 == 0 {
				time.Sleep(50 * time.Microsecond)
			}
		}
	})
}

// changeTables makes n changes to random tables, each SetTable given 10s.
func (rr *ringRun) changeTables(t *testing.T, n int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	for range n {
		tab := rr.d.Table()
		for b := range tab {
			tab[b] = rng.IntN(len(rr.k.rings))
		}
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := rr.h.SetTable(sctx, tab, rr.k)
		scancel()
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stop waits until handled reaches frames (20s at most), then stops the
// readers and returns the Holder's stats.
func (rr *ringRun) stop(handled *atomic.Int64, frames int) Stats {
	for deadline := time.Now().Add(20 * time.Second); handled.Load() < int64(frames) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // a frame handed out twice would show now
	rr.cancel()
	rr.wg.Wait()
	return rr.h.Stats()
}

// TestOrderUnderChanges runs three readers over the rings of a ringKernel
// while the table changes again and again under a stream of numbered
// frames of many flows: every flow's frames reach the handler in order,
// no hold is lifted early, and frames were held.
func TestOrderUnderChanges(t *testing.T) {
	const workers, flows, frames = 3, 64, 60000
	var mu sync.Mutex
	last := make(map[int]uint32)
	var bad, handled atomic.Int64
	handle := func(fs []steer.Frame) {
		mu.Lock()
		defer mu.Unlock()
		for _, f := range fs {
			seq, _ := synth.Seq(f.Data, false)
			fl := int(f.Data[len(f.Data)-1])
			if seq != last[fl]+1 {
				bad.Add(1)
			}
			last[fl] = seq
			handled.Add(1)
		}
	}
	rr := startRingRun(t, workers, frames, Options{HoldTimeout: 10 * time.Second}, nil, handle)
	rr.send(frames, flows)
	rr.changeTables(t, 20)
	s := rr.stop(&handled, frames)
	t.Logf("%d frames handled, %+v", handled.Load(), s)
	if handled.Load() != frames || bad.Load() != 0 {
		t.Errorf("%d of %d frames handled, %d out of order", handled.Load(), frames, bad.Load())
	}
	if s.HoldTimeouts != 0 || s.HoldOverflows != 0 || s.TableChanges != 20 {
		t.Errorf("stats %+v", s)
	}
	if s.HeldFrames == 0 {
		t.Error("no frame was held: the test did not exercise the hold")
	}
}
