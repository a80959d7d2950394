package rfstable

import (
	"math/rand/v2"
	"testing"
)

// model is the reference: a map plus the documented eviction rule.
type model struct {
	tb    *Table // for set indexing only (alt)
	ents  map[uint32]*Entry
	where map[uint32]uint32 // flowid -> set it was placed in
	busy  map[uint32]bool
	st    Stats
}

func (m *model) count(set uint32) int {
	n := 0
	for _, s := range m.where {
		if s == set {
			n++
		}
	}
	return n
}

func (m *model) lookup(f uint32, now int64) (e *Entry, inserted bool) {
	if e := m.ents[f]; e != nil {
		m.st.Hits++
		e.LastSeen = now
		return e, false
	}
	s1, s2 := f&m.tb.setMask, m.tb.alt(f)
	place := s1
	switch {
	case m.count(s1) < Ways:
	case m.count(s2) < Ways:
		place = s2
	default:
		m.st.Collisions++
		var victim *Entry
		for g, e := range m.ents {
			if s := m.where[g]; (s == s1 || s == s2) && !m.busy[g] &&
				(victim == nil || e.LastSeen < victim.LastSeen) {
				victim = e
			}
		}
		if victim == nil {
			m.st.Full++
			return nil, false
		}
		place = m.where[victim.FlowID]
		delete(m.ents, victim.FlowID)
		delete(m.where, victim.FlowID)
		m.st.Evictions++
	}
	m.where[f] = place
	m.st.Inserts++
	e = &Entry{FlowID: f, Current: -1, Desired: -1, FirstSeen: now, LastSeen: now}
	m.ents[f] = e
	return e, true
}

func (m *model) expire(older int64) int {
	n := 0
	for f, e := range m.ents {
		if e.LastSeen < older && !m.busy[f] {
			delete(m.ents, f)
			delete(m.where, f)
			n++
		}
	}
	m.st.Expired += uint64(n)
	return n
}

// runModel decodes ops from data and checks Table against the model after
// each one. now grows by one per op, so LastSeen values never tie.
func runModel(t *testing.T, capacity int, data []byte) {
	m := &model{ents: map[uint32]*Entry{}, where: map[uint32]uint32{}, busy: map[uint32]bool{}}
	tb := mustNew(t, capacity, func(e *Entry) bool { return m.busy[e.FlowID] })
	m.tb = tb
	for i := 0; i+2 < len(data); i += 3 {
		now := int64(i)
		op, b1, b2 := data[i], data[i+1], data[i+2]
		// Low byte picks the set and way pressure; b2's top bits vary the
		// upper flowid bits so that flowids sharing low bits meet.
		f := uint32(b1) | uint32(b2>>6)<<30 | uint32(b2&1)<<16
		switch op % 5 {
		case 0, 1:
			tb.Lock()
			e, ins := tb.Lookup(f, now)
			me, mins := m.lookup(f, now)
			if (e == nil) != (me == nil) || ins != mins {
				tb.Unlock()
				t.Fatalf("op %d Lookup(%#x): table %v,%v model %v,%v", i/3, f, e != nil, ins, me != nil, mins)
			}
			if e != nil {
				e.Packets++
				me.Packets++
				if *e != *me {
					tb.Unlock()
					t.Fatalf("op %d Lookup(%#x): table %+v model %+v", i/3, f, *e, *me)
				}
			}
			tb.Unlock()
		case 2:
			m.busy[f] = !m.busy[f]
		case 3:
			older := now - int64(b2)
			if got, want := tb.Expire(older), m.expire(older); got != want {
				t.Fatalf("op %d Expire(%d) = %d, model %d", i/3, older, got, want)
			}
		case 4:
			e, ok := tb.Get(f)
			me := m.ents[f]
			if ok != (me != nil) || ok && e != *me {
				t.Fatalf("op %d Get(%#x) = %+v,%v; model %+v", i/3, f, e, ok, me)
			}
		}
		st := tb.Stats()
		want := m.st
		want.Capacity, want.Len = capacity, len(m.ents)
		if st != want {
			t.Fatalf("op %d stats %+v, model %+v", i/3, st, want)
		}
	}
	n := 0
	tb.Range(func(e *Entry) bool {
		n++
		if me := m.ents[e.FlowID]; me == nil || *me != *e {
			t.Errorf("table holds %+v, model %+v", *e, me)
		}
		return true
	})
	if n != len(m.ents) {
		t.Errorf("table holds %d flows, model %d", n, len(m.ents))
	}
}

func FuzzTable(f *testing.F) {
	f.Add([]byte{0, 1, 2, 0, 1, 2, 4, 1, 2})
	rng := rand.New(rand.NewPCG(7, 8))
	seed := make([]byte, 600)
	for i := range seed {
		seed[i] = byte(rng.Uint32())
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, c := range []int{16, 32} {
			runModel(t, c, data)
		}
	})
}

// TestModelRandom runs long random op sequences against the model.
func TestModelRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for round := range 20 {
		data := make([]byte, 3*3000)
		for i := range data {
			data[i] = byte(rng.Uint32())
			if i%3 == 1 && round%2 == 0 {
				data[i] &= 0x3f // fewer distinct flows: more hits
			}
		}
		runModel(t, []int{16, 32, 64, 128}[round%4], data)
	}
}
