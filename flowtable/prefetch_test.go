package flowtable

import "testing"

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
	for id := uint32(1000); len(all) < 3*PrefetchBatch+5; id++ {
		all = append(all, id)
	}
	tb.Lock()
	for _, n := range []int{0, 1, len(ids), len(all)} {
		tb.Prefetch(all[:n])
		tb.PrefetchEntries(all[:n])
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
