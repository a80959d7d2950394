// Package afxdp is a live capture source for the steer dispatcher: a Linux
// AF_XDP socket on one NIC queue, fed by an XDP program, in pure Go
// (golang.org/x/sys/unix and cilium/ebpf, no cgo).
//
// # AF_XDP or AF_PACKET
//
// An AF_XDP socket takes the frames it receives: the XDP program redirects
// them from the driver (or, on the generic hook, from the skb path) into
// the socket, and the kernel stack never sees them. It suits a port given
// over to capture, or an inline forwarder that sends on what it keeps. An
// AF_PACKET socket (package steer/afpacket) is a tap beside the stack: the
// host keeps receiving every frame and the socket gets a copy. Use AF_XDP
// where the frames are the application's, AF_PACKET to watch a port the
// host still uses.
//
// So an interface that has addresses (any but IPv6 link-local ones) is
// refused by default (Config.Host HostRefuse, ErrHostAddrs): on a
// server's main interface the sockets would take its ARP and its
// operator's connections. With HostPass the program passes the frames
// the host needs to the kernel stack, counted: ARP, IPv6 neighbour
// discovery and packets to the interface's addresses; with HostTake the
// sockets take them too. Open's socket takes the frames the library
// cannot hash (ARP and other non-IP frames, malformed headers: HashType
// NONE in user space) as it takes the rest, and a Steering sends them to
// its fallback socket (kgroup.Options.Fallback, default 0), as the SOURCE
// policy would: all come from the one queue. With PassUnhashed
// (Config.PassUnhashed, kgroup.Options.PassUnhashed) the program passes
// them to the kernel stack instead, counted. Either option makes Open
// attach the library's steering program with one socket rather than its
// smallest one, and Stats.PassedToKernel (a Steering's host_passed and
// unhashed_passed) count what it passes. The interface's other queues go
// to the stack.
//
// Config.Promisc holds promiscuous mode while the socket (or group) is
// open, through a packet socket's PACKET_MR_PROMISC membership.
//
// # The rings
//
// Open registers a UMEM, an area of Config.NumFrames chunks of
// Config.FrameSize bytes, with the socket (XDP_UMEM_REG), and maps four
// rings the kernel shares with user space. Each has a producer and a
// consumer index, a flags word and a power-of-two array:
//
//	FILL        user space -> kernel: chunks the kernel may write frames into
//	RX          kernel -> user space: descriptors (address, length) of frames
//	COMPLETION  kernel -> user space: chunks sent on a TX ring
//	TX          user space -> kernel: frames to send (see Sending)
//
// Each index has one writer. The reader of an index loads it with an
// acquire load (atomic.LoadUint32) before it touches the entries it
// covers; the writer stores it with a release store (atomic.StoreUint32)
// after it wrote the entries (a producer) or finished reading them (a
// consumer). So the FILL ring's addresses are in memory before the kernel
// can see its producer move, and an RX descriptor is read only after the
// producer index that covers it was loaded; the kernel's side
// (net/xdp/xsk_queue.h) pairs its barriers with these.
//
// Every chunk starts in the FILL ring, which has twice NumFrames entries
// (the kernel stores its consumer index lazily, xskq_cons_release), so a
// chunk coming back always finds a slot. The kernel writes a frame 256
// bytes (XDP_PACKET_HEADROOM) into a chunk it took from FILL and puts its
// descriptor on the RX ring; a frame longer than FrameSize-256 bytes is
// dropped (rx_dropped). When the FILL ring is empty the kernel drops
// (rx_dropped in copy mode, the driver's own drop in zero copy) and counts
// rx_fill_ring_empty_descs; when the RX ring is full it drops and counts
// rx_ring_full.
//
// # Zero copy and release
//
// ReadBatch waits for descriptors with poll(2) and, like a TPACKET_V3 block
// that is handed over full or at its timeout, gathers them: it hands the
// ring over once it holds a quarter of its entries or Config.BatchTimeout
// (1 ms by default) after the reader saw its first frame, so that one
// wake-up serves many batches (docs/performance.md measures why). It hands
// the frames out as
// steer.Frame values whose Data point INTO the UMEM. The RX slots are given
// back at once (the descriptors are read), but each frame's chunk stays
// user space's until the batch's Release puts the batch's chunks back into
// the FILL ring, from any goroutine, in any order. Handlers that keep bytes
// beyond Release must copy them, or the source can run with Config.Copy,
// which copies each batch into a pooled buffer and gives its chunks back as
// soon as it is read. Chunks held by handlers are chunks the kernel cannot
// fill: a handler that holds NumFrames frames stops the socket, and the
// kernel drops and counts until a batch is released.
//
// With need-wakeup (XDP_USE_NEED_WAKEUP, always asked for), a zero-copy
// driver that ran out of FILL buffers sets XDP_RING_NEED_WAKEUP in the
// FILL ring's flags and stops until user space kicks it. A Release that
// refills the ring and sees the flag kicks it (a non-blocking recvfrom),
// and poll does as well.
//
// # Copy and zero-copy mode
//
// The mode is chosen at bind. In copy mode (XDP_COPY) the kernel copies
// each frame into a chunk; every device has it. In zero-copy mode
// (XDP_ZEROCOPY) the driver DMAs frames straight into the UMEM; mlx5, ice,
// i40e, ixgbe, igc, virtio-net and others have it, veth has not.
// Config.Bind's default, BindAuto, lets the kernel try zero copy and fall
// back to copy; Source.Info reports the mode in use. Independently, the XDP
// program runs in the driver (native, XDP_FLAGS_DRV_MODE) or on the
// generic hook after the skb is built (generic, XDP_FLAGS_SKB_MODE):
// Config.Attach's default tries native and falls back to generic, and
// Info.Attach says which. The program is attached through a BPF link, so it
// goes away with Close or with the process.
//
// What XDP sees is the frame as the driver received it: an 802.1Q tag the
// NIC stripped into its descriptor (rx-vlan-offload) is not in Data and is
// not reported (XDP has no field for it), a tag left in the frame is in
// Data. Frames carry no kernel timestamp: ReadBatch stamps each batch with
// the time it was read.
//
// # Filters
//
// Config.Filter runs a classic BPF program in user space on each frame,
// after the frame has left the kernel (the XDP program cannot run classic
// BPF, and the socket has no SO_ATTACH_FILTER hook). Rejected frames are
// counted (Stats.Filtered, SourceStats.Filtered) and their chunks go
// straight back to the FILL ring; unlike an AF_PACKET socket filter, a
// rejected frame is not left to the kernel stack: the XDP program already
// took it.
//
// # Close
//
// Close may be called at any time: it wakes a reader blocked in poll (an
// eventfd in the same poll set) and waits for it to leave; ReadBatch then
// returns ErrClosed, which wraps net.ErrClosed. Close detaches Open's
// program, so the queue's frames go to the stack again. Frames still held
// by handlers stay valid: the rings and the UMEM are unmapped and the
// socket closed only when the last batch is released; then nothing is left
// (no mapping, socket, program, map or link). The kernel lets go of the
// queue a moment after the socket is closed (after an RCU grace period),
// so Open retries a busy queue for up to a second.
//
// To read a ring dry before closing (so that every frame the socket
// received is handled), StopIntake first: it detaches the program and
// waits for an RCU grace period, so that no frame reaches the ring after
// it returns, while the queue's frames go to the kernel stack again; then
// read until ReadBatch returns empty batches, and Close. A Steering has
// its own StopIntake for its group. Info.Attach is AttachNone once the
// program is gone, and SourceStats keeps the mode the socket received in,
// for a final report.
//
// # Shared UMEM
//
// OpenGroup opens n sockets on one queue that share one UMEM
// (XDP_SHARED_UMEM): the first registers the UMEM and creates its FILL and
// COMPLETION rings, the others bind with the first one's descriptor and
// have an RX ring each. The kernel keeps one FILL and one COMPLETION ring
// per UMEM and queue, and each ring is single-producer, single-consumer.
// Every socket's frames come from the one FILL ring, and every socket's
// releases, from whichever worker goroutine handles them, go back into it:
// the producer side is serialised by a mutex, so that exactly one
// goroutine at a time writes entries and publishes the producer index. A
// group's chunks are the group's: a frame read by socket 2 may be in a
// chunk socket 0's frame used before.
//
// A group has no program until a Steering attaches one whose XSKMAP holds
// the sockets, slot i for socket i; an XDP program redirects a frame to a
// slot only if the socket there is bound to the frame's device and queue.
// A socket is released by the kernel (taken out of every XSKMAP) when its
// Source is torn down, except the first: its mappings of the FILL and
// COMPLETION rings keep it until the group's last socket is torn down. The
// attach resolves an interface index in the calling thread's network
// namespace, so it is refused from another namespace than the sockets'.
//
// # Steering in XDP
//
// Linux's own way to spread frames over CPUs at the XDP hook is a CPUMAP
// (BPF_MAP_TYPE_CPUMAP, kernel/bpf/cpumap.c): the program redirects a
// frame to a CPU, whose kthread builds the skb there (with GRO since
// 6.15). It is XDP's RPS, but the program must compute its own hash and
// table; NewSteering redirects to sockets instead, with the dispatcher's
// hash and table.
//
// NewSteering binds a Group to a dispatcher with one worker per socket, as
// a kgroup.Steering (package steer/kgroup, the kernel-steered group that
// afpacket's fanout groups share): it loads the library's steering
// program at the XDP hook (internal/bpfsteer), built from the
// dispatcher's indirection table and hash configuration, puts socket i in
// slot i of its XSKMAP and attaches it through a BPF link. For every
// hashed frame the program redirects to socket Table()[FlowID &
// (buckets-1)], the worker the user-space RSS policy picks; Run has each
// worker read its own socket, and with DIRECT dispatch the frame is
// classified and handled there. SetTable changes the table without
// reordering any flow: the switch is one map update followed by an RCU
// grace period (every run of the program that began before has ended, and
// so has the NAPI poll or generic receive that published its frames), and
// a socket's position is its RX ring's producer index, which its reader
// reaches when its consumer index does.
//
// Frames the program cannot hash go to the fallback socket, or with
// kgroup.Options.PassUnhashed to the kernel stack (the rule above). The
// Steering's Stats.Kernel counts, under these names, the frames the
// program redirected to socket i (redirected_i), the frames it could not
// hash that it passed to the stack (unhashed_passed) or sent to the
// fallback (unhashed_fallback, also in redirected_i), the host's frames
// passed with HostPass (host_passed), those whose slot held no socket
// (no_socket: a closed socket, passed to the stack) and those of other
// queues (other_queue, below). Every frame the program sees is in exactly
// one of redirected_i, unhashed_passed, host_passed, no_socket and
// other_queue: the tests check that the sum is the interface's
// rx_packets, and each socket's Received its redirected_i.
//
// The program runs on every frame of the interface it is attached to, on
// whatever queue it arrives, but a socket accepts only frames of the
// device and queue it is bound to (the kernel drops a frame redirected to
// a socket of another queue). So the program steers the frames of the
// group's queue only and passes those of the other queues to the kernel
// stack, unexamined, counted: on a multi-queue NIC the dispatcher sees one
// queue's share of the traffic. To steer it all, send every frame to the
// group's queue (ethtool -L combined 1, or flow rules), or use a
// single-queue device such as veth.
//
// The Steering's Close detaches the program (the link goes, and the
// queue's frames go to the kernel stack again), empties the XSKMAP and
// unloads the program; the group stays open, and a new Steering may take
// it. Its StopIntake detaches the program alone and waits for a grace
// period, so that the sockets' rings can be read dry first; the program's
// counters then stop, and each socket's Received, once its ring is dry, is
// its redirected_i.
//
// # Counters
//
// Stats reads the socket's XDP_STATISTICS (rx_dropped, rx_invalid_descs,
// rx_ring_full, rx_fill_ring_empty_descs), which the kernel keeps per
// socket from bind and does not reset on read, beside the frames delivered
// and filtered. Once the RX ring is drained, every frame the program
// redirected to the socket is in exactly one of Delivered, Filtered,
// RxDropped and RxRingFull (Stats.Received): the tests check that this
// adds up to the interface's own rx_packets. rx_fill_ring_empty_descs
// counts events (once per frame in copy mode, per refill attempt in a
// zero-copy driver), not frames, so it is not a drop count. It belongs to
// the FILL ring, which a group's sockets share, and the kernel reports the
// same count on each: the group's first socket (the ring's owner) alone
// carries it, in Stats and SourceStats, and the others report zero, so
// that sums over the sockets count it once.
//
// # Sending
//
// The package receives. A socket that sends on a queue a Source holds
// must share the Source's UMEM (XDP_SHARED_UMEM: the kernel allows one
// UMEM per device and queue); Config.SendFrames sets chunks of the UMEM
// aside for it, which the FILL ring never gets. examples/forwarder sends
// that way, through a socket of its own (internal/xsk).
package afxdp
