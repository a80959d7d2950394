// Package steer spreads received frames over per-CPU worker goroutines so
// that every flow is handled by one worker, in order: FreeBSD's netisr and
// RSS layers (and Linux's RPS/RFS), done in user space for a single-queue
// source such as a capture file or an AF_PACKET ring.
//
// # The path of a frame
//
// A [Source] delivers frames in batches. An [Input] (one per feeding
// goroutine, each with its own source id, closed with [Input.Close] when the
// goroutine is done; [Dispatcher.Run] makes and closes one) takes every
// frame through four steps, each in one place in the code:
//
//  1. Classify (ether_demux). [Classifier.Classify] walks the Ethernet header,
//     up to four 802.1Q/802.1ad tags, the IPv4 header or the IPv6 extension
//     chain, and the transport ports, into a fixed-size [FlowKey]. It never
//     drops: a frame it cannot read fully gets a [Reason], counted in the
//     stats, and is delivered anyway. The input is the one step of the path
//     that cannot be spread over the workers, so for a queued plain TCP or
//     UDP over IPv4 packet, the bulk of most traffic, it reads no more than
//     the hash needs, as Linux's RPS does: [Packet.Key] derives the key in
//     the handler's worker, on first use.
//
//  2. Hash (rss_mbuf_software_hash_v4/v6). When the source gave no hash (a
//     NIC would set m->m_pkthdr.flowid), the Toeplitz hash of the 4-tuple or
//     2-tuple, built as FreeBSD's rss_hash_ip4_4tuple builds it, becomes the
//     flowid, and the [hash.HashType] (M_HASHTYPE_*) says what was hashed:
//     TCP gets RSS_TCP_IPV4/6 over addresses and ports; UDP gets the 2-tuple
//     RSS_IPV4/6 unless Config.UDP4Tuple; fragments always the 2-tuple;
//     non-IP frames NONE and no flowid. The input classifies a chunk of up
//     to 64 frames before it steers any, and hashes the chunk's plain IPv4
//     packets in one batch ([hash.Toeplitz.SumIPv4Tuples]).
//
//  3. Select (netisr_select_cpuid). The [Policy] picks the worker: FLOW is
//     netisr_default_flow2cpu (flowid % workers); SOURCE uses the source id
//     and ingress interface, and places every frame with HashType NONE; CPU
//     asks a function; RSS, the default, is the CPU policy with FreeBSD
//     RSS's rss_m2cpuid: bucket = flowid & (buckets-1) (rss_getbucket),
//     worker = table[bucket] (rss_getcpu). The indirection table has 128
//     buckets by default, assigned round-robin, and can be read and
//     reprogrammed at run time ([Dispatcher.Table], [Dispatcher.SetTable]).
//     With RFS on, a flow whose consumer named a worker
//     ([Dispatcher.SetDesired], Linux's rps_record_sock_flow) goes there.
//
//  4. Hand off (netisr_dispatch_src). [DispatchMode] DIRECT runs the handler
//     in the caller's goroutine; DEFERRED queues the frame to its worker;
//     HYBRID runs it inline only when the caller is itself the selected
//     worker (a handler re-dispatching a decapsulated frame) with an empty
//     queue. Queued frames travel in batches of up to 64 per worker, because
//     one channel operation per frame costs more than all of the steering.
//
// Each worker is a workstream (netisr's nws): a goroutine, optionally pinned
// to a CPU (net.isr.bindthreads), with a bounded queue of qlimit frames
// (net.isr.defaultqlimit 256, maxqlimit 10240). A full queue drops at the
// tail and counts QDrops, or, with Config.Block, holds the source back.
// [Dispatcher.Stats] reports each workstream with netstat -Q's columns (Len,
// WMark, Disp'd, HDisp'd, QDrops, Queued, Handled), and
// [Stats.WriteReport] prints them the way netstat -Q does.
//
// # Order
//
// The frames of a flow are handled by one worker at a time, in the order the
// input received them. Batching keeps order because a worker's queue is a
// FIFO. Moving a flow (a reprogrammed bucket, an RFS move, the rebalancer)
// follows Linux's last_qtail rule: every worker counts the frames put on its
// queue (tail) and the frames handled (head); each input remembers, per
// bucket and per flow, the tail position of the last frame it queued; a flow
// may leave its worker only once that worker's head has passed that
// position. Until then its frames keep going to the old worker. Config's
// MoveOut and MoveIn hooks let per-flow state follow the flow: MoveOut runs
// in the old worker after its last frame of the flow, MoveIn in the new one
// before its first.
//
// # Accounting
//
// Every frame handed in ends as handled or as dropped with a reason (queue
// full, flow limit, re-dispatch too deep, Close out of time), and
// Stats.Frames == Stats.Handled() + Stats.Dropped() once the dispatcher is
// closed. A source's buffer (a file arena, a ring block) is released once
// every frame in it has been handled or dropped; a handler that keeps bytes
// calls [Packet.Retain]. A handler panic is recovered, counted and reported
// through Config.OnPanic, and the worker goes on.
//
// # Where FreeBSD and Linux names live here
//
//	FreeBSD / Linux                          here
//	m_pkthdr.flowid, M_HASHTYPE_*            Packet.FlowID, Packet.HashType (hash.HashType)
//	ether_demux                              Classifier.Classify
//	rss_hash_ip4_4tuple and friends          hash.NewTuple4, hash.NewTuple2, Toeplitz.Sum, Toeplitz.SumIPv4Tuples
//	rss_mbuf_software_hash_v4/v6             the classifier's choice of tuple and HashType
//	rss_key (default: the Microsoft key)     Config.Key (default: random), hash.MicrosoftKey
//	netisr_select_cpuid                      selectWorker in producer.go (step 3 above)
//	NETISR_POLICY_SOURCE/FLOW/CPU            PolicySource, PolicyFlow, PolicyCPU
//	netisr_default_flow2cpu                  PolicyFlow
//	rss_m2cpuid, rss_getbucket, rss_getcpu   PolicyRSS, flowid & (Buckets-1), Dispatcher.Table
//	NETISR_DISPATCH_DIRECT/HYBRID/DEFERRED   Direct, Hybrid, Deferred
//	net.isr.maxthreads, bindthreads          Config.Workers, Config.CPUs
//	net.isr.defaultqlimit, maxqlimit         Config.QLimit (DefaultQLimit), MaxQLimit
//	netstat -Q (WSID .. Handled)             Dispatcher.Stats, Stats.WriteReport
//	rps_sock_flow_table, rps_record_sock_flow  Dispatcher.SetDesired (flowtable.Desired)
//	rps_dev_flow_table, last_qtail           each Input's flowtable.Table, Entry.LastTail
//	input_queue_head, input_queue_tail       Worker head and tail counters
//	skb_flow_limit (FLOW_LIMIT_HISTORY)      Config.FlowLimit
//	ethtool -X (RETA)                        Dispatcher.SetTable, SetBucket
//
// Where the library differs: dispatch defaults to DEFERRED (FreeBSD's
// default, DIRECT, keeps the packet on the interrupted CPU, which a single
// user-space reader would turn into no steering at all), and DIRECT still
// selects a workstream, to account the frame there; a TCP segment too short
// for its ports gets a 2-tuple hash and ReasonShortTransport where FreeBSD
// gives it no hash, so it still follows its addresses; the default key is random, not the public
// Microsoft key (a known key lets anyone aim every flow at one worker);
// reprogramming the table never reorders a flow (FreeBSD's netisr cannot
// change its configuration at run time at all); and a rebalancer
// (Config.Rebalance) moves buckets by measured load, which neither kernel
// does.
package steer
