package flowtable

import (
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"
	"weak"
)

// key stands for a caller's full flow key (steer.FlowKey, say).
type key struct {
	src, dst     [16]byte
	sport, dport uint16
	proto        uint8
}

func k(n int) key {
	return key{src: [16]byte{0: 10, 15: byte(n >> 24)}, dst: [16]byte{0: 10, 15: 1}, sport: uint16(n), dport: uint16(n >> 16), proto: 6}
}

// rec stands for a caller's per-flow state.
type rec struct {
	packets uint64
	first   time.Time
	tag     int
}

// at returns a time n seconds after a fixed start.
func at(n int) time.Time { return time.Unix(1_700_000_000+int64(n), 0) }

type evicted struct {
	f   Flow[key]
	v   rec
	why Reason
}

// newRec returns a table of capacity flows whose OnEvict appends to *out.
func newRec(t testing.TB, capacity int, idle time.Duration, out *[]evicted) *Table[key, rec] {
	t.Helper()
	cfg := Config[key, rec]{Capacity: capacity, Idle: idle}
	if out != nil {
		cfg.OnEvict = func(f Flow[key], v *rec, why Reason) { *out = append(*out, evicted{f, *v, why}) }
	}
	tb, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// wantNew looks up flow (id, k(id)) at ts and fails unless it starts
// afresh.
func wantNew(t *testing.T, tb *Table[key, rec], id int, ts time.Time) {
	t.Helper()
	if v, isNew := tb.Lookup(uint32(id), k(id), ts); !isNew || *v != (rec{}) {
		t.Fatalf("flow %d at %v: %+v, isNew %v; want a new flow", id, ts, *v, isNew)
	}
}

// wantEvicted fails unless OnEvict received exactly want.
func wantEvicted(t *testing.T, got []evicted, want ...evicted) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("OnEvict received %+v, want %+v", got, want)
	}
}

// checkStats checks the identities Stats documents, and that All sees Len
// flows.
func checkStats[K comparable, V any](t *testing.T, tb *Table[K, V]) Stats {
	t.Helper()
	st := tb.Stats()
	if got := st.Inserts - st.Evictions - st.Expired - st.Deleted; got != uint64(st.Len) {
		t.Errorf("Inserts-Evictions-Expired-Deleted = %d, Len = %d (%+v)", got, st.Len, st)
	}
	if st.Len > st.Capacity || st.Len < 0 || st.Len != tb.Len() || st.Crowded > st.Evictions {
		t.Errorf("inconsistent stats %+v (Len() %d)", st, tb.Len())
	}
	n := 0
	for range tb.All() {
		n++
	}
	if n != st.Len {
		t.Errorf("All saw %d flows, Len = %d", n, st.Len)
	}
	return st
}

func TestNewConfig(t *testing.T) {
	for _, cfg := range []Config[key, rec]{
		{Capacity: 0}, {Capacity: -1}, {Capacity: MaxCapacity + 1}, {Capacity: 8, Idle: -time.Second},
	} {
		if tb, err := New(cfg); !errors.Is(err, ErrConfig) || tb != nil {
			t.Errorf("New(%+v) = %v, %v; want nil, ErrConfig", cfg, tb, err)
		}
	}
	// Flows so large that the capacity cannot be allocated: an error, not
	// a panic in make.
	if _, err := New(Config[struct{}, [1 << 24]byte]{Capacity: 1 << 24}); !errors.Is(err, ErrConfig) {
		t.Errorf("New with 2^48 bytes of values: %v, want ErrConfig", err)
	}
	for _, c := range []int{1, 2, 3, 1000, 1024} {
		tb := newRec(t, c, 0, nil)
		if st := tb.Stats(); st.Capacity != c || st.Len != 0 || len(tb.buckets) < c || len(tb.buckets) >= 2*c && c > 1 {
			t.Errorf("New(%d): stats %+v, %d buckets", c, st, len(tb.buckets))
		}
	}
}

// TestLayout pins the bookkeeping size the package comment and New's doc
// give.
func TestLayout(t *testing.T) {
	if s := unsafe.Sizeof(meta{}); s != 32 {
		t.Errorf("meta is %d bytes, want 32", s)
	}
}

func TestLookupInsertHit(t *testing.T) {
	tb := newRec(t, 8, 0, nil)
	v, isNew := tb.Lookup(7, k(1), at(0))
	if !isNew || *v != (rec{}) {
		t.Fatalf("first Lookup: %+v, isNew %v", *v, isNew)
	}
	v.packets, v.first = 1, at(0)
	v, isNew = tb.Lookup(7, k(1), at(1))
	if isNew || v.packets != 1 || !v.first.Equal(at(0)) {
		t.Fatalf("second Lookup: %+v, isNew %v", *v, isNew)
	}
	if g := tb.Get(7, k(1)); g != v {
		t.Errorf("Get returned %p, Lookup %p", g, v)
	}
	if tb.Get(7, k(2)) != nil || tb.Get(8, k(1)) != nil {
		t.Error("Get found a flow the table does not hold")
	}
	if st := checkStats(t, tb); st.Hits != 1 || st.Inserts != 1 || st.Len != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestCollidingFlowids: flows with one flowid and different keys are
// different flows, each with its own value; and a flow keyed by struct{}
// is its flowid.
func TestCollidingFlowids(t *testing.T) {
	tb := newRec(t, 64, 0, nil)
	for i := range 10 {
		v, isNew := tb.Lookup(0xdead, k(i), at(i))
		if !isNew {
			t.Fatalf("flow %d of one flowid found as existing", i)
		}
		v.tag = i
	}
	for i := range 10 {
		if v := tb.Get(0xdead, k(i)); v == nil || v.tag != i {
			t.Errorf("flow %d: %v", i, v)
		}
	}
	byID, err := New(Config[struct{}, int]{Capacity: 4})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := byID.Lookup(5, struct{}{}, time.Time{})
	*v = 42
	if v, isNew := byID.Lookup(5, struct{}{}, time.Time{}); isNew || *v != 42 {
		t.Errorf("struct{} key: %d, isNew %v", *v, isNew)
	}
}

// TestEvictLeastRecentlySeen: a full table evicts the flow looked up least
// recently (not the one inserted first), and reports it.
func TestEvictLeastRecentlySeen(t *testing.T) {
	var out []evicted
	tb := newRec(t, 4, 0, &out)
	for i := range 4 {
		v, _ := tb.Lookup(uint32(i), k(i), at(i))
		v.tag = i
	}
	tb.Lookup(0, k(0), at(10)) // 1 is now the least recently seen
	tb.Get(1, k(1))            // Get does not count as seen
	wantNew(t, tb, 99, at(11))
	wantEvicted(t, out, evicted{Flow[key]{1, k(1)}, rec{tag: 1}, Evicted})
	if tb.Get(1, k(1)) != nil {
		t.Error("evicted flow still found")
	}
	for _, i := range []int{0, 2, 3} {
		if v := tb.Get(uint32(i), k(i)); v == nil || v.tag != i {
			t.Errorf("flow %d lost or changed: %v", i, v)
		}
	}
	if st := checkStats(t, tb); st.Evictions != 1 || st.Crowded != 0 || st.Len != 4 {
		t.Errorf("stats %+v", st)
	}
}

// TestIdleRestart: a flow whose next packet comes more than Idle after its
// last one ends (OnEvict, Expired) and starts afresh; a gap of exactly
// Idle does not end it.
func TestIdleRestart(t *testing.T) {
	var out []evicted
	tb := newRec(t, 4, 10*time.Second, &out)
	v, _ := tb.Lookup(1, k(1), at(0))
	v.packets = 5
	if v, isNew := tb.Lookup(1, k(1), at(10)); isNew || v.packets != 5 {
		t.Fatalf("gap of exactly Idle ended the flow: %+v, %v", *v, isNew)
	}
	wantNew(t, tb, 1, at(21)) // after a gap of 11 s
	wantEvicted(t, out, evicted{Flow[key]{1, k(1)}, rec{packets: 5}, Expired})
	// Times going backwards never end a flow.
	if _, isNew := tb.Lookup(1, k(1), at(-100)); isNew {
		t.Error("an earlier time ended the flow")
	}
	if st := checkStats(t, tb); st.Expired != 1 || st.Inserts != 2 || st.Hits != 2 || st.Len != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestExpire(t *testing.T) {
	var out []evicted
	tb := newRec(t, 16, 10*time.Second, &out)
	for i := range 8 {
		tb.Lookup(uint32(i), k(i), at(i))
	}
	tb.Lookup(2, k(2), at(9)) // 2 is the most recently seen now
	if n := tb.Expire(at(15)); n != 4 {
		t.Errorf("Expire(15) removed %d, want 4 (flows 0, 1, 3, 4)", n)
	}
	var got []uint32
	for _, e := range out {
		if e.why != Expired {
			t.Errorf("flow %d passed as %v", e.f.ID, e.why)
		}
		got = append(got, e.f.ID)
	}
	if want := []uint32{0, 1, 3, 4}; !slices.Equal(got, want) {
		t.Errorf("expired %v, want %v in that order", got, want)
	}
	var left []uint32
	for f := range tb.All() {
		left = append(left, f.ID)
	}
	if want := []uint32{5, 6, 7, 2}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v (least recently seen first)", left, want)
	}
	// A flow looked up after a newer one, with an older time, is expired
	// late (it stands behind a flow that is not idle), never early.
	tb.Lookup(100, k(100), at(100))
	tb.Lookup(101, k(101), at(50))
	out = out[:0]
	tb.Expire(at(65))
	for _, e := range out {
		if e.f.ID == 100 || e.f.ID == 101 {
			t.Errorf("flow %d expired at 65", e.f.ID)
		}
	}
	if tb.Get(101, k(101)) == nil {
		t.Error("flow 101 (seen at 50, behind one seen at 100) is gone at 65")
	}
	if n := tb.Expire(at(111)); n != 2 || tb.Len() != 0 {
		t.Errorf("Expire(111) removed %d, Len %d; want 2, 0", n, tb.Len())
	}
	checkStats(t, tb)
	noIdle := newRec(t, 4, 0, nil)
	noIdle.Lookup(1, k(1), at(0))
	if n := noIdle.Expire(at(1 << 30)); n != 0 || noIdle.Len() != 1 {
		t.Errorf("Expire without an idle timeout removed %d", n)
	}
}

// TestCrowdedBucket: flows crafted to share one flowid (a known Toeplitz
// key makes that easy) fill one bucket to 16 and then evict each other,
// least recently seen first, while other flows keep their state.
func TestCrowdedBucket(t *testing.T) {
	var out []evicted
	tb := newRec(t, 1024, 0, &out)
	for i := range 100 {
		tb.Lookup(uint32(5000+i), k(i), at(0)) // bystanders
	}
	for i := range 40 {
		tb.Lookup(0xbad, k(i), at(i))
		if i == 20 {
			tb.Lookup(0xbad, k(8), at(100)) // keep flow 8 fresh
		}
	}
	held := 0
	for i := range 40 {
		if tb.Get(0xbad, k(i)) != nil {
			held++
		}
	}
	if held != maxChain || tb.Get(0xbad, k(8)) == nil || tb.Get(0xbad, k(39)) == nil {
		t.Errorf("%d crafted flows held (want %d, with 8 and 39 among them)", held, maxChain)
	}
	for i := range 100 {
		if tb.Get(uint32(5000+i), k(i)) == nil {
			t.Fatalf("bystander %d evicted", i)
		}
	}
	st := checkStats(t, tb)
	if st.Crowded != 24 || st.Evictions != 24 || len(out) != 24 {
		t.Errorf("stats %+v, %d passed to OnEvict; want 24 crowded evictions", st, len(out))
	}
	if out[0].f.Key != k(0) || out[8].f.Key != k(9) {
		t.Errorf("crowded evictions out of order: first %v, ninth %v", out[0].f.Key, out[8].f.Key)
	}
}

func TestDelete(t *testing.T) {
	tb := newRec(t, 8, 0, nil)
	for i := range 8 {
		v, _ := tb.Lookup(uint32(i%3), k(i), at(i))
		v.tag = i
	}
	if !tb.Delete(1, k(4)) || tb.Delete(1, k(4)) || tb.Delete(2, k(4)) {
		t.Error("Delete: wrong answers")
	}
	n := tb.DeleteFunc(func(f Flow[key], v *rec) bool {
		v.packets = 9 // kept flows keep the change
		return f.ID == 0
	})
	if n != 3 { // 0, 3, 6
		t.Errorf("DeleteFunc removed %d, want 3", n)
	}
	for i := range 8 {
		v := tb.Get(uint32(i%3), k(i))
		switch {
		case i%3 == 0 || i == 4:
			if v != nil {
				t.Errorf("flow %d not deleted", i)
			}
		case v == nil || v.tag != i || v.packets != 9:
			t.Errorf("flow %d: %v", i, v)
		}
	}
	// Freed slots are reused, and come back zeroed.
	for i := range 4 {
		if v, isNew := tb.Lookup(100, k(i), at(9)); !isNew || *v != (rec{}) {
			t.Errorf("reused slot %d: %+v", i, *v)
		}
	}
	if st := checkStats(t, tb); st.Deleted != 4 || st.Evictions != 0 || st.Len != 8 {
		t.Errorf("stats %+v", st)
	}
}

// TestAllDeleteInLoop: All visits flows least recently seen first, stops
// when the loop breaks, and lets the loop delete the flow it is given.
func TestAllDeleteInLoop(t *testing.T) {
	tb := newRec(t, 16, 0, nil)
	for i := range 10 {
		tb.Lookup(uint32(i), k(i), at(i))
	}
	tb.Lookup(0, k(0), at(20))
	var order []uint32
	for f, v := range tb.All() {
		order = append(order, f.ID)
		v.packets++
		if f.ID%2 == 1 {
			tb.Delete(f.ID, f.Key)
		}
	}
	if want := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 0}; !slices.Equal(order, want) {
		t.Errorf("All visited %v, want %v", order, want)
	}
	if tb.Len() != 5 || tb.Get(2, k(2)).packets != 1 {
		t.Errorf("after the loop: Len %d", tb.Len())
	}
	n := 0
	for range tb.All() {
		n++
		break
	}
	if n != 1 {
		t.Errorf("break after one flow saw %d", n)
	}
	checkStats(t, tb)
}

// TestAllocs: in steady state no method allocates.
func TestAllocs(t *testing.T) {
	var evicted int
	tb, err := New(Config[key, rec]{Capacity: 256, Idle: time.Second,
		OnEvict: func(Flow[key], *rec, Reason) { evicted++ }})
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	step := func() {
		i++
		id := uint32(i * 7919 % 1000)
		v, _ := tb.Lookup(id, k(int(id)), time.Unix(0, int64(i)*int64(time.Millisecond)))
		v.packets++
		tb.Get(id, k(int(id)))
		if i%16 == 0 {
			tb.Delete(id, k(int(id)))
		}
		if i%64 == 0 {
			tb.Expire(time.Unix(0, int64(i)*int64(time.Millisecond)))
			tb.DeleteFunc(func(f Flow[key], _ *rec) bool { return f.ID%97 == 0 })
			for _, v := range tb.All() {
				v.packets++
			}
			_ = tb.Stats()
		}
	}
	for range 2000 {
		step() // fill, evict, expire
	}
	if a := testing.AllocsPerRun(10000, step); a != 0 {
		t.Errorf("%v allocations per step, want 0", a)
	}
	if evicted == 0 {
		t.Error("the steady state evicted nothing: the test does not cover eviction")
	}
	checkStats(t, tb)
}

func TestReasonText(t *testing.T) {
	for _, r := range []Reason{Evicted, Expired} {
		b, err := r.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Reason
		if err := back.UnmarshalText([]byte(string(b))); err != nil || back != r || r.String() != string(b) {
			t.Errorf("%v: %q, %v, %v", r, b, back, err)
		}
	}
	var r Reason
	if err := r.UnmarshalText([]byte("EXPIRED")); err != nil || r != Expired {
		t.Errorf("EXPIRED: %v, %v", r, err)
	}
	if err := r.UnmarshalText([]byte("gone")); !errors.Is(err, ErrReason) {
		t.Errorf("gone: %v", err)
	}
	if _, err := Reason(7).MarshalText(); !errors.Is(err, ErrReason) || Reason(7).String() != "Reason(7)" {
		t.Errorf("Reason(7): %v %q", err, Reason(7).String())
	}
}

// TestRemovedFlowsReleaseMemory: a removed flow's key and value are
// cleared, so that what they point to can be collected while the slot
// waits for another flow.
func TestRemovedFlowsReleaseMemory(t *testing.T) {
	tb, err := New(Config[int, *[1 << 16]byte]{Capacity: 8, Idle: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var refs []weak.Pointer[[1 << 16]byte]
	for i := range 3 {
		v, _ := tb.Lookup(uint32(i), i, at(0))
		*v = new([1 << 16]byte)
		refs = append(refs, weak.Make(*v))
	}
	tb.Delete(0, 0)
	tb.DeleteFunc(func(f Flow[int], _ **[1 << 16]byte) bool { return f.Key == 1 })
	tb.Expire(at(2))
	runtime.GC()
	for i, r := range refs {
		if r.Value() != nil {
			t.Errorf("value of removed flow %d still reachable", i)
		}
	}
	runtime.KeepAlive(tb)
}

// TestOnEvictPanics: an OnEvict that panics (in a handler whose panics the
// dispatcher recovers) leaves the table sound: the flow it was given is
// still held, the counters agree, and no slot is lost.
func TestOnEvictPanics(t *testing.T) {
	boom := true
	tb, err := New(Config[key, rec]{Capacity: 4, Idle: 10 * time.Second,
		OnEvict: func(Flow[key], *rec, Reason) {
			if boom {
				panic("handler bug")
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	mustPanic := func(what string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: OnEvict's panic did not reach the caller", what)
			}
		}()
		f()
	}
	for i := range 4 {
		tb.Lookup(uint32(i), k(i), at(i))
	}
	mustPanic("eviction", func() { tb.Lookup(9, k(9), at(5)) })
	mustPanic("idle restart", func() { tb.Lookup(0, k(0), at(30)) })
	mustPanic("Expire", func() { tb.Expire(at(30)) })
	for i := range 4 {
		if tb.Get(uint32(i), k(i)) == nil {
			t.Errorf("flow %d lost to a panicking OnEvict", i)
		}
	}
	if st := checkStats(t, tb); st.Len != 4 || st.Inserts != 4 || st.Evictions != 0 || st.Expired != 0 {
		t.Errorf("stats after the panics: %+v", st)
	}
	boom = false
	for i := range 8 { // the table still takes its capacity, and evicts
		tb.Lookup(uint32(100+i), k(100+i), at(40))
	}
	if st := checkStats(t, tb); st.Len != 4 || st.Evictions+st.Expired != 8 {
		t.Errorf("stats after refilling: %+v", st)
	}
}

// TestLookupExpires: Lookup ends flows gone idle by the time it is given,
// two at a time, least recently seen first, so a replay that passes
// capture times expires flows with no Expire call, and a table whose flows
// go idle makes room without evicting.
func TestLookupExpires(t *testing.T) {
	var out []evicted
	tb := newRec(t, 4, 10*time.Second, &out)
	for i := range 4 {
		tb.Lookup(uint32(i), k(i), at(i))
	}
	// At 12.5 s, flows 0 (0 s) and 1 (1 s) are idle, 2 and 3 are not: the
	// new flow takes a slot they freed.
	wantNew(t, tb, 9, time.Unix(1_700_000_012, 5e8))
	var got []uint32
	for _, e := range out {
		if e.why != Expired {
			t.Errorf("flow %d ended as %v", e.f.ID, e.why)
		}
		got = append(got, e.f.ID)
	}
	if !slices.Equal(got, []uint32{0, 1}) {
		t.Errorf("Lookup at 12.5 s ended %v, want [0 1]", got)
	}
	// At 100 s all three left are idle: one Lookup ends two of them.
	out = out[:0]
	tb.Lookup(9, k(9), at(100)) // flow 9 itself is idle too: restarted
	if len(out) != 3 || out[2].f.ID != 9 || tb.Len() != 1 {
		t.Errorf("Lookup at 100 s ended %d flows (%v), %d left; want flows 2 and 3, then flow 9's restart, 1 left", len(out), out, tb.Len())
	}
	// New flows one a second, in a table of 4 with a 2 s timeout: each
	// flow lives 3 s of capture time, so no eviction is ever needed.
	ev := newRec(t, 4, 2*time.Second, nil)
	for i := range 1000 {
		ev.Lookup(uint32(i), k(i), at(i))
	}
	if st := checkStats(t, ev); st.Evictions != 0 || st.Expired < 990 {
		t.Errorf("flows that go idle: %+v; want no eviction", st)
	}
}

// TestPrefetch: Prefetch and PrefetchBucket change nothing, on any
// flowid, in an empty or a full table.
func TestPrefetch(t *testing.T) {
	tb := newRec(t, 64, time.Second, nil)
	tb.Prefetch(0)
	tb.Prefetch(0xffffffff)
	tb.PrefetchBucket(0)
	tb.PrefetchBucket(0xffffffff)
	for i := range 100 {
		v, _ := tb.Lookup(uint32(i), k(i), at(i))
		v.packets = uint64(i)
	}
	before := checkStats(t, tb)
	var order []uint32
	for f := range tb.All() {
		order = append(order, f.ID)
	}
	for i := range 1000 {
		tb.PrefetchBucket(uint32(i * 7919))
		tb.Prefetch(uint32(i * 7919))
	}
	var after []uint32
	for f, v := range tb.All() {
		after = append(after, f.ID)
		if v.packets != uint64(f.ID) {
			t.Errorf("flow %d: %d packets after Prefetch", f.ID, v.packets)
		}
	}
	if st := checkStats(t, tb); st != before || !slices.Equal(order, after) {
		t.Errorf("Prefetch changed the table: stats %+v then %+v, order %v then %v", before, st, order, after)
	}
	if n := testing.AllocsPerRun(100, func() { tb.PrefetchBucket(42); tb.Prefetch(42) }); n != 0 {
		t.Errorf("Prefetch allocates %v times", n)
	}
}

// TestRecencyBump pins how the recency order follows lookups with an idle
// timeout: a flow moves to the newest end at most once per Idle/16, so a
// flow looked up again sooner keeps its place (eviction may take it before
// a flow seen earlier), and an idle flow behind it ends late, by less than
// Idle/16, never early. Without an idle timeout every lookup moves its
// flow.
func TestRecencyBump(t *testing.T) {
	const idle = 16 * time.Second // flows move at most once a second
	sec := func(ms int) time.Time { return at(0).Add(time.Duration(ms) * time.Millisecond) }

	t.Run("eviction", func(t *testing.T) {
		var out []evicted
		tb := newRec(t, 2, idle, &out)
		tb.Lookup(1, k(1), sec(0))
		tb.Lookup(2, k(2), sec(100))
		tb.Lookup(1, k(1), sec(500)) // moved 500 ms ago: keeps its place
		tb.Lookup(3, k(3), sec(600))
		if len(out) != 1 || out[0].f.ID != 1 || out[0].why != Evicted {
			t.Fatalf("evicted %+v, want flow 1 (not moved by a lookup within Idle/16)", out)
		}
		tb.Lookup(2, k(2), sec(1100)) // moved 1 s ago: moves
		tb.Lookup(4, k(4), sec(1200))
		if len(out) != 2 || out[1].f.ID != 3 {
			t.Fatalf("evicted %+v, want flow 3 next (flow 2 moved)", out)
		}
	})

	t.Run("expiry", func(t *testing.T) {
		var out []evicted
		tb := newRec(t, 4, idle, &out)
		tb.Lookup(1, k(1), sec(0))
		tb.Lookup(2, k(2), sec(500))
		tb.Lookup(1, k(1), sec(900)) // keeps its place, ahead of flow 2
		// At 16.6 s flow 2 has been idle for 16.1 s, but flow 1 (seen at
		// 0.9 s) is not idle and stands first: nothing ends yet.
		if n := tb.Expire(sec(16_600)); n != 0 {
			t.Fatalf("Expire at 16.6 s ended %d flows %+v, want 0", n, out)
		}
		// At 16.95 s both are: flow 1 first, then flow 2, 0.45 s late.
		if n := tb.Expire(sec(16_950)); n != 2 || out[0].f.ID != 1 || out[1].f.ID != 2 {
			t.Fatalf("Expire at 16.95 s: %d flows %+v, want flows 1 then 2", n, out)
		}
	})

	t.Run("no idle timeout", func(t *testing.T) {
		var out []evicted
		tb := newRec(t, 2, 0, &out)
		tb.Lookup(1, k(1), sec(0))
		tb.Lookup(2, k(2), sec(1))
		tb.Lookup(1, k(1), sec(2)) // moves: the order is exact
		tb.Lookup(3, k(3), sec(3))
		if len(out) != 1 || out[0].f.ID != 2 {
			t.Fatalf("evicted %+v, want flow 2, the least recently seen", out)
		}
	})
}
