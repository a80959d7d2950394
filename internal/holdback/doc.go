// Package holdback changes the indirection table of a kernel-steered group
// of sockets without reordering any flow: the ordered table change of
// steer/kgroup's Steering, which steer/afpacket (a fanout group steered by
// an eBPF program) and steer/afxdp (AF_XDP sockets steered by an XDP
// program) share.
//
// Each socket of the group is read by one worker with DIRECT dispatch, and
// the kernel picks the socket of a frame by the table. After the kernel's
// table changes, frames of a moved bucket go to the new worker's socket,
// but frames that came before may still sit in the old socket's ring, not
// yet read or handled by the old worker. Handled at once by the new worker,
// the newer frames would overtake them. So [Holder.SetTable], for each
// moved bucket:
//
//  1. Before the switch, tells the new worker to hold the bucket's frames
//     back: while a hold is on, its [Reader] classifies each frame read
//     (the only time a frame is classified twice) and copies those of held
//     buckets aside instead of dispatching them.
//  2. Switches the kernel's table and waits for a grace period
//     ([Kernel.Switch]): once it returns, every frame steered with the old
//     table is in its socket's ring.
//  3. Reads each old worker's position ([Kernel.Position]): how many
//     frames its ring had received at the switch.
//  4. Waits: each Reader publishes, each time its worker comes back for
//     more, how far it has read; everything before was dispatched (DIRECT:
//     handled). Once every old worker a hold waits on has reached its
//     target, it has handled every frame of the bucket it will ever get,
//     and the new worker dispatches the held frames, in arrival order,
//     before anything it reads later.
//
// The socket families differ only in the primitives of steps 2 and 3,
// which steer/kgroup gives as a [Kernel]: the switch updates the program's
// table map and waits for an RCU grace period in both; a socket's
// position is tp_packets - tp_drops of PACKET_STATISTICS for AF_PACKET,
// the RX ring's producer index for AF_XDP. Positions are ring indices:
// counters that wrap at 2^32, compared modulo 2^32.
//
// A hold normally lasts until the old worker's next read. It is lifted
// early, and counted in [Stats], after Options.HoldTimeout (an old worker
// that stopped reading) or past Options.MaxHeld bytes: the only cases in
// which a flow may be reordered. The new worker's reader lifts its holds;
// one it has not come back for twice HoldTimeout after the switch (the
// workers are not running) SetTable lifts itself, counted as a timeout,
// so that SetTable returns without readers too; the frames the reader
// held back it hands out when it reads again, first. [Holder.Close] wakes
// every waiting SetTable with [ErrClosed].
//
// The reader's path without a hold costs one atomic store and two loads
// per batch: [Reader.BeforeRead] and [Reader.AfterRead] inline into the
// source's ReadBatch.
package holdback
