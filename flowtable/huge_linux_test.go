//go:build linux

package flowtable

import (
	"runtime"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/hugetest"
)

// TestHugePages checks, where the kernel offers transparent huge pages,
// that a large table's slots are backed by them once flows fill it, both
// in memory fresh from the OS and in memory the Go heap recycled (which
// make has already touched in small pages).
func TestHugePages(t *testing.T) {
	hugetest.Available(t)
	const n = 1 << 18 // 20 MiB of slots
	check := func(what string) {
		tb := newRec(t, n, time.Hour, nil)
		for i := range n {
			tb.Lookup(uint32(i), k(i), at(0))
		}
		kv := hugetest.Bytes(tb.kv)
		if kb := hugetest.AnonHugeKB(t, kv); kb == 0 {
			t.Errorf("%s: a table of %d flows: no huge page backs its %d MiB of slots", what, n, len(kv)>>20)
		}
	}
	check("first table")
	// Recycled: fill the heap with touched memory, drop it, collect, then
	// make a table again.
	junk := make([]byte, 64<<20)
	for i := range junk {
		junk[i] = 1
	}
	junk = nil
	runtime.GC()
	check("table in recycled memory")
}
