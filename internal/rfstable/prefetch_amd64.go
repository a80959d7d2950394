package rfstable

import "unsafe"

// prefetchScaled prefetches base + (id&mask)*size for each of ids: the
// slot or set each flowid indexes in an array of size-byte elements. It
// asks the CPU to bring each line into its caches without waiting for any
// (PREFETCHT0); a prefetch never faults and never changes what a later
// load reads.
//
//go:noescape
func prefetchScaled(base unsafe.Pointer, mask uint32, size uintptr, ids []uint32)

// probeSets is probeGo in assembly, with SSE2 (which every amd64 CPU has),
// plus the prefetches: one compare of the first set's eight tags, the valid
// mask, then the hint and the prefetch of the entry found or of the second
// set. sets points at the table's first set; len(hints) >= len(ids). It
// relies on the set layout pinned below.
//
//go:noescape
func probeSets(sets unsafe.Pointer, setMask, altShift uint32, ids []uint32, hints []Hint)

// This fails to compile unless a set is what probeSets expects: eight
// 4-byte tags at offset 0, the valid byte at 32, eight 64-byte entries from
// offset 64, 576 bytes in all.
var (
	_ = [1]struct{}{}[unsafe.Sizeof(set{})-576]
	_ = [1]struct{}{}[unsafe.Offsetof(set{}.valid)-32]
	_ = [1]struct{}{}[unsafe.Offsetof(set{}.ent)-64]
	_ = [1]struct{}{}[unsafe.Sizeof(Entry{})-64]
)

func (t *Table) probe(flowids []uint32, hints []Hint) {
	if len(flowids) == 0 {
		return
	}
	probeSets(unsafe.Pointer(&t.sets[0]), t.setMask, t.altShift, flowids, hints[:len(flowids)])
}

func (d *Desired) prefetch(flowids []uint32) {
	prefetchScaled(unsafe.Pointer(unsafe.SliceData(d.slots)), d.mask, unsafe.Sizeof(d.slots[0]), flowids)
}

func (t *Table) prefetch(flowids []uint32) {
	prefetchScaled(unsafe.Pointer(unsafe.SliceData(t.sets)), t.setMask, unsafe.Sizeof(set{}), flowids)
}
