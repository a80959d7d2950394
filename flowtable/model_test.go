package flowtable

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// model is the table's contract written the plain way: a map for the
// flows and a slice for their recency, least recently moved first, each
// operation a scan.
type model struct {
	capacity int
	idle     int64
	bump     int64 // a looked-up flow moves in the order at most this often
	shift    uint
	order    []Flow[uint8]
	flows    map[Flow[uint8]]*mflow
	inserted uint64 // insertion clock, for the crowded bucket's ties
	st       Stats
	evicted  []string
}

type mflow struct {
	v     int64
	seen  int64
	moved int64  // when the flow last moved to the end of order
	ins   uint64 // when the flow took its slot (an idle restart keeps it)
}

func newModel(capacity int, idle int64) *model {
	return &model{capacity: capacity, idle: idle, bump: idle / 16, shift: uint(32 - bits.Len(uint(capacity-1))),
		flows: map[Flow[uint8]]*mflow{}, st: Stats{Capacity: capacity}}
}

func (m *model) bucket(id uint32) uint64 { return uint64(id*golden) >> m.shift }

func (m *model) report(f Flow[uint8], v int64, why Reason) {
	m.evicted = append(m.evicted, fmt.Sprintf("%v %d %v", f, v, why))
}

func (m *model) remove(f Flow[uint8]) {
	m.order = slices.DeleteFunc(m.order, func(g Flow[uint8]) bool { return g == f })
	delete(m.flows, f)
	m.st.Len--
}

func (m *model) touch(f Flow[uint8]) {
	m.order = slices.DeleteFunc(m.order, func(g Flow[uint8]) bool { return g == f })
	m.order = append(m.order, f)
}

func (m *model) lookup(f Flow[uint8], now int64) (*int64, bool) {
	m.expireN(now, lookupExpiry)
	if e := m.flows[f]; e != nil {
		isNew := m.idle > 0 && now-e.seen > m.idle
		if isNew {
			m.st.Expired++
			m.st.Inserts++
			m.report(f, e.v, Expired)
			e.v = 0
		} else {
			m.st.Hits++
		}
		e.seen = now
		if d := now - e.moved; d >= m.bump || d < 0 {
			m.touch(f)
			e.moved = now
		}
		return &e.v, isNew
	}
	var crowd []Flow[uint8]
	for g := range m.flows {
		if m.bucket(g.ID) == m.bucket(f.ID) {
			crowd = append(crowd, g)
		}
	}
	var victim *Flow[uint8]
	switch {
	case len(crowd) >= maxChain:
		v := slices.MinFunc(crowd, func(a, b Flow[uint8]) int {
			ea, eb := m.flows[a], m.flows[b]
			if ea.seen != eb.seen {
				return cmpInt(ea.seen, eb.seen)
			}
			return cmpInt(int64(ea.ins), int64(eb.ins))
		})
		victim = &v
		m.st.Crowded++
	case len(m.flows) == m.capacity:
		victim = &m.order[0]
	}
	if victim != nil {
		g := *victim
		m.st.Evictions++
		m.report(g, m.flows[g].v, Evicted)
		m.remove(g)
	}
	m.inserted++
	e := &mflow{seen: now, moved: now, ins: m.inserted}
	m.flows[f] = e
	m.order = append(m.order, f)
	m.st.Inserts++
	m.st.Len++
	return &e.v, true
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (m *model) expire(now int64) int { return m.expireN(now, len(m.order)) }

// expireN ends up to limit flows idle at now, least recently seen first.
func (m *model) expireN(now int64, limit int) int {
	n := 0
	for m.idle > 0 && n < limit && len(m.order) > 0 && now-m.flows[m.order[0]].seen > m.idle {
		f := m.order[0]
		m.st.Expired++
		m.report(f, m.flows[f].v, Expired)
		m.remove(f)
		n++
	}
	return n
}

// runModel drives a table and the model with the operations data encodes
// and fails at the first difference. It returns the table's final stats.
func runModel(t *testing.T, data []byte) Stats {
	if len(data) < 2 {
		return Stats{}
	}
	capacity := 1 + int(data[0]%40)
	idle := int64(data[1]%8) * int64(time.Second)
	m := newModel(capacity, idle)
	tb, err := New(Config[uint8, int64]{Capacity: capacity, Idle: time.Duration(idle),
		OnEvict: func(f Flow[uint8], v *int64, why Reason) {
			m.evicted = append(m.evicted, "table: "+fmt.Sprintf("%v %d %v", f, *v, why))
		}})
	if err != nil {
		t.Fatal(err)
	}
	// A few flowids, so that flows share flowids and buckets; up to 32 keys
	// for one flowid, so that a bucket overflows.
	ids := []uint32{1, 2, 0xdead, 0x80000001, 7}
	now := int64(0)
	var calls []string
	for i := 2; i+2 < len(data); i += 3 {
		op, a, b := data[i]%8, data[i+1], data[i+2]
		f := Flow[uint8]{ID: ids[int(a)%len(ids)], Key: b % 32}
		var what string
		m.evicted = m.evicted[:0]
		switch op {
		case 0, 1, 2:
			now += int64(a>>5) * int64(time.Second) / 64
			what = fmt.Sprintf("Lookup(%v, %d)", f, now)
			v, isNew := tb.Lookup(f.ID, f.Key, time.Unix(0, now))
			n := len(m.evicted)
			mv, mNew := m.lookup(f, now)
			// The table reports to m.evicted first; the model appends after.
			if got, want := m.evicted[:n], m.evicted[n:]; !sameReports(got, want) {
				t.Fatalf("op %d %s: OnEvict got %q, model %q", i, what, got, want)
			}
			if *v != *mv || isNew != mNew {
				t.Fatalf("op %d %s: value %d isNew %v, model %d %v", i, what, *v, isNew, *mv, mNew)
			}
			*v++
			*mv++
		case 3:
			what = fmt.Sprintf("Get(%v)", f)
			v := tb.Get(f.ID, f.Key)
			e := m.flows[f]
			if (v == nil) != (e == nil) || v != nil && *v != e.v {
				t.Fatalf("op %d %s: %v, model %v", i, what, v, e)
			}
		case 4:
			what = fmt.Sprintf("Delete(%v)", f)
			_, had := m.flows[f]
			if had {
				m.remove(f)
				m.st.Deleted++
			}
			if got := tb.Delete(f.ID, f.Key); got != had {
				t.Fatalf("op %d %s: %v, model %v", i, what, got, had)
			}
		case 5:
			what = fmt.Sprintf("DeleteFunc(key%%4 == %d)", a%4)
			calls = calls[:0]
			n := tb.DeleteFunc(func(g Flow[uint8], v *int64) bool {
				calls = append(calls, fmt.Sprintf("%v %d", g, *v))
				*v += 100
				return g.Key%4 == a%4
			})
			var want []string
			mn := 0
			for _, g := range slices.Clone(m.order) {
				e := m.flows[g]
				want = append(want, fmt.Sprintf("%v %d", g, e.v))
				e.v += 100
				if g.Key%4 == a%4 {
					m.remove(g)
					m.st.Deleted++
					mn++
				}
			}
			if n != mn || !slices.Equal(calls, want) {
				t.Fatalf("op %d %s: removed %d after %q; model %d after %q", i, what, n, calls, mn, want)
			}
		case 6:
			now -= int64(a%8) * int64(time.Second) / 4 // times may go backwards
			what = fmt.Sprintf("Expire(%d)", now)
			n := tb.Expire(time.Unix(0, now))
			k := len(m.evicted)
			mn := m.expire(now)
			if got, want := m.evicted[:k], m.evicted[k:]; n != mn || !sameReports(got, want) {
				t.Fatalf("op %d %s: removed %d %q, model %d %q", i, what, n, got, mn, want)
			}
		case 7:
			now += int64(a) * int64(time.Second)
			continue
		}
		if st := tb.Stats(); st != m.st {
			t.Fatalf("op %d %s: stats %+v, model %+v", i, what, st, m.st)
		}
		j := 0
		for g, v := range tb.All() {
			if j >= len(m.order) || g != m.order[j] || *v != m.flows[g].v {
				t.Fatalf("op %d %s: All's flow %d is %v = %d; model order %v", i, what, j, g, *v, m.order)
			}
			j++
		}
		if j != len(m.order) {
			t.Fatalf("op %d %s: All saw %d flows, model %d", i, what, j, len(m.order))
		}
	}
	return tb.Stats()
}

// sameReports compares the table's OnEvict calls (prefixed "table: ")
// with the model's.
func sameReports(table, model []string) bool {
	if len(table) != len(model) {
		return false
	}
	for i := range table {
		if table[i] != "table: "+model[i] {
			return false
		}
	}
	return true
}

// FuzzModel holds the table to the model for any operation sequence.
func FuzzModel(f *testing.F) {
	f.Add([]byte{3, 4, 0, 0, 1, 0, 1, 2, 0, 2, 3, 1, 0, 1, 6, 0, 0, 7, 9, 0, 6, 0, 0})
	// 24 flows of one flowid in a table of 39: a crowded bucket.
	crowd := []byte{39, 0}
	for k := range byte(24) {
		crowd = append(crowd, 0, 2, k)
	}
	f.Add(append(crowd, 0, 2, 3, 6, 0, 0, 0, 2, 0))
	f.Add([]byte{10, 3, 0, 5, 5, 5, 1, 6, 4, 1, 6, 3, 3, 6, 5, 1, 4, 6, 7, 3, 3, 6, 2, 0})
	f.Fuzz(func(t *testing.T, data []byte) { runModel(t, data) })
}

// TestModelRandom runs the model over random sequences: small tables, few
// flowids, so that eviction, crowded buckets, idle restarts and times
// going backwards all happen.
func TestModelRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	runs := 300
	if testing.Short() {
		runs = 50
	}
	var sum Stats
	for range runs {
		// Mostly lookups, time moving slowly, a table of 17 to 40 flows.
		data := []byte{byte(16 + rng.IntN(24)), byte(rng.IntN(8))}
		keys := 4 + rng.IntN(29)
		for range 1000 {
			var op byte
			switch r := rng.IntN(100); {
			case r < 75:
				op = byte(rng.IntN(3)) // Lookup
			case r < 83:
				op = 3 // Get
			case r < 88:
				op = 4 // Delete
			case r < 89:
				op = 5 // DeleteFunc
			case r < 98:
				op = 6 // Expire
			default:
				op = 7 // time jumps
			}
			a, b := byte(rng.Uint32()), byte(rng.IntN(keys))
			if rng.IntN(2) == 0 {
				a = a - a%5 + 2 // flowid 0xdead, to crowd its bucket
			}
			if op == 7 {
				a %= 8
			}
			data = append(data, op, a, b)
		}
		st := runModel(t, data)
		sum.Hits += st.Hits
		sum.Evictions += st.Evictions
		sum.Crowded += st.Crowded
		sum.Expired += st.Expired
		sum.Deleted += st.Deleted
	}
	// Every way out of the table was taken, else the test proves little.
	if sum.Hits == 0 || sum.Evictions == sum.Crowded || sum.Crowded == 0 || sum.Expired == 0 || sum.Deleted == 0 {
		t.Errorf("the random runs missed a case: %+v", sum)
	}
	t.Logf("%d runs: %+v", runs, sum)
}
