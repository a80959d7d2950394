package steer

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"github.com/rpsgo/rps/hash"
)

// Builders for shims and tunnels, by hand like the others in
// classify_test.go.

var (
	c4 = netip.MustParseAddr("10.0.0.1") // tunnel endpoints
	d4 = netip.MustParseAddr("10.0.0.2")
	c6 = netip.MustParseAddr("fd00::1")
	d6 = netip.MustParseAddr("fd00::2")
)

const tunnelSport = 51000 // the UDP source port of the outer header (entropy)

// outer4 wraps l4 of protocol proto in an Ethernet and IPv4 header between
// the tunnel endpoints.
func outer4(proto uint8, l4 []byte, tags ...vlanTag) []byte {
	return ethFrame(etherTypeIPv4, ipv4Packet(c4, d4, proto, 0, l4), tags...)
}

// outer6 is outer4 over IPv6.
func outer6(proto uint8, l4 []byte) []byte {
	return ethFrame(etherTypeIPv6, ipv6Packet(c6, d6, proto, l4))
}

// inner4 is the inner frame: an Ethernet frame with a TCP/IPv4 packet.
func inner4(tags ...vlanTag) []byte { return tcp4(0, tags...) }

// innerIP4 is the inner TCP/IPv4 packet without a link header.
func innerIP4() []byte { return ipv4Packet(a4, b4, protoTCP, 0, tcpHdr(sport, dport, 'h', 'i')) }

// innerIP6 is the inner TCP/IPv6 packet without a link header.
func innerIP6() []byte { return ipv6Packet(a6, b6, protoTCP, tcpHdr(sport, dport, 'h', 'i')) }

func vxlanHdr(vni uint32, rest []byte) []byte {
	b := []byte{vxlanFlagI, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[4:], vni<<8)
	return append(b, rest...)
}

func vxlan4(vni uint32, inner []byte, tags ...vlanTag) []byte {
	return outer4(protoUDP, udpHdr(tunnelSport, VXLANPort, vxlanHdr(vni, inner)...), tags...)
}

// geneveHdr returns a GENEVE header with optWords 4-byte words of options.
func geneveHdr(vni uint32, proto uint16, optWords int, rest []byte) []byte {
	b := make([]byte, geneveHeaderLen+4*optWords)
	b[0] = byte(optWords)
	binary.BigEndian.PutUint16(b[2:], proto)
	binary.BigEndian.PutUint32(b[4:], vni<<8)
	for i := 0; i < optWords; i++ {
		o := b[geneveHeaderLen+4*i:]
		binary.BigEndian.PutUint16(o, 0x0102) // option class
		o[2], o[3] = 0x80, 0                  // type, length 0 words of data
	}
	return append(b, rest...)
}

// greHdr returns a GRE header; key and seq are written when their flag is
// in flags, a zero checksum with greFlagChecksum.
func greHdr(flags uint16, proto uint16, key, seq uint32, rest []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, flags)
	b = binary.BigEndian.AppendUint16(b, proto)
	if flags&greFlagChecksum != 0 {
		b = append(b, 0, 0, 0, 0)
	}
	if flags&greFlagKey != 0 {
		b = binary.BigEndian.AppendUint32(b, key)
	}
	if flags&greFlagSeq != 0 {
		b = binary.BigEndian.AppendUint32(b, seq)
	}
	return append(b, rest...)
}

func erspan2Hdr(session uint16, rest []byte) []byte {
	b := []byte{0x10, 0x00, 0, 0, 0, 0, 0, 7} // version 1, index 7
	binary.BigEndian.PutUint16(b[2:], session&0x3ff)
	return append(b, rest...)
}

// erspan3Hdr returns an ERSPAN type III header, with the platform
// sub-header when platform is set, of frame type ft.
func erspan3Hdr(session uint16, platform bool, ft uint8, rest []byte) []byte {
	b := make([]byte, erspan3HeaderLen)
	b[0] = 0x20 // version 2
	binary.BigEndian.PutUint16(b[2:], session&0x3ff)
	binary.BigEndian.PutUint32(b[4:], 0x01020304) // timestamp
	b[10] = ft << 2
	if platform {
		b[11] |= 1
		b = append(b, 0x08, 0, 0, 0, 0, 0, 0, 1) // platform ID 1
	}
	return append(b, rest...)
}

// gtpuHdr returns a GTP-U header of message type mt; with opt the sequence
// number, N-PDU number and next-type fields, followed by each extension
// header (given whole, next-type byte last, which gtpuHdr chains).
func gtpuHdr(mt uint8, teid uint32, opt bool, ext [][]byte, rest []byte) []byte {
	b := []byte{0x30, mt, 0, 0}
	b = binary.BigEndian.AppendUint32(b, teid)
	if opt || len(ext) > 0 {
		b[0] |= 0x02 // S
		if len(ext) > 0 {
			b[0] |= 0x04 // E
		}
		b = append(b, 0, 1, 0, 0) // sequence 1, N-PDU 0, next type
		for _, e := range ext {
			b[len(b)-1] = 0x85 // PDU session container
			b = append(b, e...)
		}
	}
	b = append(b, rest...)
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)-gtpuHeaderLen))
	return b
}

// gtpuExt returns an extension header of n 4-byte units, the next type
// zero (gtpuHdr sets it when another follows).
func gtpuExt(n int) []byte {
	b := make([]byte, 4*n)
	b[0] = byte(n)
	return b
}

func gtpu4(teid uint32, ip []byte) []byte {
	return outer4(protoUDP, udpHdr(gtpuPort, gtpuPort, gtpuHdr(gtpuGPDU, teid, false, nil, ip)...))
}

// mplsStack returns label stack entries for labels, bottom of stack on
// the last.
func mplsStack(rest []byte, labels ...uint32) []byte {
	var b []byte
	for i, l := range labels {
		e := l<<12 | 64
		if i == len(labels)-1 {
			e |= mplsBottomOfStack
		}
		b = binary.BigEndian.AppendUint32(b, e)
	}
	return append(b, rest...)
}

func pppoeSession(session uint16, proto uint16, rest []byte) []byte {
	b := []byte{pppoeVerType, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint16(b[2:], session)
	binary.BigEndian.PutUint16(b[4:], uint16(2+len(rest)))
	b = binary.BigEndian.AppendUint16(b, proto)
	return append(b, rest...)
}

// cmdEth returns Cisco MetaData in its Ethernet form (after EtherType
// 0x8909): version 1, length 1, the SGT option, tag sgt, then et.
func cmdEth(sgt, et uint16, rest []byte) []byte {
	b := []byte{1, 1, 0, 1}
	b = binary.BigEndian.AppendUint16(b, sgt)
	b = binary.BigEndian.AppendUint16(b, et)
	return append(b, rest...)
}

// cmdGRE returns Cisco MetaData in its GRE form (after GRE protocol
// 0x8909): et first, then version, length, option and tag sgt.
func cmdGRE(et, sgt uint16, rest []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, et)
	b = append(b, 1, 1, 0, 1)
	b = binary.BigEndian.AppendUint16(b, sgt)
	return append(b, rest...)
}

// jumbo6 returns an IPv6 jumbogram as RFC 2675 and Linux's BIG TCP
// write it: a payload length of zero and a hop-by-hop header with a Jumbo
// Payload option holding the real length, before payload of protocol nh.
func jumbo6(src, dst netip.Addr, nh uint8, payload []byte) []byte {
	hbh := binary.BigEndian.AppendUint32([]byte{nh, 0, 0xc2, 4}, uint32(8+len(payload)))
	b := ipv6Packet(src, dst, protoHopByHop, cat(hbh, payload))
	b[4], b[5] = 0, 0
	return b
}

// bigIPv4 sets an IPv4 packet's total length to zero, as Linux's BIG TCP
// sends a packet over 64 KiB.
func bigIPv4(ip []byte) []byte { return edit(ip, func(b []byte) { b[2], b[3] = 0, 0 }) }

// Keys.

func withEncaps(k FlowKey, depth int, es ...Encap) FlowKey {
	k.Depth = uint8(depth)
	k.NEncap = uint8(copy(k.Encaps[:], es))
	return k
}

func enc(kind EncapKind, id uint32) Encap { return Encap{Kind: kind, HasID: true, ID: id} }

func encNoID(kind EncapKind) Encap { return Encap{Kind: kind} }

// outerKey is the outer header's key for a UDP tunnel to port dp.
func outerKey(dp uint16) FlowKey {
	return FlowKey{Src: c4, Dst: d4, Proto: protoUDP, SrcPort: tunnelSport, DstPort: dp}
}

var innerTCP4 = key4(protoTCP, sport, dport)

// encapCases are classifyCase values for shims and tunnels; tunnels set
// says to classify with TunnelsInner.
func encapCases() []classifyCase {
	ip4, ip6 := innerIP4(), innerIP6()
	arp := ethFrame(0x0806, rep(28, 0))
	inner6 := key6(protoTCP, sport, dport)
	const v4, v6 = etherTypeIPv4, etherTypeIPv6
	tcp4ht, tcp6ht := hash.RSSTCPIPv4, hash.RSSTCPIPv6
	return []classifyCase{
		// VXLAN.
		{name: "vxlan tcp4", tunnels: true, frame: vxlan4(42, inner4()), ht: tcp4ht, etherType: v4,
			key: withEncaps(innerTCP4, 1, enc(EncapVXLAN, 42))},
		{name: "vxlan outer with tunnels off", frame: vxlan4(42, inner4()), ht: hash.RSSIPv4, etherType: v4, key: outerKey(VXLANPort)},
		{name: "vxlan outer udp 4-tuple with tunnels off", udp4: true, frame: vxlan4(42, inner4()), ht: hash.RSSUDPIPv4, etherType: v4, key: outerKey(VXLANPort)},
		{name: "vxlan vlans inside and outside", tunnels: true, frame: vxlan4(0xffffff, inner4(stag(10), tag(20)), tag(7)), ht: tcp4ht, etherType: v4,
			key: withVLANs(withEncaps(innerTCP4, 1, enc(EncapVXLAN, 0xffffff), enc(EncapVLAN, 10), enc(EncapVLAN, 20)), 7)},
		{name: "vxlan in ipv6", tunnels: true, frame: outer6(protoUDP, udpHdr(tunnelSport, VXLANPort, vxlanHdr(5, inner4())...)), ht: tcp4ht, etherType: v4,
			key: withEncaps(innerTCP4, 1, enc(EncapVXLAN, 5))},
		{name: "vxlan tcp6 inside", tunnels: true, frame: vxlan4(9, ethFrame(v6, ip6)), ht: tcp6ht, etherType: v6,
			key: withEncaps(inner6, 1, enc(EncapVXLAN, 9))},
		{name: "vxlan I flag clear", tunnels: true, frame: edit(vxlan4(42, inner4()), func(b []byte) { b[ethHeaderLen+28] = 0 }),
			reason: ReasonBadVXLAN, ht: hash.RSSIPv4, etherType: v4, key: outerKey(VXLANPort)},
		{name: "vxlan header cut", tunnels: true, frame: vxlan4(42, nil)[:ethHeaderLen+28+7],
			reason: ReasonBadVXLAN, ht: hash.RSSIPv4, etherType: v4, key: outerKey(VXLANPort)},
		{name: "vxlan udp header cut", tunnels: true, frame: vxlan4(42, nil)[:ethHeaderLen+20+6],
			reason: ReasonBadVXLAN, ht: hash.RSSIPv4, etherType: v4, key: outerKey(VXLANPort)},
		{name: "vxlan arp inside", tunnels: true, frame: vxlan4(42, arp),
			reason: ReasonTunnelNonIP, ht: hash.RSSIPv4, etherType: v4, key: withEncaps(outerKey(VXLANPort), 0, enc(EncapVXLAN, 42))},
		{name: "vxlan inner ethernet cut", tunnels: true, frame: vxlan4(42, inner4()[:10]),
			reason: ReasonShortEthernet, ht: hash.RSSIPv4, etherType: v4, key: withEncaps(outerKey(VXLANPort), 0, enc(EncapVXLAN, 42))},
		{name: "vxlan inner ipv4 cut", tunnels: true, frame: vxlan4(42, inner4()[:ethHeaderLen+19]),
			reason: ReasonShortIPv4, ht: hash.RSSIPv4, etherType: v4, key: withEncaps(outerKey(VXLANPort), 0, enc(EncapVXLAN, 42))},
		{name: "vxlan inner tcp cut", tunnels: true, frame: vxlan4(42, inner4()[:ethHeaderLen+22]),
			reason: ReasonShortTransport, ht: hash.RSSIPv4, etherType: v4, key: withEncaps(key4(protoTCP, 0, 0), 1, enc(EncapVXLAN, 42))},
		{name: "vxlan inner vlan cut", tunnels: true, frame: vxlan4(42, inner4(tag(3))[:ethHeaderLen+2]),
			reason: ReasonShortVLAN, ht: hash.RSSIPv4, etherType: v4, key: withEncaps(outerKey(VXLANPort), 0, enc(EncapVXLAN, 42))},
		{name: "vxlan inner 5 tags", tunnels: true, frame: vxlan4(42, inner4(tag(1), tag(2), tag(3), tag(4), tag(5))),
			reason: ReasonTooManyVLANs, ht: hash.RSSIPv4, etherType: v4,
			key: withEncaps(outerKey(VXLANPort), 0, enc(EncapVXLAN, 42), enc(EncapVLAN, 1), enc(EncapVLAN, 2), enc(EncapVLAN, 3), enc(EncapVLAN, 4))},
		{name: "vxlan outer fragment not opened", tunnels: true, frame: edit(vxlan4(42, inner4()), func(b []byte) { b[ethHeaderLen+6] = 0x20 }),
			ht: hash.RSSIPv4, etherType: v4, key: withFrag(FlowKey{Src: c4, Dst: d4, Proto: protoUDP})},
		{name: "vxlan inner fragment", tunnels: true, frame: vxlan4(42, edit(inner4(), func(b []byte) { b[ethHeaderLen+6] = 0x20 })),
			ht: hash.RSSIPv4, etherType: v4, key: withEncaps(withFrag(key4(protoTCP, 0, 0)), 1, enc(EncapVXLAN, 42))},

		// GENEVE.
		{name: "geneve ethernet with options", tunnels: true, frame: outer4(protoUDP, udpHdr(tunnelSport, genevePort, geneveHdr(77, etherTypeTEB, 3, inner4())...)),
			ht: tcp4ht, etherType: v4, key: withEncaps(innerTCP4, 1, enc(EncapGENEVE, 77))},
		{name: "geneve ipv6 payload", tunnels: true, frame: outer4(protoUDP, udpHdr(tunnelSport, genevePort, geneveHdr(77, v6, 0, ip6)...)),
			ht: tcp6ht, etherType: v6, key: withEncaps(inner6, 1, enc(EncapGENEVE, 77))},
		{name: "geneve version 1", tunnels: true, frame: outer4(protoUDP, udpHdr(tunnelSport, genevePort, edit(geneveHdr(77, v4, 0, ip4), func(b []byte) { b[0] |= 0x40 })...)),
			reason: ReasonBadGENEVE, ht: hash.RSSIPv4, etherType: v4, key: outerKey(genevePort)},
		{name: "geneve options cut", tunnels: true, frame: outer4(protoUDP, udpHdr(tunnelSport, genevePort, geneveHdr(77, v4, 3, nil)[:16]...)),
			reason: ReasonBadGENEVE, ht: hash.RSSIPv4, etherType: v4, key: outerKey(genevePort)},

		// GRE.
		{name: "gre ipv4", tunnels: true, frame: outer4(protoGRE, greHdr(0, v4, 0, 0, ip4)), ht: tcp4ht, etherType: v4,
			key: withEncaps(innerTCP4, 1, encNoID(EncapGRE))},
		{name: "gre ipv4 with tunnels off", frame: outer4(protoGRE, greHdr(0, v4, 0, 0, ip4)), ht: hash.RSSIPv4, etherType: v4,
			key: FlowKey{Src: c4, Dst: d4, Proto: protoGRE}},
		{name: "gre checksum key sequence, transparent ethernet", tunnels: true,
			frame: outer4(protoGRE, greHdr(greFlagChecksum|greFlagKey|greFlagSeq, etherTypeTEB, 9, 1, inner4(tag(5)))), ht: tcp4ht, etherType: v4,
			key: withEncaps(innerTCP4, 1, enc(EncapGRE, 9), enc(EncapVLAN, 5))},
		{name: "gre ipv6 over ipv6", tunnels: true, frame: outer6(protoGRE, greHdr(greFlagKey, v6, 0, 0, ip6)), ht: tcp6ht, etherType: v6,
			key: withEncaps(inner6, 1, enc(EncapGRE, 0))},
		{name: "gre version 1", tunnels: true, frame: outer4(protoGRE, greHdr(1, v4, 0, 0, ip4)),
			reason: ReasonBadGRE, ht: hash.RSSIPv4, etherType: v4, key: FlowKey{Src: c4, Dst: d4, Proto: protoGRE}},
		{name: "gre routing", tunnels: true, frame: outer4(protoGRE, greHdr(greFlagRouting, v4, 0, 0, ip4)),
			reason: ReasonBadGRE, ht: hash.RSSIPv4, etherType: v4, key: FlowKey{Src: c4, Dst: d4, Proto: protoGRE}},
		{name: "gre key cut", tunnels: true, frame: outer4(protoGRE, greHdr(greFlagKey, v4, 9, 0, nil)[:6]),
			reason: ReasonBadGRE, ht: hash.RSSIPv4, etherType: v4, key: FlowKey{Src: c4, Dst: d4, Proto: protoGRE}},
		{name: "gre ppp payload", tunnels: true, frame: outer4(protoGRE, greHdr(0, 0x880b, 0, 0, rep(8, 1))),
			reason: ReasonTunnelNonIP, ht: hash.RSSIPv4, etherType: v4, key: withEncaps(FlowKey{Src: c4, Dst: d4, Proto: protoGRE}, 0, encNoID(EncapGRE))},
		{name: "gre mpls payload", tunnels: true, frame: outer4(protoGRE, greHdr(0, etherTypeMPLS, 0, 0, mplsStack(ip4, 16))), ht: tcp4ht, etherType: v4,
			key: withEncaps(innerTCP4, 1, encNoID(EncapGRE), enc(EncapMPLS, 16))},

		// ERSPAN.
		{name: "erspan type 2", tunnels: true, frame: outer4(protoGRE, greHdr(greFlagSeq, etherTypeERSPAN2, 0, 3, erspan2Hdr(5, inner4()))), ht: tcp4ht, etherType: v4,
			key: withEncaps(innerTCP4, 1, encNoID(EncapGRE), enc(EncapERSPAN2, 5))},
		{name: "erspan type 1", tunnels: true, frame: outer4(protoGRE, greHdr(0, etherTypeERSPAN2, 0, 0, inner4())), ht: tcp4ht, etherType: v4,
			key: withEncaps(innerTCP4, 1, encNoID(EncapGRE), encNoID(EncapERSPAN1))},
		{name: "erspan type 3 with platform sub-header", tunnels: true,
			frame: outer4(protoGRE, greHdr(greFlagSeq, etherTypeERSPAN3, 0, 3, erspan3Hdr(1023, true, 0, inner4()))), ht: tcp4ht, etherType: v4,
			key: withEncaps(innerTCP4, 1, encNoID(EncapGRE), enc(EncapERSPAN3, 1023))},
		{name: "erspan type 3 ip frame type", tunnels: true,
			frame:  outer4(protoGRE, greHdr(greFlagSeq, etherTypeERSPAN3, 0, 3, erspan3Hdr(4, false, 2, ip4))),
			reason: ReasonTunnelNonIP, ht: hash.RSSIPv4, etherType: v4,
			key: withEncaps(FlowKey{Src: c4, Dst: d4, Proto: protoGRE}, 0, encNoID(EncapGRE), enc(EncapERSPAN3, 4))},
		{name: "erspan type 2 wrong version", tunnels: true, frame: outer4(protoGRE, greHdr(greFlagSeq, etherTypeERSPAN2, 0, 3, edit(erspan2Hdr(5, inner4()), func(b []byte) { b[0] = 0x20 }))),
			reason: ReasonBadERSPAN, ht: hash.RSSIPv4, etherType: v4, key: withEncaps(FlowKey{Src: c4, Dst: d4, Proto: protoGRE}, 0, encNoID(EncapGRE))},
		{name: "erspan type 3 platform cut", tunnels: true, frame: outer4(protoGRE, greHdr(greFlagSeq, etherTypeERSPAN3, 0, 3, erspan3Hdr(4, true, 0, nil)[:15])),
			reason: ReasonBadERSPAN, ht: hash.RSSIPv4, etherType: v4, key: withEncaps(FlowKey{Src: c4, Dst: d4, Proto: protoGRE}, 0, encNoID(EncapGRE))},

		// GTP-U.
		{name: "gtpu ipv4", tunnels: true, frame: gtpu4(0x01020304, ip4), ht: tcp4ht, etherType: v4,
			key: withEncaps(innerTCP4, 1, enc(EncapGTPU, 0x01020304))},
		{name: "gtpu sequence and extension headers", tunnels: true,
			frame: outer4(protoUDP, udpHdr(gtpuPort, gtpuPort, gtpuHdr(gtpuGPDU, 7, true, [][]byte{gtpuExt(1), gtpuExt(2)}, ip6)...)), ht: tcp6ht, etherType: v6,
			key: withEncaps(inner6, 1, enc(EncapGTPU, 7))},
		{name: "gtpu echo request", tunnels: true, frame: outer4(protoUDP, udpHdr(gtpuPort, gtpuPort, gtpuHdr(1, 0, true, nil, nil)...)),
			reason: ReasonTunnelNonIP, ht: hash.RSSIPv4, etherType: v4,
			key: withEncaps(FlowKey{Src: c4, Dst: d4, Proto: protoUDP, SrcPort: gtpuPort, DstPort: gtpuPort}, 0, enc(EncapGTPU, 0))},
		{name: "gtpu version 2", tunnels: true, frame: edit(gtpu4(7, ip4), func(b []byte) { b[ethHeaderLen+28] = 0x50 }),
			reason: ReasonBadGTPU, ht: hash.RSSIPv4, etherType: v4, key: FlowKey{Src: c4, Dst: d4, Proto: protoUDP, SrcPort: gtpuPort, DstPort: gtpuPort}},
		{name: "gtpu extension of length 0", tunnels: true,
			frame:  outer4(protoUDP, udpHdr(gtpuPort, gtpuPort, gtpuHdr(gtpuGPDU, 7, true, [][]byte{{0, 0, 0, 0}}, ip4)...)),
			reason: ReasonBadGTPU, ht: hash.RSSIPv4, etherType: v4, key: FlowKey{Src: c4, Dst: d4, Proto: protoUDP, SrcPort: gtpuPort, DstPort: gtpuPort}},

		// IP in IP.
		{name: "ipip 4in4", tunnels: true, frame: outer4(protoIPIP, ip4), ht: tcp4ht, etherType: v4, key: withEncaps(innerTCP4, 1, encNoID(EncapIPIP))},
		{name: "ipip 6in4", tunnels: true, frame: outer4(protoIPv6, ip6), ht: tcp6ht, etherType: v6, key: withEncaps(inner6, 1, encNoID(EncapIPIP))},
		{name: "ipip 4in6", tunnels: true, frame: outer6(protoIPIP, ip4), ht: tcp4ht, etherType: v4, key: withEncaps(innerTCP4, 1, encNoID(EncapIPIP))},
		{name: "ipip 6in6", tunnels: true, frame: outer6(protoIPv6, ip6), ht: tcp6ht, etherType: v6, key: withEncaps(inner6, 1, encNoID(EncapIPIP))},
		{name: "ipip with tunnels off", frame: outer4(protoIPIP, ip4), ht: hash.RSSIPv4, etherType: v4, key: FlowKey{Src: c4, Dst: d4, Proto: protoIPIP}},
		{name: "ipip outer fragment not opened", tunnels: true, frame: edit(outer4(protoIPIP, ip4), func(b []byte) { b[ethHeaderLen+7] = 1 }),
			ht: hash.RSSIPv4, etherType: v4, key: withFrag(FlowKey{Src: c4, Dst: d4, Proto: protoIPIP})},
		{name: "ipip inner ipv4 wrong version", tunnels: true, frame: outer4(protoIPIP, edit(innerIP4(), func(b []byte) { b[0] = 0x65 })),
			reason: ReasonBadIPVersion, ht: hash.RSSIPv4, etherType: v4, key: withEncaps(FlowKey{Src: c4, Dst: d4, Proto: protoIPIP}, 0, encNoID(EncapIPIP))},

		// Nesting.
		{name: "gre inside vxlan", tunnels: true, frame: vxlan4(42, ethFrame(v4, ipv4Packet(c4, d4, protoGRE, 0, greHdr(greFlagKey, v4, 9, 0, ip4)), tag(3))),
			ht: tcp4ht, etherType: v4, key: withEncaps(innerTCP4, 2, enc(EncapVXLAN, 42), enc(EncapVLAN, 3), enc(EncapGRE, 9))},
		{name: "ipip inside gre inside vxlan inside ipip", tunnels: true,
			frame: outer4(protoIPIP, ipv4Packet(c4, d4, protoUDP, 0, udpHdr(1, VXLANPort, vxlanHdr(1, ethFrame(v4, ipv4Packet(d4, c4, protoGRE, 0, greHdr(0, v4, 0, 0, ipv4Packet(c4, d4, protoIPIP, 0, ip4)))))...))),
			ht:    tcp4ht, etherType: v4, key: withEncaps(innerTCP4, 4, encNoID(EncapIPIP), enc(EncapVXLAN, 1), encNoID(EncapGRE), encNoID(EncapIPIP))},
		{name: "five tunnels deep", tunnels: true,
			frame:  outer4(protoIPIP, ipv4Packet(c4, d4, protoIPIP, 0, ipv4Packet(c4, d4, protoIPIP, 0, ipv4Packet(c4, d4, protoIPIP, 0, ipv4Packet(d4, c4, protoIPIP, 0, ip4))))),
			reason: ReasonTooDeep, ht: hash.RSSIPv4, etherType: v4,
			key: withEncaps(FlowKey{Src: d4, Dst: c4, Proto: protoIPIP}, 4, encNoID(EncapIPIP), encNoID(EncapIPIP), encNoID(EncapIPIP), encNoID(EncapIPIP))},
		{name: "broken vxlan inside gre keeps the middle hash", tunnels: true,
			frame:  outer4(protoGRE, greHdr(0, v4, 0, 0, ipv4Packet(d4, c4, protoUDP, 0, udpHdr(7, VXLANPort, 0, 0, 0)))),
			reason: ReasonBadVXLAN, ht: hash.RSSIPv4, etherType: v4,
			key: withEncaps(FlowKey{Src: d4, Dst: c4, Proto: protoUDP, SrcPort: 7, DstPort: VXLANPort}, 1, encNoID(EncapGRE))},

		// PPPoE, walked whatever the tunnel mode.
		{name: "pppoe ipv4", frame: ethFrame(etherTypePPPoESession, pppoeSession(0x1234, pppIPv4, ip4)), ht: tcp4ht, etherType: v4,
			key: withEncaps(innerTCP4, 0, enc(EncapPPPoE, 0x1234))},
		{name: "pppoe ipv6 vlan", frame: ethFrame(etherTypePPPoESession, pppoeSession(1, pppIPv6, ip6), tag(8)), ht: tcp6ht, etherType: v6,
			key: withVLANs(withEncaps(inner6, 0, enc(EncapPPPoE, 1)), 8)},
		{name: "pppoe compressed protocol", frame: ethFrame(etherTypePPPoESession, cat([]byte{pppoeVerType, 0, 0, 2, 0, byte(1 + len(ip4)), 0x21}, ip4)),
			ht: tcp4ht, etherType: v4, key: withEncaps(innerTCP4, 0, enc(EncapPPPoE, 2))},
		{name: "pppoe lcp", frame: ethFrame(etherTypePPPoESession, pppoeSession(3, 0xc021, rep(10, 1))), reason: ReasonPPPNonIP, etherType: etherTypePPPoESession,
			key: withEncaps(FlowKey{}, 0, enc(EncapPPPoE, 3))},
		{name: "pppoe discovery", frame: ethFrame(0x8863, rep(20, 0)), reason: ReasonNonIP, etherType: 0x8863},
		{name: "pppoe wrong version", frame: ethFrame(etherTypePPPoESession, edit(pppoeSession(3, pppIPv4, ip4), func(b []byte) { b[0] = 0x21 })),
			reason: ReasonBadPPPoE, etherType: etherTypePPPoESession},
		{name: "pppoe protocol cut", frame: ethFrame(etherTypePPPoESession, pppoeSession(3, pppIPv4, nil)[:7]),
			reason: ReasonBadPPPoE, etherType: etherTypePPPoESession, key: withEncaps(FlowKey{}, 0, enc(EncapPPPoE, 3))},
		{name: "pppoe length 0", frame: ethFrame(etherTypePPPoESession, edit(pppoeSession(5, pppIPv4, ip4), func(b []byte) { b[4], b[5] = 0, 0 })),
			reason: ReasonBadPPPoE, etherType: etherTypePPPoESession, key: withEncaps(FlowKey{}, 0, enc(EncapPPPoE, 5))},
		{name: "pppoe inside vxlan", tunnels: true, frame: vxlan4(6, ethFrame(etherTypePPPoESession, pppoeSession(4, pppIPv4, ip4))), ht: tcp4ht, etherType: v4,
			key: withEncaps(innerTCP4, 1, enc(EncapVXLAN, 6), enc(EncapPPPoE, 4))},

		// Cisco MetaData, walked whatever the tunnel mode, and in GRE.
		{name: "cmd ipv4", frame: ethFrame(etherTypeCMD, cmdEth(10, v4, ip4)), ht: tcp4ht, etherType: v4,
			key: withEncaps(innerTCP4, 0, enc(EncapCMD, 10))},
		{name: "cmd after a vlan tag, ipv6", frame: ethFrame(etherTypeCMD, cmdEth(0xffff, v6, ip6), tag(9)), ht: tcp6ht, etherType: v6,
			key: withVLANs(withEncaps(inner6, 0, enc(EncapCMD, 0xffff)), 9)},
		{name: "cmd mpls", frame: ethFrame(etherTypeCMD, cmdEth(3, etherTypeMPLS, mplsStack(ip4, 16))), ht: tcp4ht, etherType: v4,
			key: withEncaps(innerTCP4, 0, enc(EncapCMD, 3), enc(EncapMPLS, 16))},
		{name: "cmd cut", frame: ethFrame(etherTypeCMD, cmdEth(10, v4, nil)[:7]), reason: ReasonBadCMD, etherType: etherTypeCMD},
		{name: "cmd after cmd", frame: ethFrame(etherTypeCMD, cmdEth(10, etherTypeCMD, cmdEth(11, v4, ip4))), reason: ReasonNonIP, etherType: etherTypeCMD,
			key: withEncaps(FlowKey{}, 0, enc(EncapCMD, 10))},
		{name: "cmd arp", frame: ethFrame(etherTypeCMD, cmdEth(10, 0x0806, rep(28, 0))), reason: ReasonNonIP, etherType: 0x0806,
			key: withEncaps(FlowKey{}, 0, enc(EncapCMD, 10))},
		{name: "gre cmd ipv4", tunnels: true, frame: outer4(protoGRE, greHdr(greFlagKey, etherTypeCMD, 40, 0, cmdGRE(v4, 7, ip4))), ht: tcp4ht, etherType: v4,
			key: withEncaps(innerTCP4, 1, enc(EncapGRE, 40), enc(EncapCMD, 7))},
		{name: "gre cmd ethernet", tunnels: true, frame: outer6(protoGRE, greHdr(0, etherTypeCMD, 0, 0, cmdGRE(etherTypeTEB, 7, inner4(tag(4))))), ht: tcp4ht, etherType: v4,
			key: withEncaps(innerTCP4, 1, encNoID(EncapGRE), enc(EncapCMD, 7), enc(EncapVLAN, 4))},
		{name: "gre cmd with tunnels off", frame: outer4(protoGRE, greHdr(greFlagKey, etherTypeCMD, 40, 0, cmdGRE(v4, 7, ip4))), ht: hash.RSSIPv4, etherType: v4,
			key: FlowKey{Src: c4, Dst: d4, Proto: protoGRE}},
		{name: "gre keepalive in cmd", tunnels: true,
			frame:  outer4(protoGRE, greHdr(greFlagKey, etherTypeCMD, 40, 0, cmdGRE(v4, 0, ipv4Packet(d4, c4, protoGRE, 0, greHdr(greFlagKey, 0, 40, 0, nil))))),
			reason: ReasonTunnelNonIP, ht: hash.RSSIPv4, etherType: v4,
			key: withEncaps(FlowKey{Src: d4, Dst: c4, Proto: protoGRE}, 1, enc(EncapGRE, 40), enc(EncapCMD, 0), enc(EncapGRE, 40))},
		{name: "gre cmd cut", tunnels: true, frame: outer4(protoGRE, greHdr(0, etherTypeCMD, 0, 0, cmdGRE(v4, 7, nil)[:7])),
			reason: ReasonBadCMD, ht: hash.RSSIPv4, etherType: v4, key: withEncaps(FlowKey{Src: c4, Dst: d4, Proto: protoGRE}, 0, encNoID(EncapGRE))},
		{name: "gre cmd then ethernet-form cmd", tunnels: true, frame: outer4(protoGRE, greHdr(0, etherTypeCMD, 0, 0, cmdGRE(etherTypeCMD, 7, cmdEth(8, v4, ip4)))),
			reason: ReasonTunnelNonIP, ht: hash.RSSIPv4, etherType: v4,
			key: withEncaps(FlowKey{Src: c4, Dst: d4, Proto: protoGRE}, 0, encNoID(EncapGRE), enc(EncapCMD, 7))},
		{name: "geneve carrying cmd", tunnels: true, frame: outer4(protoUDP, udpHdr(tunnelSport, genevePort, geneveHdr(77, etherTypeCMD, 0, cmdEth(5, v4, ip4))...)),
			ht: tcp4ht, etherType: v4, key: withEncaps(innerTCP4, 1, enc(EncapGENEVE, 77), enc(EncapCMD, 5))},

		// MPLS over UDP.
		{name: "mpls over udp ipv4", tunnels: true, frame: outer4(protoUDP, udpHdr(tunnelSport, mplsUDPPort, mplsStack(ip4, 100)...)), ht: tcp4ht, etherType: v4,
			key: withEncaps(innerTCP4, 1, encNoID(EncapMPLSUDP), enc(EncapMPLS, 100))},
		{name: "mpls over udp with tunnels off", frame: outer4(protoUDP, udpHdr(tunnelSport, mplsUDPPort, mplsStack(ip4, 100)...)), ht: hash.RSSIPv4, etherType: v4,
			key: outerKey(mplsUDPPort)},
		{name: "mpls over udp over ipv6, pseudowire", tunnels: true,
			frame: outer6(protoUDP, udpHdr(tunnelSport, mplsUDPPort, mplsStack(cat([]byte{0, 0, 0, 0}, inner4()), 16, 17)...)), ht: tcp4ht, etherType: v4,
			key: withEncaps(innerTCP4, 1, encNoID(EncapMPLSUDP), enc(EncapMPLS, 16), enc(EncapMPLS, 17), encNoID(EncapPseudowire))},
		{name: "mpls over udp, stack cut", tunnels: true, frame: outer4(protoUDP, udpHdr(tunnelSport, mplsUDPPort, 0, 0)),
			reason: ReasonBadMPLS, ht: hash.RSSIPv4, etherType: v4, key: withEncaps(outerKey(mplsUDPPort), 0, encNoID(EncapMPLSUDP))},
		{name: "mpls over udp, no payload", tunnels: true, frame: outer4(protoUDP, udpHdr(tunnelSport, mplsUDPPort)),
			reason: ReasonBadMPLS, ht: hash.RSSIPv4, etherType: v4, key: withEncaps(outerKey(mplsUDPPort), 0, encNoID(EncapMPLSUDP))},
		{name: "mpls over udp, udp header cut", tunnels: true, frame: outer4(protoUDP, udpHdr(tunnelSport, mplsUDPPort)[:6]),
			reason: ReasonBadMPLS, ht: hash.RSSIPv4, etherType: v4, key: outerKey(mplsUDPPort)},

		// BIG TCP: an IPv4 total length, an IPv6 payload length and a UDP
		// length of zero.
		{name: "big tcp ipv4", frame: ethFrame(v4, bigIPv4(innerIP4())), ht: tcp4ht, etherType: v4, key: innerTCP4},
		{name: "big tcp ipv4 in vxlan in big tcp ipv4", tunnels: true,
			frame: ethFrame(v4, bigIPv4(ipv4Packet(c4, d4, protoUDP, 0, edit(udpHdr(tunnelSport, VXLANPort, vxlanHdr(5, ethFrame(v4, bigIPv4(innerIP4())))...), func(b []byte) { b[4], b[5] = 0, 0 })))),
			ht:    tcp4ht, etherType: v4, key: withEncaps(innerTCP4, 1, enc(EncapVXLAN, 5))},
		{name: "jumbogram in vxlan in jumbogram", tunnels: true,
			frame: ethFrame(v6, jumbo6(c6, d6, protoUDP, edit(udpHdr(tunnelSport, VXLANPort, vxlanHdr(5, ethFrame(v6, jumbo6(a6, b6, protoTCP, tcpHdr(sport, dport, 'h', 'i'))))...), func(b []byte) { b[4], b[5] = 0, 0 }))),
			ht:    tcp6ht, etherType: v6, key: withEncaps(inner6, 1, enc(EncapVXLAN, 5))},
		{name: "jumbogram in geneve in ipv4", tunnels: true,
			frame: outer4(protoUDP, udpHdr(tunnelSport, genevePort, geneveHdr(77, v6, 1, jumbo6(a6, b6, protoTCP, tcpHdr(sport, dport, 'h', 'i')))...)),
			ht:    tcp6ht, etherType: v6, key: withEncaps(inner6, 1, enc(EncapGENEVE, 77))},

		// MPLS, walked whatever the tunnel mode.
		{name: "mpls ipv4", frame: ethFrame(etherTypeMPLS, mplsStack(ip4, 1600)), ht: tcp4ht, etherType: v4,
			key: withEncaps(innerTCP4, 0, enc(EncapMPLS, 1600))},
		{name: "mpls two labels ipv6 multicast", frame: ethFrame(etherTypeMPLSMulticast, mplsStack(ip6, 16, 0xfffff)), ht: tcp6ht, etherType: v6,
			key: withEncaps(inner6, 0, enc(EncapMPLS, 16), enc(EncapMPLS, 0xfffff))},
		{name: "mpls pseudowire ethernet with vlan", frame: ethFrame(etherTypeMPLS, mplsStack(cat([]byte{0, 0, 0, 1}, inner4(tag(30))), 100, 200), tag(2)),
			ht: tcp4ht, etherType: v4,
			key: withVLANs(withEncaps(innerTCP4, 0, enc(EncapMPLS, 100), enc(EncapMPLS, 200), encNoID(EncapPseudowire), enc(EncapVLAN, 30)), 2)},
		{name: "mpls g-ach", frame: ethFrame(etherTypeMPLS, mplsStack([]byte{0x10, 0, 0, 7, 1, 2}, 13)), reason: ReasonMPLSNonIP, etherType: etherTypeMPLS,
			key: withEncaps(FlowKey{}, 0, enc(EncapMPLS, 13))},
		{name: "mpls stack cut", frame: ethFrame(etherTypeMPLS, mplsStack(nil, 1, 2)[:6]), reason: ReasonBadMPLS, etherType: etherTypeMPLS,
			key: withEncaps(FlowKey{}, 0, enc(EncapMPLS, 1))},
		{name: "mpls no payload", frame: ethFrame(etherTypeMPLS, mplsStack(nil, 1)), reason: ReasonBadMPLS, etherType: etherTypeMPLS,
			key: withEncaps(FlowKey{}, 0, enc(EncapMPLS, 1))},
		{name: "mpls 9 labels", frame: ethFrame(etherTypeMPLS, mplsStack(ip4, 1, 2, 3, 4, 5, 6, 7, 8, 9)), reason: ReasonTooDeep, etherType: etherTypeMPLS,
			key: withEncaps(FlowKey{}, 0, enc(EncapMPLS, 1), enc(EncapMPLS, 2), enc(EncapMPLS, 3), enc(EncapMPLS, 4), enc(EncapMPLS, 5), enc(EncapMPLS, 6), enc(EncapMPLS, 7), enc(EncapMPLS, 8))},
		{name: "mpls in vxlan, 9 labels, keeps the outer hash", tunnels: true, frame: vxlan4(1, ethFrame(etherTypeMPLS, mplsStack(ip4, 1, 2, 3, 4, 5, 6, 7, 8))),
			reason: ReasonTooDeep, ht: hash.RSSIPv4, etherType: v4,
			key: withEncaps(outerKey(VXLANPort), 0, enc(EncapVXLAN, 1), enc(EncapMPLS, 1), enc(EncapMPLS, 2), enc(EncapMPLS, 3), enc(EncapMPLS, 4), enc(EncapMPLS, 5), enc(EncapMPLS, 6), enc(EncapMPLS, 7))},
	}
}

// TestFlowKeyEncapsulation checks the names the encap column prints.
func TestFlowKeyEncapsulation(t *testing.T) {
	for _, tc := range []struct {
		k    FlowKey
		want string
	}{
		{FlowKey{}, ""},
		{withVLANs(withEncaps(FlowKey{}, 1, enc(EncapVXLAN, 42)), 7), "vlan:7+vxlan:42"},
		{withEncaps(FlowKey{}, 0, enc(EncapMPLS, 1600)), "mpls:1600"},
		{withEncaps(FlowKey{}, 2, enc(EncapGRE, 9), encNoID(EncapIPIP)), "gre:key=9+ipip"},
		{withEncaps(FlowKey{}, 1, encNoID(EncapGRE), enc(EncapERSPAN2, 5), enc(EncapVLAN, 3)), "gre+erspan2:5+vlan:3"},
		{withEncaps(FlowKey{}, 0, enc(EncapPPPoE, 17), encNoID(EncapPseudowire), enc(EncapGTPU, 1), enc(EncapGENEVE, 2)), "pppoe:17+pw+gtpu:1+geneve:2"},
		{withEncaps(FlowKey{}, 1, enc(EncapGRE, 40), enc(EncapCMD, 10)), "gre:key=40+cmd:10"},
		{withEncaps(FlowKey{}, 1, encNoID(EncapMPLSUDP), enc(EncapMPLS, 16)), "mplsudp+mpls:16"},
	} {
		if got := tc.k.Encapsulation(); got != tc.want {
			t.Errorf("Encapsulation() = %q, want %q", got, tc.want)
		}
	}
	for k := EncapNone; k < numEncapKinds; k++ {
		var back EncapKind
		b, _ := k.MarshalText()
		if err := back.UnmarshalText(b); err != nil || back != k {
			t.Errorf("%v does not round-trip: %v %v", k, back, err)
		}
		if k.Tunnel() != (k >= EncapVXLAN && k != EncapCMD) {
			t.Errorf("%v.Tunnel() = %v", k, k.Tunnel())
		}
	}
	if EncapKind(200).String() != "unknown" {
		t.Error("an unknown kind has a name")
	}
}

func tunnelClassifier(t testing.TB, cfg HashConfig) *Classifier {
	t.Helper()
	if cfg.Key == nil && cfg.Algorithm == hash.AlgorithmToeplitz {
		cfg.Key = hash.MicrosoftKey[:]
	}
	c, err := NewClassifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClassifyTruncatedEncaps cuts every encapsulated frame of
// encapCases at every byte: no panic; a reason for every cut before the
// inner ports end; and wherever the inner packet was not reached (Depth
// 0 with a tunnel in the frame), the hash a classifier with tunnels off
// gives, the outer one.
func TestClassifyTruncatedEncaps(t *testing.T) {
	on := tunnelClassifier(t, HashConfig{Tunnels: TunnelsInner})
	off := tunnelClassifier(t, HashConfig{})
	for _, tc := range encapCases() {
		if tc.reason != ReasonOK || tc.key.Proto != protoTCP || tc.key.Fragment || tc.key.Depth == 0 && tc.key.NEncap == 0 {
			continue
		}
		portsEnd := len(tc.frame) - 18 // the inner TCP header and 'h', 'i' follow the ports
		for n := 0; n <= len(tc.frame); n++ {
			f := tc.frame[:n]
			var got, outer Classification
			on.Classify(f, &got)
			off.Classify(f, &outer)
			if n < portsEnd && got.Reason == ReasonOK {
				t.Errorf("%s cut to %d of %d bytes: reason ok, key %+v", tc.name, n, len(tc.frame), got.Key)
			}
			if n >= portsEnd && (got.Reason != tc.reason || got.Key != tc.key || got.HashType != tc.ht) {
				t.Errorf("%s cut to %d of %d bytes (past the inner ports): %v %v %+v", tc.name, n, len(tc.frame), got.Reason, got.HashType, got.Key)
			}
			if got.Key.Depth == 0 && (got.FlowID != outer.FlowID || got.HashType != outer.HashType ||
				got.Key.Src != outer.Key.Src || got.Key.Dst != outer.Key.Dst || got.Key.Proto != outer.Key.Proto) {
				t.Errorf("%s cut to %d bytes, inside not hashed (%v): %v %#x %+v; outer hash %v %#x %+v",
					tc.name, n, got.Reason, got.HashType, got.FlowID, got.Key, outer.HashType, outer.FlowID, outer.Key)
			}
			if got.Key.Depth > 0 && got.HashType == hash.None {
				t.Errorf("%s cut to %d bytes: depth %d without a hash", tc.name, n, got.Key.Depth)
			}
		}
	}
}

// TestClassifyOuterFragments: an outer IPv4 or IPv6 fragment is never
// opened, so every fragment of an outer datagram, first or not, follows
// the outer 2-tuple with or without TunnelsInner.
func TestClassifyOuterFragments(t *testing.T) {
	on := tunnelClassifier(t, HashConfig{Tunnels: TunnelsInner, UDP4Tuple: true})
	off := tunnelClassifier(t, HashConfig{UDP4Tuple: true})
	for _, tc := range encapCases() {
		if !tc.tunnels || tc.reason != ReasonOK || tc.key.Depth == 0 {
			continue
		}
		f := tc.frame
		var frags [][]byte
		switch binary.BigEndian.Uint16(f[12:14]) {
		case etherTypeIPv4:
			first := edit(append([]byte(nil), f...), func(b []byte) { b[ethHeaderLen+6] |= 0x20 })
			later := edit(append([]byte(nil), f...), func(b []byte) { b[ethHeaderLen+7] = 100 })
			frags = [][]byte{first, later}
		case etherTypeIPv6:
			// Insert a fragment header in front of the outer payload.
			nh := f[ethHeaderLen+6]
			pl := f[ethHeaderLen+ipv6HeaderLen:]
			for _, off := range []uint16{0, 100} {
				ip := ipv6Packet(netip.AddrFrom16([16]byte(f[ethHeaderLen+8:])), netip.AddrFrom16([16]byte(f[ethHeaderLen+24:])), protoFragment, fragHdr(nh, off, off == 0, pl))
				frags = append(frags, ethFrame(etherTypeIPv6, ip))
			}
		}
		var want Classification
		for i, fr := range frags {
			var a, b Classification
			on.Classify(fr, &a)
			off.Classify(fr, &b)
			if !a.Key.Fragment || a.Key.Depth != 0 || a.Key.NEncap != 0 || !sameClassification(&a, &b) {
				t.Errorf("%s, outer fragment %d: %+v %v, tunnels off %+v", tc.name, i, a.Key, a.Reason, b.Key)
			}
			if i > 0 && (a.FlowID != want.FlowID || a.HashType != want.HashType) {
				t.Errorf("%s: outer fragments hash apart: %#x %v, %#x %v", tc.name, a.FlowID, a.HashType, want.FlowID, want.HashType)
			}
			want = a
		}
	}
}

// TestClassifyTunnelSymmetric: with Symmetric, the two directions of an
// inner connection hash alike, whichever tunnel endpoints carry them.
func TestClassifyTunnelSymmetric(t *testing.T) {
	c := tunnelClassifier(t, HashConfig{Tunnels: TunnelsInner, Symmetric: true, Key: mustRandomKey(t)})
	fwd := vxlan4(3, tcp4(0))
	rev := outer4(protoUDP, udpHdr(60000, VXLANPort, vxlanHdr(3, ethFrame(etherTypeIPv4, ipv4Packet(b4, a4, protoTCP, 0, tcpHdr(dport, sport))))...))
	var a, b Classification
	c.Classify(fwd, &a)
	c.Classify(rev, &b)
	if a.HashType != hash.RSSTCPIPv4 || a.FlowID != b.FlowID || a.Key.Depth != 1 || b.Key.Src != b4 {
		t.Errorf("forward %v %#x %+v, reverse %v %#x %+v", a.HashType, a.FlowID, a.Key, b.HashType, b.FlowID, b.Key)
	}
}

func mustRandomKey(t testing.TB) []byte {
	k, err := hash.RandomKey(hash.DefaultKeyLen)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestClassifyHashTypes checks the hash-type set: the tuple each protocol
// gets, on the fast path and the general one, for each family.
func TestClassifyHashTypes(t *testing.T) {
	udp4 := ethFrame(etherTypeIPv4, ipv4Packet(a4, b4, protoUDP, 0, udpHdr(sport, 53)))
	udp6 := ip6frame(protoUDP, udpHdr(sport, 53))
	tcp6 := ip6frame(protoTCP, tcpHdr(sport, dport))
	sctp4 := ethFrame(etherTypeIPv4, ipv4Packet(a4, b4, protoSCTP, 0, sctpHdr(1, 2)))
	tcp4v := tcp4(0, tag(9)) // the general path
	for _, tc := range []struct {
		types hash.Types
		udp4  bool
		want  [6]hash.HashType // tcp4, tcp4 tagged, udp4, tcp6, udp6, sctp4
	}{
		{0, false, [6]hash.HashType{hash.RSSTCPIPv4, hash.RSSTCPIPv4, hash.RSSIPv4, hash.RSSTCPIPv6, hash.RSSIPv6, hash.RSSIPv4}},
		{0, true, [6]hash.HashType{hash.RSSTCPIPv4, hash.RSSTCPIPv4, hash.RSSUDPIPv4, hash.RSSTCPIPv6, hash.RSSUDPIPv6, hash.OpaqueHash}},
		{hash.TypeIPv4 | hash.TypeIPv6, false, [6]hash.HashType{hash.RSSIPv4, hash.RSSIPv4, hash.RSSIPv4, hash.RSSIPv6, hash.RSSIPv6, hash.RSSIPv4}},
		{hash.TypeIPv4 | hash.TypeIPv6 | hash.TypeUDPIPv4, false, [6]hash.HashType{hash.RSSIPv4, hash.RSSIPv4, hash.RSSUDPIPv4, hash.RSSIPv6, hash.RSSIPv6, hash.OpaqueHash}},
		{hash.TypeIPv4 | hash.TypeIPv6 | hash.TypeTCPIPv6 | hash.TypeUDPIPv6, false, [6]hash.HashType{hash.RSSIPv4, hash.RSSIPv4, hash.RSSIPv4, hash.RSSTCPIPv6, hash.RSSUDPIPv6, hash.RSSIPv4}},
	} {
		c := tunnelClassifier(t, HashConfig{Types: tc.types, UDP4Tuple: tc.udp4})
		for i, f := range [][]byte{tcp4(0), tcp4v, udp4, tcp6, udp6, sctp4} {
			var got Classification
			c.Classify(f, &got)
			if got.HashType != tc.want[i] {
				t.Errorf("types %v udp4 %v, frame %d: %v, want %v", tc.types, tc.udp4, i, got.HashType, tc.want[i])
			}
			checkHash(t, msHasher(t), &got, false)
			var fo Classification
			c.flowOnly(f, &fo)
			if fo.FlowID != got.FlowID || fo.HashType != got.HashType {
				t.Errorf("types %v, frame %d: flowOnly %v %#x, Classify %v %#x", tc.types, i, fo.HashType, fo.FlowID, got.HashType, got.FlowID)
			}
		}
	}
}

func TestHashConfigErrors(t *testing.T) {
	for _, cfg := range []HashConfig{
		{Types: hash.TypeTCPIPv4 | hash.TypeIPv6},                 // no IPv4 2-tuple
		{Types: hash.TypeIPv4},                                    // no IPv6
		{Types: hash.DefaultTypes | 1},                            // an unknown bit
		{Algorithm: hash.AlgorithmSipHash, Key: make([]byte, 40)}, // a Toeplitz-sized key
		{Algorithm: 7},
		{Tunnels: 2},
		{VXLANPorts: []uint16{0}},
		{VXLANPorts: []uint16{4789, genevePort}},
		{VXLANPorts: []uint16{gtpuPort}},
	} {
		if _, err := NewClassifier(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: error %v, want ErrConfig", cfg, err)
		}
	}
	cfg := HashConfig{Types: hash.AllTypes, VXLANPorts: []uint16{8472}}
	if err := cfg.normalize(); err != nil || !cfg.UDP4Tuple || len(cfg.VXLANPorts) != 1 {
		t.Errorf("all types: %v, UDP4Tuple %v", err, cfg.UDP4Tuple)
	}
	cfg = HashConfig{}
	if err := cfg.normalize(); err != nil || cfg.Types != hash.DefaultTypes || cfg.UDP4Tuple || len(cfg.VXLANPorts) != 1 || cfg.VXLANPorts[0] != VXLANPort {
		t.Errorf("defaults: %+v %v", cfg, err)
	}
	var m TunnelMode
	if err := m.UnmarshalText([]byte("Inner")); err != nil || m != TunnelsInner || m.String() != "inner" {
		t.Errorf("TunnelMode: %v %v", m, err)
	}
	if err := m.UnmarshalText([]byte("both")); !errors.Is(err, ErrConfig) {
		t.Errorf("TunnelMode both: %v", err)
	}
}

// TestClassifyVXLANPorts: VXLAN is told by the configured ports only.
func TestClassifyVXLANPorts(t *testing.T) {
	linux := outer4(protoUDP, udpHdr(tunnelSport, 8472, vxlanHdr(4, inner4())...))
	iana := vxlan4(4, inner4())
	for _, tc := range []struct {
		ports       []uint16
		linux, iana uint8 // the depth each frame gets
	}{
		{nil, 0, 1},
		{[]uint16{8472}, 1, 0},
		{[]uint16{4789, 8472}, 1, 1},
	} {
		c := tunnelClassifier(t, HashConfig{Tunnels: TunnelsInner, VXLANPorts: tc.ports})
		var a, b Classification
		c.Classify(linux, &a)
		c.Classify(iana, &b)
		if a.Key.Depth != tc.linux || b.Key.Depth != tc.iana {
			t.Errorf("ports %v: depth %d for 8472 and %d for 4789, want %d and %d", tc.ports, a.Key.Depth, b.Key.Depth, tc.linux, tc.iana)
		}
	}
}

// TestClassifySipHash: with SipHash the flowid is SipHash of the same
// tuple, on every path (Classify, flowOnly, the dispatcher's batched fast
// path), and the key-only classifier still gives no hash.
func TestClassifySipHash(t *testing.T) {
	key := []byte("0123456789abcdef")
	sip, err := hash.NewSipHash(key)
	if err != nil {
		t.Fatal(err)
	}
	for _, tunnels := range []TunnelMode{TunnelsOuter, TunnelsInner} {
		c := tunnelClassifier(t, HashConfig{Algorithm: hash.AlgorithmSipHash, Key: key, Tunnels: tunnels})
		var chunk []Frame
		var want []Classification
		for _, tc := range classifyCases() {
			var got Classification
			c.Classify(tc.frame, &got)
			if got.HashType != hash.None && got.FlowID != sip.Sum(got.Tuple()) {
				t.Errorf("%s: flowid %#x, SipHash of the tuple %#x", tc.name, got.FlowID, sip.Sum(got.Tuple()))
			}
			var fo Classification
			c.flowOnly(tc.frame, &fo)
			if fo.FlowID != got.FlowID || fo.HashType != got.HashType {
				t.Errorf("%s: flowOnly %#x, Classify %#x", tc.name, fo.FlowID, got.FlowID)
			}
			var k Classification
			c.keyOnly().Classify(tc.frame, &k)
			if k.FlowID != 0 || k.Key != got.Key {
				t.Errorf("%s: key-only flowid %#x", tc.name, k.FlowID)
			}
			if len(chunk) < chunkLen {
				chunk = append(chunk, Frame{Data: tc.frame})
				want = append(want, got)
			}
		}
		var fc fastChunk
		slow := fc.run(c, chunk)
		for k, i := range fc.at[:fc.n] {
			if slow&(1<<i) != 0 || fc.sums[k] != want[i].FlowID || fc.types[k] != want[i].HashType {
				t.Errorf("fast chunk frame %d: %#x %v, Classify %#x %v", i, fc.sums[k], fc.types[k], want[i].FlowID, want[i].HashType)
			}
		}
		if fc.n == 0 {
			t.Error("no frame took the fast path")
		}
	}
}

// TestClassifyVXLANFastPath: flowOnly takes a VXLAN frame whose outer and
// inner packets are untagged simple IPv4 without classifying it fully,
// and gives it what Classify gives; any other tunnelled frame is
// classified fully.
func TestClassifyVXLANFastPath(t *testing.T) {
	c := tunnelClassifier(t, HashConfig{Tunnels: TunnelsInner})
	// The same frame, in three cases.
	fast := map[string]bool{"vxlan tcp4": true, "vxlan outer with tunnels off": true, "vxlan outer udp 4-tuple with tunnels off": true}
	for _, tc := range encapCases() {
		var tuple [hash.IPv4Tuple4Len]byte
		_, ok := c.vxlanTuple(tc.frame, &tuple)
		if ok != fast[tc.name] {
			t.Errorf("%s: fast path %v, want %v", tc.name, ok, fast[tc.name])
		}
		var got, want Classification
		c.flowOnly(tc.frame, &got)
		c.Classify(tc.frame, &want)
		if got.FlowID != want.FlowID || got.HashType != want.HashType || got.EtherType != want.EtherType || got.Reason != want.Reason || got.keyless != ok {
			t.Errorf("%s: flowOnly %#x %v %#x %v, Classify %#x %v %#x %v", tc.name, got.FlowID, got.HashType, got.EtherType, got.Reason,
				want.FlowID, want.HashType, want.EtherType, want.Reason)
		}
	}
}

// TestClassifyOverwrites: whatever an earlier classification left in out,
// each path of Classify and ClassifyVLAN overwrites all of it.
func TestClassifyOverwrites(t *testing.T) {
	c := tunnelClassifier(t, HashConfig{Tunnels: TunnelsInner})
	var prior []Classification
	for _, tc := range classifyCases() {
		var p Classification
		c.Classify(tc.frame, &p)
		prior = append(prior, p)
		c.ClassifyVLAN(tc.frame, 9, &p)
		prior = append(prior, p)
	}
	for _, tc := range classifyCases() {
		var fresh, freshV Classification
		c.Classify(tc.frame, &fresh)
		c.ClassifyVLAN(tc.frame, 5, &freshV)
		for i := range prior {
			got := prior[i]
			c.Classify(tc.frame, &got)
			if !sameClassification(&got, &fresh) {
				t.Fatalf("%s after %+v:\n%+v\nwant %+v", tc.name, prior[i], got, fresh)
			}
			got = prior[i]
			c.ClassifyVLAN(tc.frame, 5, &got)
			if !sameClassification(&got, &freshV) {
				t.Fatalf("%s (out-of-band tag) after %+v:\n%+v\nwant %+v", tc.name, prior[i], got, freshV)
			}
		}
	}
}
