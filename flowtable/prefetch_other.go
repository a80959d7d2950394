//go:build !amd64

package flowtable

// prefetchAll does nothing where the package has no prefetch instruction:
// the lookups then take their cache misses one after another.
func prefetchAll(addrs []uintptr) {}
