//go:build !amd64

package flowtable

// prefetchAll does nothing where the package has no prefetch instruction:
// the lookups then take their cache misses one after another.
func prefetchAll(addrs []uintptr) {}

// probe is probeGo where the package has no assembly.
func (t *Table) probe(flowids []uint32, hints []Hint) { t.probeGo(flowids, hints) }

func (d *Desired) prefetch(flowids []uint32) {}

func (t *Table) prefetch(flowids []uint32) {}
