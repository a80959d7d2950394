// Package flowtable is a bounded table of per-flow state for packet
// handlers: a flow meter's records, a reassembler's connections, a rate
// limiter's buckets. Its caller is a handler's per-worker state: with
// steer.NewPerWorker each worker's state holds a [Table] of its own, the
// dispatcher keeps every frame of a flow on one worker, and so no table is
// ever shared and none needs a lock. It depends on the standard library
// only and knows nothing of package steer; the dispatcher's own flow state
// (RFS) is no part of it.
//
// # What it promises
//
//   - Bounded memory. [New] allocates all of a table's memory, for
//     Config.Capacity flows; nothing grows afterwards, whatever traffic
//     arrives. A flood of ten million new flows only recycles slots.
//   - No allocation. Lookup, Get, Prefetch, PrefetchBucket, Delete, DeleteFunc, Expire,
//     Len and Stats never allocate, nor does a range loop over All, so a handler
//     that keeps its state here allocates nothing per packet in steady
//     state.
//   - Least recently seen first out. When the table is full, a new flow
//     evicts the flow looked up least recently (with Config.Idle set, to
//     within Idle/16: see "Recency"), counted in Stats.Evictions and
//     passed to Config.OnEvict as [Evicted], so that a meter can still
//     report it.
//   - Idle expiry by capture time. With Config.Idle set, a flow not seen
//     for longer than that has ended. The times are the ones the caller
//     passes, normally the packets' capture times (steer.Packet.Timestamp);
//     the table never reads the clock, so a capture replayed in
//     milliseconds ends the same flows, at the same points of the capture,
//     as it did live. Each Lookup ends up to two flows gone idle by its
//     time, the least recently seen first, and restarts its own flow if
//     that one had gone idle: a handler that only looks up expires flows
//     as the capture's time moves, and a table whose flows go idle frees
//     slots faster than new flows take them, evicting none (if it has room
//     for the flows seen within Idle + Idle/16: an idle flow may end that
//     late, see "Recency").
//     [Table.Expire], from a worker's tick (steer.Ticker) with the latest
//     capture time the worker handled, ends the rest when a worker's
//     traffic stops.
//   - Exact keys. A flow is found by the flowid the dispatcher already
//     computed (steer.Packet.FlowID, the Toeplitz hash: FreeBSD's
//     m_pkthdr.flowid) and confirmed by the caller's full key K (say
//     steer.FlowKey), so two flows whose 32-bit flowids collide are two
//     flows, each with its own state. A handler that wants flows keyed by
//     the flowid alone, colliding flows shared, uses struct{} for K, which
//     costs nothing. A flowid that does not tell flows apart is another
//     matter: a 2-tuple hash (UDP's under the default hash types, a
//     fragment's) gives every flow between two hosts one flowid, and frames
//     without a hash share flowid 0; past 16 such flows they crowd each
//     other out of their bucket (see "Bounded time"). A handler that keys
//     such flows passes an id with the ports mixed in (examples/flowmeter's
//     count, examples/pcapsteer's slotID) and keeps the flowid in its value
//     if it needs it (for Move.Contains, say).
//
// A Table is not safe for concurrent use, by design: one table per worker,
// touched only by that worker's goroutine (its handler, Tick, MoveOut,
// MoveIn and Close all run there). Reading one from elsewhere is safe only
// once the dispatcher has closed.
//
// # Use
//
// A flow meter's per-worker state, in outline (steer's per-worker state
// API; error handling left out):
//
//	type meter struct {
//		flows *flowtable.Table[steer.FlowKey, record]
//		ended []record  // records of ended flows, to report
//		clock time.Time // the latest capture time handled
//	}
//
//	func newMeter(w *steer.Worker) *meter {
//		m := &meter{}
//		m.flows, _ = flowtable.New(flowtable.Config[steer.FlowKey, record]{
//			Capacity: 1 << 16,
//			Idle:     30 * time.Second,
//			OnEvict: func(_ flowtable.Flow[steer.FlowKey], r *record, _ flowtable.Reason) {
//				m.ended = append(m.ended, *r)
//			},
//		})
//		return m
//	}
//
//	func handle(m *meter, p *steer.Packet) {
//		m.clock = p.Timestamp
//		r, isNew := m.flows.Lookup(p.FlowID, p.Key().Flow(), p.Timestamp)
//		if isNew {
//			r.First = p.Timestamp
//		}
//		r.Packets++
//	}
//
//	// Lookup expires by capture time; the tick ends what is left idle
//	// when this worker's traffic stops.
//	func (m *meter) Tick(time.Time) { m.flows.Expire(m.clock) }
//
// A table larger than the caches costs a lookup a few cache misses. A
// handler that names each packet's flow with [Table.Prefetch] as it
// arrives, and looks it up a few packets later (a delay line of pending
// updates, applied in order, and drained at the tick and at Close),
// overlaps those misses: a lookup in a table of a million flows then takes
// about 0.6 of the time (BenchmarkPrefetch). Prefetch reads the bucket that
// names the flow's slot; [Table.PrefetchBucket] a few packets before it
// keeps that read from waiting too (pcapsteer does both).
//
// MoveOut takes a moved flow's records with [Table.DeleteFunc]
// (Move.Contains(f.ID)) and MoveIn puts them into the new worker's table
// with Lookup; at the end, [Table.All] visits the records still open.
//
// # How it works
//
// A table is three arrays, all allocated by New: the slots' bookkeeping (32
// bytes a flow: its flowid, the times it was last seen and last moved in
// the recency list, and three slot numbers); the slots' keys and values,
// kept apart so that walking a chain reads only bookkeeping; and the index,
// as many buckets as the next power of two at or above the capacity, each
// the first slot of a chain of the flows that share it. Removed flows'
// slots wait on a free list, so a table that is not full never evicts. A
// flow's bucket is taken from the top bits of flowid*0x9E3779B1 (Fibonacci
// hashing), which depend on all 32 bits of the flowid: its low bits alone
// would not do, since the dispatcher picks a flow's worker by them and one
// worker's flows share them. A doubly linked list through the slots keeps
// the flows in the order they were last looked up (see "Recency"), so that
// eviction takes its tail and Expire visits only the flows it removes, plus
// one. On Linux, New asks for huge pages for each array of 4 MiB or more
// (MADV_HUGEPAGE): a table of a million flows is then missed in the TLB far
// less, for nothing more than resident memory counted two megabytes at a
// time.
//
// # Recency
//
// Moving a flow to the newest end of the recency list writes the
// bookkeeping of its two neighbours there, which lie anywhere in the
// table: two cache misses more for a lookup in a table larger than the
// caches, which no Prefetch can name in advance. So with Config.Idle set,
// a lookup moves its flow only if the flow has not moved for Idle/16 (the
// flow's time is updated either way), as memcached bumps an item in its
// LRU at most once a minute. The list is then in the order of the flows'
// last moves, which is the order of their last lookups to within Idle/16:
// eviction takes a flow seen at most Idle/16 after the one seen longest
// ago, and an idle flow standing behind one looked up since its last move
// ends at most Idle/16 late, never early. Without an idle timeout every
// lookup moves its flow and the order is exact. Where this package says
// least recently seen (eviction, Expire, DeleteFunc, All), it means first
// in this order. BenchmarkLookup, a table of a million flows: 0.84 of the
// time with the moves spared (10,000 flows: 0.91).
//
// # Bounded time
//
// A Toeplitz hash is linear: whoever knows the key (a fixed one such as
// Microsoft's, not the random default) can craft as many tuples with one
// flowid as they like, and unbounded chains would make every lookup of
// that bucket slower. So a bucket holds at most 16 flows; a new flow of a
// full bucket evicts the least recently seen flow of that bucket, counted
// in Stats.Crowded as well as Evictions. Random traffic does not fill a
// bucket: with at most one flow a bucket on average, the chance that a
// given bucket holds 16 is about 2 in 10^14, so Crowded stays zero unless
// someone aims at it. Lookup, Get and Delete so look at 16 chain entries
// at the most (Lookup also ends two idle flows at the most); Expire,
// besides, at the flows it removes.
package flowtable
