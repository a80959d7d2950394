//go:build linux

package flowtable

import (
	"syscall"
	"unsafe"
)

// hugePage is the size of an x86-64 (and arm64 4K-granule) huge page.
const hugePage = 2 << 20

// madvCollapse is MADV_COLLAPSE (Linux 6.1 and later), which package
// syscall does not name.
const madvCollapse = 25

// adviseHuge asks the kernel to back the huge-page-aligned part of s with
// huge pages (MADV_HUGEPAGE), when it spans at least two: a lookup in a
// table of many megabytes then misses the TLB less. It is advice only:
// with transparent huge pages off nothing changes but the speed. Memory
// fresh from the OS stays untouched until the table uses it, so a table's
// capacity still costs resident memory only as flows fill it, two
// megabytes at a time. Memory the heap recycled, which make has already
// touched in small pages, is collapsed into huge pages at once
// (MADV_COLLAPSE; older kernels refuse, and it keeps small pages).
func adviseHuge[T any](s []T) {
	if len(s) == 0 {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), uintptr(len(s))*unsafe.Sizeof(s[0]))
	off := (hugePage - uintptr(unsafe.Pointer(&b[0]))%hugePage) % hugePage
	if uintptr(len(b)) < off+2*hugePage {
		return
	}
	region := b[off : off+(uintptr(len(b))-off)/hugePage*hugePage]
	_ = syscall.Madvise(region, syscall.MADV_HUGEPAGE)
	if resident(region) {
		_ = syscall.Madvise(region, madvCollapse)
	}
}

// resident reports whether the first page of b is in memory (mincore(2)).
func resident(b []byte) bool {
	var vec [1]byte
	_, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(syscall.Getpagesize()), uintptr(unsafe.Pointer(&vec[0])))
	return errno == 0 && vec[0]&1 != 0
}
