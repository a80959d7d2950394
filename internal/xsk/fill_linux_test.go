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
	u := fakeUMEM(FillRingSize(chunks), frameSize)
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

// fakeUMEM is a UMEM whose FILL ring of size entries lives in Go memory,
// for tests that play the kernel's side.
func fakeUMEM(size int, frameSize uint64) *UMEM {
	idx := new([48]uint32) // producer, consumer and flags, apart
	slots := make([]uint64, size)
	return &UMEM{
		FrameSize: frameSize,
		Fill: Ring{
			Prod:  &idx[0],
			Cons:  &idx[16],
			Flags: &idx[32],
			desc:  unsafe.Pointer(&slots[0]),
			Mask:  uint32(size - 1),
		},
	}
}

// lazyKernel plays the kernel's FILL consumer as net/xdp/xsk_queue.h has
// it: it takes the entries it sees at once (cached_prod), uses them one by
// one (cached_cons), and stores the consumer index only when it has used
// them all and comes back for more.
type lazyKernel struct {
	u                      *UMEM
	cachedCons, cachedProd uint32
}

// take returns the next chunk, or false when the ring has none for it.
func (k *lazyKernel) take() (uint64, bool) {
	if k.cachedCons == k.cachedProd {
		atomic.StoreUint32(k.u.Fill.Cons, k.cachedCons) // __xskq_cons_release
		k.cachedProd = atomic.LoadUint32(k.u.Fill.Prod) // __xskq_cons_peek
		if k.cachedCons == k.cachedProd {
			return 0, false
		}
	}
	a := *k.u.Fill.Addr(k.cachedCons)
	k.cachedCons++
	return a, true
}

// TestFillLazyConsumer: the kernel takes every chunk from the FILL ring
// and stores its consumer index only when it comes back for more; the
// frames come back to user space and every chunk is given back meanwhile.
// When the kernel comes back, it must find every chunk in the ring. With a
// ring of as many entries as chunks, the ring looked full to the Gives and
// the chunks stayed in the spill, where nothing would move them while no
// frame arrived: AF_XDP stopped receiving.
func TestFillLazyConsumer(t *testing.T) {
	const chunks, frameSize = 64, 2048
	u := fakeUMEM(FillRingSize(chunks), frameSize)
	all := make([]uint64, chunks)
	for i := range all {
		all[i] = uint64(i) * frameSize
	}
	u.Give(all)
	k := &lazyKernel{u: u}
	for round := range 3 {
		var got []uint64
		for range chunks {
			a, ok := k.take()
			if !ok {
				t.Fatalf("round %d: the kernel found %d chunks in the ring, want %d (%d spilled)", round, len(got), chunks, len(u.spill))
			}
			got = append(got, a)
		}
		for len(got) > 0 { // released in batches of 8, as workers do
			u.Give(got[:8])
			got = got[8:]
		}
	}
}

// TestFillFlush: chunks that found no slot go into the ring by Flush, once
// the kernel has stored its consumer index, with no Give after them.
func TestFillFlush(t *testing.T) {
	const chunks, frameSize = 64, 2048
	u := fakeUMEM(chunks, frameSize) // too small on purpose
	all := make([]uint64, chunks)
	for i := range all {
		all[i] = uint64(i) * frameSize
	}
	u.Give(all)
	k := &lazyKernel{u: u}
	for range chunks {
		if _, ok := k.take(); !ok {
			t.Fatal("the kernel found too few chunks")
		}
	}
	u.Give(all)
	if len(u.spill) != chunks {
		t.Fatalf("%d chunks spilled, want %d", len(u.spill), chunks)
	}
	if _, ok := k.take(); ok { // stores the consumer index, finds nothing
		t.Fatal("the kernel found a chunk that was spilled")
	}
	u.Flush()
	for i := range chunks {
		if _, ok := k.take(); !ok {
			t.Fatalf("after Flush the kernel found %d chunks, want %d", i, chunks)
		}
	}
	if u.spilled.Load() {
		t.Fatal("spill still marked after it was flushed")
	}
}
