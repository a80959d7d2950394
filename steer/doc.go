// Package steer spreads received frames over per-CPU worker goroutines so
// that every flow is handled by one worker, in order: FreeBSD's netisr and
// RSS (and Linux's RPS/RFS) in user space, for a single-queue source such
// as a capture file or an AF_PACKET ring. It uses the kernels' names where
// they fit; docs/freebsd-linux.md puts each beside the name that plays its
// part here, with the kernel detail and where the library differs.
//
// # The path of a frame
//
// A [Source] delivers frames in batches. An [Input] (one per feeding
// goroutine, from [Dispatcher.NewInput]; [Dispatcher.Run] makes one) takes
// every frame through four steps, the same in every dispatch mode:
//
//  1. Classify (ether_demux). [Classifier.Classify] walks the Ethernet
//     header, VLAN tags, the shims that hide an IP header (PPPoE, MPLS,
//     Cisco MetaData), the IP header and the transport ports into a
//     [FlowKey]; with [TunnelsInner] it opens tunnels too. It never drops:
//     a frame it cannot read fully gets a [Reason], counted, and is
//     delivered anyway.
//  2. Hash. Unless the source gave one, the Toeplitz hash (or a keyed
//     SipHash) of the 4-tuple or 2-tuple, as [HashConfig] says, is the
//     flowid, and a hash.HashType says what was hashed; a frame that is
//     not IP gets none.
//  3. Select (netisr_select_cpuid). The [Policy] picks the worker: by
//     default [PolicyRSS], worker = table[flowid & (buckets-1)] over an
//     indirection table that can be reprogrammed at run time
//     ([Dispatcher.SetTable]). With [RFSConfig], a flow whose consumer
//     named a worker ([Dispatcher.SetDesired]) moves there first.
//  4. Hand off. [DispatchDeferred], the default, queues the frame to its
//     worker in batches of up to [BatchSize]; [DispatchDirect] runs the
//     handler in the caller's goroutine; [DispatchHybrid] runs it inline
//     when the caller is the selected worker and that worker is idle.
//
// Four types carry the results, each with one role: [FlowKey] is the key
// (a comparable value, a map key); [Classification] is what the classifier
// finds (key, flowid, hash type, reason); [Packet] is what a handler gets
// (the frame, its flowid and [Packet.Key]); [Decision] is a trace record of
// steps 3 and 4 (Config.Trace), pointing at the frame and classification.
//
// # Workers and their state
//
// Each [Worker] is a goroutine, pinned to a CPU when Config.CPUs is set,
// with a bounded queue ([QueueConfig]). A full queue holds back a source
// that can wait (a file, a slice) and drops at the tail for a [LiveSource]
// once its ring fills or the worker stalls ([Overflow]). [New] takes a
// stateless [Handler]; [NewPerWorker] gives every worker a state of its
// own, made in its goroutine, which may implement [Ticker], [Mover] and
// io.Closer.
//
// # Order
//
// The frames of a flow are handled by one worker at a time, in the order
// the input received them. A flow moves (a reprogrammed bucket, an RFS
// move, the rebalancer) under Linux's last_qtail rule: only once its old
// worker has handled every frame of it already queued there. A [Mover]
// state carries per-flow state across the move.
//
// # Accounting
//
// Every frame handed in is handled, dropped with a reason (queue full,
// flow limit, re-dispatch too deep, Close out of time) or panicked; once
// the dispatcher is closed, Stats.Frames == Handled() + Dropped() +
// Panicked(). A panic in any user callback is recovered, counted and
// logged, and the dispatcher goes on. A source's buffer is released once
// every frame in it is done; a handler that keeps bytes calls
// [Packet.Retain]. [Stats.WriteReport] prints the counters as
// `netstat -Q` does. [Dispatcher.Close] drains the queues and waits for
// the workers; when its ctx ends first, what is queued is dropped and
// counted.
package steer
