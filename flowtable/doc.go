// Package flowtable holds the state of receive flow steering (RFS): where
// each flow's consumer wants to run, and where each flow is handled now.
// It is modelled on the two tables Linux's RFS keeps (include/net/rps.h,
// get_rps_cpu and set_rps_cpu in net/core/dev.c) and depends on the standard
// library only; package steer's dispatcher is its user.
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
// first/last-seen times. Linux indexes that table by hash & mask and lets
// colliding flows share a slot; this one is keyed by the full flowid, in
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
// dispatcher therefore numbers the frames enqueued on each worker w (tail[w]
// counts frames enqueued, head[w] counts frames the worker has finished) and
// applies, per frame of flow e:
//
//   - on enqueue to worker e.Current, set e.LastTail = tail[e.Current] after
//     the enqueue (the position of this frame);
//   - e may leave e.Current for another worker (e.Desired, say) only when
//     int64(head[e.Current]-e.LastTail) >= 0, that is, when the old worker
//     has finished the flow's last frame; the signed difference keeps the
//     test right across counter wrap-around, as Linux's
//     (int)(input_queue_head - last_qtail) >= 0 does;
//   - on a move, set e.Current to the new worker; the enqueue that follows
//     sets LastTail on the new worker's queue;
//   - a freshly inserted entry (Current == -1) knows nothing of the flow's
//     earlier frames, which may still be queued: they went wherever
//     stateless steering (the indirection table) sends the flowid, because
//     a flow without an entry is steered statelessly and an entry is only
//     ever dropped when idle. So the dispatcher starts a new entry as
//     Current = that stateless worker s, LastTail = tail[s] (everything
//     queued on s now), and then applies the rule above: the flow moves to
//     its desired worker at once only if s has drained.
//
// The busy function given to [New] is the negation of that test,
// int64(head[e.Current]-e.LastTail) < 0 (false when Current is -1). A busy
// entry still carries the only record of where its flow's frames are
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
// set, and misses, look at the second. A caller that knows a batch of
// flowids before it looks them up starts those loads with [Table.Prefetch],
// then [Table.PrefetchEntries] (and [Desired.Prefetch]), so that the cache
// misses of the batch overlap. PrefetchEntries, which has to read the tags
// to know which entry to load, keeps what it found as a [Hint] per flowid;
// [Table.LookupHint] then checks that one slot's tag instead of searching
// again. (On amd64 that search is a few SSE2 instructions in assembly.)
// Two choices matter: inserting
// 10,000 random flowids into 16,384 entries, a single 8-way set per flowid
// leaves 1.9% of them without room (they keep evicting one another); two
// candidate sets leave 0.14%, and 0.014% of 1,000,000 flows in 2^21
// entries.
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
// not miss the TLB as well as the cache. With 1,000,000 flows that cut the
// dispatcher's RFS cost per frame from 25-29 ns to 16-17 ns. The memory is
// the same; only the page size changes.
//
// # Concurrency
//
// Desired is safe for any number of goroutines. Table is built for one
// writer holding its lock for a whole batch of frames ([Table.Lock],
// [Table.Lookup], updates in place, [Table.Unlock]); readers on other
// goroutines use the methods that take the lock themselves: [Table.Stats],
// [Table.Top], [Table.Range], [Table.Get], [Table.Len], [Table.Expire].
package flowtable
