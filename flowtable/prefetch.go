package flowtable

import (
	"math/bits"
	"unsafe"
)

// PrefetchBatch is the most flowids one Prefetch call handles; longer
// slices are taken in pieces of this size.
const PrefetchBatch = 64

// Prefetch starts loading the slots of flowids into the cache and returns
// at once. A caller that knows a batch of flowids before it looks them up
// calls Prefetch first, so that the cache misses overlap instead of
// following one another. It changes nothing a reader can see.
func (d *Desired) Prefetch(flowids []uint32) {
	var addrs [PrefetchBatch]uintptr
	for len(flowids) > 0 {
		k := min(len(flowids), PrefetchBatch)
		for i, id := range flowids[:k] {
			addrs[i] = uintptr(unsafe.Pointer(&d.slots[id&d.mask]))
		}
		prefetchAll(addrs[:k])
		flowids = flowids[k:]
	}
}

// Prefetch starts loading the tag lines of the first candidate sets of
// flowids, the first of the two steps of a Lookup that can miss the cache
// (see [Table.PrefetchEntries] for the second). It changes nothing a
// reader can see. The caller holds the table's lock.
func (t *Table) Prefetch(flowids []uint32) {
	var addrs [PrefetchBatch]uintptr
	for len(flowids) > 0 {
		k := min(len(flowids), PrefetchBatch)
		for i, id := range flowids[:k] {
			addrs[i] = uintptr(unsafe.Pointer(&t.sets[id&t.setMask]))
		}
		prefetchAll(addrs[:k])
		flowids = flowids[k:]
	}
}

// PrefetchEntries reads the tags of the first candidate set of each of
// flowids (best after [Table.Prefetch] has brought them in) and starts
// loading the entry of each flow found there, or the tag line of the second
// candidate set of each flow that is not. It changes nothing a reader can
// see. The caller holds the table's lock.
func (t *Table) PrefetchEntries(flowids []uint32) {
	var addrs [PrefetchBatch]uintptr
	for len(flowids) > 0 {
		k := min(len(flowids), PrefetchBatch)
		for i, id := range flowids[:k] {
			s := &t.sets[id&t.setMask]
			if m := s.match(id); m != 0 {
				addrs[i] = uintptr(unsafe.Pointer(&s.ent[bits.TrailingZeros(m)&(Ways-1)]))
			} else {
				addrs[i] = uintptr(unsafe.Pointer(&t.sets[t.alt(id)]))
			}
		}
		prefetchAll(addrs[:k])
		flowids = flowids[k:]
	}
}
