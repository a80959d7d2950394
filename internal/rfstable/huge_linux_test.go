package rfstable

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// TestHugeSliceGetsHugePages checks, where the kernel offers transparent
// huge pages, that a large table is backed by them, both from memory fresh
// from the OS and from memory the Go heap recycled (which make has already
// touched in small pages).
func TestHugeSliceGetsHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skipf("transparent huge pages are off here (%q, %v): nothing to check", strings.TrimSpace(string(mode)), err)
	}
	const n = 16 << 20 / 8 // 16 MiB of slots
	fresh := hugeSlice[uint64](n)
	fresh[0], fresh[n-1] = 1, 1 // touch the first and the last huge page
	if kb := anonHugeKB(t, fresh); kb == 0 {
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
	if kb := anonHugeKB(t, recycled); kb == 0 {
		t.Errorf("recycled 16 MiB table: no huge page backs it")
	}
	runtime.KeepAlive(fresh)
}

// anonHugeKB sums AnonHugePages over the mappings of /proc/self/smaps that
// overlap s.
func anonHugeKB(t *testing.T, s []uint64) int {
	t.Helper()
	lo := uintptr(unsafe.Pointer(&s[0]))
	hi := lo + uintptr(len(s))*8
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
