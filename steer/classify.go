package steer

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/rpsgo/rps/hash"
)

// The classifier is the ether_demux step of FreeBSD (sys/net/if_ethersubr.c)
// fused with the software RSS hash (rss_mbuf_software_hash_v4 and _v6 in
// sys/netinet/in_rss.c and sys/netinet6/in6_rss.c): it walks the link
// header and its VLAN tags, the IP header and, for IPv6, the extension
// header chain, reads the ports, and hashes the tuple FreeBSD would hash.
//
// Rules, in the order the classifier applies them:
//
//   - Link layer: Ethernet II. 802.1Q (0x8100), 802.1ad (0x88a8) and the
//     legacy QinQ TPID 0x9100 are walked, up to [MaxVLANDepth] tags,
//     counting a tag delivered out of band (ClassifyVLAN). The
//     VLAN IDs are recorded in the key and never hashed. An EtherType below
//     0x0600 (an 802.3 length) or anything but IPv4, IPv6 and the shims
//     below is [ReasonNonIP].
//   - Shims, always walked (shim.go): PPPoE sessions, MPLS label stacks,
//     with an MPLS pseudowire's Ethernet frame walked as a frame, and
//     Cisco MetaData. Their labels, session IDs and tags are recorded in
//     the key's Encaps, never hashed.
//   - Tunnels, opened with TunnelsInner (tunnel.go): after the transport
//     step below, a UDP packet to a VXLAN, GENEVE or GTP-U port, GRE, or
//     IP in IP (protocols 4 and 41) is decapsulated and its inner packet
//     classified by these same rules; the tuple hashed is the innermost.
//     A fragment is never decapsulated. If the inside cannot be hashed
//     (a tunnel header cut short, an inner frame that is not IP), the
//     frame is hashed by the tunnel's own IP header, with the reason.
//   - IPv4: the version must be 4, IHL at least 5 and the header within the
//     frame, the total length at least the header length, or zero: Linux's
//     BIG TCP (6.3 and later) sends a packet over 64 KiB with a total length
//     of zero, as a capture of a TSO send shows one, and tcpdump and
//     Wireshark then take the frame, as the classifier does. The packet ends at
//     the smaller of the total length and the frame (Ethernet padding is cut
//     off; a snap-length cut is tolerated). Options are skipped. A fragment
//     (MF set or a non-zero offset) is hashed over its addresses and its
//     ports are never read, as FreeBSD does; but with FragmentsFollow a
//     first fragment (offset zero, MF set) is read and hashed as a whole
//     packet would be (never decapsulated), Key.Fragment set, and the
//     dispatcher gives the later ones its flowid (fragment.go).
//   - IPv6: the version must be 6. The packet ends at the smaller of 40 +
//     payload length and the frame; a payload length of zero (a jumbogram,
//     or a sender that left it to the link) means the frame. Hop-by-hop (0),
//     routing (43), destination options (60), fragment (44) and AH (51)
//     headers are walked, at most maxIPv6ExtHeaders of them, each within the
//     packet. An atomic fragment (offset 0, M clear, RFC 6946) is walked
//     through as if unfragmented; a real fragment stops the walk: Proto is
//     the fragment header's next header (the same for every fragment of a
//     datagram) and the ports are not read. With FragmentsFollow a first
//     fragment (offset zero, M set) is walked through as an atomic one is,
//     and hashed as a whole packet would be, Key.Fragment set.
//   - Transport: TCP (6), UDP (17) and SCTP (132) ports are the first four
//     bytes of their header; those four bytes are all the classifier
//     requires (a TCP or UDP header cut short after its ports, as a small
//     snap length leaves it, still hashes with its flow). Fewer than four
//     bytes give [ReasonShortTransport] and a 2-tuple hash. Other protocols
//     (ICMP, GRE, ESP, ...) hash over their addresses, ports zero. FreeBSD
//     gives no hash at all to a TCP segment whose 20-byte header is not
//     whole, or, with UDP's 4-tuple type configured, to a UDP datagram
//     under 8 bytes (rss_mbuf_software_hash_v4/v6): in a kernel that means
//     a malformed packet, here mostly a capture's snap length, and keeping
//     such frames with their flow is what a capture's reader wants.
//   - Hash type, from the configured set (HashConfig.Types): TCP gets
//     RSS_TCP_IPV4/6 (4-tuple) when its type is in the set, else RSS_IPV4/6
//     (2-tuple, ports still recorded in the key). UDP likewise with
//     RSS_UDP_IPV4/6, which the default set leaves out. SCTP is hashed like
//     UDP; its 4-tuple hash is typed OPAQUE_HASH, because FreeBSD defines no
//     SCTP RSS hash type. FreeBSD hashes SCTP over its 2-tuple whatever the
//     set (in_rss.c); the 4-tuple under UDP's type is the library's choice,
//     so that many associations between two hosts can spread. Everything
//     else IP gets RSS_IPV4/6.
//   - Hash function: Toeplitz, or SipHash-2-4 over the same tuple.
//
// A frame whose link or IP header is unusable gets HashType NONE, FlowID 0
// and the reason; the classifier records what it could read before that
// (VLAN IDs, and the addresses and protocol when the fixed IP header is
// present with the right version).
//
// With Symmetric set, the two (address, port) endpoints are put in the
// order of [hash.Canonical] (lower first, comparing addresses as big-endian
// bytes, then ports) before the tuple is built; a 2-tuple compares addresses
// only. The key keeps the real source and destination.

// EtherTypes and IP protocol numbers the classifier knows.
const (
	etherTypeIPv4      = 0x0800
	etherTypeIPv6      = 0x86dd
	etherTypeVLAN      = 0x8100 // 802.1Q
	etherTypeQinQ      = 0x88a8 // 802.1ad service tag
	etherTypeQinQOld   = 0x9100 // pre-standard QinQ
	ethHeaderLen       = 14
	vlanTagLen         = 4
	ipv4MinHeaderLen   = 20
	ipv6HeaderLen      = 40
	vlanIDMask         = 0x0fff
	ipv4FragMask       = 0x3fff // MF flag and fragment offset
	ipv4OffsetMask     = 0x1fff // fragment offset
	ipv6FragOffMMask   = 0xfff9 // fragment offset and M flag (reserved bits ignored)
	ipv6FragOffMask    = 0xfff8 // fragment offset
	ipv6FragHeaderLen  = 8
	protoHopByHop      = 0
	protoIPIP          = 4 // IPv4 inside IP
	protoTCP           = 6
	protoUDP           = 17
	protoIPv6          = 41 // IPv6 inside IP
	protoRouting       = 43
	protoFragment      = 44
	protoGRE           = 47
	protoAH            = 51
	protoDstOpts       = 60
	protoSCTP          = 132
	maxIPv6ExtHeaders  = 8 // extension headers walked before ReasonBadExtHeader
	transportPortBytes = 4 // source and destination port
)

// Classifier turns frames into flow keys and flowids; safe for concurrent use.
type Classifier struct {
	h   *hash.Toeplitz // the Toeplitz hasher; nil with SipHash and for keyOnly
	sip *hash.SipHash  // the SipHash hasher; nil with Toeplitz and for keyOnly
	// tunnels holds the UDP ports that name a tunnel with TunnelsInner;
	// nil when tunnels are not opened, which is all the fast paths check.
	tunnels   *portSet
	symmetric bool
	// l4 is, per family (0 IPv4, 1 IPv6), which hash TCP, UDP and SCTP get
	// under the configured hash types: an l4* outcome.
	l4 [2]struct{ tcp, udp, sctp uint8 }
	// tcp4, udp4, tcp6 and udp6 say whether TCP and UDP over IPv4 and
	// IPv6 get their 4-tuple: l4 in the form the fast paths read fastest.
	tcp4, udp4, tcp6, udp6 bool
	// follow is FragmentsFollow: a first fragment is hashed as a whole
	// packet, and fragments are marked for the producer's table.
	follow bool
}

// NewClassifier returns a classifier that hashes as a dispatcher with cfg.
func NewClassifier(cfg HashConfig) (*Classifier, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	c := &Classifier{symmetric: cfg.Symmetric, follow: cfg.Fragments == FragmentsFollow}
	var err error
	if cfg.Algorithm == hash.AlgorithmSipHash {
		c.sip, err = hash.NewSipHash(cfg.Key)
	} else {
		c.h, err = hash.NewToeplitz(cfg.Key)
	}
	if err != nil {
		return nil, fmt.Errorf("steer: new classifier: %w", err)
	}
	for f, types := range [2][2]hash.Types{{hash.TypeTCPIPv4, hash.TypeUDPIPv4}, {hash.TypeTCPIPv6, hash.TypeUDPIPv6}} {
		l := &c.l4[f]
		l.tcp, l.udp, l.sctp = l4TwoTuple, l4TwoTuple, l4TwoTuple
		if cfg.Types.Has(types[0]) {
			l.tcp = l4TCP
		}
		if cfg.Types.Has(types[1]) {
			l.udp, l.sctp = l4UDP, l4Opaque
		}
	}
	c.tcp4, c.udp4 = c.l4[0].tcp == l4TCP, c.l4[0].udp == l4UDP
	c.tcp6, c.udp6 = c.l4[1].tcp == l4TCP, c.l4[1].udp == l4UDP
	if cfg.Tunnels == TunnelsInner {
		c.tunnels = newPortSet(cfg.VXLANPorts)
	}
	return c, nil
}

// Classify classifies frame, from its Ethernet header, into out. It never
// fails and never allocates: a frame it cannot classify fully gets a Reason.
func (c *Classifier) Classify(frame []byte, out *Classification) {
	// Fast path: an untagged simple IPv4 packet (see simpleIPv4), which
	// writes every field but those resetFast clears.
	if ip := simpleIPv4Of(frame); ip != nil {
		if c.notTunnel4(ip) {
			out.resetFast()
			out.EtherType = etherTypeIPv4
			c.simpleIPv4(ip, out)
			return
		}
		out.reset()
		out.EtherType = etherTypeIPv4
		c.simpleUDPTunnel(frame[ethHeaderLen:], out)
		return
	}
	out.resetFast() // classify clears the rest unless a fast path writes it
	c.classify(frame, out)
}

// simpleIPv4Of returns the IPv4 header and ports of an untagged frame for
// which isSimpleIPv4 holds, or nil.
func simpleIPv4Of(frame []byte) *[simpleIPv4Len]byte {
	if len(frame) < ethHeaderLen+simpleIPv4Len || binary.BigEndian.Uint16(frame[12:14]) != etherTypeIPv4 {
		return nil
	}
	if ip := (*[simpleIPv4Len]byte)(frame[ethHeaderLen : ethHeaderLen+simpleIPv4Len]); isSimpleIPv4(ip) {
		return ip
	}
	return nil
}

// keyIPv4 writes the fields of a simple IPv4 packet's key (see
// isSimpleIPv4) that are not zero; k's others must be. simpleIPv4 writes
// them the same way.
func keyIPv4(k *FlowKey, ip *[simpleIPv4Len]byte) {
	k.Src, k.Dst = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
	ports := binary.BigEndian.Uint32(ip[20:24])
	k.SrcPort, k.DstPort, k.Proto = uint16(ports>>16), uint16(ports), ip[9]
}

// simpleIPv4Len is what the fast path reads of a packet: an IPv4 header
// without options, then the ports.
const simpleIPv4Len = ipv4MinHeaderLen + transportPortBytes

// isSimpleIPv4 reports whether ip starts a TCP or UDP packet over IPv4 with
// no options, not fragmented, whose total length covers the ports: the bulk
// of most traffic, which the fast path classifies exactly as the general
// path would.
func isSimpleIPv4(ip *[simpleIPv4Len]byte) bool {
	return ip[0] == 0x45 && binary.BigEndian.Uint16(ip[6:8])&ipv4FragMask == 0 &&
		binary.BigEndian.Uint16(ip[2:4]) >= simpleIPv4Len && (ip[9] == protoTCP || ip[9] == protoUDP)
}

// notTunnel4 reports whether a packet for which isSimpleIPv4 holds is not
// UDP to a tunnel port, or tunnels are not opened: with isSimpleIPv4, the
// test of the IPv4 fast path. The two are written out side by side at
// each use, where they inline; one function of both would not.
func (c *Classifier) notTunnel4(ip *[simpleIPv4Len]byte) bool {
	return c.tunnels == nil || ip[9] != protoUDP || !c.tunnels.has(binary.BigEndian.Uint16(ip[22:24]))
}

// simpleIPv4 classifies a packet for which isSimpleIPv4 holds. Its tuple
// is the 12 bytes from the source address to the destination port, as they
// are in the packet.
func (c *Classifier) simpleIPv4(ip *[simpleIPv4Len]byte, out *Classification) {
	ht, n := c.ipv4Type(ip[9])
	// keyIPv4, written out: it does not inline, and the call would cost
	// Classify a twelfth.
	out.Key.Src, out.Key.Dst = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
	ports := binary.BigEndian.Uint32(ip[20:24])
	out.Key.SrcPort, out.Key.DstPort, out.Key.Proto = uint16(ports>>16), uint16(ports), ip[9]
	out.HashType = ht
	out.tupleLen = uint8(n)
	t := (*[hash.IPv4Tuple4Len]byte)(out.tuple[:hash.IPv4Tuple4Len])
	*t = [hash.IPv4Tuple4Len]byte(ip[12:24])
	if c.symmetric {
		symmetricIPv4(t, n)
		if c.sip != nil {
			out.FlowID = c.sumSip(t[:n])
		} else {
			out.FlowID = c.sum(t[:n])
		}
		return
	}
	// Hash the bytes where they lie in the packet, not the copy just
	// stored: a wide load of freshly stored bytes misses store forwarding
	// and costs more than the whole hash.
	if c.sip != nil {
		out.FlowID = c.sumSip(ip[12 : 12+n])
	} else {
		out.FlowID = c.sum(ip[12 : 12+n])
	}
}

// ipv4Type is the hash type of a TCP or UDP packet over IPv4 and the
// length of its tuple.
func (c *Classifier) ipv4Type(proto uint8) (hash.HashType, int) {
	if proto != protoUDP {
		if c.tcp4 {
			return hash.RSSTCPIPv4, hash.IPv4Tuple4Len
		}
	} else if c.udp4 {
		return hash.RSSUDPIPv4, hash.IPv4Tuple4Len
	}
	return hash.RSSIPv4, hash.IPv4Tuple2Len
}

// flowOnly is Classify for the dispatcher, where the handler's goroutine
// derives the flow key when it asks for it (see Packet.Key): for an
// untagged simple IPv4 packet, the bulk of most traffic, and with tunnels
// opened for such a packet inside VXLAN (vxlanTuple), it sets EtherType,
// HashType, FlowID and Reason as Classify would, leaves the key and the
// tuple alone and marks out keyless; any other frame it classifies fully.
func (c *Classifier) flowOnly(frame []byte, out *Classification) {
	var t [hash.IPv4Tuple4Len]byte
	ht, ok := c.ipv4Tuple(frame, &t)
	if !ok && c.tunnels != nil {
		ht, ok = c.vxlanTuple(frame, &t)
	}
	if ok {
		out.EtherType, out.Reason, out.HashType, out.keyless, out.frag = etherTypeIPv4, ReasonOK, ht, true, fragNone
		out.FlowID = c.sumIPv4(&t, ht)
		return
	}
	c.Classify(frame, out)
}

// ipv4Tuple is flowOnly's fast path short of the hash, for the
// dispatcher's batches (see producer.fastChunk): if frame is an untagged
// simple IPv4 packet (and not UDP to a tunnel port when tunnels are
// opened) it writes the packet's hash input to t and returns its hash
// type. A 2-tuple gets zero ports: zero bytes add nothing to a Toeplitz
// hash, so every input is 12 bytes, [hash.Toeplitz.SumIPv4Tuples]'s size
// (sumIPv4 hashes the 8 that count for SipHash).
func (c *Classifier) ipv4Tuple(frame []byte, t *[hash.IPv4Tuple4Len]byte) (hash.HashType, bool) {
	ip := simpleIPv4Of(frame)
	if ip == nil || !c.notTunnel4(ip) {
		return hash.None, false
	}
	ht, n := c.ipv4Type(ip[9])
	*t = [hash.IPv4Tuple4Len]byte(ip[12:24])
	if n == hash.IPv4Tuple2Len {
		binary.LittleEndian.PutUint32(t[8:], 0)
	}
	if c.symmetric {
		symmetricIPv4(t, n)
	}
	return ht, true
}

// keyOnly returns a copy of c that computes everything but the hash (FlowID
// stays zero): what a worker needs to derive a frame's key again.
func (c *Classifier) keyOnly() *Classifier {
	k := *c
	k.h, k.sip = nil, nil
	return &k
}

// sum hashes a tuple with Toeplitz, or gives 0 for a key-only classifier
// and with SipHash, for which the caller checks c.sip first (see
// sumSip). It is small enough to be inlined, with the Toeplitz call,
// into the fast paths: one more call in it would not be.
func (c *Classifier) sum(tuple []byte) uint32 {
	if c.h == nil {
		return 0
	}
	return c.h.Sum(tuple)
}

// sumSip is the SipHash of a tuple: every caller of sum calls it instead
// when c.sip is set.
//
//go:noinline
func (c *Classifier) sumSip(tuple []byte) uint32 { return c.sip.Sum(tuple) }

// sumIPv4 hashes an IPv4 tuple as ipv4Tuple writes it, of hash type ht: 12
// bytes for Toeplitz, where the zero ports of a 2-tuple add nothing, and
// the 8 or 12 bytes of the tuple for SipHash.
func (c *Classifier) sumIPv4(t *[hash.IPv4Tuple4Len]byte, ht hash.HashType) uint32 {
	switch {
	case c.sip == nil:
		return c.sum(t[:])
	case ht == hash.RSSIPv4:
		return c.sumSip(t[:hash.IPv4Tuple2Len])
	}
	return c.sumSip(t[:])
}

// simpleIPv6Len is what the IPv6 fast path reads: the header and ports.
const simpleIPv6Len = ipv6HeaderLen + transportPortBytes

// isSimpleIPv6 reports whether ip starts an IPv6 packet with no extension
// headers that carries TCP or UDP and whose payload length covers the ports
// (or is zero: the frame does).
func isSimpleIPv6(ip *[simpleIPv6Len]byte) bool {
	pl := binary.BigEndian.Uint16(ip[4:6])
	return ip[0]>>4 == 6 && (ip[6] == protoTCP || ip[6] == protoUDP) && (pl == 0 || pl >= transportPortBytes)
}

// notTunnel6 is notTunnel4 for IPv6: with isSimpleIPv6, the IPv6 fast
// path's test.
func (c *Classifier) notTunnel6(ip *[simpleIPv6Len]byte) bool {
	return c.tunnels == nil || ip[6] != protoUDP || !c.tunnels.has(binary.BigEndian.Uint16(ip[42:44]))
}

// simpleIPv6 classifies a packet for which isSimpleIPv6 holds, exactly as
// the general path would. Its tuple is the 36 bytes from the source address
// to the destination port, as they are in the packet.
func (c *Classifier) simpleIPv6(ip *[simpleIPv6Len]byte, out *Classification) {
	proto := ip[6]
	ht, n := hash.RSSIPv6, hash.IPv6Tuple2Len
	if proto != protoUDP {
		if c.tcp6 {
			ht, n = hash.RSSTCPIPv6, hash.IPv6Tuple4Len
		}
	} else if c.udp6 {
		ht, n = hash.RSSUDPIPv6, hash.IPv6Tuple4Len
	}
	out.Key.Src = netip.AddrFrom16([16]byte(ip[8:24]))
	out.Key.Dst = netip.AddrFrom16([16]byte(ip[24:40]))
	out.Key.SrcPort = binary.BigEndian.Uint16(ip[40:42])
	out.Key.DstPort = binary.BigEndian.Uint16(ip[42:44])
	out.Key.Proto = proto
	out.HashType = ht
	out.tupleLen = uint8(n)
	t := &out.tuple
	*t = [hash.IPv6Tuple4Len]byte(ip[8:44])
	if c.symmetric {
		s, d := (*[16]byte)(t[0:16]), (*[16]byte)(t[16:32])
		if cmp := compare16(s, d); cmp > 0 || (cmp == 0 && n == hash.IPv6Tuple4Len &&
			binary.BigEndian.Uint16(t[32:34]) > binary.BigEndian.Uint16(t[34:36])) {
			*s, *d = *d, *s
			t[32], t[33], t[34], t[35] = t[34], t[35], t[32], t[33]
		}
		if c.sip != nil {
			out.FlowID = c.sumSip(t[:n])
		} else {
			out.FlowID = c.sum(t[:n])
		}
		return
	}
	if c.sip != nil {
		out.FlowID = c.sumSip(ip[8 : 8+n])
	} else {
		out.FlowID = c.sum(ip[8 : 8+n]) // from the packet, as in simpleIPv4
	}
}

// symmetricIPv4 puts the endpoints of an IPv4 tuple of n bytes (8 or 12)
// in canonical order, in place.
func symmetricIPv4(t *[hash.IPv4Tuple4Len]byte, n int) {
	s := binary.BigEndian.Uint32(t[0:4])
	d := binary.BigEndian.Uint32(t[4:8])
	if s < d || (s == d && (n == hash.IPv4Tuple2Len || binary.BigEndian.Uint16(t[8:10]) <= binary.BigEndian.Uint16(t[10:12]))) {
		return
	}
	binary.BigEndian.PutUint32(t[0:4], d)
	binary.BigEndian.PutUint32(t[4:8], s)
	if n == hash.IPv4Tuple4Len {
		t[8], t[9], t[10], t[11] = t[10], t[11], t[8], t[9]
	}
}

// ClassifyVLAN is Classify for a frame whose 802.1Q tag was delivered out of
// band: its VLAN ID is recorded as the outermost.
func (c *Classifier) ClassifyVLAN(frame []byte, vlan uint16, out *Classification) {
	out.resetFast()
	out.Key.VLANs[0] = vlan & vlanIDMask
	out.Key.NVLAN = 1
	c.classify(frame, out)
}

// classify is the general path. out has had resetFast, and holds VLANs
// recorded out of band; classify clears the tuple's fields (clearTuple)
// on every path that does not end in simpleIPv4 or simpleIPv6.
func (c *Classifier) classify(frame []byte, out *Classification) {
	if len(frame) < ethHeaderLen {
		out.clearTuple()
		out.Reason = ReasonShortEthernet
		return
	}
	et := binary.BigEndian.Uint16(frame[12:14])
	p := frame[ethHeaderLen:]
	nv := int(out.Key.NVLAN)
	for isVLAN(et) {
		if len(p) < vlanTagLen || nv >= MaxVLANDepth {
			out.clearTuple()
			out.EtherType, out.Reason, out.Key.NVLAN = et, vlanReason(p), uint8(nv)
			return
		}
		out.Key.VLANs[nv] = binary.BigEndian.Uint16(p[0:2]) & vlanIDMask
		nv++
		et = binary.BigEndian.Uint16(p[2:4])
		p = p[vlanTagLen:]
	}
	out.Key.NVLAN = uint8(nv)
	// The IP cases of ether, written out: the common frames skip a call.
	switch et {
	case etherTypeIPv4:
		if len(p) >= simpleIPv4Len {
			if ip := (*[simpleIPv4Len]byte)(p); isSimpleIPv4(ip) && c.notTunnel4(ip) {
				out.EtherType = et
				c.simpleIPv4(ip, out)
				return
			}
		}
		out.clearTuple()
		out.EtherType = et
		c.ipv4(p, out)
	case etherTypeIPv6:
		if len(p) >= simpleIPv6Len {
			if ip := (*[simpleIPv6Len]byte)(p); isSimpleIPv6(ip) && c.notTunnel6(ip) {
				out.EtherType = et
				c.simpleIPv6(ip, out)
				return
			}
		}
		out.clearTuple()
		out.EtherType = et
		c.ipv6(p, out)
	default:
		out.clearTuple()
		c.ether(et, p, out)
	}
}

// isVLAN reports whether et is a VLAN tag's TPID.
func isVLAN(et uint16) bool {
	return et == etherTypeVLAN || et == etherTypeQinQ || et == etherTypeQinQOld
}

// vlanReason is why a VLAN tag at p stops the walk: it is cut short, or
// one too many.
func vlanReason(p []byte) Reason {
	if len(p) < vlanTagLen {
		return ReasonShortVLAN
	}
	return ReasonTooManyVLANs
}

// innerEthernet classifies an Ethernet frame inside a tunnel or a
// pseudowire, whose VLAN IDs go to Key.Encaps.
func (c *Classifier) innerEthernet(frame []byte, out *Classification) {
	if len(frame) < ethHeaderLen {
		out.Reason = ReasonShortEthernet
		return
	}
	et := binary.BigEndian.Uint16(frame[12:14])
	p := frame[ethHeaderLen:]
	for nv := 0; isVLAN(et); nv++ {
		if len(p) < vlanTagLen || nv >= MaxVLANDepth {
			out.EtherType, out.Reason = et, vlanReason(p)
			return
		}
		if !c.push(out, EncapVLAN, true, uint32(binary.BigEndian.Uint16(p[0:2])&vlanIDMask)) {
			return
		}
		et = binary.BigEndian.Uint16(p[2:4])
		p = p[vlanTagLen:]
	}
	c.ether(et, p, out)
}

// ether classifies the payload p of EtherType et: an IP packet, a shim
// that hides one, or a non-IP frame.
func (c *Classifier) ether(et uint16, p []byte, out *Classification) {
	out.EtherType = et
	switch et {
	case etherTypeIPv4:
		if len(p) >= simpleIPv4Len {
			if ip := (*[simpleIPv4Len]byte)(p); isSimpleIPv4(ip) && c.notTunnel4(ip) {
				c.simpleIPv4(ip, out)
				return
			}
		}
		c.ipv4(p, out)
	case etherTypeIPv6:
		if len(p) >= simpleIPv6Len {
			if ip := (*[simpleIPv6Len]byte)(p); isSimpleIPv6(ip) && c.notTunnel6(ip) {
				c.simpleIPv6(ip, out)
				return
			}
		}
		c.ipv6(p, out)
	case etherTypePPPoESession:
		c.pppoe(p, out)
	case etherTypeMPLS, etherTypeMPLSMulticast:
		c.mpls(p, out)
	case etherTypeCMD:
		c.cmd(p, out)
	default:
		out.Reason = ReasonNonIP
	}
}

// push records a shim or tunnel header in the key, or sets ReasonTooDeep
// and reports false when Encaps is full.
func (c *Classifier) push(out *Classification, kind EncapKind, hasID bool, id uint32) bool {
	n := out.Key.NEncap
	if int(n) >= MaxEncaps {
		out.Reason = ReasonTooDeep
		return false
	}
	out.Key.Encaps[n] = Encap{Kind: kind, HasID: hasID, ID: id}
	out.Key.NEncap = n + 1
	return true
}

// ipv4 classifies an IPv4 packet p (from its header to the frame's end).
func (c *Classifier) ipv4(p []byte, out *Classification) {
	if len(p) < ipv4MinHeaderLen {
		out.Reason = ReasonShortIPv4
		return
	}
	h := p[:ipv4MinHeaderLen]
	if h[0]>>4 != 4 {
		out.Reason = ReasonBadIPVersion
		return
	}
	s := binary.BigEndian.Uint32(h[12:16])
	d := binary.BigEndian.Uint32(h[16:20])
	proto := h[9]
	out.Key.Src = netip.AddrFrom4([4]byte(h[12:16]))
	out.Key.Dst = netip.AddrFrom4([4]byte(h[16:20]))
	out.Key.Proto = proto
	hl := int(h[0]&0x0f) << 2
	if hl < ipv4MinHeaderLen || hl > len(p) {
		out.Reason = ReasonBadIHL
		return
	}
	tl := int(binary.BigEndian.Uint16(h[2:4]))
	switch {
	case tl == 0: // BIG TCP or a TSO capture: the frame
		tl = len(p)
	case tl < hl:
		out.Reason = ReasonBadIPLength
		return
	}
	fo := binary.BigEndian.Uint16(h[6:8]) & ipv4FragMask
	if fo != 0 {
		out.Key.Fragment = true
		if c.follow {
			out.frag, out.fragID, out.fragProto = fragFirst, uint32(binary.BigEndian.Uint16(h[4:6])), proto
		}
		if !c.follow || fo&ipv4OffsetMask != 0 {
			if c.follow {
				out.frag = fragLater
			}
			c.hashIPv4(out, hash.RSSIPv4, s, d, 0, 0)
			return
		}
	}
	if tl < len(p) {
		p = p[:tl]
	}
	ht := c.transport(p[hl:], proto, 0, out)
	if c.tunnels != nil && fo == 0 && c.tunnel(p[hl:], proto, out) {
		if out.HashType != hash.None {
			return // the inner packet was hashed
		}
		// The inside could not be hashed: this header is the deepest read
		// whole. Its key fields come back; the reason stays.
		out.Key.Src = netip.AddrFrom4([4]byte(h[12:16]))
		out.Key.Dst = netip.AddrFrom4([4]byte(h[16:20]))
		out.Key.Proto, out.EtherType = proto, etherTypeIPv4
		out.Key.SrcPort, out.Key.DstPort = 0, 0
		ht = c.transport(p[hl:], proto, 0, out)
	}
	if ht == l4TwoTuple {
		c.hashIPv4(out, hash.RSSIPv4, s, d, 0, 0)
		return
	}
	c.hashIPv4(out, ipv4HashTypes[ht], s, d, out.Key.SrcPort, out.Key.DstPort)
}

// ipv6 classifies an IPv6 packet p (from its header to the frame's end).
func (c *Classifier) ipv6(p []byte, out *Classification) {
	if len(p) < ipv6HeaderLen {
		out.Reason = ReasonShortIPv6
		return
	}
	h := p[:ipv6HeaderLen]
	if h[0]>>4 != 6 {
		out.Reason = ReasonBadIPVersion
		return
	}
	src := [16]byte(h[8:24])
	dst := [16]byte(h[24:40])
	out.Key.Src = netip.AddrFrom16(src)
	out.Key.Dst = netip.AddrFrom16(dst)
	if pl := int(binary.BigEndian.Uint16(h[4:6])); pl != 0 && ipv6HeaderLen+pl < len(p) {
		p = p[:ipv6HeaderLen+pl]
	}
	nh := h[6]
	off := ipv6HeaderLen
	frag := false    // a fragment, but a first one followed (FragmentsFollow)
	var fragNH uint8 // a first fragment's next header, when one was walked through
	for n := 0; ; n++ {
		var l int
		var fo uint16 // a fragment header's offset and M flag
		switch nh {
		case protoHopByHop, protoRouting, protoDstOpts, protoAH:
			if off+2 > len(p) {
				l = -1
				break
			}
			if nh == protoAH {
				l = (int(p[off+1]) + 2) << 2 // RFC 4302: in 4-byte units, minus 2
			} else {
				l = (int(p[off+1]) + 1) << 3 // RFC 8200: in 8-byte units, minus 1
			}
		case protoFragment:
			l = ipv6FragHeaderLen
			if off+l <= len(p) {
				fo = binary.BigEndian.Uint16(p[off+2:off+4]) & ipv6FragOffMMask // zero: atomic
			}
		default:
			goto upper
		}
		if n >= maxIPv6ExtHeaders || l < 0 || l > len(p)-off || (fo != 0 && out.frag == fragFirst) {
			if out.frag == fragFirst { // after a first fragment's header: another, or a bad one
				c.firstAsTuple(out, fragNH, &src, &dst)
				return
			}
			out.Key.Proto = nh
			out.Reason = ReasonBadExtHeader
			return
		}
		if fo != 0 {
			frag = !c.follow || fo&ipv6FragOffMask != 0
			if c.follow {
				out.frag, out.fragID, out.fragProto, fragNH = fragFirst, binary.BigEndian.Uint32(p[off+4:off+8]), 0, p[off]
				if frag {
					out.frag = fragLater
				}
			}
		}
		nh = p[off]
		off += l
		if frag {
			break
		}
	}
upper:
	out.Key.Proto = nh
	if frag {
		out.Key.Fragment = true
		c.hashIPv6(out, hash.RSSIPv6, &src, &dst, 0, 0)
		return
	}
	out.Key.Fragment = out.frag == fragFirst
	ht := c.transport(p[off:], nh, 1, out)
	if c.tunnels != nil && !out.Key.Fragment && c.tunnel(p[off:], nh, out) {
		if out.HashType != hash.None {
			return
		}
		out.Key.Src = netip.AddrFrom16(src)
		out.Key.Dst = netip.AddrFrom16(dst)
		out.Key.Proto, out.EtherType = nh, etherTypeIPv6
		out.Key.SrcPort, out.Key.DstPort = 0, 0
		ht = c.transport(p[off:], nh, 1, out)
	}
	if ht == l4TwoTuple {
		c.hashIPv6(out, hash.RSSIPv6, &src, &dst, 0, 0)
		return
	}
	c.hashIPv6(out, ipv6HashTypes[ht], &src, &dst, out.Key.SrcPort, out.Key.DstPort)
}

// firstAsTuple classifies an IPv6 first fragment whose headers after its
// fragment header cannot be walked (one runs past the packet, the chain
// is too long, another fragment header follows) as FragmentsTuple does,
// which stops at its fragment header: its addresses hashed, Proto that
// header's next header nh. It stays a first fragment, whose flowid the
// later ones follow.
func (c *Classifier) firstAsTuple(out *Classification, nh uint8, src, dst *[16]byte) {
	out.Key.Proto, out.Key.Fragment = nh, true
	c.hashIPv6(out, hash.RSSIPv6, src, dst, 0, 0)
}

// Transport outcomes: which hash a packet gets, independent of the family.
const (
	l4TwoTuple = iota // addresses only
	l4TCP             // TCP 4-tuple (TCP's type in the set)
	l4UDP             // UDP 4-tuple (UDP's type in the set)
	l4Opaque          // SCTP 4-tuple (UDP's type in the set)
)

var (
	ipv4HashTypes = [...]hash.HashType{hash.RSSIPv4, hash.RSSTCPIPv4, hash.RSSUDPIPv4, hash.OpaqueHash}
	ipv6HashTypes = [...]hash.HashType{hash.RSSIPv6, hash.RSSTCPIPv6, hash.RSSUDPIPv6, hash.OpaqueHash}
)

// transport reads the ports of a TCP, UDP or SCTP header l4 into out.Key and
// says what the packet is hashed over; family is 0 for IPv4, 1 for IPv6.
// The ports are read (and the reason set) whatever the hash type: a
// tunnel is told by its port.
func (c *Classifier) transport(l4 []byte, proto uint8, family int, out *Classification) int {
	var o uint8
	switch proto {
	case protoTCP:
		o = c.l4[family].tcp
	case protoUDP:
		o = c.l4[family].udp
	case protoSCTP:
		o = c.l4[family].sctp
	default:
		return l4TwoTuple
	}
	if len(l4) < transportPortBytes {
		out.Reason = ReasonShortTransport
		return l4TwoTuple
	}
	out.Key.SrcPort = binary.BigEndian.Uint16(l4[0:2])
	out.Key.DstPort = binary.BigEndian.Uint16(l4[2:4])
	return int(o)
}

// hashIPv4 builds the IPv4 tuple (a 2-tuple when ht is RSS_IPV4) and
// hashes it.
func (c *Classifier) hashIPv4(out *Classification, ht hash.HashType, s, d uint32, sp, dp uint16) {
	if c.symmetric && (s > d || (s == d && sp > dp)) {
		s, d, sp, dp = d, s, dp, sp
	}
	t := out.tuple[:hash.IPv4Tuple4Len]
	binary.BigEndian.PutUint32(t[0:4], s)
	binary.BigEndian.PutUint32(t[4:8], d)
	n := hash.IPv4Tuple2Len
	if ht != hash.RSSIPv4 {
		binary.BigEndian.PutUint16(t[8:10], sp)
		binary.BigEndian.PutUint16(t[10:12], dp)
		n = hash.IPv4Tuple4Len
	}
	out.tupleLen = uint8(n)
	out.HashType = ht
	if c.sip != nil {
		out.FlowID = c.sumSip(t[:n])
	} else {
		out.FlowID = c.sum(t[:n])
	}
}

// hashIPv6 builds the IPv6 tuple (a 2-tuple when ht is RSS_IPV6) and
// hashes it.
func (c *Classifier) hashIPv6(out *Classification, ht hash.HashType, s, d *[16]byte, sp, dp uint16) {
	if c.symmetric {
		if cmp := compare16(s, d); cmp > 0 || (cmp == 0 && sp > dp) {
			s, d, sp, dp = d, s, dp, sp
		}
	}
	t := out.tuple[:hash.IPv6Tuple4Len]
	copy(t[0:16], s[:])
	copy(t[16:32], d[:])
	n := hash.IPv6Tuple2Len
	if ht != hash.RSSIPv6 {
		binary.BigEndian.PutUint16(t[32:34], sp)
		binary.BigEndian.PutUint16(t[34:36], dp)
		n = hash.IPv6Tuple4Len
	}
	out.tupleLen = uint8(n)
	out.HashType = ht
	if c.sip != nil {
		out.FlowID = c.sumSip(t[:n])
	} else {
		out.FlowID = c.sum(t[:n])
	}
}

// compare16 compares two IPv6 addresses as big-endian numbers.
func compare16(a, b *[16]byte) int {
	ah, bh := binary.BigEndian.Uint64(a[0:8]), binary.BigEndian.Uint64(b[0:8])
	if ah != bh {
		if ah < bh {
			return -1
		}
		return 1
	}
	al, bl := binary.BigEndian.Uint64(a[8:16]), binary.BigEndian.Uint64(b[8:16])
	switch {
	case al < bl:
		return -1
	case al > bl:
		return 1
	}
	return 0
}
