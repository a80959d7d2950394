//go:build linux

package xsk

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// mappings returns the ranges of /proc/self/maps that overlap [lo, hi).
func mappings(t *testing.T, lo, hi uintptr) []string {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var a, b uintptr
		if _, err := fmt.Sscanf(sc.Text(), "%x-%x", &a, &b); err != nil {
			t.Fatalf("parsing %q: %v", sc.Text(), err)
		}
		if a < hi && b > lo {
			out = append(out, fmt.Sprintf("%x-%x", a, b))
		}
	}
	return out
}

// vmSize returns the process's virtual memory size in KiB.
func vmSize(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var kib int
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmSize:"); ok {
			if _, err := fmt.Sscanf(rest, "%d", &kib); err != nil {
				t.Fatalf("VmSize %q: %v", rest, err)
			}
			return kib
		}
	}
	t.Fatal("no VmSize in /proc/self/status")
	return 0
}

// TestMapArea: an area of a huge page or more starts on a huge-page
// boundary; every area is as long as asked, written to and readable, and
// unmapArea leaves nothing of it, nor of the slack mapped to align it: the
// slack left behind would grow the process by a huge page an area, every
// round. The Go runtime grows it too, now and then (a 64 MiB heap arena
// reserved at once), so the check counts the rounds that grew it by a huge
// page or more: a leak grows every one.
func TestMapArea(t *testing.T) {
	const rounds = 20
	grewRounds := 0
	for round := 0; round < rounds; round++ {
		v0 := vmSize(t)
		for _, size := range []int{64 << 10, 32 << 20, 3<<20 + 4096} {
			area, err := mapArea(size)
			if err != nil {
				t.Fatal(err)
			}
			lo := uintptr(unsafe.Pointer(&area[0]))
			hi := lo + uintptr(size)
			if len(area) != size || cap(area) != size {
				t.Fatalf("size %d: area of len %d cap %d", size, len(area), cap(area))
			}
			if size >= hugePage && lo%hugePage != 0 {
				t.Fatalf("size %d: area at %#x, not on a huge-page boundary", size, lo)
			}
			if got := mappings(t, lo, hi); len(got) == 0 {
				t.Fatalf("size %d: nothing mapped at the area %#x-%#x", size, lo, hi)
			}
			area[0], area[size-1] = 1, 2
			if area[0]+area[size-1] != 3 {
				t.Fatal("the area does not hold what was written")
			}
			if err := unmapArea(area); err != nil {
				t.Fatal(err)
			}
			if left := mappings(t, lo, hi); len(left) != 0 {
				t.Fatalf("size %d: still mapped after unmapArea: %v", size, left)
			}
		}
		if vmSize(t)-v0 >= hugePage>>10 {
			grewRounds++
		}
	}
	if grewRounds > 3 {
		t.Errorf("the process grew by a huge page or more in %d of %d rounds of mapping and unmapping", grewRounds, rounds)
	}
}
