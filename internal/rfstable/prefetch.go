package rfstable

import "math/bits"

// probeChunk is how many flowids PrefetchEntries without hints probes at a
// time, into a scratch array.
const probeChunk = 64

// Prefetch starts loading the slots of flowids into the cache and returns
// at once. A caller that knows a batch of flowids before it looks them up
// calls Prefetch first, so that the cache misses overlap instead of
// following one another. It changes nothing a reader can see.
func (d *Desired) Prefetch(flowids []uint32) { d.prefetch(flowids) }

// Prefetch starts loading the tag lines of the first candidate sets of
// flowids, the first of the two steps of a Lookup that can miss the cache
// (see [Table.PrefetchEntries] for the second). It changes nothing a
// reader can see. The caller holds the table's lock.
func (t *Table) Prefetch(flowids []uint32) { t.prefetch(flowids) }

// Hint is where [Table.PrefetchEntries] found a flowid: one more than the
// index of its slot (set*Ways + way), or 0 when the flow was not in its
// first candidate set. It only spares [Table.LookupHint] a search; any
// value is safe.
type Hint uint32

// PrefetchEntries reads the tags of the first candidate set of each of
// flowids (best after [Table.Prefetch] has brought them in) and starts
// loading the entry of each flow found there, or the tag line of the second
// candidate set of each flow that is not. It sets hints[i] to where it found
// flowids[i] (0 when it did not), for [Table.LookupHint], for each i below
// len(hints); hints may be nil. It changes nothing a reader can see. The
// caller holds the table's lock.
func (t *Table) PrefetchEntries(flowids []uint32, hints []Hint) {
	n := min(len(flowids), len(hints))
	t.probe(flowids[:n], hints[:n])
	var buf [probeChunk]Hint
	for flowids = flowids[n:]; len(flowids) > 0; {
		k := min(len(flowids), probeChunk)
		t.probe(flowids[:k], buf[:k])
		flowids = flowids[k:]
	}
}

// probeGo is probe without its prefetches: for each flowid, the hint from
// the tags of its first set. It is probe where the package has no prefetch
// instruction, and on amd64 the reference the tests hold the assembly to.
func (t *Table) probeGo(flowids []uint32, hints []Hint) {
	hints = hints[:len(flowids)]
	for i, id := range flowids {
		si := id & t.setMask
		hints[i] = 0
		if m := t.sets[si].match(id); m != 0 {
			hints[i] = Hint(si*Ways + uint32(bits.TrailingZeros(m)&(Ways-1)) + 1)
		}
	}
}

// LookupHint is [Table.Lookup] for a flowid whose hint (from
// [Table.PrefetchEntries]) may name its slot: [Table.Hit], then Lookup when
// that finds nothing. The caller holds the lock.
func (t *Table) LookupHint(flowid uint32, h Hint, now int64) (e *Entry, inserted bool) {
	if e = t.Hit(flowid, h, now); e != nil {
		return e, false
	}
	return t.Lookup(flowid, now)
}

// Hit checks the slot that hint h names, and its valid bit: when it holds
// flowid, Hit counts a hit, sets LastSeen and returns the entry without
// searching; otherwise (a zero hint, or a stale one: the flow was not in
// its first set, or a Lookup or Expire has since taken it out) it changes
// nothing and returns nil, and the caller goes on with [Table.Lookup]. Any
// hint is safe. Hit is small enough for the compiler to inline, which
// LookupHint is not. The caller holds the lock.
func (t *Table) Hit(flowid uint32, h Hint, now int64) *Entry {
	i := uint32(h - 1)
	s := &t.sets[i/Ways&t.setMask]
	way := i % Ways
	if h == 0 || s.valid>>way&1 == 0 || s.tags[way] != flowid {
		return nil
	}
	t.hits++
	e := &s.ent[way]
	e.LastSeen = now
	return e
}
