package flowtable

import (
	"runtime"
	"testing"
	"time"
)

// TestFlood pushes ten million distinct flows (one million with -short)
// through a table of 65,536 and checks that its memory does not grow: the
// flood only recycles slots, each eviction reported.
func TestFlood(t *testing.T) {
	const capacity = 1 << 16
	n := 10_000_000
	if testing.Short() {
		n = 1_000_000
	}
	evicted := 0
	tb, err := New(Config[key, rec]{Capacity: capacity, Idle: time.Minute,
		OnEvict: func(_ Flow[key], v *rec, why Reason) {
			if why != Evicted || v.packets == 0 {
				t.Errorf("flood flow passed as %v with %d packets", why, v.packets)
			}
			evicted++
		}})
	if err != nil {
		t.Fatal(err)
	}
	before := heapAfterGC()

	start := time.Unix(1_700_000_000, 0)
	for i := range n {
		now := start.Add(time.Duration(i) * time.Microsecond)
		id, kk := floodFlow(i)
		v, isNew := tb.Lookup(id, kk, now)
		if !isNew {
			t.Fatalf("flow %d found before it was inserted", i)
		}
		v.packets++
		if i%16 == 0 && i > 0 { // some traffic on a recent flow
			id, kk = floodFlow(i - 1)
			if v, isNew = tb.Lookup(id, kk, now); isNew {
				t.Fatalf("recent flow %d was evicted", i-1)
			}
			v.packets++
		}
	}

	const bound = 1 << 20
	if after := heapAfterGC(); after > before+bound {
		t.Errorf("heap grew from %d to %d bytes during the flood (bound %d)", before, after, bound)
	}
	st := checkStats(t, tb)
	if st.Len != capacity || st.Inserts != uint64(n) || st.Evictions != uint64(n-capacity) ||
		evicted != n-capacity || st.Crowded != 0 || st.Expired != 0 {
		t.Errorf("after %d distinct flows: %+v, %d passed to OnEvict", n, st, evicted)
	}
	t.Logf("%d flows: heap %d bytes before, %+v", n, before, st)
	runtime.KeepAlive(tb)
}

// floodFlow returns the i-th flow of a flood, each flowid new: i times an
// odd constant is a bijection on uint32.
func floodFlow(i int) (uint32, key) {
	return uint32(i) * 0x85EBCA6B, key{sport: uint16(i), dport: uint16(i >> 16), proto: 17}
}

// heapAfterGC returns the bytes of live heap objects after a collection.
func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
