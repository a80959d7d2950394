package flowtable

import "testing"

// TestTouchHasNoEffect checks that prefetching changes nothing a Lookup or
// a reader can see: no insert, no hit counted, no LastSeen refreshed.
func TestTouchHasNoEffect(t *testing.T) {
	tb, err := New(64, func(*Entry) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDesired(64)
	if err != nil {
		t.Fatal(err)
	}
	tb.Lock()
	e, _ := tb.Lookup(7, 100)
	e.LastTail = 42
	tb.Unlock()
	before := tb.Stats()
	tb.Lock()
	if got := tb.Touch(7); got != 42 {
		t.Errorf("Touch of a known flow read %d, want its entry's LastTail 42", got)
	}
	for id := uint32(100); id < 200; id++ {
		tb.Touch(id)
		d.Touch(id)
	}
	tb.Unlock()
	if after := tb.Stats(); after != before {
		t.Errorf("Touch changed the stats: %+v, then %+v", before, after)
	}
	if g, _ := tb.Get(7); g.LastSeen != 100 {
		t.Errorf("Touch refreshed LastSeen to %d", g.LastSeen)
	}
	if _, ok := d.Get(150); ok {
		t.Error("Desired.Touch recorded a worker")
	}
}
