//go:build linux

package flowtable

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestHugePages checks, where the kernel offers transparent huge pages,
// that a large table's slots are backed by them once flows fill it, both
// in memory fresh from the OS and in memory the Go heap recycled (which
// make has already touched in small pages).
func TestHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skipf("transparent huge pages are off here (%q, %v): nothing to check", strings.TrimSpace(string(mode)), err)
	}
	const n = 1 << 18 // 20 MiB of slots
	check := func(what string) {
		tb := newRec(t, n, time.Hour, nil)
		for i := range n {
			tb.Lookup(uint32(i), k(i), at(0))
		}
		kv := unsafe.Slice((*byte)(unsafe.Pointer(&tb.kv[0])), uintptr(n)*unsafe.Sizeof(tb.kv[0]))
		if kb := anonHugeKB(t, kv); kb == 0 {
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

// anonHugeKB sums AnonHugePages over the mappings of /proc/self/smaps that
// overlap b.
func anonHugeKB(t *testing.T, b []byte) int {
	t.Helper()
	lo := uintptr(unsafe.Pointer(&b[0]))
	hi := lo + uintptr(len(b))
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sum, in := 0, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) > 0 && !strings.HasSuffix(f[0], ":") { // a mapping's first line
			var a, b uintptr
			if _, err := fmt.Sscanf(f[0], "%x-%x", &a, &b); err == nil {
				in = a < hi && lo < b
			}
			continue
		}
		var kb int
		if in && strings.HasPrefix(line, "AnonHugePages:") {
			if _, err := fmt.Sscanf(strings.TrimPrefix(line, "AnonHugePages:"), "%d", &kb); err == nil {
				sum += kb
			}
		}
	}
	return sum
}
