//go:build linux

package flowtable

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestHugePages checks, where the kernel offers transparent huge pages,
// that a large table's slots are backed by them once flows fill it.
func TestHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skipf("transparent huge pages are off here (%q, %v): nothing to check", strings.TrimSpace(string(mode)), err)
	}
	const n = 1 << 18 // 20 MiB of slots: fresh memory, not recycled
	tb := newRec(t, n, time.Hour, nil)
	for i := range n {
		tb.Lookup(uint32(i), k(i), at(0))
	}
	kv := unsafe.Slice((*byte)(unsafe.Pointer(&tb.kv[0])), uintptr(n)*unsafe.Sizeof(tb.kv[0]))
	if kb := anonHugeKB(t, kv); kb == 0 {
		t.Errorf("a table of %d flows: no huge page backs its %d MiB of slots", n, len(kv)>>20)
	}
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
