package rfstable

import (
	"runtime"
	"testing"
)

// TestFlood pushes ten million distinct new flowids through a table of
// capacity 65536 and checks that its memory does not grow (about 3 s under
// -race on 2 cores). With -short it sends one million.
func TestFlood(t *testing.T) {
	const capacity = 1 << 16
	n := 10_000_000
	if testing.Short() {
		n = 1_000_000
	}
	// The flows of the last `lag` frames are busy (their frames still
	// queued), so eviction has to skip busy entries.
	const lag = 1000
	var head uint64
	tb := mustNew(t, capacity, func(e *Entry) bool { return head < e.LastTail })
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc

	tb.Lock()
	for i := range n {
		// i * odd constant is a bijection on uint32: all flowids distinct.
		f := uint32(i) * 0x9E3779B1
		e, ins := tb.Lookup(f, int64(i))
		if e == nil {
			continue
		}
		if !ins {
			tb.Unlock()
			t.Fatalf("flowid %#x (i=%d) reported as a hit: distinct flows confused", f, i)
		}
		e.Packets++
		e.Bytes += 1500
		e.LastTail = uint64(i) + 1
		head = max(uint64(i), lag) - lag
	}
	tb.Unlock()

	runtime.GC()
	runtime.ReadMemStats(&ms)
	after := ms.HeapAlloc
	const bound = 1 << 20
	if after > before+bound {
		t.Errorf("heap grew from %d to %d bytes during the flood (bound %d)", before, after, bound)
	}
	st := checkStats(t, tb)
	if st.Len > capacity || st.Capacity != capacity {
		t.Errorf("Len %d Capacity %d after flood", st.Len, st.Capacity)
	}
	if st.Hits != 0 || st.Inserts+st.Full != uint64(n) || st.Evictions == 0 {
		t.Errorf("stats after %d distinct flows: %+v", n, st)
	}
	t.Logf("%d flows: heap %d -> %d bytes, %+v", n, before, after, st)
	runtime.KeepAlive(tb)
}
