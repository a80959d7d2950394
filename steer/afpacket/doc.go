// Package afpacket is a live capture source for the steer dispatcher: a
// Linux AF_PACKET socket with a TPACKET_V3 receive ring, alone or in a
// kernel fanout group, in pure Go (golang.org/x/sys/unix, no cgo).
//
// # The ring
//
// Open creates a raw packet socket, switches it to TPACKET_V3 and asks the
// kernel for a ring of NumBlocks blocks of BlockSize bytes (PACKET_RX_RING),
// which it maps into the process. The kernel copies every received frame
// (up to the snap length) into the current block, behind a tpacket3_hdr
// that carries its length on the wire, the captured length, a timestamp and
// an out-of-band VLAN tag. When a block is full, or BlockTimeout passed
// since it was opened (tp_retire_blk_tov), the kernel marks the whole block
// TP_STATUS_USER and moves to the next one, in ring order. If that next
// block is still owned by user space the kernel freezes the ring and drops
// frames, counting them (tp_drops, tp_freeze_q_cnt), until the block comes
// back.
//
// # Zero copy and block release
//
// ReadBatch waits for the next block with poll(2), then walks its frames
// and hands them out as steer.Frame values whose Data point INTO the ring:
// nothing is copied. A block may be handed out over several batches of at
// most BatchSize frames. Each batch's Release drops a reference on its
// block; when the reader has walked the whole block and every batch from it
// has been released, the block's status word goes back to TP_STATUS_KERNEL
// and the kernel may fill it again. Blocks may be released in any order and
// from any goroutine; the reader never takes a block that is still held
// from the previous lap around the ring (it waits for the release
// instead), so a block is never handed out twice. Handlers that keep bytes
// beyond Release must copy them, or the source can run in Copy mode, which
// copies each batch into a pooled buffer and returns the block to the
// kernel as soon as it has been walked. The kernel fills the blocks in
// turn, so a batch held long (a stuck handler's) holds the whole ring up
// once the kernel laps round to its block: every frame is dropped until it
// is released, whatever the dispatcher's stall timeout; not in Copy mode.
//
// Frames larger than the snap length (including the 64 KiB GSO/GRO
// super-frames that cross a veth with offloads on) are one frame each:
// len(Data) is the snapped length, Frame.WireLen the real one. An 802.1Q tag
// is not in Data: the kernel strips it before the packet taps run and the
// source reports it as Frame.VLAN (the 12-bit id) with HasVLAN. What the
// kernel knows of a frame's checksums is Frame.Checksum:
// TP_STATUS_CSUM_VALID (the NIC or the stack verified the transport
// checksum) is steer.ChecksumGood, TP_STATUS_CSUMNOTREADY (the checksum
// is left to offload: a frame this host, or a guest, sent) is
// steer.ChecksumPartial, so that steer.Config.VerifyChecksums checks only
// the others.
//
// # Filters
//
// Config.Filter is a classic BPF program the kernel runs on each frame
// before the ring (SO_ATTACH_FILTER): frames it rejects never reach user
// space and are not counted by the socket (tp_packets counts the frames
// that passed), and the frames it accepts are cut to its return value,
// clamped to Config.SnapLen. CompileFilter makes the program from tcpdump's
// syntax through package steer/filter, in the form libpcap gives a live
// Linux capture: since the kernel has taken the outer 802.1Q tag out of
// the frame before any filter runs, `vlan 100` is matched against the tag
// the socket sees out of band. In a fanout group every socket carries the
// filter once the group is complete (until then each drops everything, see
// Fanout); with FanoutEBPF the group's program picks the socket first and
// that socket's filter then decides, so the filter applies whichever
// socket a flow is steered to.
//
// # Counters
//
// The kernel's PACKET_STATISTICS counters are reset by every read, so
// Source.Stats adds them up. For TPACKET_V3, tp_packets counts every frame
// that passed the socket filter, including the tp_drops frames that found
// no room. Once the ring is drained, Stats.Delivered == Packets - Drops: the
// tests check that this, with the interface's own rx_packets, adds up
// exactly under TCP, UDP and 64-byte floods.
//
// # Close
//
// Close may be called at any time: it wakes a reader blocked in poll (an
// eventfd in the same poll set) and waits for it to leave; ReadBatch then
// returns ErrClosed, which wraps net.ErrClosed. Blocks still held by
// handlers stay valid: the ring is unmapped and the socket closed only when
// the last of them is released.
//
// # Fanout
//
// OpenGroup opens N sockets on one interface and joins them to one kernel
// fanout group (PACKET_FANOUT), the kernel's own way to spread one
// interface's frames over several rings. The first socket asks for an
// unused group id (PACKET_FANOUT_FLAG_UNIQUEID); the kernel reports it back
// and the others join it. FanoutHash (a symmetric flow hash the kernel
// computes for the fanout, not the skb's hash) and
// FanoutEBPF (a program's answer, see Group.SetEBPF) keep a flow on one
// socket; LB, RND and ROLLOVER spread by load; CPU and QM follow the
// receiving CPU or queue. A socket's index is its join order; when a member
// leaves the kernel moves the last member into its slot, so a group is
// closed as a whole.
//
// # Steering a group with the dispatcher
//
// NewSteering binds a group of N sockets to a dispatcher of N workers, as
// a kgroup.Steering (package steer/kgroup, the kernel-steered group that
// afxdp's XDP-steered groups share): worker i reads socket i itself
// and, with DIRECT dispatch, classifies and handles each frame where it
// was read, so the kernel's choice of socket is the choice of worker, each
// frame is classified once, and the stats keep their netstat -Q shape, with
// every socket's PACKET_STATISTICS shown as a source. What each mode
// promises about flows (FanoutMode.KeepsFlows):
//
//	hash      one worker per flow, both directions (the kernel's
//	          symmetric fanout hash), in order
//	ebpf      one worker per flow: the dispatcher's own flowid in the kernel
//	          (Toeplitz or SipHash, its hash types, inner headers with
//	          TunnelsInner), the worker Table()[flowid & (buckets-1)]; table
//	          changes in order
//	lb, rnd   frames dealt by turn or at random: flows are split and may be
//	          reordered across workers
//	rollover  fills one socket, then the next: flows split under load
//	cpu, qm   follow the receiving CPU or NIC queue: one worker per flow only
//	          as long as the NIC's RSS and IRQ affinity (for cpu, RPS and RFS
//	          too, which choose the CPU the tap runs on) keep the flow there
//
// kgroup.WorkerChanges counts how often flows change worker, to see what
// a mode does. In EBPF mode the Steering's SetTable moves buckets between
// workers without reordering (see package steer/kgroup): the switch is one
// update of the program's table map and an RCU grace period (the fanout
// runs the program and puts the frame in its ring, counting it in
// tp_packets, in one RCU read-side section), and a socket's position is
// tp_packets - tp_drops. With HYBRID or DEFERRED dispatch each worker
// re-steers what its socket delivers through the user-space table, and a
// flow is ordered only per socket.
package afpacket
