//go:build !amd64

package rfstable

// Where the package has no prefetch instruction, the prefetches do nothing
// and the lookups take their cache misses one after another.

// probe is probeGo where the package has no assembly.
func (t *Table) probe(flowids []uint32, hints []Hint) { t.probeGo(flowids, hints) }

func (d *Desired) prefetch(flowids []uint32) {}

func (t *Table) prefetch(flowids []uint32) {}
