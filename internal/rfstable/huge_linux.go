package rfstable

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the size of an x86-64 (and arm64 4K-granule) huge page.
const hugePage = 2 << 20

// hugeSlice returns n zero values of T, a type that holds no pointers: the
// memory is a []byte, which the garbage collector does not scan
// (TestHugeSliceTypesHoldNoPointers checks the types used). When they span
// at least two huge pages, their memory starts on a huge-page boundary and
// the kernel is asked to back it with huge pages (MADV_HUGEPAGE; it may
// not, and then only the speed differs). A lookup in a table of many
// megabytes otherwise misses the TLB as well as the cache.
func hugeSlice[T any](n int) []T {
	var zero T
	size := n * int(unsafe.Sizeof(zero))
	if size < 2*hugePage {
		return make([]T, n)
	}
	buf := make([]byte, size+hugePage)
	off := (hugePage - int(uintptr(unsafe.Pointer(&buf[0]))%hugePage)) % hugePage
	region := buf[off : off+size/hugePage*hugePage]
	_ = unix.Madvise(region, unix.MADV_HUGEPAGE) // advice only
	// Memory fresh from the OS is not yet touched, and its first faults
	// bring huge pages. Memory the heap recycled was zeroed by make, so it
	// is already in small pages: ask for those to be collapsed now
	// (MADV_COLLAPSE, Linux 6.1 and later; older kernels refuse, and the
	// table keeps small pages).
	if resident(region) {
		_ = unix.Madvise(region, unix.MADV_COLLAPSE)
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&buf[off])), n)
}

// resident reports whether the first page of b is in memory (mincore(2)).
func resident(b []byte) bool {
	var vec [1]byte
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(unix.Getpagesize()), uintptr(unsafe.Pointer(&vec[0])))
	return errno == 0 && vec[0]&1 != 0
}
