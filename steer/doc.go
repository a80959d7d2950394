// Package steer spreads received frames over per-CPU worker goroutines so
// that every flow is handled by one worker, in order: FreeBSD's netisr and
// RSS layers (and Linux's RPS/RFS), done in user space for a single-queue
// source such as a capture file or an AF_PACKET ring. The package uses the
// kernels' names where they fit; docs/freebsd-linux.md in the repository
// puts each of them beside the name that plays its part here and says where
// the library differs.
//
// # The path of a frame
//
// A [Source] delivers frames in batches. An [Input] (one per feeding
// goroutine, each with its own source id, from [Dispatcher.NewInput] and
// closed with [Input.Close] when the goroutine is done; [Dispatcher.Run]
// makes and closes one) takes every frame through four steps, each in one
// place in the code and the same for every dispatch mode, with RFS and with
// tracing. FreeBSD takes a packet through netisr twice: ether_input calls
// netisr_dispatch(NETISR_ETHER), whose handler (DIRECT) runs ether_demux,
// which calls netisr_dispatch(NETISR_IP); the software hash is computed
// inside that second netisr_select_cpuid, by the protocol's nh_m2cpuid
// (rss_soft_m2cpuid_v4, under options RSS). The library makes one pass, and hashes as a step of
// its own, so that every frame carries its flowid whatever the policy:
//
//  1. Classify (ether_demux). [Classifier.Classify] walks the Ethernet header,
//     up to four 802.1Q/802.1ad tags, the shims that hide an IP header
//     (PPPoE sessions; MPLS label stacks, with pseudowires; Cisco
//     MetaData), the IPv4 header or the IPv6 extension chain, and the
//     transport ports, into a fixed-size [FlowKey]. With Config.Hash.Tunnels
//     set to [TunnelsInner] it also opens VXLAN, GENEVE, GRE (with ERSPAN,
//     transparent Ethernet and Cisco MetaData), GTP-U, IP in IP and MPLS
//     over UDP, up to [MaxTunnelDepth] deep, and the
//     innermost IP header is the one hashed; the key records the layers
//     walked ([FlowKey.Encapsulation]). An outer fragment is never opened,
//     and a tunnel that cannot be read leaves the frame on its outer hash.
//     The classifier never drops: a frame it cannot read fully gets a
//     [Reason], counted in the stats, and is delivered anyway. Any byte
//     sequence is a valid input.
//     For a queued plain TCP or UDP over IPv4 packet the input reads no
//     more than the hash needs, as Linux's RPS leaves protocol parsing to
//     the backlog CPU: [Packet.Key] derives the key in the handler's worker,
//     on first use.
//
//  2. Hash (rss_mbuf_software_hash_v4/v6). When the source gave no hash,
//     the Toeplitz hash of the 4-tuple or 2-tuple, with the tuple bytes
//     FreeBSD's rss_hash_ip4_4tuple uses, becomes the flowid
//     ([Packet.FlowID]), and the [hash.HashType] (M_HASHTYPE_*) says what
//     was hashed. Config.Hash.Types is the set of hash types in use
//     (rss_gethashconfig): by default TCP gets RSS_TCP_IPV4/6 over addresses
//     and ports and UDP the 2-tuple RSS_IPV4/6 (Config.Hash.UDP4Tuple adds
//     UDP's 4-tuple); fragments get the 2-tuple, as FreeBSD's do, unless
//     Config.Hash.Fragments is [FragmentsFollow]: then a datagram's first
//     fragment is hashed as its whole packets are and each input gives its
//     later fragments the same flowid, from a bounded table of the first
//     fragments it has seen; non-IP frames NONE and no flowid. Config.Hash.Algorithm may replace Toeplitz with a keyed
//     SipHash of the same tuple, which an attacker who sees collisions
//     cannot extend. Config.Hash.Key is the
//     Toeplitz key (nil: a fresh random key; at least [minKeyLen] bytes, so
//     that an IPv6 4-tuple is hashed in full); Config.Hash.Symmetric gives
//     both directions of a connection one flowid. FreeBSD hashes a
//     reassembled datagram again (ip_reass: rss_mbuf_software_hash_v4, then
//     netisr_dispatch(NETISR_IP_DIRECT)), so that it ends on its 4-tuple's
//     CPU; the library does not reassemble, and a handler that does can
//     re-steer the datagram with [Packet.Redispatch].
//
//  3. Select (netisr_select_cpuid). The [Policy] picks the worker: RSS, the
//     default, is bucket = flowid & (buckets-1), worker = table[bucket],
//     over an indirection table of Config.Buckets entries (128 by default,
//     assigned round-robin) that can be read and reprogrammed at run time
//     ([Dispatcher.Table], [Dispatcher.SetTable], [Dispatcher.SetBucket]);
//     FLOW is flowid % workers; SOURCE uses the source id and ingress
//     interface, and places every frame without a hash (HashType NONE or
//     OPAQUE); CPU asks Config.CPUFunc. RSS is the CPU policy of FreeBSD's
//     IP handlers under options RSS (rss_soft_m2cpuid_v4, whose
//     rss_hash2cpuid looks the bucket up); Linux's RPS has no bucket table
//     and picks from the queue's rps_map by the hash's high bits
//     (reciprocal_scale). With Config.RFS enabled, RFS is the first stage
//     of selection: a flow whose consumer named a worker
//     ([Dispatcher.SetDesired], Linux's rps_record_sock_flow) moves there,
//     under the order rule below. That is Linux's answer, the flow follows
//     the application; FreeBSD's is the reverse, the application follows
//     the flow: it reads a socket's flowid and RSS bucket (IP_FLOWID,
//     IP_RSSBUCKETID) and pins the thread to that bucket's CPU
//     (rss_getcpu), as a handler here may read [Packet.FlowID] and
//     [Dispatcher.Table].
//
//  4. Hand off (netisr_dispatch_src, netisr_queue_src). [DispatchMode]
//     DIRECT runs the handler in the caller's goroutine; DEFERRED, the
//     default, queues the frame to its worker; HYBRID runs it inline when
//     the caller is itself the selected worker and that worker is idle: a
//     worker reading a source ([Dispatcher.Run] reads in worker 0 under
//     HYBRID; [Dispatcher.RunOnWorkers]) or a handler re-dispatching with
//     [Packet.Redispatch]. Every mode accounts the frame to the selected worker, DIRECT
//     too, where FreeBSD selects no CPU and counts the packet on the
//     current one: here the handler gets that worker's state. Queued
//     frames travel in batches of up to [BatchSize] per worker, because one
//     channel operation per frame costs more than all of the steering.
//     With Config.VerifyChecksums the worker (or, inline, the goroutine
//     that runs the handler) verifies the frame's checksums before its
//     handler runs, where the cost is spread ([Checksum]), and the
//     handler finds the verdict, or the source's, in [Packet.Checksum].
//
// Config.Trace, when set, receives each [Decision]: every step above for one
// frame, named as the kernels name it (netisr_select_cpuid where it selects,
// netisr_queue_src where it queues). It costs nothing when unset.
//
// # Workers and their state
//
// Each [Worker] is a workstream (netisr's nws): a goroutine, pinned to a CPU
// when Config.CPUs is set (net.isr.bindthreads), with a bounded queue.
// Config.Workers defaults to [DefaultWorkers], the CPUs the process may run
// on. Config.Queue.Limit bounds each queue (net.isr.defaultqlimit): zero
// means [DefaultQLimit] for inputs that drop and [DefaultWaitQLimit] for
// inputs that wait, at most [MaxQLimit]. Config.Queue.Overflow says what a
// full queue does to the input filling it: [OverflowAuto], the default,
// holds back a source that can wait (a file, a slice, an Input the caller
// feeds), and a [LiveSource] (a ring the kernel fills) as long as that
// costs nothing: while its ring is under three quarters full, the frames
// wait there, where the kernel counts what it cannot hold. Past that, or
// once the worker's queue has not moved for Config.Queue.StallTimeout (a
// stuck handler, which must not stop the other workers), it drops at the
// tail as netisr does (QueueDrops; StallDrops for a stalled worker).
// [OverflowWait] and [OverflowDrop] choose one rule for all inputs.
//
// [New] takes a stateless [Handler]. [NewPerWorker] gives every worker a
// state of its own: newState runs in each worker's goroutine before its
// first frame, the handler receives that worker's state with each packet,
// and states[i], worker i's state, may be read from outside the workers
// once [Dispatcher.Close] has returned. A state that implements [Ticker] is
// ticked every Config.TickInterval in its worker; one that implements
// [Mover] carries per-flow state when a flow moves; one that implements
// io.Closer is closed in its worker before the worker exits, and the errors
// are joined into Close's.
//
// # Order
//
// The frames of a flow are handled by one worker at a time, in the order the
// input received them. Batching keeps order because a worker's queue is a
// FIFO. Moving a flow (a reprogrammed bucket, an RFS move, the rebalancer of
// Config.Rebalance) follows Linux's last_qtail rule: every worker counts the
// frames put on its queue (tail) and the frames handled (head); each input
// remembers, per bucket and per flow, the tail position of the last frame it
// queued; a flow may leave its worker only once that worker's head has
// passed that position. Until then its frames keep going to the old worker.
// For a state that implements [Mover], MoveOut runs in the old worker after
// its last frame of the flow, and MoveIn in the new one, with what MoveOut
// returned, before its first.
//
// # Accounting
//
// Every frame handed in has one outcome: handled; dropped with a reason
// (queue full, flow limit, re-dispatch too deep, Close out of time); or
// panicked, when its handler panicked. Once the dispatcher is closed,
// Stats.Frames == Stats.Handled() + Stats.Dropped() + Stats.Panicked().
// Every user callback (the handler, a state's constructor and hooks,
// Trace, CPUFunc, OnPanic, a batch's release) is treated alike: a panic is
// recovered, counted under the callback's name, logged through
// Config.Logger (at most one record a second) or passed to Config.OnPanic,
// and the dispatcher goes on. [Dispatcher.Stats] never waits for a
// handler. A source's buffer (a file arena, a ring block) is released once every frame
// in it has been handled, dropped or panicked; a handler that keeps bytes
// past its return calls [Packet.Retain]. [Dispatcher.Stats] reports each
// workstream (WorkstreamStats), and [Stats.WriteReport] prints them under
// netstat -Q's column headings.
//
// [Dispatcher.Close] stops intake, lets every worker drain its queue and
// waits for the workers to exit; when its ctx ends first, what is queued is
// dropped and counted, and Close says what it could not wait for (frames a
// handler still holds end as handled or dropped when it returns). It may
// be called at any moment and more than once; a dispatch after it returns
// [ErrClosed].
package steer
