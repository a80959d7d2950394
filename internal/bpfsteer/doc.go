// Package bpfsteer builds the eBPF program that steers frames inside the
// kernel exactly as the library's user-space RSS policy does, for a
// PACKET_FANOUT_EBPF group of AF_PACKET sockets (one socket per worker).
//
// FreeBSD does this step in netisr: rss_mbuf_software_hash_v4/_v6 give the
// mbuf a flowid, and rss_m2cpuid maps it through the RSS indirection table
// to a CPU. Linux's RPS does the same with skb_get_hash and rps_map. Here
// the kernel runs our program on each frame the fanout group receives
// (fanout_demux_bpf in net/packet/af_packet.c) and delivers the frame to
// socket number "return value modulo group size". The program returns
// Table[flowid & (len(Table)-1)], so a frame lands on the worker that the
// user-space dispatcher, with the same key, table and options, would pick.
// It is built instruction by instruction with cilium/ebpf's asm package:
// no C compiler is needed, and [Instructions] shows the result.
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
//     skb->vlan_tci (__sk_buff.vlan_present), up to four in all, like
//     steer's Classifier.ClassifyVLAN. More tags, a tag cut short, a
//     non-IP EtherType: the fallback socket ([Options.Fallback]).
//  3. IPv4: version 4, IHL at least 5 and the header within the frame,
//     total length at least the header length (else the fallback). The
//     addresses go to the tuple. A fragment (MF or an offset) hashes its
//     2-tuple. The packet ends at the smaller of the total length and the
//     frame; the transport header starts after the options.
//  4. IPv6: version 6 (else the fallback), the addresses to the tuple, the
//     packet cut at 40 + payload length when that is non-zero and shorter
//     than the frame. Hop-by-hop, routing and destination options
//     ((len+1)*8 bytes), AH ((len+2)*4 bytes) and fragment headers (8
//     bytes) are walked, at most eight, each within the packet, else the
//     fallback. An atomic fragment (offset 0, M clear) is walked through; a
//     real one hashes its 2-tuple.
//  5. Ports: TCP always, UDP and SCTP with [Options.UDP4Tuple], when four
//     bytes of transport header lie within the packet; otherwise the
//     2-tuple. The tuple is FreeBSD's: source and destination address,
//     then source and destination port, network byte order, 8, 12, 32 or
//     36 bytes.
//  6. With [Options.Symmetric], swap the endpoints when the source
//     (address, port) is above the destination's, compared big-endian
//     (hash.Canonical's order).
//  7. Toeplitz: the hash is linear, so the hash of a tuple is the XOR of
//     one 32-bit contribution per byte: T[i][v], the hash of byte value v
//     at position i. New computes T from the key with package hash and
//     stores it in an array map ([ToeplitzMapName], one 36 KiB value,
//     frozen); the program does one load per tuple byte, unrolled, the
//     byte value (0..255, as the verifier knows from the byte load) times
//     four giving the bounded offset.
//  8. Look the bucket up in the indirection table ([TableMapName], one value
//     of len(Table) 32-bit words) and return the worker.
//
// # What is not the same as user space
//
// Frames user space gives HashType NONE (non-IP, malformed link or IP
// header) go to [Options.Fallback]; user space places them with the
// SOURCE policy, which the kernel cannot know. The agreement covers every
// hashed frame, and is tested frame by frame both with BPF_PROG_TEST_RUN
// and on a real fanout group (on loopback in a private network namespace).
//
// User space must classify what the ring delivers: the frame from its MAC
// header with ClassifyVLAN when the ring reports a stripped tag
// (TP_STATUS_VLAN_VALID), Classify otherwise, and with a snap length that
// keeps the headers: a frame cut inside its headers is classified on what
// is left, while the program sees all of it.
//
// The indirection table's length is fixed when the program is built (the
// mask is an immediate); [Program.SetTable] replaces its contents with one
// map update that the next frame sees.
package bpfsteer
