package flowtable

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"math/bits"
	"time"
	"unsafe"
)

// MaxCapacity is the largest Config.Capacity [New] accepts.
const MaxCapacity = 1 << 30

// maxBytes bounds the memory New asks for, below what make accepts (the
// heap's address space on 64-bit systems, MaxInt on 32-bit ones), so that
// too large a table is an error and not a panic.
const maxBytes = min(math.MaxInt, 1<<47)

// maxChain bounds how many flows may share one bucket of the index (see
// the package comment, "Bounded time").
const maxChain = 16

// bumpFraction sets how often a looked-up flow moves to the newest end of
// the recency list: at most once per Config.Idle/bumpFraction (see "Recency"
// in the package comment).
const bumpFraction = 16

// golden is 2^32 divided by the golden ratio: multiplying a flowid by it
// and keeping the top bits (Fibonacci hashing) gives a bucket that depends
// on all 32 bits of the flowid.
const golden = 0x9E3779B1

// ErrConfig reports a [Config] that [New] cannot build a table from.
var ErrConfig = errors.New("invalid flow table configuration")

// Config says how large a [Table] is and when its flows end.
type Config[K comparable, V any] struct {
	// Capacity is the most flows the table holds at once, between 1 and
	// [MaxCapacity]; it has no default, since it fixes the table's memory.
	Capacity int
	// Idle is the idle timeout: a flow not seen for longer than Idle (by
	// the times the caller passes) has ended. Lookup then starts it
	// afresh, and Expire removes it. Zero means flows never go idle and
	// only eviction removes them; negative is an error.
	Idle time.Duration
	// OnEvict, when set, receives every flow the table removes by itself,
	// just before its slot is reused: evicted to make room ([Evicted]) or
	// ended by the idle timeout ([Expired]). It runs inside the call that
	// removes the flow (Lookup or Expire); v is valid only during the call,
	// and OnEvict must not call the table's methods. Flows removed by
	// Delete and DeleteFunc are not passed to it: their caller has them.
	// If OnEvict panics, the panic reaches the caller of Lookup or Expire,
	// and the flow it was given is still in the table, uncounted: a
	// handler whose panics the dispatcher recovers keeps a sound table.
	OnEvict func(f Flow[K], v *V, why Reason)
}

// Flow names one flow of a table: the flowid the dispatcher computed
// (steer.Packet.FlowID) and the caller's full key.
type Flow[K comparable] struct {
	ID  uint32 // the flowid
	Key K      // the full key
}

// Stats is a snapshot of a table's counters. Every Lookup ends as a hit or
// an insert, and every flow inserted is still held or was removed once:
//
//	Lookups = Hits + Inserts
//	Len     = Inserts - Evictions - Expired - Deleted
type Stats struct {
	// Capacity is the most flows the table holds (Config.Capacity).
	Capacity int
	// Len is the number of flows held now.
	Len int
	// Hits counts Lookups that found their flow, not idle.
	Hits uint64
	// Inserts counts Lookups that started a flow: one the table did not
	// hold, or one that had gone idle (that one is also counted in
	// Expired).
	Inserts uint64
	// Evictions counts flows removed to make room for a new one: the
	// least recently seen flow when the table was full (to within
	// Idle/16: see "Recency" in the package comment), or the least
	// recently seen of a crowded bucket (see Crowded).
	Evictions uint64
	// Crowded counts the Evictions made because the new flow's bucket
	// already held the most flows one bucket may (16): flowids that share
	// a bucket by the dozen, which chance does not produce but a flood
	// crafted against a known hash key does.
	Crowded uint64
	// Expired counts flows ended by the idle timeout, in Lookup or
	// Expire.
	Expired uint64
	// Deleted counts flows removed by Delete or DeleteFunc.
	Deleted uint64
}

// ref names a slot: its index plus one, 0 for none, so that zeroed memory
// is an empty index and an empty list.
type ref uint32

// meta is a slot's bookkeeping, kept apart from keys and values so that
// walking a bucket's chain or the recency list reads only these 32 bytes
// a flow (two to a cache line), and so that the garbage collector never
// scans them.
type meta struct {
	flowid uint32
	next   ref   // the next slot in the bucket's chain, or in the free list
	newer  ref   // the recency list, towards the most recently moved
	older  ref   // and towards the least recently moved
	seen   int64 // when the flow was last looked up, unix nanoseconds
	moved  int64 // when it last moved to the newest end of the recency list
}

// pair is a slot's key and value.
type pair[K comparable, V any] struct {
	key K
	val V
}

// Table is a bounded table of per-flow state for one goroutine: at most
// Config.Capacity flows, each a value of type V found by its flowid and its
// full key K. Two flows whose flowids are equal but whose keys differ are
// two flows. A handler keyed by the flowid alone uses struct{} for K.
//
// All of its memory is allocated by [New] (see "What it promises" in the
// package comment). A Table is not safe for concurrent use: each worker holds its own, in its
// per-worker state (see the package comment).
type Table[K comparable, V any] struct {
	meta    []meta
	kv      []pair[K, V]
	buckets []ref // the first slot of each bucket's chain
	shift   uint  // 32 - log2(len(buckets))
	used    int   // slots [0, used) have held a flow; the rest never have
	free    ref   // slots that held a flow and were removed, through next
	newest  ref   // the recency list's ends
	oldest  ref
	n       int
	idle    int64
	bump    int64 // a flow moves in the recency list at most this often: idle/bumpFraction
	onEvict func(Flow[K], *V, Reason)

	hits, inserts, evictions, crowded, expired, deleted uint64
}

// New returns an empty table as cfg describes, or an error wrapping
// [ErrConfig]. It allocates all the table's memory: for each flow of
// Config.Capacity, 32 bytes of bookkeeping plus a key and a value, and 4
// to 8 bytes of index.
func New[K comparable, V any](cfg Config[K, V]) (*Table[K, V], error) {
	if cfg.Capacity < 1 || cfg.Capacity > MaxCapacity {
		return nil, fmt.Errorf("flowtable: capacity %d: want 1 to %d flows: %w", cfg.Capacity, MaxCapacity, ErrConfig)
	}
	if size := uint64(unsafe.Sizeof(meta{}) + unsafe.Sizeof(pair[K, V]{}) + 8); uint64(cfg.Capacity) > maxBytes/size {
		return nil, fmt.Errorf("flowtable: capacity %d of %d-byte flows is more memory than can be allocated: %w", cfg.Capacity, size, ErrConfig)
	}
	if cfg.Idle < 0 {
		return nil, fmt.Errorf("flowtable: idle timeout %v: want 0 (none) or more: %w", cfg.Idle, ErrConfig)
	}
	// As many buckets as the next power of two: at most one flow a bucket
	// on average.
	lg := bits.Len(uint(cfg.Capacity - 1))
	t := &Table[K, V]{
		meta:    make([]meta, cfg.Capacity),
		kv:      make([]pair[K, V], cfg.Capacity),
		buckets: make([]ref, 1<<lg),
		shift:   uint(32 - lg),
		idle:    int64(cfg.Idle),
		bump:    int64(cfg.Idle) / bumpFraction,
		onEvict: cfg.OnEvict,
	}
	adviseHuge(t.meta)
	adviseHuge(t.kv)
	adviseHuge(t.buckets)
	return t, nil
}

// bucket returns the index slot of flowid's chain.
func (t *Table[K, V]) bucket(flowid uint32) *ref {
	// The top bits of the product depend on all of the flowid's bits. The
	// low bits alone would not do: the dispatcher picks a flow's worker by
	// them, so one worker's flows share their low bits.
	return &t.buckets[uint64(flowid*golden)>>t.shift]
}

// Lookup returns the value of the flow (flowid, key), seen at now, and
// makes it the most recently seen (with Config.Idle set, it moves in the
// recency order at most once per Idle/16: see "Recency" in the package
// comment). isNew reports a flow just started, whose
// value is V's zero value for the caller to fill in: one the table did not
// hold, or one not seen for longer than Config.Idle before now (that one
// ended first, through Config.OnEvict, as [Expired]). A new flow takes a
// free slot; when there is none, the least recently seen flow is evicted
// and passed to OnEvict as [Evicted] (in a crowded bucket, that bucket's
// least recently seen: see the package comment).
//
// With Config.Idle set, Lookup first ends up to two other flows not seen
// for longer than Idle before now, least recently seen first, each passed
// to OnEvict as [Expired] as Expire would: flows expire as the times
// passed to Lookup advance, with no tick.
//
// now is the time the caller goes by: a packet's capture time
// (steer.Packet.Timestamp), so that replaying a capture gives the same
// flows as it did live. The table only compares the times it is given and
// never reads the clock; a caller that passes the zero Time throughout
// never has a flow go idle.
//
// The pointer is valid until the next Lookup, Delete, DeleteFunc or Expire
// on the table, any of which may reuse the slot for another flow.
func (t *Table[K, V]) Lookup(flowid uint32, key K, now time.Time) (v *V, isNew bool) {
	ns := now.UnixNano()
	if t.oldest != 0 && t.idle > 0 && ns-t.meta[t.oldest-1].seen > t.idle {
		t.expire(ns, lookupExpiry)
	}
	b := t.bucket(flowid)
	depth := 0
	for r := *b; r != 0; depth++ {
		m := &t.meta[r-1]
		if m.flowid == flowid && t.kv[r-1].key == key {
			return t.hit(r, ns)
		}
		r = m.next
	}
	return t.insert(b, depth, flowid, key, ns), true
}

// Prefetch asks the CPU to bring the flow that heads flowid's chain, its
// bookkeeping, key and value, into the caches without waiting for it. A
// handler that names a packet's flow a few packets before it looks it up
// (a delay line of pending updates) so overlaps the cache misses of
// several lookups, which a table larger than the caches otherwise takes
// one after another. It changes nothing in the table.
func (t *Table[K, V]) Prefetch(flowid uint32) {
	if r := *t.bucket(flowid); r != 0 {
		prefetch(unsafe.Pointer(&t.meta[r-1]))
		p := unsafe.Pointer(&t.kv[r-1])
		prefetch(p)
		if unsafe.Sizeof(t.kv[0]) > 64 {
			prefetch(unsafe.Add(p, 64))
		}
	}
}

// PrefetchBucket asks the CPU to bring the entry that names flowid's
// chain into the caches, without waiting for it: the first step of a
// two-step prefetch, for a handler with a delay line long enough to call
// Prefetch, which reads that entry, some packets later and Lookup some
// packets after that.
func (t *Table[K, V]) PrefetchBucket(flowid uint32) {
	prefetch(unsafe.Pointer(t.bucket(flowid)))
}

// hit is Lookup for a flow found in slot r.
func (t *Table[K, V]) hit(r ref, ns int64) (*V, bool) {
	m := &t.meta[r-1]
	p := &t.kv[r-1]
	isNew := t.idle > 0 && ns-m.seen > t.idle
	if isNew {
		// The old flow ended: report it, then start over in its slot.
		t.report(r, Expired)
		t.expired++
		t.inserts++
		var zero V
		p.val = zero
	} else {
		t.hits++
	}
	m.seen = ns
	if d := ns - m.moved; d >= t.bump || d < 0 {
		if t.newest != r {
			t.unlinkRecency(r)
			t.pushNewest(r)
		}
		m.moved = ns
	}
	return &p.val, isNew
}

// insert starts the flow (flowid, key) in the chain at b, which holds depth
// flows, and returns its zero value.
func (t *Table[K, V]) insert(b *ref, depth int, flowid uint32, key K, ns int64) *V {
	var r ref
	switch {
	case depth >= maxChain:
		r = t.crowdedVictim(*b)
		t.evict(r)
		t.crowded++
	case t.free != 0:
		r = t.free
		t.free = t.meta[r-1].next
	case t.used < len(t.meta):
		t.used++
		r = ref(t.used)
	default:
		r = t.oldest
		t.evict(r)
	}
	t.inserts++
	t.n++
	t.meta[r-1] = meta{flowid: flowid, next: *b, seen: ns, moved: ns}
	*b = r
	t.pushNewest(r)
	p := &t.kv[r-1]
	p.key = key
	var zero V
	p.val = zero
	return &p.val
}

// crowdedVictim returns the least recently seen flow of the chain that
// starts at r (ties: the one inserted first, which stands further along).
func (t *Table[K, V]) crowdedVictim(r ref) ref {
	victim := r
	for ; r != 0; r = t.meta[r-1].next {
		if t.meta[r-1].seen <= t.meta[victim-1].seen {
			victim = r
		}
	}
	return victim
}

// evict reports the flow in slot r, then removes it to make room.
func (t *Table[K, V]) evict(r ref) {
	t.report(r, Evicted)
	t.unlink(r)
	t.evictions++
}

// report passes the flow in slot r to OnEvict. It comes before any change
// to the table, so that an OnEvict that panics leaves the table as it was:
// the flow still held, the counters unchanged.
func (t *Table[K, V]) report(r ref, why Reason) {
	if t.onEvict != nil {
		p := &t.kv[r-1]
		t.onEvict(Flow[K]{ID: t.meta[r-1].flowid, Key: p.key}, &p.val, why)
	}
}

// unlink takes slot r out of its bucket's chain and the recency list.
func (t *Table[K, V]) unlink(r ref) {
	b := t.bucket(t.meta[r-1].flowid)
	for *b != r {
		b = &t.meta[*b-1].next
	}
	*b = t.meta[r-1].next
	t.unlinkRecency(r)
	t.n--
}

func (t *Table[K, V]) unlinkRecency(r ref) {
	m := &t.meta[r-1]
	if m.newer != 0 {
		t.meta[m.newer-1].older = m.older
	} else {
		t.newest = m.older
	}
	if m.older != 0 {
		t.meta[m.older-1].newer = m.newer
	} else {
		t.oldest = m.newer
	}
	m.newer, m.older = 0, 0
}

func (t *Table[K, V]) pushNewest(r ref) {
	m := &t.meta[r-1]
	m.newer, m.older = 0, t.newest
	if t.newest != 0 {
		t.meta[t.newest-1].newer = r
	} else {
		t.oldest = r
	}
	t.newest = r
}

// release puts slot r, already unlinked, on the free list, and zeroes its
// key and value so that the table keeps nothing they point to alive.
func (t *Table[K, V]) release(r ref) {
	t.kv[r-1] = pair[K, V]{}
	t.meta[r-1] = meta{next: t.free}
	t.free = r
}

// find returns the slot of the flow (flowid, key), or 0.
func (t *Table[K, V]) find(flowid uint32, key K) ref {
	for r := *t.bucket(flowid); r != 0; r = t.meta[r-1].next {
		if t.meta[r-1].flowid == flowid && t.kv[r-1].key == key {
			return r
		}
	}
	return 0
}

// Get returns the value of the flow (flowid, key), or nil when the table
// does not hold it. Unlike Lookup it changes nothing: not the flow's
// recency, not its time, not the counters; and it returns a flow that has
// gone idle but has not been expired yet. The pointer is valid as
// Lookup's is.
func (t *Table[K, V]) Get(flowid uint32, key K) *V {
	if r := t.find(flowid, key); r != 0 {
		return &t.kv[r-1].val
	}
	return nil
}

// Delete removes the flow (flowid, key) and reports whether the table held
// it. The flow is not passed to Config.OnEvict.
func (t *Table[K, V]) Delete(flowid uint32, key K) bool {
	r := t.find(flowid, key)
	if r == 0 {
		return false
	}
	t.unlink(r)
	t.deleted++
	t.release(r)
	return true
}

// DeleteFunc calls del for each flow, least recently seen first, removes
// those for which it returns true, and returns how many it removed. del may
// change *v (a flow it keeps keeps the change) but must not retain v nor
// call the table's methods. Removed flows are not passed to
// Config.OnEvict. A handler uses it to hand flows over to another worker
// (a steer move: Move.Contains(f.ID)).
func (t *Table[K, V]) DeleteFunc(del func(f Flow[K], v *V) bool) int {
	removed := 0
	for r := t.oldest; r != 0; {
		next := t.meta[r-1].newer
		p := &t.kv[r-1]
		if del(Flow[K]{ID: t.meta[r-1].flowid, Key: p.key}, &p.val) {
			t.unlink(r)
			t.release(r)
			removed++
		}
		r = next
	}
	t.deleted += uint64(removed)
	return removed
}

// Expire ends the flows not seen for longer than Config.Idle before now:
// each is passed to Config.OnEvict as [Expired] and removed. It returns how
// many it removed; with no idle timeout, none. It visits only the flows it
// removes and the first one it keeps: flows are kept in the order they were
// last looked up, and Expire stops at the first that has not gone idle. So
// when the times given to Lookup go backwards (frames of several sources,
// a little out of order), a flow seen at an earlier time than one looked
// up before it may be expired late, at a later Expire or by its next
// Lookup; never early. So may a flow that stands behind one looked up
// since its last move in the recency order, by less than Idle/16 (see
// "Recency" in the package comment).
//
// Lookup expires flows too, two at a time, as the times it is given
// advance; Expire ends all the idle ones at once. A handler calls it from
// its worker's tick (steer's Ticker), with the latest packet time it has
// handled rather than the wall clock when it replays captures, so that a
// worker whose traffic stopped still ends its flows.
func (t *Table[K, V]) Expire(now time.Time) int {
	if t.idle <= 0 {
		return 0
	}
	return t.expire(now.UnixNano(), math.MaxInt)
}

// lookupExpiry is how many idle flows a Lookup ends at the most: more than
// the one flow it may start, so that ending flows keeps pace with starting
// them and a table whose flows go idle never has to evict.
const lookupExpiry = 2

// expire ends up to limit flows not seen for longer than the idle timeout
// before ns, least recently seen first, and returns how many it ended.
func (t *Table[K, V]) expire(ns int64, limit int) int {
	removed := 0
	for r := t.oldest; r != 0 && removed < limit && ns-t.meta[r-1].seen > t.idle; r = t.oldest {
		t.report(r, Expired)
		t.unlink(r)
		t.release(r)
		t.expired++
		removed++
	}
	return removed
}

// All returns an iterator over the flows the table holds, least recently
// seen first, each with a pointer to its value (for flushing the records
// still open when a capture ends, say). The loop may change *v, and may
// Delete the flow it was given; any other change to the table during the
// loop (Lookup, Expire, DeleteFunc, deleting another flow) makes what the
// loop sees next unspecified.
func (t *Table[K, V]) All() iter.Seq2[Flow[K], *V] {
	return func(yield func(Flow[K], *V) bool) {
		for r := t.oldest; r != 0; {
			next := t.meta[r-1].newer
			p := &t.kv[r-1]
			if !yield(Flow[K]{ID: t.meta[r-1].flowid, Key: p.key}, &p.val) {
				return
			}
			r = next
		}
	}
}

// Len returns the number of flows held.
func (t *Table[K, V]) Len() int { return t.n }

// Stats returns a snapshot of the counters.
func (t *Table[K, V]) Stats() Stats {
	return Stats{
		Capacity:  len(t.meta),
		Len:       t.n,
		Hits:      t.hits,
		Inserts:   t.inserts,
		Evictions: t.evictions,
		Crowded:   t.crowded,
		Expired:   t.expired,
		Deleted:   t.deleted,
	}
}
