// Package steer spreads received frames over per-CPU worker goroutines so
// that every flow is handled by one worker, in order: FreeBSD's netisr and
// RSS (and Linux's RPS/RFS) in user space, for a single-queue source such
// as a capture file or an AF_PACKET ring. docs/freebsd-linux.md puts each
// kernel name beside the one that plays its part here.
//
// # The path of a frame
//
// A [Source] delivers frames in batches; an [Input] ([Dispatcher.NewInput],
// or the one [Dispatcher.Run] makes) takes each frame through four steps:
//
//  1. Classify (ether_demux): [Classifier.Classify] walks the headers, VLAN
//     tags, shims (PPPoE, MPLS) and, with [TunnelsInner], tunnels into a
//     [FlowKey]. It never drops: a frame it cannot read fully gets a
//     counted [Reason] and is delivered anyway.
//  2. Hash: unless the source gave one, the Toeplitz (or SipHash) hash of
//     the 4-tuple or 2-tuple ([HashConfig]) is the flowid.
//  3. Select (netisr_select_cpuid): the [Policy] picks the worker, by
//     default from an indirection table that can be reprogrammed
//     ([Dispatcher.SetTable]); with [RFSConfig] a flow moves to the worker
//     its consumer named ([Dispatcher.SetDesired]).
//  4. Hand off: the [DispatchMode] queues the frame to its worker in
//     batches of up to [BatchSize], or runs the handler inline.
//
// [FlowKey] is a flow's key (a map key); [Classification] is what the
// classifier finds; [Packet] is what a handler gets; [Decision] is a trace
// record of one frame's steering (Config.Trace).
//
// # Workers, order and accounting
//
// Each [Worker] is a goroutine, optionally pinned to a CPU, with a bounded
// queue ([QueueConfig], [Overflow]). [New] takes a stateless [Handler];
// [NewPerWorker] gives each worker a state, which may implement [Ticker],
// [Mover] and io.Closer.
//
// A flow's frames are handled by one worker at a time, in the order its
// input received them: a flow changes worker (a reprogrammed bucket, RFS,
// the rebalancer) only once the old worker has handled its frames already
// queued there, Linux's last_qtail rule. An input that waits for room (a
// file's) waits for that too, since it keeps the queues full; a live input
// keeps sending the flow to the old worker until its queue has let the
// last frame go, as Linux does.
//
// Every frame handed in is handled, dropped with a reason or panicked;
// once the dispatcher is closed, Stats.Frames == Handled() + Dropped() +
// Panicked(). A panic in a user callback is recovered, counted and logged.
// A source's buffer is released once its frames are done ([Packet.Retain]
// keeps it). [Stats.WriteReport] prints the counters as `netstat -Q` does.
package steer
