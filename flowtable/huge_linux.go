//go:build linux

package flowtable

import (
	"syscall"
	"unsafe"
)

// hugePage is the size of an x86-64 (and arm64 4K-granule) huge page.
const hugePage = 2 << 20

// adviseHuge asks the kernel to back the huge-page-aligned part of s with
// huge pages (MADV_HUGEPAGE), when it spans at least two: a lookup in a
// table of many megabytes then misses the TLB less. It is advice only:
// with transparent huge pages off, or on memory the heap recycled (already
// in small pages), nothing changes but the speed. Memory fresh from the OS
// stays untouched until the table uses it, so a table's capacity still
// costs resident memory only as flows fill it, two megabytes at a time.
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
}
