// Package kgroup binds a group of sockets to a dispatcher and lets the
// kernel steer it: one socket per worker, and a kernel program that picks
// each frame's socket, so that the kernel's choice of socket is the
// choice of worker. It is the mechanism the live sources share, written
// once over a small interface that each socket family implements
// ([Kernel], [Socket] and [Program]): an AF_PACKET fanout group with its
// PACKET_FANOUT_EBPF program (steer/afpacket), AF_XDP sockets on one
// queue with an XDP program that redirects through an XSKMAP
// (steer/afxdp). Their NewSteering functions return a [Steering].
//
// # The group and its workers
//
// Worker i reads socket i itself ([steer.Dispatcher.RunOnWorkers], which
// [Steering.Run] calls) and, with DIRECT dispatch, classifies and handles
// each frame where it was read: each frame is classified once, and the
// dispatcher's stats keep their netstat -Q shape, with every socket's
// kernel counters shown as a source. The family's program is built from
// the dispatcher's indirection table and its whole hash configuration
// (the algorithm, Toeplitz or SipHash, and key, the hash types,
// Symmetric, and the tunnels opened with their VXLAN ports; MPLS and
// PPPoE always), so the kernel picks the worker the user-space RSS policy
// would: for every hashed frame, Packet.Worker ==
// Table()[FlowID & (buckets-1)]. A configuration the program cannot
// honour (another policy than rss, more VXLAN ports than it matches) is
// an error wrapping steer.ErrConfig that says what to change, never a
// group steered otherwise than the dispatcher would. The frames the
// program cannot hash (ARP and other non-IP frames, malformed headers)
// go to socket Options.Fallback, as the SOURCE policy would place them;
// a family whose program takes frames from the kernel stack may pass
// them to the stack instead (Options.PassUnhashed). Some families also
// steer by rules of their own (an AF_PACKET fanout by the skb's hash, by
// load, by CPU): the group is then bound to the workers all the same, and
// the table steers nothing.
//
// # Ordered table changes
//
// [Steering.SetTable] changes the table in the kernel and in the
// dispatcher at once without reordering any flow. After the kernel's
// table changes, frames of a moved bucket go to the new worker's socket,
// but frames that came before may still sit in the old socket's ring, not
// yet read or handled by the old worker; handled at once by the new
// worker, the newer frames would overtake them. So, for each moved
// bucket:
//
//  1. Before the switch, the new worker is told to hold the bucket's
//     frames back: while a hold is on, its reader classifies each frame it
//     reads (the only time a frame is classified twice) and copies those
//     of held buckets aside instead of dispatching them.
//  2. The kernel's table is updated (one map write, [Program.SetTable]),
//     and the switch waits for an RCU grace period ([Program.Sync]): every
//     run of the program that began before has ended, and with it the
//     delivery of its frame into the socket's ring.
//  3. The old worker's position is read: how many frames its ring had
//     received then ([Socket.Position]: tp_packets - tp_drops of an
//     AF_PACKET socket, the RX ring's producer index of an AF_XDP one).
//  4. The old worker's reader publishes, each time it comes back for
//     more, how far it has read; everything before was handled (DIRECT).
//     Once that reaches the target (positions wrap at 2^32), the old
//     worker has handled every frame of the bucket it will ever get, and
//     the new worker dispatches the held frames, in arrival order, before
//     anything it reads later.
//
// A hold normally lasts until the old worker's next read. It is lifted
// early, and counted in [Stats], after Options.HoldTimeout (an old worker
// that stopped reading) or past Options.MaxHeld bytes, or when a switch
// could not wait for its grace period ([ErrNoGracePeriod]): the only cases
// in which a flow may be reordered. Without a hold a reader's cost is one
// atomic store and two atomic loads per batch.
//
// # Stopping and closing
//
// [Steering.StopIntake] stops the kernel passing frames to the sockets and
// returns once none can reach their rings, so that the rings can be read
// dry before the counters are final. [Steering.Close] detaches the
// program; it does not close the group or the dispatcher. Both may be
// called at any time, and Close wakes a SetTable waiting for its holds or
// its turn. A Steering has no goroutine of its own.
//
// # Counting how flows move
//
// [WorkerChanges] wraps a handler and counts how often a flow's frame is
// handled by another worker than its previous frame: zero in a steady run
// of a mode that keeps flows together, and the measure of what a mode
// that spreads by load does to them.
package kgroup
