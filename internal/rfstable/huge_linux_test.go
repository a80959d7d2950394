package rfstable

import (
	"runtime"
	"testing"

	"github.com/rpsgo/rps/internal/hugetest"
)

// TestHugeSliceGetsHugePages checks, where the kernel offers transparent
// huge pages, that a large table is backed by them, both from memory fresh
// from the OS and from memory the Go heap recycled (which make has already
// touched in small pages).
func TestHugeSliceGetsHugePages(t *testing.T) {
	hugetest.Available(t)
	const n = 16 << 20 / 8 // 16 MiB of slots
	fresh := hugeSlice[uint64](n)
	fresh[0], fresh[n-1] = 1, 1 // touch the first and the last huge page
	if kb := hugetest.AnonHugeKB(t, hugetest.Bytes(fresh)); kb == 0 {
		t.Errorf("fresh 16 MiB table: no huge page backs it")
	}
	// Recycled: fill the heap with touched memory, drop it, collect, then
	// allocate again.
	junk := make([]byte, 64<<20)
	for i := range junk {
		junk[i] = 1
	}
	junk = nil
	runtime.GC()
	recycled := hugeSlice[uint64](n)
	recycled[0], recycled[n-1] = 1, 1
	if kb := hugetest.AnonHugeKB(t, hugetest.Bytes(recycled)); kb == 0 {
		t.Errorf("recycled 16 MiB table: no huge page backs it")
	}
	runtime.KeepAlive(fresh)
}
