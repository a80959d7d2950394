// Package rfstable holds the state of receive flow steering (RFS): where
// each flow's consumer wants to run, and where each flow is handled now.
// It is modelled on the two tables Linux's RFS keeps (include/net/rps.h,
// get_rps_cpu and set_rps_cpu in net/core/dev.c). Package steer's
// dispatcher is its only user; it is internal so that its lock, prefetch
// and hint machinery, which exists for the dispatcher's batches, is no part
// of the library's API. (Handlers that want per-flow state of their own use
// package flowtable.)
//
// # The two tables
//
// [Desired] is the analogue of Linux's global rps_sock_flow_table. Whoever
// consumes a flow (in Linux, the socket's recvmsg; here, any goroutine)
// records the worker it runs on with [Desired.Set]; the dispatcher reads it
// with [Desired.Get]. It is a fixed array of atomic words, one per slot,
// indexed by the low bits of the flowid, each tagged with the full flowid
// so that a slot overwritten by another flow reads as absent. It is
// lock-free and never allocates. Its generation ([Desired.Gen]) moves on
// every change, so a reader may keep what it read (as [Entry].Desired with
// [Entry].DesiredGen) until the generation moves: Linux reads the table for
// every packet, the dispatcher only after a change.
//
// [Table] is the analogue of Linux's per-queue rps_dev_flow_table: for each
// flow, the worker handling it now ([Entry].Current, rps_dev_flow.cpu), the
// queue position of its last enqueued frame ([Entry].LastTail,
// rps_dev_flow.last_qtail), the last desired worker seen, counters and
// first/last-seen times. Linux indexes that table by hash & mask (up to
// 6.14; by hash_32 since 6.15, rfs_slot) and lets colliding flows share a
// slot; this one is keyed by the full flowid, in
// 8-way associative sets, so two flows never share state by accident.
//
// # The unit of steering
//
// The flowid (FreeBSD's m_pkthdr.flowid, Linux's skb->hash) is the unit of
// steering: frames whose flowids are equal are treated as one flow. Distinct
// connections whose tuples hash to the same 32-bit flowid share one entry,
// one desired worker and one current worker, and move together, as in Linux.
// This is harmless for ordering (each connection stays in order) and rare.
//
// # The last_qtail rule
//
// Moving a flow from one worker to another while frames of it are still
// queued on the first would let later frames overtake earlier ones. The
// table stores LastTail and asks the caller's busy function (given to
// [New]) what it means; this is the rule package steer applies with it.
//
// Each worker w keeps two unsigned 64-bit counters: tail[w], the frames
// ever enqueued on it, and head[w], the frames it has finished (advanced
// after each batch). The k-th frame enqueued on w has position k, and
// head[w] >= k tells that w has finished it. The counters start at zero and only grow; at one frame a
// nanosecond they would wrap after 584 years, so the rule compares them
// as plain unsigned numbers, without the signed difference Linux needs
// for its 32-bit counters ((int)(input_queue_head - last_qtail) >= 0).
// Per frame of a flow whose entry is e, the dispatcher:
//
//   - when it puts the frame into a batch that is not yet enqueued, sets
//     e.LastTail to the pending marker ^uint64(0), which no head reaches:
//     until the batch has a queue position, the flow cannot move and its
//     entry is busy;
//   - when it enqueues that batch on worker w from position base, sets
//     e.LastTail = base+i+1 for the batch's i-th frame (0-based), the
//     flow's last frame in it; if the queue took only the first n frames
//     and e still holds the marker, e.LastTail = base+n, a position no
//     frame of the flow queued on w comes after;
//   - before testing a move, enqueues its pending batch for e.Current, so
//     that the test sees a position and not the marker;
//   - lets e leave e.Current for another worker only when
//     head[e.Current] >= e.LastTail (unsigned), that is, when the old
//     worker has finished the flow's last frame; otherwise the frame goes
//     to e.Current;
//   - on a move, sets e.Current to the new worker and e.LastTail = 0:
//     nothing of the flow is queued there yet. The frame being steered
//     then sets the marker when it is batched; if it is dropped (flow
//     limit) or handled inline instead, LastTail stays 0 and holds no
//     later move back;
//   - for a freshly inserted entry (Current == -1), which knows nothing of
//     the flow's earlier frames: a flow without an entry was steered
//     statelessly (by the policy), since an entry is only dropped when not
//     busy. So the dispatcher, after enqueueing its pending batches if any
//     frame has been steered without an entry since it last did, sets
//     Current to the policy's worker s and LastTail = tail[s], everything
//     queued on s now; the flow moves on at once only if s has drained.
//
// The busy function steer gives [New] is the negation of the move test:
// e.Current >= 0 && head[e.Current] < e.LastTail (so an entry holding the
// marker is busy, and one with Current == -1 or LastTail == 0 is not). A
// busy entry carries the only record of where its flow's frames are
// queued, so the table never evicts nor expires it.
//
// # Eviction and memory bounds
//
// A Table's capacity is a power of two fixed by [New]; all of its memory (72
// bytes per entry) is allocated there and never grows, whatever traffic
// arrives. The entries are grouped in sets of eight ([Ways]); each set keeps
// its eight full 32-bit tags and a valid bitmap in one cache line, followed
// by its eight 64-byte entries. A flowid has two candidate sets: the one its
// low bits select (flowid & (sets-1)), and an alternate derived from all its
// bits. A lookup compares the first set's tags (one cache line, without
// branches), then touches one entry; only flows that overflowed their first
// set, and misses, look at the second. Two candidate sets leave far fewer
// flows without room than one would (TestTwoChoiceRoom measures both).
//
// A caller that knows a batch of flowids before it looks them up starts
// those loads with [Table.Prefetch], then [Table.PrefetchEntries] (and
// [Desired.Prefetch]), so that the cache misses of the batch overlap.
// PrefetchEntries, which has to read the tags to know which entry to load,
// keeps what it found as a [Hint] per flowid; [Table.LookupHint] and
// [Table.Hit] then check that one slot's tag instead of searching again.
// On amd64 that search is a few SSE2 instructions in assembly
// (prefetch_amd64.s); elsewhere it is Go and the prefetches do nothing.
//
// On a miss, the new flow takes a free way of its first set, else of its
// second. If both are full (a collision), it evicts, among the sixteen
// candidates, the non-busy entry with the oldest LastSeen (aging by last
// seen; ties go to the first set, then the lowest way). If all sixteen are
// busy the lookup returns nil and counts Full, and the dispatcher steers
// that frame statelessly (see the last rule above). [Table.Expire] removes
// idle entries. A flood of new flowids therefore only recycles entries: it
// costs evicted flows their RFS state, never memory, and never a busy
// flow's LastTail.
//
// A Desired table's memory is 8 bytes per slot, fixed by [NewDesired].
//
// On Linux, a table (of either kind) of 4 MiB or more starts on a 2 MiB
// boundary and asks the kernel for huge pages (MADV_HUGEPAGE, honoured when
// transparent huge pages are set to "madvise" or "always"; memory that the
// Go heap recycled, already in small pages, is collapsed with
// MADV_COLLAPSE, from Linux 6.1), so that a lookup in a large table does
// not miss the TLB as well as the cache. The memory is the same; only the
// page size changes.
//
// # Concurrency
//
// Desired is safe for any number of goroutines. Table is built for one
// writer holding its lock for a whole batch of frames ([Table.Lock],
// [Table.Lookup], updates in place, [Table.Unlock]); readers on other
// goroutines use the methods that take the lock themselves: [Table.Stats],
// [Table.Top], [Table.Range], [Table.Get], [Table.Len], [Table.Expire].
package rfstable
