package rfstable

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
	"unsafe"
)

// Ways is the associativity of a [Table]'s sets. A flowid has two candidate
// sets (the one its low bits select and an alternate), so it can live in
// one of 2*Ways slots.
const Ways = 8

// MinCapacity and MaxCapacity bound the capacity [New] accepts.
const (
	MinCapacity = 2 * Ways
	MaxCapacity = 1 << 26
)

// Entry is the per-flow RFS state, the analogue of Linux's struct
// rps_dev_flow (cpu, last_qtail) plus counters. The table creates it, the
// dispatcher updates it in place under the table's lock.
type Entry struct {
	// FlowID is the flow's 32-bit hash (mbuf m_pkthdr.flowid, skb->hash).
	// The table sets it; callers must not change it.
	FlowID uint32
	// Current is the worker now handling the flow (rps_dev_flow.cpu), -1
	// when none has been chosen yet.
	Current int32
	// Desired is the last desired worker seen for the flow (from a
	// [Desired] table), -1 when none.
	Desired int32
	_       uint32
	// LastTail is the position in worker Current's queue of the flow's last
	// enqueued frame (rps_dev_flow.last_qtail), 0 for none, or the caller's
	// pending marker. The table stores it and leaves its meaning to the
	// busy function; see the package comment for the rule steer applies.
	LastTail uint64
	// Packets and Bytes count the flow's frames, as the caller adds them.
	Packets, Bytes uint64
	// FirstSeen and LastSeen are unix nanoseconds supplied by the caller
	// (the table never reads the clock). Lookup sets both on insertion and
	// LastSeen on every hit; eviction and Expire use LastSeen.
	FirstSeen, LastSeen int64
	// DesiredGen is the [Desired.Gen] at which Desired was read; zero for
	// a new entry. While the table's generation is still DesiredGen, no
	// desired worker has changed since, and Desired needs no new read.
	DesiredGen uint64
}

// set is one associative set: a cache line of tags, then the entries.
type set struct {
	tags  [Ways]uint32 // full flowids of the valid ways
	valid uint8        // bit i set: way i holds a flow
	_     [64 - Ways*4 - 1]byte
	ent   [Ways]Entry
}

// Stats is a snapshot of a table's counters. Every Lookup ends as exactly
// one of a hit, an insert or a Full refusal:
//
//	Lookups    = Hits + Inserts + Full
//	Collisions = Evictions + Full
//	Len        = Inserts - Evictions - Expired
type Stats struct {
	// Capacity is the fixed number of entries.
	Capacity int
	// Len is the number of flows held now.
	Len int
	// Inserts counts Lookups that created an entry (a miss that found or
	// made room), including those that evicted another flow.
	Inserts uint64
	// Hits counts Lookups that found their flowid.
	Hits uint64
	// Evictions counts entries removed by Lookup to make room for a new
	// flowid (entries removed by Expire are counted in Expired).
	Evictions uint64
	// Collisions counts misses whose two candidate sets were both full of
	// other valid flowids; each ended as an eviction or as a Full refusal.
	Collisions uint64
	// Full counts Lookups that returned nil: a miss whose sixteen candidate
	// entries were all valid and busy, so none could be evicted.
	Full uint64
	// Expired counts entries removed by Expire.
	Expired uint64
}

// Table is a bounded, set-associative table of per-flow state keyed by the
// full 32-bit flowid: the analogue of Linux's per-queue rps_dev_flow_table,
// which instead indexes by hash & mask (up to 6.14; hash_32 since 6.15) and
// lets colliding flows share a slot. Its memory is allocated once by [New] and never grows.
//
// Concurrency: the hot-path methods [Table.Lookup] and [Table.Find] require
// the caller to hold the table's lock ([Table.Lock]) and are meant for one
// writer that takes it once per batch of frames. Every other method takes the
// lock itself and may be called from any goroutine, but not while holding the
// lock.
type Table struct {
	mu       sync.Mutex
	sets     []set
	setMask  uint32
	altShift uint32 // 32 - log2(number of sets)
	busy     func(e *Entry) bool

	n          int
	inserts    uint64
	hits       uint64
	evictions  uint64
	collisions uint64
	full       uint64
	expired    uint64
}

// New returns an empty table of capacity entries. capacity must be a power
// of two between [MinCapacity] and [MaxCapacity] (otherwise the error wraps
// [ErrCapacity]); each entry costs 72 bytes (a 64-byte Entry plus its tag
// share), allocated here once (in huge pages when large; see the package
// comment).
//
// busy reports whether a flow still has frames queued on worker e.Current
// (the dispatcher supplies e.Current >= 0 && head[e.Current] < e.LastTail,
// unsigned; see the package comment). It must answer false, not panic, for
// an entry whose Current is still -1. An entry for which busy returns true
// is never evicted nor expired. busy is called with the
// table's lock held, from the goroutine calling Lookup or Expire; it must not
// call the table's methods, must not retain e, and must read any state shared
// with workers atomically. A nil busy means no entry is ever busy.
func New(capacity int, busy func(e *Entry) bool) (*Table, error) {
	if capacity < MinCapacity || capacity > MaxCapacity || capacity&(capacity-1) != 0 ||
		uint64(capacity/Ways) > math.MaxInt/uint64(unsafe.Sizeof(set{})) {
		return nil, fmt.Errorf("rfstable: new table of capacity %d: %w", capacity, ErrCapacity)
	}
	if busy == nil {
		busy = func(*Entry) bool { return false }
	}
	nsets := capacity / Ways
	return &Table{
		sets:     hugeSlice[set](nsets),
		setMask:  uint32(nsets - 1),
		altShift: uint32(32 - bits.TrailingZeros(uint(nsets))),
		busy:     busy,
	}, nil
}

// Capacity returns the fixed number of entries. It needs no lock.
func (t *Table) Capacity() int { return len(t.sets) * Ways }

// Lock takes the table's lock for a batch of Lookup/Find calls.
func (t *Table) Lock() { t.mu.Lock() }

// Unlock releases the lock. Entry pointers obtained under it become invalid
// once another call changes the table (Lookup, Expire); the table's owner,
// the one goroutine that makes such calls, may keep them across an Unlock
// and a Lock between which it made none, while others only read.
func (t *Table) Unlock() { t.mu.Unlock() }

// altMul scatters a flowid's upper bits into its alternate set index.
const altMul = 0x9E3779B1

// alt returns the index of flowid's second candidate set, given its first
// s1 = flowid & setMask. It always differs from s1 (bit 0 flips), and it
// depends on all of flowid's bits, so that flows crowding one first set
// overflow into many different second sets.
func (t *Table) alt(flowid uint32) uint32 {
	return (flowid&t.setMask ^ (flowid*altMul>>t.altShift | 1)) & t.setMask
}

// Lookup returns the entry for flowid, inserting one if it is absent. The
// caller must hold the lock. The returned pointer may be updated in place
// (except FlowID); it is valid until the next Lookup or Unlock, whichever
// comes first, since the next Lookup may evict the entry and reuse its slot.
//
// On a hit Lookup sets LastSeen = now and returns inserted = false. On a
// miss it takes a free way of flowid's first candidate set, else of its
// second, else evicts the non-busy entry with the oldest LastSeen among the
// two sets' sixteen (ties: first set, then lowest way), and initialises it:
// FlowID = flowid, Current = Desired = -1, FirstSeen = LastSeen = now, zero
// LastTail and counters; inserted = true. When all sixteen candidates are
// busy it returns nil and counts Full.
//
// Lookup never allocates.
func (t *Table) Lookup(flowid uint32, now int64) (e *Entry, inserted bool) {
	s := &t.sets[flowid&t.setMask]
	// s.match(flowid), written out: the compiler does not inline it.
	g := &s.tags
	m := (b2u(g[0] == flowid) | b2u(g[1] == flowid)<<1 | b2u(g[2] == flowid)<<2 |
		b2u(g[3] == flowid)<<3 | b2u(g[4] == flowid)<<4 | b2u(g[5] == flowid)<<5 |
		b2u(g[6] == flowid)<<6 | b2u(g[7] == flowid)<<7) & uint(s.valid)
	if m == 0 {
		s2 := &t.sets[t.alt(flowid)]
		if m = s2.match(flowid); m == 0 {
			return t.insert(s, s2, flowid, now)
		}
		s = s2
	}
	t.hits++
	e = &s.ent[bits.TrailingZeros(m)&(Ways-1)]
	e.LastSeen = now
	return e, false
}

// b2u converts a comparison to 0 or 1 without a branch.
func b2u(c bool) uint {
	var x uint
	if c {
		x = 1
	}
	return x
}

// match returns the bitmap of s's valid ways whose tag is flowid (at most
// one bit). It compares all eight tags without branches: a branch per way
// mispredicts on the way that matches and costs about twice as much.
func (s *set) match(flowid uint32) uint {
	t := &s.tags
	m := b2u(t[0] == flowid) | b2u(t[1] == flowid)<<1 | b2u(t[2] == flowid)<<2 |
		b2u(t[3] == flowid)<<3 | b2u(t[4] == flowid)<<4 | b2u(t[5] == flowid)<<5 |
		b2u(t[6] == flowid)<<6 | b2u(t[7] == flowid)<<7
	return m & uint(s.valid)
}

func (t *Table) insert(s1, s2 *set, flowid uint32, now int64) (*Entry, bool) {
	var s *set
	var way int
	switch {
	case s1.valid != 0xff:
		s, way = s1, bits.TrailingZeros8(^s1.valid)
		t.n++
	case s2.valid != 0xff:
		s, way = s2, bits.TrailingZeros8(^s2.valid)
		t.n++
	default:
		t.collisions++
		var oldest int64
		for _, c := range [2]*set{s1, s2} {
			for i := range Ways {
				e := &c.ent[i]
				// Ask busy only about entries that would beat the current pick.
				if (s == nil || e.LastSeen < oldest) && !t.busy(e) {
					s, way, oldest = c, i, e.LastSeen
				}
			}
		}
		if s == nil {
			t.full++
			return nil, false
		}
		t.evictions++
	}
	t.inserts++
	s.tags[way] = flowid
	s.valid |= 1 << way
	e := &s.ent[way]
	*e = Entry{FlowID: flowid, Current: -1, Desired: -1, FirstSeen: now, LastSeen: now}
	return e, true
}

// Find returns the entry for flowid, or nil, without inserting and without
// touching any field or counter. The caller must hold the lock; the pointer
// is valid until the next Lookup or Unlock.
func (t *Table) Find(flowid uint32) *Entry {
	s := &t.sets[flowid&t.setMask]
	m := s.match(flowid)
	if m == 0 {
		s = &t.sets[t.alt(flowid)]
		if m = s.match(flowid); m == 0 {
			return nil
		}
	}
	return &s.ent[bits.TrailingZeros(m)&(Ways-1)]
}

// Get returns a copy of flowid's entry. It takes the lock.
func (t *Table) Get(flowid uint32) (Entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.Find(flowid); e != nil {
		return *e, true
	}
	return Entry{}, false
}

// Len returns the number of flows held. It takes the lock.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// Stats returns a snapshot of the counters. It takes the lock.
func (t *Table) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return Stats{
		Capacity:   t.Capacity(),
		Len:        t.n,
		Inserts:    t.inserts,
		Hits:       t.hits,
		Evictions:  t.evictions,
		Collisions: t.collisions,
		Full:       t.full,
		Expired:    t.expired,
	}
}

// Range calls fn for each flow held, in table order, until fn returns false.
// It holds the lock throughout: fn must not call the table's methods, must
// treat *e as read-only and must not retain e.
func (t *Table) Range(fn func(e *Entry) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for si := range t.sets {
		s := &t.sets[si]
		for v := s.valid; v != 0; v &= v - 1 {
			if !fn(&s.ent[bits.TrailingZeros8(v)]) {
				return
			}
		}
	}
}

// Expire removes every non-busy entry whose LastSeen is before olderThan and
// returns how many it removed (counted in Stats.Expired). It takes the lock.
func (t *Table) Expire(olderThan int64) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	removed := 0
	for si := range t.sets {
		s := &t.sets[si]
		for v := s.valid; v != 0; v &= v - 1 {
			i := bits.TrailingZeros8(v)
			e := &s.ent[i]
			if e.LastSeen < olderThan && !t.busy(e) {
				s.valid &^= 1 << i
				*e = Entry{}
				removed++
			}
		}
	}
	t.n -= removed
	t.expired += uint64(removed)
	return removed
}

// before reports whether a ranks above b in Top's order: more packets first,
// then lower FlowID.
func before(a, b *Entry) bool {
	if a.Packets != b.Packets {
		return a.Packets > b.Packets
	}
	return a.FlowID < b.FlowID
}

// Top returns copies of the n flows with the most packets (the elephants),
// sorted by Packets descending, ties by FlowID ascending. It stores them in
// dst[:0], growing it only when its capacity is below min(n, Len), and
// returns the result. n <= 0 returns dst[:0]. It takes the lock.
func (t *Table) Top(n int, dst []Entry) []Entry {
	dst = dst[:0]
	t.mu.Lock()
	defer t.mu.Unlock()
	n = min(n, t.n)
	if n <= 0 {
		return dst
	}
	dst = slices.Grow(dst, n)
	// dst is a heap whose root is the entry ranked lowest.
	for si := range t.sets {
		s := &t.sets[si]
		for v := s.valid; v != 0; v &= v - 1 {
			e := &s.ent[bits.TrailingZeros8(v)]
			if len(dst) < n {
				dst = append(dst, *e)
				heapUp(dst, len(dst)-1)
			} else if before(e, &dst[0]) {
				dst[0] = *e
				heapDown(dst, 0)
			}
		}
	}
	slices.SortFunc(dst, func(a, b Entry) int {
		switch {
		case a.FlowID == b.FlowID:
			return 0
		case before(&a, &b):
			return -1
		}
		return 1
	})
	return dst
}

// heapUp and heapDown maintain h as a heap with the lowest-ranked entry at
// index 0.
func heapUp(h []Entry, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !before(&h[p], &h[i]) {
			return
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func heapDown(h []Entry, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && before(&h[l], &h[r]) {
			c = r
		}
		if !before(&h[i], &h[c]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
