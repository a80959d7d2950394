// Package bpfsteer builds the eBPF program that steers frames inside the
// kernel exactly as the library's user-space RSS policy does, for a
// PACKET_FANOUT_EBPF group of AF_PACKET sockets (one socket per worker),
// or, the same program at the XDP hook, for AF_XDP sockets sharing one
// UMEM on one queue (see "The XDP hook" below).
//
// FreeBSD does this step in netisr under options RSS: ip_nh's
// rss_soft_m2cpuid_v4 (_v6 for IPv6) gives the mbuf a flowid through
// rss_mbuf_software_hash_v4/_v6 and maps it through the RSS indirection
// table to a CPU with rss_hash2cpuid. Linux's RPS does the same with
// skb_get_hash and rps_map, indexed by the hash's high bits
// (reciprocal_scale) with no bucket table. Here
// the kernel runs our program on each frame the fanout group receives
// (fanout_demux_bpf in net/packet/af_packet.c) and delivers the frame to
// socket number "return value modulo group size". The program returns
// Table[flowid & (len(Table)-1)], so a frame lands on the worker that the
// user-space dispatcher, with the same hash configuration and table, would
// pick. It is built instruction by instruction with cilium/ebpf's asm
// package: no C compiler is needed, and [Instructions] shows the result.
//
// It honours every field of steer.HashConfig ([Options] mirrors them): the
// hash function (Toeplitz or SipHash) and its key, the hash-type set, the
// symmetric order, and tunnel decapsulation with the VXLAN ports. What it
// cannot do, [Instructions] and [New] refuse with [ErrOptions] (a VXLAN port
// list longer than [MaxVXLANPorts]), never steering differently.
//
// # What the program does, step by step
//
//  1. Find the frame. A socket filter sees the skb, not the frame: on
//     receive, eth_type_trans has pulled the 14-byte MAC header, so
//     skb->data is the network header and skb->protocol holds the
//     EtherType; __netif_receive_skb_core has also moved an outermost
//     802.1Q/802.1ad tag into skb->vlan_tci (ring readers see it in
//     tp_vlan_tci) and closed the gap, so the bytes from the MAC header on
//     are exactly the frame user space reads from the ring. A transmitted
//     frame seen by the tap (pkt_type PACKET_OUTGOING, from
//     dev_queue_xmit_nit) has skb->data at the MAC header instead, and
//     skb->protocol is whatever the sender set. The program therefore takes
//     the EtherType from skb->protocol on receive and from frame offset 12
//     on transmit, and reads everything after it with bpf_skb_load_bytes
//     relative to skb->data, which also reads paged (non-linear) skbs.
//     BPF_PROG_TEST_RUN builds a receive-like skb (eth_type_trans, data at
//     offset 14) but strips no VLAN tag: a test frame carries all its tags
//     inline, and the program walks them like any inner tag.
//  2. Walk the VLAN tags (0x8100, 0x88a8, 0x9100), counting the one in
//     skb->vlan_tci (__sk_buff.vlan_present), up to [MaxVLANDepth] in all,
//     like steer's Classifier.ClassifyVLAN. More tags, a tag cut short: the
//     fallback socket ([Options.Fallback]).
//  3. Walk the shims to an IP header (rps_seg), always, as steer's shim.go
//     does: Cisco MetaData (0x8909, 8 bytes, the EtherType after it last;
//     not twice in a row), a PPPoE session (0x8864: version and type 0x11,
//     code 0, its length bounding the payload, PPP protocol 0x21 or 0x57,
//     compressed or not), an MPLS label stack (0x8847, 0x8848, rps_mpls)
//     to the bottom-of-stack entry, then IPv4, IPv6 or a pseudowire control word
//     and an Ethernet frame, whose VLAN tags are walked (rps_eth) and after
//     which the walk starts again. Each label, session, control word and
//     inner tag counts towards [MaxEncaps]. Anything else: not IP, the
//     fallback socket.
//  4. The IP header (rps_ip). IPv4: version 4, IHL at least 5 and the
//     header within the packet, total length at least the header length
//     or zero (BIG TCP: what is left; else the fallback); the packet ends
//     at the smaller of the total length and what is left; the transport
//     header starts after the options. IPv6: version 6, the packet cut at
//     40 + payload length when that is non-zero and shorter; hop-by-hop, routing and destination
//     options ((len+1)*8 bytes), AH ((len+2)*4 bytes) and fragment headers
//     (8 bytes) walked, at most eight, each within the packet, else the
//     fallback; an atomic fragment (offset 0, M clear) is walked through. A
//     fragment (IPv4 MF or offset, a real IPv6 fragment header) hashes its
//     2-tuple.
//  5. The tuple, by the hash types ([Options.Types], FreeBSD's
//     rss_gethashconfig): TCP's ports when its type is in the set, UDP's
//     and SCTP's when UDP's is, if four bytes of transport header lie
//     within the packet; otherwise the 2-tuple. The tuple is FreeBSD's:
//     source and destination address, then source and destination port,
//     network byte order, 8, 12, 32 or 36 bytes.
//  6. With [Options.Tunnels], a tunnel is opened (rps_tun), as steer's
//     tunnel.go does, up to [MaxTunnelDepth] inside one another: UDP to a
//     VXLAN port ([Options.VXLANPorts]), to 6081 (GENEVE), 2152 (GTP-U) or
//     6635 (MPLS over UDP), GRE (protocol 47, with transparent Ethernet,
//     ERSPAN types I, II and III and Cisco MetaData) and IP in IP (4, 41);
//     never a fragment. The flowid of the
//     IP header around the tunnel is computed first; the tunnel's payload
//     is then walked from step 3. If anything inside fails (a header cut
//     short or malformed, a payload that is not IP, one header past
//     MaxEncaps), that flowid is the frame's: the deepest IP header read
//     whole, as in user space.
//  7. With [Options.FollowFragments] (steer.FragmentsFollow), a first
//     fragment is walked as a whole packet (an IPv6 one through its
//     extension headers, unless one after its fragment header cannot be
//     walked: then as a fragment), never into a tunnel, and after the hash
//     its flowid is written to an LRU hash map ([FragMapName],
//     wire.FragmentTableSize entries) under its datagram's identity:
//     addresses, identification, and IPv4's protocol; a later fragment
//     found there takes that flowid unless the entry is older, in kernel
//     time, than wire.FragmentTimeout (IPv4) or wire.FragmentTimeout6
//     (IPv6). User space keeps its table per input and ages it in capture
//     time; the map is shared by the CPUs that run the program and
//     evicts the least recently used entry, so under a flood the two may
//     forget different datagrams.
//  8. With [Options.Symmetric], swap the endpoints when the source
//     (address, port) is above the destination's, compared big-endian
//     (hash.Canonical's order).
//  9. Hash (rps_hash). Toeplitz: the hash is linear, so the hash of a
//     tuple is the XOR of one 32-bit contribution per byte: T[i][v], the
//     hash of byte value v at position i. New computes T from the key with
//     package hash and stores it in an array map ([ToeplitzMapName], one
//     36 KiB value, frozen); the program does one load per tuple byte,
//     unrolled, the byte value (0..255, as the verifier knows from the byte
//     load) times four giving the bounded offset. SipHash-2-4: the state
//     after the key comes from a frozen map ([SipHashMapName]); the
//     rounds are unrolled, and the flowid is the low 32 bits, as package
//     hash computes it.
//  10. Look the bucket up in the indirection table ([TableMapName], one value
//     of len(Table) 32-bit words) and return the worker.
//
// # How it is built, for the verifier
//
// The program is a main function and six of its own (rps_seg, rps_mpls,
// rps_eth, rps_ip, rps_tun, rps_hash), called with BPF-to-BPF calls: the
// walk is unrolled to fixed depths (tunnels one depth at a time, label
// stacks, tags, extension headers and pseudowires each to its bound), and
// each depth calls the same functions instead of repeating their code.
// The functions share a parse state in the main function's stack (the next
// header's offset and kind, the packet's end, the header count, the tuple,
// the saved flowid). Every packet read is bpf_skb_load_bytes (at the XDP
// hook bpf_xdp_load_bytes) after a check against the end of the header's
// packet, so a bounds check precedes every access and the helper checks
// again at run time.
//
// The verifier follows every path through the program, pruning a path when
// its state matches one it has followed. So the program keeps out of its
// state what does not change the outcome: the offsets and the header count
// start from a zero the verifier cannot see through (they would otherwise
// be constants that differ on every path), the count is checked only where
// it decides the outcome (before each IP header), a tunnel's kind, not its
// port, is carried to rps_tun, and the ports of a 2-tuple are zero, so the
// hash branches on the tuple's family, not its length (a zero byte adds
// nothing to a Toeplitz hash; SipHash puts the length in its last word).
// Loading needs CAP_BPF (or root), as BPF-to-BPF calls do.
//
// # What is not the same as user space
//
// Frames user space gives HashType NONE (non-IP, malformed link or IP
// header, one header past MaxEncaps outside any tunnel) go to
// [Options.Fallback]; user space places them with the SOURCE policy, which
// the kernel cannot know. The agreement covers every hashed frame, and is
// tested frame by frame with BPF_PROG_TEST_RUN over random frames of every
// encapsulation and every configuration, frames at each limit, and frames
// cut at every byte, and on a real fanout group (on loopback in a private
// network namespace).
//
// User space must classify what the ring delivers: the frame from its MAC
// header with ClassifyVLAN when the ring reports a stripped tag
// (TP_STATUS_VLAN_VALID), Classify otherwise, and with a snap length that
// keeps the headers, tunnel headers and inner headers included: a frame cut
// inside its headers is classified on what is left, while the program sees
// all of it.
//
// The indirection table's length is fixed when the program is built (the
// mask is an immediate); [Program.SetTable] replaces its contents with one
// map update that the next frame sees.
//
// # The XDP hook
//
// With [Options.Hook] set to [HookXDP], [NewXDP] loads the same walk and
// hash as a BPF_PROG_TYPE_XDP program, run on each frame the device it is
// attached to receives, on any of its queues, before the kernel builds an
// skb. What differs:
//
//   - First of all, a frame that arrived on another receive queue
//     (xdp_md.rx_queue_index) than [Options.Queue], the queue the AF_XDP
//     sockets are bound to, is passed to the kernel stack unexamined and
//     counted: the kernel accepts a frame redirected to an AF_XDP socket
//     only from the device and queue the socket is bound to and drops it
//     otherwise (net/xdp/xsk.c, xsk_rcv_check), so steering it would lose
//     it.
//   - The context is the xdp_md: the frame from its MAC header, so every
//     offset is from the MAC header, the EtherType is read at offset 12
//     and every VLAN tag is inline (no tag has been moved out of band:
//     step 2 counts from zero). Bytes are read with bpf_xdp_load_bytes,
//     which also reads the fragments of a multi-buffer frame, and the
//     packet ends at bpf_xdp_get_buff_len.
//   - The end is bpf_redirect_map(&rps_xsks, worker, XDP_PASS) on the
//     XSKMAP ([XSKMapName]) of AF_XDP sockets, one slot per worker, filled
//     with [XDP.SetSocket]; the program returns what the helper returns:
//     XDP_REDIRECT, or XDP_PASS when the slot holds no socket.
//   - Frames not hashed go to [Options.Fallback] as on the socket filter
//     (on a single-queue device they all come from one queue, the one
//     source the SOURCE policy would name), or with [Options.PassUnhashed]
//     to the kernel stack: an AF_XDP socket takes the frames redirected
//     to it away from the kernel, so ARP and the like must be passed for
//     the host to keep working on that interface.
//   - With [Options.PassHost], right after the queue check, the frames
//     the host itself needs are passed to the kernel stack, counted: ARP,
//     IPv6 neighbour discovery (ICMPv6 types 133 to 137 right after the
//     IPv6 header) and untagged IPv4 and IPv6 packets to one of
//     [Options.HostAddrs], looked up in a hash map ([HostMapName]). On an
//     interface with addresses the host then keeps answering on them, its
//     connections included, while the sockets take the rest.
//   - Counters, in a per-CPU array ([XDPStatsMapName]) read and summed by
//     [XDP.Counters]: the frames redirected to each socket, the frames not
//     hashed passed to the kernel and those sent to the fallback, the
//     host's frames passed, the frames whose slot held no socket and those
//     of another queue (both passed to the kernel). Every frame the
//     program sees is in one of the redirected, passed, host, no-socket
//     and other-queue counts.
//   - [XDP.Sync] waits until every run of the program that began before it
//     has ended (an RCU grace period: the kernel waits for running
//     programs after each update of an array of maps, and XDP runs inside
//     an RCU read-side section), so a table change followed by Sync has a
//     moment after which no frame is steered by the old table, which
//     ordered table changes build on.
//
// The agreement tests run for both hooks over the same frames and
// configurations (the XDP program built to return the socket index
// instead of redirecting), and the real XDP program is tested with
// BPF_PROG_TEST_RUN for its verdicts and counters with sockets in some
// slots, and, with an xdp_md context naming each receive queue of a
// two-queue veth, for the frames of its queue steered and the others
// passed.
package bpfsteer
