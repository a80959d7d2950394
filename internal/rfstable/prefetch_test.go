package rfstable

import (
	"math/rand/v2"
	"testing"
)

// TestPrefetchHasNoEffect checks that prefetching changes nothing a Lookup
// or a reader can see: no insert, no hit counted, no LastSeen refreshed, no
// desired worker recorded. It prefetches more flowids than one call takes
// at once, flows in both candidate sets, and unknown flows.
func TestPrefetchHasNoEffect(t *testing.T) {
	tb, err := New(64, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDesired(64)
	if err != nil {
		t.Fatal(err)
	}
	// Flowids with the same low bits share a first set: the ninth and
	// later of them overflow into their second sets.
	var ids []uint32
	for i := range uint32(12) {
		ids = append(ids, i<<8|3)
	}
	tb.Lock()
	for i, id := range ids {
		e, _ := tb.Lookup(id, 100)
		e.LastTail = uint64(i)
	}
	tb.Unlock()
	if err := d.Set(ids[0], 1); err != nil {
		t.Fatal(err)
	}
	before := tb.Stats()
	if before.Len != len(ids) {
		t.Fatalf("set-up holds %d flows, want %d", before.Len, len(ids))
	}
	all := append([]uint32{}, ids...)
	for id := uint32(1000); len(all) < 3*probeChunk+5; id++ {
		all = append(all, id)
	}
	tb.Lock()
	for _, n := range []int{0, 1, len(ids), len(all)} {
		tb.Prefetch(all[:n])
		tb.PrefetchEntries(all[:n], nil)
		tb.PrefetchEntries(all[:n], make([]Hint, n))
		d.Prefetch(all[:n])
	}
	tb.Unlock()
	if after := tb.Stats(); after != before {
		t.Errorf("Prefetch changed the stats: %+v, then %+v", before, after)
	}
	for i, id := range ids {
		g, ok := tb.Get(id)
		if !ok || g.LastSeen != 100 || g.LastTail != uint64(i) {
			t.Errorf("flow %#x after Prefetch: %+v (found %v), want LastSeen 100, LastTail %d", id, g, ok, i)
		}
	}
	if w, ok := d.Get(ids[0]); !ok || w != 1 {
		t.Errorf("desired worker of %#x is %d (%v) after Prefetch, want 1", ids[0], w, ok)
	}
	if _, ok := d.Get(1001); ok {
		t.Error("Desired.Prefetch recorded a worker")
	}
}

// TestLookupHint checks the hints PrefetchEntries gives and LookupHint's use
// of them: a flow found in its first set gets its slot, anything else 0; a
// hint that still names its flow's slot is a hit; a zero hint, a hint whose
// slot a Lookup has since given to another flow, and a hint naming no slot
// of the table fall back to Lookup.
func TestLookupHint(t *testing.T) {
	tb, err := New(MinCapacity, nil) // two sets
	if err != nil {
		t.Fatal(err)
	}
	// Ten flowids with the same low bit: eight fill the first set, two
	// overflow into the second.
	var ids []uint32
	for i := range uint32(10) {
		ids = append(ids, i<<4)
	}
	tb.Lock()
	for i, id := range ids {
		tb.Lookup(id, int64(i))
	}
	unknown := uint32(0x1234_5670)
	query := append(append([]uint32{}, ids...), unknown)
	hints := make([]Hint, len(query))
	tb.PrefetchEntries(query, hints)
	for i, id := range query {
		var want Hint
		if i < Ways {
			want = Hint(i + 1) // set 0, way i
		}
		if hints[i] != want {
			t.Fatalf("hint for %#x is %d, want %d", id, hints[i], want)
		}
	}
	good := tb.Find(ids[3])
	e, inserted := tb.LookupHint(ids[3], hints[3], 50)
	if e != good || inserted || e.LastSeen != 50 {
		t.Fatalf("LookupHint with a good hint: %p inserted=%v, want %p, false", e, inserted, good)
	}
	// Hit alone: a good hint hits, any other gives nil and counts nothing.
	if e := tb.Hit(ids[3], hints[3], 52); e != good || e.LastSeen != 52 {
		t.Fatalf("Hit with a good hint: %p, want %p", e, good)
	}
	for _, h := range []Hint{0, hints[2], hints[4], 1 << 30, ^Hint(0)} {
		if e := tb.Hit(ids[3], h, 53); e != nil {
			t.Fatalf("Hit(%#x, hint %d) = %+v, want nil", ids[3], h, e)
		}
	}
	// A zero hint, and hints that name another flow's slot or no slot: the
	// flow in the second set is still found.
	for _, h := range []Hint{0, hints[2], 1 << 30, ^Hint(0)} {
		if e, inserted := tb.LookupHint(ids[9], h, 51); e == nil || inserted || e.FlowID != ids[9] {
			t.Fatalf("LookupHint(%#x, hint %d): %+v inserted=%v", ids[9], h, e, inserted)
		}
	}
	// A stale hint: six new flows fill the second set, the seventh evicts
	// the oldest entry, ids[0]'s; its old hint must not be taken for ids[0].
	for i := range uint32(7) {
		if e, inserted := tb.Lookup(0x100+i<<4, 60); e == nil || !inserted {
			t.Fatal("set-up: insert failed")
		}
	}
	if tb.Find(ids[0]) != nil {
		t.Fatal("set-up: ids[0] was not evicted")
	}
	e, inserted = tb.LookupHint(ids[0], hints[0], 70)
	if e == nil || !inserted || e.FlowID != ids[0] || e.LastSeen != 70 {
		t.Fatalf("LookupHint with a stale hint: %+v inserted=%v, want a new entry for %#x", e, inserted, ids[0])
	}
	if got := tb.Find(0x160); got == nil || got.FlowID != 0x160 {
		t.Fatalf("the flow that took the hinted slot lost it: %+v", got)
	}
	tb.Unlock()
	// Six hits (the good hint twice, four for ids[9]); ten, seven, then
	// one inserts, the last two evicting.
	if st := tb.Stats(); st.Hits != 6 || st.Inserts != 18 || st.Evictions != 2 {
		t.Errorf("counters %+v, want 6 hits, 18 inserts, 2 evictions", st)
	}

	// A hint to a slot that Expire has freed: the tag is still there, the
	// valid bit is not, and the zeroed entry must not be taken for a hit.
	tb, err = New(MinCapacity, nil)
	if err != nil {
		t.Fatal(err)
	}
	tb.Lock()
	tb.Lookup(0x40, 1)
	h := make([]Hint, 1)
	tb.PrefetchEntries([]uint32{0x40}, h)
	tb.Unlock()
	if h[0] == 0 || tb.Expire(2) != 1 {
		t.Fatalf("set-up: hint %d, or the flow was not expired", h[0])
	}
	tb.Lock()
	e, inserted = tb.LookupHint(0x40, h[0], 3)
	tb.Unlock()
	if e == nil || !inserted || e.FirstSeen != 3 {
		t.Errorf("LookupHint with a hint to an expired slot: %+v inserted=%v, want a new entry", e, inserted)
	}
	if st := tb.Stats(); st.Hits != 0 || st.Inserts != 2 {
		t.Errorf("counters %+v, want no hit and two inserts", st)
	}
}

// TestProbeMatchesGo checks the assembly probe (where there is one) against
// probeGo on a crowded table: flows in their first set, in their second, and
// unknown ones, over every set.
func TestProbeMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, capacity := range []int{MinCapacity, 1024, 1 << 16} {
		tb, err := New(capacity, nil)
		if err != nil {
			t.Fatal(err)
		}
		var ids []uint32
		tb.Lock()
		for i := range capacity - capacity/8 {
			id := rng.Uint32()
			// A quarter are seen at time 0, to be expired below: their
			// tags stay in the sets with the valid bits cleared.
			if e, _ := tb.Lookup(id, int64(min(i%4, 1))); e != nil {
				ids = append(ids, id)
			}
		}
		tb.Unlock()
		expired := tb.Expire(1)
		tb.Lock()
		for range 1000 {
			ids = append(ids, rng.Uint32())
		}
		want, got := make([]Hint, len(ids)), make([]Hint, len(ids))
		tb.probeGo(ids, want)
		tb.probe(ids, got)
		found := 0
		for i, id := range ids {
			if got[i] != want[i] {
				t.Fatalf("capacity %d: hint for %#x is %d, want %d", capacity, id, got[i], want[i])
			}
			e := tb.Find(id)
			if want[i] != 0 {
				found++
				if e == nil || e.FlowID != id {
					t.Fatalf("capacity %d: hint %d for %#x names no entry of it", capacity, want[i], id)
				}
			} else if e != nil && inFirstSet(tb, id, e) {
				t.Fatalf("capacity %d: %#x is in its first set but got no hint", capacity, id)
			}
		}
		tb.Unlock()
		if found == 0 || found == len(ids) || expired == 0 {
			t.Fatalf("capacity %d: %d of %d flows found in their first set, %d expired", capacity, found, len(ids), expired)
		}
	}
}

// inFirstSet reports whether e is one of the entries of id's first set.
func inFirstSet(tb *Table, id uint32, e *Entry) bool {
	s := &tb.sets[id&tb.setMask]
	for i := range s.ent {
		if &s.ent[i] == e {
			return true
		}
	}
	return false
}
