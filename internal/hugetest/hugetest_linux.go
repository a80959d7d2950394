//go:build linux

package hugetest

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// Available skips t unless huge pages can be checked here: the kernel
// offers transparent huge pages, and the test runs on the kernel rather than
// under a user-mode emulator (qemu-user ignores madvise, so MADV_HUGEPAGE
// does nothing there, and it answers /proc/self/smaps itself).
func Available(t testing.TB) {
	t.Helper()
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skipf("transparent huge pages are off here (%q, %v): nothing to check", strings.TrimSpace(string(mode)), err)
	}
	if comm, err := os.ReadFile("/proc/self/comm"); err == nil && strings.HasPrefix(string(comm), "qemu-") {
		t.Skipf("running under the emulator %s, which ignores madvise: nothing to check", strings.TrimSpace(string(comm)))
	}
}

// AnonHugeKB sums AnonHugePages, in KiB, over the mappings of
// /proc/self/smaps that overlap b.
func AnonHugeKB(t testing.TB, b []byte) int {
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

// Bytes returns the memory of s as bytes.
func Bytes[T any](s []T) []byte {
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), uintptr(len(s))*unsafe.Sizeof(zero))
}
