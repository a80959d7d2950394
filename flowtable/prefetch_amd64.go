package flowtable

import "unsafe"

// prefetch asks the CPU to bring the cache line at p into its caches
// without waiting (PREFETCHT0). A prefetch never faults and never changes
// what a later load reads.
//
//go:noescape
func prefetch(p unsafe.Pointer)
