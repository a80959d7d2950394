package flowtable

// prefetchAll asks the CPU to bring the cache line at each address into
// its caches, without waiting for any of them (PREFETCHT0). The addresses
// must point into live Go memory; a prefetch never faults and never
// changes what a later load reads.
//
//go:noescape
func prefetchAll(addrs []uintptr)
