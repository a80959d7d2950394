//go:build linux

package xsk

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
)

// TestFillHammer gives chunks back to one FILL ring from many goroutines
// at once, as the workers of a group do, while a goroutine plays the
// kernel: it consumes the ring (acquire load of the producer, entries,
// release store of the consumer) and hands each chunk to a releaser
// again. Every chunk must come out of the ring exactly as often as it went
// in: a lost or doubled slot (two producers at once) shows as a chunk seen
// twice in flight or one that never comes back. Run it with -race.
func TestFillHammer(t *testing.T) {
	const (
		chunks    = 256
		frameSize = 2048
		releasers = 8
		rounds    = 200000
	)
	var idx [48]uint32 // producer, consumer and flags, apart
	slots := make([]uint64, chunks)
	u := &UMEM{
		FrameSize: frameSize,
		Fill: Ring{
			Prod:  &idx[0],
			Cons:  &idx[16],
			Flags: &idx[32],
			desc:  unsafe.Pointer(&slots[0]),
			Mask:  chunks - 1,
		},
	}
	var inRing [chunks]atomic.Bool // in FILL (or on its way in)
	work := make([]chan uint64, releasers)
	for i := range work {
		work[i] = make(chan uint64, chunks)
	}
	var wg sync.WaitGroup
	var given atomic.Int64
	for i := range releasers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 1))
			var batch []uint64
			for c := range work[i] {
				batch = append(batch, c)
				if len(batch) >= 1+r.IntN(16) || len(work[i]) == 0 {
					for _, b := range batch {
						if inRing[b/frameSize].Swap(true) {
							t.Errorf("chunk %d given back while in the ring", b)
						}
					}
					u.Give(batch)
					given.Add(int64(len(batch)))
					batch = batch[:0]
				}
			}
			if len(batch) > 0 {
				for _, b := range batch {
					inRing[b/frameSize].Store(true)
				}
				u.Give(batch)
			}
		}()
	}
	// Start with every chunk in the ring, as newUMEM does.
	all := make([]uint64, chunks)
	for i := range all {
		all[i] = uint64(i) * frameSize
		inRing[i].Store(true)
	}
	u.Give(all)
	// The kernel: consume, check, deal to a releaser.
	cons := uint32(0)
	seen := 0
	for seen < rounds && !t.Failed() {
		prod := atomic.LoadUint32(u.Fill.Prod)
		if prod == cons {
			runtime.Gosched()
		}
		for ; cons != prod && seen < rounds; cons++ {
			a := *u.Fill.Addr(cons)
			if a%frameSize != 0 || a >= chunks*frameSize {
				t.Fatalf("slot %d holds address %#x", cons, a)
			}
			if !inRing[a/frameSize].Swap(false) {
				t.Fatalf("chunk %#x came out of the ring twice", a)
			}
			work[int(a/frameSize)%releasers] <- a
			seen++
		}
		atomic.StoreUint32(u.Fill.Cons, cons)
	}
	for _, w := range work {
		close(w)
	}
	wg.Wait()
	// Drain: every chunk must be in the ring once.
	prod := atomic.LoadUint32(u.Fill.Prod)
	if n := prod - cons; n != chunks {
		t.Fatalf("%d chunks in the ring at the end, want %d (spilled %d)", n, chunks, len(u.spill))
	}
	for ; cons != prod; cons++ {
		a := *u.Fill.Addr(cons)
		if !inRing[a/frameSize].Swap(false) {
			t.Fatalf("chunk %#x twice in the ring at the end", a)
		}
	}
	t.Logf("%d chunks through the ring, %d given back by %d goroutines", seen, given.Load(), releasers)
}
