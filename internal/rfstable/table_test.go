package rfstable

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
)

// sameSet returns the k-th flowid that maps to set s of a table of capacity c.
func sameSet(c, s, k int) uint32 { return uint32(s + k*(c/Ways)) }

func mustNew(t testing.TB, c int, busy func(*Entry) bool) *Table {
	t.Helper()
	tb, err := New(c, busy)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func checkStats(t *testing.T, tb *Table) Stats {
	t.Helper()
	st := tb.Stats()
	if got := st.Inserts - st.Evictions - st.Expired; got != uint64(st.Len) {
		t.Errorf("Inserts-Evictions-Expired = %d, Len = %d (%+v)", got, st.Len, st)
	}
	if st.Collisions != st.Evictions+st.Full {
		t.Errorf("Collisions %d != Evictions %d + Full %d", st.Collisions, st.Evictions, st.Full)
	}
	if st.Len > st.Capacity || st.Len < 0 {
		t.Errorf("Len %d outside [0, %d]", st.Len, st.Capacity)
	}
	n := 0
	tb.Range(func(*Entry) bool { n++; return true })
	if n != st.Len {
		t.Errorf("Range saw %d entries, Len = %d", n, st.Len)
	}
	return st
}

func TestLayout(t *testing.T) {
	if s := unsafe.Sizeof(Entry{}); s != 64 {
		t.Errorf("Entry is %d bytes, want 64 (one cache line)", s)
	}
	if o := unsafe.Offsetof(set{}.ent); o != 64 {
		t.Errorf("entries start at offset %d of a set, want 64", o)
	}
}

func TestNewCapacity(t *testing.T) {
	for _, c := range []int{-8, 0, 1, 4, 8, 12, 1000, MaxCapacity * 2} {
		if tb, err := New(c, nil); !errors.Is(err, ErrCapacity) || tb != nil {
			t.Errorf("New(%d) = %v, %v; want nil, ErrCapacity", c, tb, err)
		}
	}
	tb := mustNew(t, 64, nil)
	if tb.Capacity() != 64 || tb.Len() != 0 {
		t.Errorf("Capacity %d Len %d", tb.Capacity(), tb.Len())
	}
}

func TestLookupInsertHit(t *testing.T) {
	tb := mustNew(t, 64, nil)
	tb.Lock()
	e, ins := tb.Lookup(7, 100)
	if e == nil || !ins {
		t.Fatalf("first Lookup = %v, %v", e, ins)
	}
	want := Entry{FlowID: 7, Current: -1, Desired: -1, FirstSeen: 100, LastSeen: 100}
	if *e != want {
		t.Errorf("new entry = %+v, want %+v", *e, want)
	}
	e.Current, e.Desired, e.LastTail, e.Packets, e.Bytes = 3, 2, 99, 1, 60
	e2, ins := tb.Lookup(7, 200)
	if e2 != e || ins {
		t.Errorf("second Lookup = %p, %v; want %p, false", e2, ins, e)
	}
	if e2.LastSeen != 200 || e2.FirstSeen != 100 || e2.Current != 3 || e2.LastTail != 99 || e2.Bytes != 60 {
		t.Errorf("hit entry = %+v", *e2)
	}
	if f := tb.Find(7); f != e {
		t.Errorf("Find(7) = %p, want %p", f, e)
	}
	if f := tb.Find(8); f != nil {
		t.Errorf("Find(8) = %+v, want nil", *f)
	}
	tb.Unlock()
	got, ok := tb.Get(7)
	if !ok || got.Packets != 1 || got.FlowID != 7 {
		t.Errorf("Get(7) = %+v, %v", got, ok)
	}
	if _, ok := tb.Get(8); ok {
		t.Error("Get(8) found a flow never inserted")
	}
	st := checkStats(t, tb)
	if st.Inserts != 1 || st.Hits != 1 || st.Len != 1 || st.Evictions != 0 || st.Full != 0 {
		t.Errorf("stats %+v", st)
	}
}

// A table of capacity 16 has two sets, each the other's alternate: every
// flowid's sixteen candidates are the whole table, which makes the
// eviction tests exact.
const pair = 2 * Ways

func TestSameSetNeverConfused(t *testing.T) {
	tb := mustNew(t, pair, nil)
	tb.Lock()
	defer tb.Unlock()
	// Flowids sharing their low 16 bits (so their first set) all fit, in
	// both sets, and are told apart.
	for k := range pair {
		e, ins := tb.Lookup(uint32(k)<<16|5, int64(k))
		if e == nil || !ins {
			t.Fatalf("insert %d failed", k)
		}
		e.Packets = uint64(k + 1000)
	}
	for k := range pair {
		f := uint32(k)<<16 | 5
		e, ins := tb.Lookup(f, 100)
		if e == nil || ins || e.FlowID != f || e.Packets != uint64(k+1000) {
			t.Errorf("Lookup(%#x) = %+v, %v", f, e, ins)
		}
	}
	other := uint32(1)<<24 | 5
	if e := tb.Find(other); e != nil {
		t.Errorf("Find(%#x) returned %#x's entry", other, e.FlowID)
	}
}

func TestTwoChoice(t *testing.T) {
	const c = 1024
	tb := mustNew(t, c, nil)
	for f := range uint32(1 << 20) {
		a := tb.alt(f)
		if a == f&tb.setMask || a > tb.setMask {
			t.Fatalf("alt(%#x) = %d, first set %d", f, a, f&tb.setMask)
		}
	}
	// Twelve flows sharing a first set: four overflow into alternates, none
	// is evicted.
	tb.Lock()
	for k := range 12 {
		tb.Lookup(sameSet(c, 9, k), int64(k))
	}
	for k := range 12 {
		if tb.Find(sameSet(c, 9, k)) == nil {
			t.Errorf("flow %d of 12 sharing a first set is missing", k)
		}
	}
	tb.Unlock()
	if st := checkStats(t, tb); st.Evictions != 0 || st.Len != 12 {
		t.Errorf("stats %+v", st)
	}
}

func TestEvictOldestLastSeen(t *testing.T) {
	tb := mustNew(t, pair, nil)
	tb.Lock()
	// Insert in one order, then touch so that LastSeen order differs from
	// insertion and way order: flow k gets LastSeen = perm[k].
	perm := []int64{50, 20, 70, 10, 80, 30, 60, 40, 55, 25, 75, 15, 85, 35, 65, 45}
	for k := range pair {
		tb.Lookup(uint32(k), 1)
	}
	for k := range pair {
		tb.Lookup(uint32(k), perm[k])
	}
	// Successive new flows evict in LastSeen order: 10 (k=3), 15 (k=11),
	// 20 (k=1), 25 (k=9).
	gone := map[int]bool{}
	for i, victim := range []int{3, 11, 1, 9} {
		nf := uint32(100 + i)
		e, ins := tb.Lookup(nf, 1000+int64(i))
		if e == nil || !ins {
			t.Fatalf("insert of %#x = %v, %v", nf, e, ins)
		}
		gone[victim] = true
		for k := range pair {
			if present := tb.Find(uint32(k)) != nil; present == gone[k] {
				t.Errorf("round %d: flow %d present=%v, want %v (victim %d)", i, k, present, !gone[k], victim)
			}
		}
	}
	tb.Unlock()
	st := checkStats(t, tb)
	if st.Evictions != 4 || st.Collisions != 4 || st.Inserts != 20 || st.Len != pair {
		t.Errorf("stats %+v", st)
	}
}

func TestBusyNeverEvicted(t *testing.T) {
	busy := map[uint32]bool{}
	tb := mustNew(t, pair, func(e *Entry) bool { return busy[e.FlowID] })
	tb.Lock()
	for k := range pair {
		f := uint32(k)
		busy[f] = true
		tb.Lookup(f, int64(10+k))
	}
	for i := range 3 {
		if e, ins := tb.Lookup(uint32(50+i), 100); e != nil || ins {
			t.Errorf("Lookup into all-busy sets = %v, %v; want nil", e, ins)
		}
	}
	tb.Unlock()
	st := checkStats(t, tb)
	if st.Full != 3 || st.Len != pair || st.Evictions != 0 {
		t.Errorf("stats after refusals %+v", st)
	}
	// k=14 and k=15 become idle: the older of them (k=14, LastSeen 24)
	// goes, though busy k=0 (LastSeen 10) is older still.
	busy[14] = false
	busy[15] = false
	tb.Lock()
	if e, ins := tb.Lookup(60, 200); e == nil || !ins {
		t.Fatalf("Lookup after freeing = %v, %v", e, ins)
	}
	if tb.Find(14) != nil {
		t.Error("oldest non-busy entry k=14 still present")
	}
	for k := range 14 {
		if tb.Find(uint32(k)) == nil {
			t.Errorf("busy entry k=%d evicted", k)
		}
	}
	tb.Unlock()
	// Expire spares busy entries however old.
	if n := tb.Expire(1 << 40); n != 2 {
		t.Errorf("Expire removed %d, want 2 (k=15 and the new flow)", n)
	}
	for k := range 14 {
		if _, ok := tb.Get(uint32(k)); !ok {
			t.Errorf("busy k=%d expired", k)
		}
	}
	st = checkStats(t, tb)
	if st.Expired != 2 || st.Len != 14 || st.Evictions != 1 {
		t.Errorf("final stats %+v", st)
	}
}

func TestExpire(t *testing.T) {
	tb := mustNew(t, 128, nil)
	tb.Lock()
	for f := range uint32(40) {
		tb.Lookup(f*13, int64(f))
	}
	tb.Unlock()
	if n := tb.Expire(10); n != 10 {
		t.Errorf("Expire(10) = %d, want 10", n)
	}
	if n := tb.Expire(10); n != 0 {
		t.Errorf("second Expire(10) = %d, want 0", n)
	}
	for f := range uint32(40) {
		_, ok := tb.Get(f * 13)
		if ok != (f >= 10) {
			t.Errorf("flow %d present=%v after Expire(10)", f*13, ok)
		}
	}
	// Expired slots are reusable and come back fresh.
	tb.Lock()
	e, ins := tb.Lookup(0, 500)
	if !ins || e.Packets != 0 || e.FirstSeen != 500 {
		t.Errorf("re-insert after expiry = %+v, %v", *e, ins)
	}
	tb.Unlock()
	st := checkStats(t, tb)
	if st.Len != 31 || st.Expired != 10 || st.Inserts != 41 {
		t.Errorf("stats %+v", st)
	}
}

func TestTop(t *testing.T) {
	tb := mustNew(t, 256, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	tb.Lock()
	var all []Entry
	for range 150 {
		f := rng.Uint32()
		e, ins := tb.Lookup(f, 1)
		if !ins {
			continue
		}
		e.Packets = uint64(rng.IntN(20)) // many ties
		all = append(all, *e)
	}
	tb.Unlock()
	all = all[:0]
	tb.Range(func(e *Entry) bool { all = append(all, *e); return true })
	slices.SortFunc(all, func(a, b Entry) int {
		if a.Packets != b.Packets {
			if a.Packets > b.Packets {
				return -1
			}
			return 1
		}
		if a.FlowID < b.FlowID {
			return -1
		}
		return 1
	})
	for _, n := range []int{0, 1, 5, 37, len(all), len(all) + 10} {
		got := tb.Top(n, nil)
		want := all[:min(n, len(all))]
		if !slices.Equal(got, want) {
			t.Errorf("Top(%d) = %v\nwant %v", n, got, want)
		}
	}
	// dst is reused when large enough.
	buf := make([]Entry, 3, 10)
	got := tb.Top(10, buf)
	if &got[0] != &buf[:1][0] || len(got) != 10 {
		t.Errorf("Top did not reuse dst")
	}
	if got := tb.Top(-1, buf); len(got) != 0 {
		t.Errorf("Top(-1) returned %d entries", len(got))
	}
}

func TestRangeStops(t *testing.T) {
	tb := mustNew(t, 64, nil)
	tb.Lock()
	for f := range uint32(20) {
		tb.Lookup(f, 0)
	}
	tb.Unlock()
	n := 0
	tb.Range(func(*Entry) bool { n++; return n < 5 })
	if n != 5 {
		t.Errorf("Range called fn %d times after it returned false at 5", n)
	}
}

func TestLookupAllocs(t *testing.T) {
	tb := mustNew(t, 1024, func(e *Entry) bool { return e.LastTail > 5 })
	flows := make([]uint32, 4096) // more flows than capacity: hits, inserts, evictions
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range flows {
		flows[i] = rng.Uint32()
	}
	now := int64(0)
	allocs := testing.AllocsPerRun(100, func() {
		tb.Lock()
		for _, f := range flows {
			now++
			if e, _ := tb.Lookup(f, now); e != nil {
				e.Packets++
				e.Bytes += 64
				e.LastTail = uint64(now & 7)
			}
		}
		tb.Unlock()
	})
	if allocs != 0 {
		t.Errorf("Lookup allocates %v per run", allocs)
	}
	if st := checkStats(t, tb); st.Evictions == 0 || st.Hits == 0 {
		t.Errorf("test did not exercise evictions and hits: %+v", st)
	}
}

// TestConcurrentReaders runs one writer (batches under the lock, with
// busy reading atomically-published worker heads) against readers using
// every locking method, under -race.
func TestConcurrentReaders(t *testing.T) {
	var head [4]atomic.Uint64
	tb := mustNew(t, 512, func(e *Entry) bool {
		return e.Current >= 0 && head[e.Current].Load() < e.LastTail
	})
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() { // workers advance their heads
		for !stop.Load() {
			for i := range head {
				head[i].Add(1)
			}
		}
	})
	var readerErr atomic.Value
	for range 2 {
		wg.Go(func() {
			var buf []Entry
			for !stop.Load() {
				st := tb.Stats()
				if st.Inserts-st.Evictions-st.Expired != uint64(st.Len) {
					readerErr.Store("stats do not add up")
				}
				buf = tb.Top(10, buf)
				for i := 1; i < len(buf); i++ {
					if buf[i].Packets > buf[i-1].Packets {
						readerErr.Store("Top not sorted")
					}
				}
				tb.Range(func(e *Entry) bool { return e.Packets < 1<<62 })
				_, _ = tb.Get(42)
				_ = tb.Len()
				tb.Expire(-1)
			}
		})
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var tail [4]uint64
	for b := range 2000 {
		tb.Lock()
		for range 64 {
			f := rng.Uint32() % 2000
			if e, _ := tb.Lookup(f, int64(b)); e != nil {
				if e.Current < 0 {
					e.Current = int32(f % 4)
				}
				tail[e.Current]++
				e.LastTail = tail[e.Current]
				e.Packets++
			}
		}
		tb.Unlock()
	}
	stop.Store(true)
	wg.Wait()
	if v := readerErr.Load(); v != nil {
		t.Error(v)
	}
	checkStats(t, tb)
}

// TestTwoChoiceRoom measures what the package comment claims for two
// candidate sets: 10,000 random flowids in 16,384 entries leave many times
// fewer flows without room (a collision on insert) than if each flowid had
// only its first set.
func TestTwoChoiceRoom(t *testing.T) {
	const c, n = 16384, 10_000
	tb := mustNew(t, c, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	perSet := make([]int, c/Ways)
	seen := make(map[uint32]bool, n)
	tb.Lock()
	for len(seen) < n {
		f := rng.Uint32()
		if seen[f] {
			continue
		}
		seen[f] = true
		perSet[f&tb.setMask]++
		tb.Lookup(f, 0)
	}
	tb.Unlock()
	oneSet := 0 // flows beyond the eight ways of their only set
	for _, k := range perSet {
		oneSet += max(k-Ways, 0)
	}
	two := int(checkStats(t, tb).Collisions)
	t.Logf("%d flows in %d entries without room: one set %d (%.2f%%), two sets %d (%.2f%%)",
		n, c, oneSet, 100*float64(oneSet)/n, two, 100*float64(two)/n)
	if oneSet == 0 || two*5 > oneSet {
		t.Errorf("two candidate sets left %d flows without room, one set %d: want at least 5 times fewer", two, oneSet)
	}
}
