package synth

// This file writes the headers of tunnels and shims by hand, for the
// encapsulation cases and the tunnels capture alike: each header kind is
// written here once.

import (
	"encoding/binary"
	"net"
	"slices"
)

// The outer Ethernet headers' addresses: a tunnel frame goes from its
// source's host to the router.
var (
	routerMAC = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}
	switchMAC = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0xfe}
	broadcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
)

// hostMAC is a host's MAC address, made of its IP address.
func hostMAC(ip net.IP) net.HardwareAddr {
	if v4 := ip.To4(); v4 != nil {
		return net.HardwareAddr{0x02, 0x00, v4[0], v4[1], v4[2], v4[3]}
	}
	return net.HardwareAddr{0x02, 0x06, ip[12], ip[13], ip[14], ip[15]}
}

// IP protocol numbers and EtherTypes the headers name.
const (
	protoIPv4, protoTCP, protoUDP, protoIPv6, protoGRE = 4, 6, 17, 41, 47

	typeIPv4, typeIPv6, typeVLAN, typeQinQ = 0x0800, 0x86dd, 0x8100, 0x88a8
	typeMPLS, typePPPoE, typeCMD, typeTEB  = 0x8847, 0x8864, 0x8909, 0x6558
	typeERSPAN2, typeERSPAN3               = 0x88be, 0x22eb
)

// sum is the Internet checksum of data, starting from the partial sum s.
func sum(data []byte, s uint32) uint16 {
	for i := 0; i+1 < len(data); i += 2 {
		s += uint32(binary.BigEndian.Uint16(data[i:]))
	}
	if len(data)%2 == 1 {
		s += uint32(data[len(data)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}

// checksum is the IPv4 header checksum of h (its checksum field zero).
func checksum(h []byte) uint16 { return sum(h, 0) }

// etherType is the EtherType of an IP packet from src.
func etherType(src net.IP) uint16 {
	if src.To4() != nil {
		return typeIPv4
	}
	return typeIPv6
}

// ipPacket is an IP packet of protocol proto from src to dst: IPv4 with
// identification id and a TTL of 64, or IPv6 with a hop limit of 64. A
// TCP or UDP payload (its checksum field zero) gets its checksum.
func ipPacket(src, dst net.IP, id uint16, proto uint8, payload []byte) []byte {
	var h []byte
	var pseudo uint32
	if s4, d4 := src.To4(), dst.To4(); s4 != nil {
		h = []byte{0x45, 0, 0, 0, byte(id >> 8), byte(id), 0, 0, 64, proto, 0, 0}
		binary.BigEndian.PutUint16(h[2:], uint16(20+len(payload)))
		h = append(append(h, s4...), d4...)
		binary.BigEndian.PutUint16(h[10:], checksum(h))
		pseudo = uint32(sumOf(s4)) + uint32(sumOf(d4))
	} else {
		h = []byte{0x60, 0, 0, 0, 0, 0, proto, 64}
		binary.BigEndian.PutUint16(h[4:], uint16(len(payload)))
		h = append(append(h, src.To16()...), dst.To16()...)
		pseudo = uint32(sumOf(src.To16())) + uint32(sumOf(dst.To16()))
	}
	p := append(h, payload...)
	l4 := p[len(h):]
	pseudo += uint32(proto) + uint32(len(l4))
	switch proto {
	case protoTCP:
		binary.BigEndian.PutUint16(l4[16:], sum(l4, pseudo))
	case protoUDP:
		binary.BigEndian.PutUint16(l4[6:], sum(l4, pseudo))
	}
	return p
}

// ethernet is an Ethernet frame of type typ from src to dst, padded with
// zeros to Ethernet's least length (60 bytes without the FCS), as
// gopacket pads it.
func ethernet(src, dst net.HardwareAddr, typ uint16, payload []byte) []byte {
	f := append(slices.Clone(dst), src...)
	f = append(binary.BigEndian.AppendUint16(f, typ), payload...)
	return append(f, make([]byte, max(60-len(f), 0))...)
}

// ipOver is an Ethernet frame from src's host to the router carrying
// ipPacket's packet.
func ipOver(src, dst net.IP, id uint16, proto uint8, payload []byte) []byte {
	return ethernet(hostMAC(src), routerMAC, etherType(src), ipPacket(src, dst, id, proto, payload))
}

// udpHeader is a UDP header from port sport to dport before payload, its
// checksum zero (ipPacket fills it in), its length zero (RFC 2675) when
// the datagram is over 64 KiB.
func udpHeader(sport, dport uint16, payload []byte) []byte {
	u := binary.BigEndian.AppendUint16(nil, sport)
	u = binary.BigEndian.AppendUint16(u, dport)
	n := 8 + len(payload)
	if n > 0xffff {
		n = 0
	}
	u = binary.BigEndian.AppendUint16(u, uint16(n))
	return append(append(u, 0, 0), payload...)
}

// udpOver is ipOver for a UDP datagram.
func udpOver(src, dst net.IP, id, sport, dport uint16, payload []byte) []byte {
	return ipOver(src, dst, id, protoUDP, udpHeader(sport, dport, payload))
}

// sumOf is the one's complement sum of b's 16-bit words, not inverted.
func sumOf(b []byte) uint16 { return ^sum(b, 0) }

// withTag inserts a VLAN tag (TPID tpid) after a frame's MAC addresses.
func withTag(frame []byte, tpid, vid uint16) []byte {
	f := slices.Clone(frame[:12])
	f = append(f, byte(tpid>>8), byte(tpid), byte(vid>>8), byte(vid))
	return append(f, frame[12:]...)
}

// withShim puts EtherType typ and hdr between a frame's MAC addresses and
// its IP packet, in place of its EtherType.
func withShim(frame []byte, typ uint16, hdr []byte) []byte {
	f := binary.BigEndian.AppendUint16(slices.Clone(frame[:12]), typ)
	return append(append(f, hdr...), frame[14:]...)
}

// mplsLabel is an MPLS label stack entry with a TTL of 64, bottom of the
// stack when bottom.
func mplsLabel(label uint32, bottom bool) []byte {
	e := label<<12 | 64
	if bottom {
		e |= 0x100
	}
	return binary.BigEndian.AppendUint32(nil, e)
}

// pppoeSession is a PPPoE session header (session id) and the PPP
// protocol of the IP packet ip, which follows it.
func pppoeSession(id uint16, ip []byte) []byte {
	proto := uint16(0x0021) // IPv4
	if ip[0]>>4 == 6 {
		proto = 0x0057
	}
	h := []byte{0x11, 0x00, byte(id >> 8), byte(id), 0, 0, byte(proto >> 8), byte(proto)}
	binary.BigEndian.PutUint16(h[4:], uint16(2+len(ip)))
	return h
}

// pseudowire is an Ethernet pseudowire's MPLS payload: a label, the
// control word (sequence number seq) and the whole frame.
func pseudowire(label uint32, seq uint16, frame []byte) []byte {
	h := append(mplsLabel(label, true), 0, 0, byte(seq>>8), byte(seq))
	return append(h, frame...)
}

// vxlanHeader is a VXLAN header (RFC 7348): the I flag and the VNI.
func vxlanHeader(vni uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{0x08, 0, 0, 0}, vni<<8)
}

// vxlanSourcePort is the UDP source port a VTEP picks for an IPv4 frame:
// a hash of its ports, as RFC 7348 asks.
func vxlanSourcePort(frame []byte) uint16 {
	h := uint32(binary.BigEndian.Uint16(frame[34:]))*2654435761 ^ uint32(binary.BigEndian.Uint16(frame[36:]))
	return uint16(49152 + h%16384)
}

// geneve is a GENEVE header (RFC 8926): version 0, the options' length,
// the protocol type, the VNI, the options.
func geneve(vni uint32, proto uint16, opts []byte) []byte {
	h := make([]byte, 8, 8+len(opts))
	h[0] = byte(len(opts) / 4)
	binary.BigEndian.PutUint16(h[2:], proto)
	binary.BigEndian.PutUint32(h[4:], vni<<8)
	return append(h, opts...)
}

// GRE header fields: no key, no sequence number.
const noField = -1

// gre is a GRE header (RFC 2890) of protocol proto before payload, with a
// key and a sequence number unless noField, and a checksum when csum.
func gre(proto uint16, key, seq int64, csum bool, payload []byte) []byte {
	h := []byte{0, 0, byte(proto >> 8), byte(proto)}
	if csum {
		h[0] |= 0x80
		h = append(h, 0, 0, 0, 0)
	}
	if key != noField {
		h[0] |= 0x20
		h = binary.BigEndian.AppendUint32(h, uint32(key))
	}
	if seq != noField {
		h[0] |= 0x10
		h = binary.BigEndian.AppendUint32(h, uint32(seq))
	}
	g := append(h, payload...)
	if csum {
		binary.BigEndian.PutUint16(g[4:], sum(g, 0))
	}
	return g
}

// erspan2 is an ERSPAN type II header: version 1, VLAN 0, the session and
// the index.
func erspan2(session uint16, index uint32) []byte {
	h := binary.BigEndian.AppendUint16([]byte{0x10, 0x00}, session&0x3ff)
	return binary.BigEndian.AppendUint32(h, index&0xfffff)
}

// erspan3 is an ERSPAN type III header: version 2, VLAN 100, the session
// ID, a timestamp, frame type 0 (Ethernet), and with platform the O bit
// and an 8-byte platform-specific sub-header.
func erspan3(session uint16, platform bool) []byte {
	h := make([]byte, 12)
	binary.BigEndian.PutUint16(h[0:], 2<<12|100)
	binary.BigEndian.PutUint16(h[2:], session&0x3ff)
	binary.BigEndian.PutUint32(h[4:], 0x01020304)
	if platform {
		h[11] |= 0x01
		h = append(h, 0x08, 0, 0, 0, 0, 0, 0, 0) // platform ID 1
	}
	return h
}

// gtpuHeader is a GTP-U G-PDU header (3GPP TS 29.281) before a user
// packet of n bytes: version 1, protocol type GTP, the TEID; with seq, the
// sequence number 11, N-PDU number and next extension header type 0
// follow the 8 bytes.
func gtpuHeader(teid uint32, seq bool, n int) []byte {
	h := []byte{1<<5 | 1<<4, 0xff, 0, 0}
	if seq {
		h[0] |= 0x02
		n += 4
	}
	binary.BigEndian.PutUint16(h[2:], uint16(n))
	h = binary.BigEndian.AppendUint32(h, teid)
	if seq {
		h = append(h, 0, 11, 0, 0)
	}
	return h
}

// cmdEth is Cisco MetaData in its Ethernet form, after EtherType 0x8909:
// version 1, length 1, the SGT option, the tag, then the EtherType of what
// follows.
func cmdEth(sgt, next uint16) []byte {
	h := binary.BigEndian.AppendUint16([]byte{1, 1, 0, 1}, sgt)
	return binary.BigEndian.AppendUint16(h, next)
}

// cmdGRE is Cisco MetaData in its GRE form, after GRE protocol 0x8909: the
// EtherType of what follows first, then version, length, option, tag.
func cmdGRE(next, sgt uint16) []byte {
	h := binary.BigEndian.AppendUint16(nil, next)
	return binary.BigEndian.AppendUint16(append(h, 1, 1, 0, 1), sgt)
}
