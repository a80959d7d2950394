// This file builds frames in every encapsulation (Cases, BigCases) and the
// captures made of them (VXLANCapture, FragmentedUDP).

package synth

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// Flow is the innermost packet of a frame: TCP or UDP between two IPv4 or
// two IPv6 addresses.
type Flow struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
	UDP              bool
}

// Case is one way to encapsulate a flow.
type Case struct {
	Name string
	// Inner is what steer.FlowKey.Encapsulation gives for the frame with
	// tunnels opened (TunnelsInner), Outer with them closed (the shims
	// and VLAN tags before the first tunnel).
	Inner, Outer string
	// Tunnel says whether the flow is inside a tunnel, so that the outer
	// header is hashed with tunnels closed.
	Tunnel bool
	// Build returns the frame carrying f.
	Build func(f Flow) []byte
}

// Underlay addresses: the tunnel endpoints.
var (
	outer4a = netip.MustParseAddr("192.0.2.1")
	outer4b = netip.MustParseAddr("192.0.2.2")
	outer6a = netip.MustParseAddr("2001:db8::1")
	outer6b = netip.MustParseAddr("2001:db8::2")
	macA    = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0a}
	macB    = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0b}
)

// Cases are the encapsulations, each at least once; the names are unique.
var Cases = []Case{
	{Name: "plain", Build: func(f Flow) []byte { return Frame(eth(ipType(f.Src)), inner(f)...) }},
	{Name: "vlan", Inner: "vlan:7", Outer: "vlan:7", Build: func(f Flow) []byte {
		return Frame(eth(layers.EthernetTypeDot1Q), cat(l(dot1q(7, ipType(f.Src))), inner(f))...)
	}},
	{Name: "qinq", Inner: "vlan:100+vlan:7", Outer: "vlan:100+vlan:7", Build: func(f Flow) []byte {
		return Frame(eth(layers.EthernetTypeQinQ), cat(l(dot1q(100, layers.EthernetTypeDot1Q), dot1q(7, ipType(f.Src))), inner(f))...)
	}},
	{Name: "vxlan", Inner: "vlan:7+vxlan:42", Outer: "vlan:7", Tunnel: true, Build: func(f Flow) []byte {
		return Frame(eth(layers.EthernetTypeDot1Q), cat(l(dot1q(7, layers.EthernetTypeIPv4)), udpOver(outer4a, outer4b, 50000, 4789),
			l(&layers.VXLAN{ValidIDFlag: true, VNI: 42}, eth(ipType(f.Src))), inner(f))...)
	}},
	{Name: "vxlan6-inner-vlan", Inner: "vxlan:43+vlan:9", Tunnel: true, Build: func(f Flow) []byte {
		return Frame(eth(layers.EthernetTypeIPv6), cat(udpOver(outer6a, outer6b, 50001, 4789),
			l(&layers.VXLAN{ValidIDFlag: true, VNI: 43}, eth(layers.EthernetTypeDot1Q), dot1q(9, ipType(f.Src))), inner(f))...)
	}},
	{Name: "vxlan-legacy-port", Inner: "vxlan:44", Tunnel: true, Build: func(f Flow) []byte {
		return Frame(eth(layers.EthernetTypeIPv4), cat(udpOver(outer4a, outer4b, 50002, 8472),
			l(&layers.VXLAN{ValidIDFlag: true, VNI: 44}, eth(ipType(f.Src))), inner(f))...)
	}},
	{Name: "geneve", Inner: "geneve:77", Tunnel: true, Build: func(f Flow) []byte {
		// One 8-byte option (class 0x0102, type 3, 4 bytes of data), then
		// an Ethernet frame.
		opt := []byte{0x01, 0x02, 0x03, 0x01, 0xde, 0xad, 0xbe, 0xef}
		return Frame(eth(layers.EthernetTypeIPv4), cat(udpOver(outer4a, outer4b, 50003, 6081),
			l(geneve(77, 0x6558, opt), eth(ipType(f.Src))), inner(f))...)
	}},
	{Name: "geneve-ip", Inner: "geneve:78", Tunnel: true, Build: func(f Flow) []byte {
		return Frame(eth(layers.EthernetTypeIPv4), cat(udpOver(outer4a, outer4b, 50004, 6081),
			l(geneve(78, uint16(ipType(f.Src)), nil)), inner(f))...)
	}},
	{Name: "gre-key", Inner: "gre:key=9", Tunnel: true, Build: func(f Flow) []byte {
		return Frame(eth(layers.EthernetTypeIPv4), cat(l(ip4(outer4a, outer4b, layers.IPProtocolGRE),
			&layers.GRE{KeyPresent: true, Key: 9, Protocol: ipType(f.Src)}), inner(f))...)
	}},
	{Name: "gre-ipip", Inner: "gre:key=9+ipip", Tunnel: true, Build: func(f Flow) []byte {
		return Frame(eth(layers.EthernetTypeIPv4), cat(l(ip4(outer4a, outer4b, layers.IPProtocolGRE),
			&layers.GRE{KeyPresent: true, Key: 9, Protocol: layers.EthernetTypeIPv4},
			ip4(netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("198.51.100.2"), ipInIP(f.Src))), inner(f))...)
	}},
	{Name: "gre-csum-seq", Inner: "gre", Tunnel: true, Build: func(f Flow) []byte {
		return Frame(eth(layers.EthernetTypeIPv4), cat(l(ip4(outer4a, outer4b, layers.IPProtocolGRE),
			&layers.GRE{ChecksumPresent: true, SeqPresent: true, Seq: 7, Protocol: ipType(f.Src)}), inner(f))...)
	}},
	{Name: "nvgre", Inner: "gre:key=1280", Tunnel: true, Build: func(f Flow) []byte {
		// NVGRE: the key is the 24-bit virtual subnet ID and an 8-bit flow ID.
		return Frame(eth(layers.EthernetTypeIPv6), cat(l(ip6(outer6a, outer6b, layers.IPProtocolGRE),
			&layers.GRE{KeyPresent: true, Key: 5 << 8, Protocol: layers.EthernetTypeTransparentEthernetBridging},
			eth(ipType(f.Src))), inner(f))...)
	}},
	{Name: "erspan1", Inner: "gre+erspan1", Tunnel: true, Build: func(f Flow) []byte {
		return Frame(eth(layers.EthernetTypeIPv4), cat(l(ip4(outer4a, outer4b, layers.IPProtocolGRE),
			&layers.GRE{Protocol: layers.EthernetTypeERSPAN}, eth(ipType(f.Src))), inner(f))...)
	}},
	{Name: "erspan2", Inner: "gre+erspan2:5", Tunnel: true, Build: func(f Flow) []byte {
		return Frame(eth(layers.EthernetTypeIPv4), cat(l(ip4(outer4a, outer4b, layers.IPProtocolGRE),
			&layers.GRE{SeqPresent: true, Seq: 1, Protocol: layers.EthernetTypeERSPAN},
			&layers.ERSPANII{Version: 1, SessionID: 5, Index: 3}, eth(ipType(f.Src))), inner(f))...)
	}},
	{Name: "erspan3", Inner: "gre+erspan3:6", Tunnel: true, Build: func(f Flow) []byte {
		return Frame(eth(layers.EthernetTypeIPv4), cat(l(ip4(outer4a, outer4b, layers.IPProtocolGRE),
			&layers.GRE{SeqPresent: true, Seq: 1, Protocol: 0x22eb}, erspan3(6, false), eth(ipType(f.Src))), inner(f))...)
	}},
	{Name: "erspan3-platform", Inner: "gre+erspan3:6", Tunnel: true, Build: func(f Flow) []byte {
		return Frame(eth(layers.EthernetTypeIPv4), cat(l(ip4(outer4a, outer4b, layers.IPProtocolGRE),
			&layers.GRE{SeqPresent: true, Seq: 2, Protocol: 0x22eb}, erspan3(6, true), eth(ipType(f.Src))), inner(f))...)
	}},
	{Name: "gtpu", Inner: "gtpu:1234", Tunnel: true, Build: func(f Flow) []byte {
		return gtpuFrame(f, 1234, false)
	}},
	{Name: "gtpu-seq", Inner: "gtpu:1235", Tunnel: true, Build: func(f Flow) []byte {
		return gtpuFrame(f, 1235, true)
	}},
	{Name: "ipip", Inner: "ipip", Tunnel: true, Build: func(f Flow) []byte {
		return Frame(eth(layers.EthernetTypeIPv4), cat(l(ip4(outer4a, outer4b, ipInIP(f.Src))), inner(f))...)
	}},
	{Name: "ipip6", Inner: "ipip", Tunnel: true, Build: func(f Flow) []byte {
		return Frame(eth(layers.EthernetTypeIPv6), cat(l(ip6(outer6a, outer6b, ipInIP(f.Src))), inner(f))...)
	}},
	{Name: "mpls", Inner: "mpls:1600", Outer: "mpls:1600", Build: func(f Flow) []byte {
		return Frame(eth(layers.EthernetTypeMPLSUnicast), cat(l(&layers.MPLS{Label: 1600, StackBottom: true, TTL: 64}), inner(f))...)
	}},
	{Name: "mpls-stack", Inner: "mpls:16+mpls:1601", Outer: "mpls:16+mpls:1601", Build: func(f Flow) []byte {
		return Frame(eth(layers.EthernetTypeMPLSUnicast), cat(l(&layers.MPLS{Label: 16, TTL: 64},
			&layers.MPLS{Label: 1601, StackBottom: true, TTL: 64}), inner(f))...)
	}},
	{Name: "mpls-pw", Inner: "mpls:2000+pw+vlan:5", Outer: "mpls:2000+pw+vlan:5", Build: func(f Flow) []byte {
		return Frame(eth(layers.EthernetTypeMPLSUnicast), cat(l(&layers.MPLS{Label: 2000, StackBottom: true, TTL: 64},
			gopacket.Payload{0, 0, 0, 1}, eth(layers.EthernetTypeDot1Q), dot1q(5, ipType(f.Src))), inner(f))...)
	}},
	{Name: "pppoe", Inner: "pppoe:17", Outer: "pppoe:17", Build: func(f Flow) []byte {
		ppp := layers.PPPTypeIPv4
		if f.Src.Is6() {
			ppp = layers.PPPTypeIPv6
		}
		return Frame(eth(layers.EthernetTypePPPoESession), cat(l(&layers.PPPoE{Version: 1, Type: 1, Code: layers.PPPoECodeSession, SessionId: 17},
			&layers.PPP{PPPType: ppp}), inner(f))...)
	}},
	{Name: "vlan-vxlan-gre", Inner: "vlan:7+vxlan:42+gre:key=9", Outer: "vlan:7", Tunnel: true, Build: func(f Flow) []byte {
		return Frame(eth(layers.EthernetTypeDot1Q), cat(l(dot1q(7, layers.EthernetTypeIPv4)), udpOver(outer4a, outer4b, 50005, 4789),
			l(&layers.VXLAN{ValidIDFlag: true, VNI: 42}, eth(layers.EthernetTypeIPv4),
				ip4(netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("198.51.100.2"), layers.IPProtocolGRE),
				&layers.GRE{KeyPresent: true, Key: 9, Protocol: ipType(f.Src)}), inner(f))...)
	}},
	{Name: "mpls-gtpu", Inner: "mpls:300+gtpu:99", Outer: "mpls:300", Tunnel: true, Build: func(f Flow) []byte {
		return Frame(eth(layers.EthernetTypeMPLSUnicast), cat(l(&layers.MPLS{Label: 300, StackBottom: true, TTL: 64}), gtpuLayers(f, 99, false))...)
	}},
	{Name: "cmd", Inner: "vlan:7+cmd:10", Outer: "vlan:7+cmd:10", Build: func(f Flow) []byte {
		return Frame(eth(layers.EthernetTypeDot1Q), cat(l(dot1q(7, etherTypeCMD), cmdEth(10, ipType(f.Src))), inner(f))...)
	}},
	{Name: "gre-cmd", Inner: "gre:key=40+cmd:5", Tunnel: true, Build: func(f Flow) []byte {
		return Frame(eth(layers.EthernetTypeIPv4), cat(l(ip4(outer4a, outer4b, layers.IPProtocolGRE),
			&layers.GRE{KeyPresent: true, Key: 40, Protocol: etherTypeCMD}, cmdGRE(ipType(f.Src), 5)), inner(f))...)
	}},
	{Name: "mplsudp", Inner: "mplsudp+mpls:100", Tunnel: true, Build: func(f Flow) []byte {
		return Frame(eth(layers.EthernetTypeIPv4), cat(udpOver(outer4a, outer4b, 50006, 6635),
			l(&layers.MPLS{Label: 100, StackBottom: true, TTL: 64}), inner(f))...)
	}},
	{Name: "mplsudp6-pw", Inner: "mplsudp+mpls:200+pw", Tunnel: true, Build: func(f Flow) []byte {
		return Frame(eth(layers.EthernetTypeIPv6), cat(udpOver(outer6a, outer6b, 50007, 6635),
			l(&layers.MPLS{Label: 200, StackBottom: true, TTL: 64}, gopacket.Payload{0, 0, 0, 0}, eth(ipType(f.Src))), inner(f))...)
	}},
}

// etherTypeCMD is Cisco MetaData's EtherType, and its GRE protocol type.
const etherTypeCMD = 0x8909

// cmdEth writes Cisco MetaData in its Ethernet form, after EtherType
// 0x8909: version 1, length 1, the SGT option, the tag, then the EtherType
// of what follows.
func cmdEth(sgt uint16, next layers.EthernetType) gopacket.Payload {
	h := []byte{1, 1, 0, 1}
	h = binary.BigEndian.AppendUint16(h, sgt)
	return binary.BigEndian.AppendUint16(h, uint16(next))
}

// cmdGRE writes Cisco MetaData in its GRE form, after GRE protocol 0x8909:
// the EtherType of what follows first, then version, length, option, tag.
func cmdGRE(next layers.EthernetType, sgt uint16) gopacket.Payload {
	h := binary.BigEndian.AppendUint16(nil, uint16(next))
	h = append(h, 1, 1, 0, 1)
	return binary.BigEndian.AppendUint16(h, sgt)
}

// BigLen is the size of the transport payload of BigCases' packets: over
// 64 KiB, so that none of their length fields can hold it.
const BigLen = 70000

// BigCases carry the flow in a packet over 64 KiB, as Linux's BIG TCP
// sends one and RFC 2675 defines an IPv6 jumbogram: an IPv4 total length
// of zero; an IPv6 payload length of zero and a hop-by-hop header with the
// Jumbo Payload option; a UDP length of zero. A tunnel over IPv6 is a
// jumbogram too, since what it carries is as large. Their frames are over
// 64 KiB: written with a snap length (PcapSnap) they are cut, as a capture
// cuts them.
var BigCases = []Case{
	{Name: "big", Build: func(f Flow) []byte { return append(ethBytes(ipType(f.Src)), bigPacket(f)...) }},
	{Name: "vxlan-jumbo", Inner: "vxlan:5001", Tunnel: true, Build: func(f Flow) []byte {
		p := append(vxlanHeader(5001), ethBytes(ipType(f.Src))...)
		return append(ethBytes(layers.EthernetTypeIPv6), jumbo6(outer6a, outer6b, 17, udpBig(50008, 4789, append(p, bigPacket(f)...)))...)
	}},
	{Name: "geneve-jumbo", Inner: "geneve:77", Tunnel: true, Build: func(f Flow) []byte {
		g := geneve(77, uint16(ipType(f.Src)), []byte{0x01, 0x02, 0x03, 0x01, 0xde, 0xad, 0xbe, 0xef})
		return append(ethBytes(layers.EthernetTypeIPv6), jumbo6(outer6a, outer6b, 17, udpBig(50009, 6081, append(g, bigPacket(f)...)))...)
	}},
}

// ethBytes is an Ethernet header of type t.
func ethBytes(t layers.EthernetType) []byte {
	return append(append(append([]byte(nil), macB...), macA...), byte(t>>8), byte(t))
}

// bigPacket is the flow's IP packet with BigLen bytes of payload: BIG
// TCP's IPv4 (total length zero) or an IPv6 jumbogram, the UDP length
// zero.
func bigPacket(f Flow) []byte {
	var l4 []byte
	proto := uint8(6)
	if f.UDP {
		proto = 17
		l4 = udpBig(f.SrcPort, f.DstPort, make([]byte, BigLen))
	} else {
		l4 = binary.BigEndian.AppendUint16(nil, f.SrcPort)
		l4 = binary.BigEndian.AppendUint16(l4, f.DstPort)
		l4 = append(l4, 0, 0, 0, 1, 0, 0, 0, 1, 0x50, 0x18, 0x02, 0, 0, 0, 0, 0) // seq, ack, PSH|ACK
		l4 = append(l4, make([]byte, BigLen)...)
	}
	if f.Src.Is6() {
		return jumbo6(f.Src, f.Dst, proto, l4)
	}
	h := []byte{0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, proto, 0, 0} // total length 0, DF
	h = append(append(h, f.Src.AsSlice()...), f.Dst.AsSlice()...)
	return append(h, l4...)
}

// jumbo6 is an IPv6 jumbogram (RFC 2675) carrying payload of protocol nh:
// a payload length of zero, and a hop-by-hop header of 8 bytes holding the
// Jumbo Payload option.
func jumbo6(src, dst netip.Addr, nh uint8, payload []byte) []byte {
	h := []byte{0x60, 0, 0, 0, 0, 0, 0, 64} // payload length 0, next header hop-by-hop
	h = append(append(h, src.AsSlice()...), dst.AsSlice()...)
	h = append(h, nh, 0, 0xc2, 4)
	h = binary.BigEndian.AppendUint32(h, uint32(8+len(payload)))
	return append(h, payload...)
}

// udpBig is a UDP header, its length zero (RFC 2675) when the datagram is
// over 64 KiB, with no checksum, and payload.
func udpBig(sport, dport uint16, payload []byte) []byte {
	h := binary.BigEndian.AppendUint16(nil, sport)
	h = binary.BigEndian.AppendUint16(h, dport)
	n := 8 + len(payload)
	if n > 0xffff {
		n = 0
	}
	h = binary.BigEndian.AppendUint16(h, uint16(n))
	return append(append(h, 0, 0), payload...)
}

// VXLANPorts are the UDP ports the cases use for VXLAN: IANA's and Linux's
// legacy one (the "vxlan-legacy-port" case).
const VXLANPorts = "4789,8472"

// Frame serializes the layers, lengths and checksums computed, with
// first the outermost.
func Frame(first gopacket.SerializableLayer, rest ...gopacket.SerializableLayer) []byte {
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, append([]gopacket.SerializableLayer{first}, rest...)...); err != nil {
		panic(fmt.Sprintf("synth: %v", err)) // the cases are fixed: a bug here
	}
	return append([]byte(nil), buf.Bytes()...)
}

func l(ls ...gopacket.SerializableLayer) []gopacket.SerializableLayer { return ls }

func cat(parts ...[]gopacket.SerializableLayer) []gopacket.SerializableLayer {
	var all []gopacket.SerializableLayer
	for _, p := range parts {
		all = append(all, p...)
	}
	return all
}

func eth(t layers.EthernetType) *layers.Ethernet {
	return &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: t}
}

func dot1q(id uint16, next layers.EthernetType) *layers.Dot1Q {
	return &layers.Dot1Q{VLANIdentifier: id, Type: next}
}

func ipType(a netip.Addr) layers.EthernetType {
	if a.Is6() {
		return layers.EthernetTypeIPv6
	}
	return layers.EthernetTypeIPv4
}

// ipInIP is the IP protocol of an IP header carrying a packet from a.
func ipInIP(a netip.Addr) layers.IPProtocol {
	if a.Is6() {
		return layers.IPProtocolIPv6
	}
	return layers.IPProtocolIPv4
}

func ip4(src, dst netip.Addr, proto layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: proto, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
}

func ip6(src, dst netip.Addr, next layers.IPProtocol) *layers.IPv6 {
	return &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: next, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
}

// ipHeader returns the IP header from src to dst.
func ipHeader(src, dst netip.Addr, proto layers.IPProtocol) gopacket.NetworkLayer {
	if src.Is6() {
		return ip6(src, dst, proto)
	}
	return ip4(src, dst, proto)
}

// udpOver is an outer IP header and UDP header to a tunnel port.
func udpOver(src, dst netip.Addr, sport, dport uint16) []gopacket.SerializableLayer {
	ip := ipHeader(src, dst, layers.IPProtocolUDP)
	u := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
	u.SetNetworkLayerForChecksum(ip)
	return l(ip.(gopacket.SerializableLayer), u)
}

// inner is the flow's IP header, transport header and a payload.
func inner(f Flow) []gopacket.SerializableLayer {
	proto := layers.IPProtocolTCP
	if f.UDP {
		proto = layers.IPProtocolUDP
	}
	ip := ipHeader(f.Src, f.Dst, proto)
	payload := gopacket.Payload("payload of the inner flow")
	if f.UDP {
		u := &layers.UDP{SrcPort: layers.UDPPort(f.SrcPort), DstPort: layers.UDPPort(f.DstPort)}
		u.SetNetworkLayerForChecksum(ip)
		return l(ip.(gopacket.SerializableLayer), u, payload)
	}
	t := &layers.TCP{SrcPort: layers.TCPPort(f.SrcPort), DstPort: layers.TCPPort(f.DstPort), Seq: 1, ACK: true, PSH: true, Window: 512}
	t.SetNetworkLayerForChecksum(ip)
	return l(ip.(gopacket.SerializableLayer), t, payload)
}

// vxlanHeader is a VXLAN header (RFC 7348): the I flag and the VNI.
func vxlanHeader(vni uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{0x08, 0, 0, 0}, vni<<8)
}

// geneve writes a GENEVE header (RFC 8926), which gopacket only reads:
// version 0, the options' length, the protocol type, the VNI.
func geneve(vni uint32, proto uint16, opts []byte) gopacket.Payload {
	h := make([]byte, 8, 8+len(opts))
	h[0] = byte(len(opts) / 4)
	binary.BigEndian.PutUint16(h[2:], proto)
	binary.BigEndian.PutUint32(h[4:], vni<<8)
	return append(h, opts...)
}

// erspan3 writes an ERSPAN type III header, which gopacket does not know:
// version 2, the session ID, frame type 0 (Ethernet), and with platform the
// O bit and an 8-byte platform-specific sub-header.
func erspan3(session uint16, platform bool) gopacket.Payload {
	h := make([]byte, 12)
	binary.BigEndian.PutUint16(h[0:], 2<<12|100) // version 2, VLAN 100
	binary.BigEndian.PutUint16(h[2:], session&0x3ff)
	binary.BigEndian.PutUint32(h[4:], 0x01020304) // timestamp
	if platform {
		h[11] |= 0x01
		h = append(h, 0x08, 0, 0, 0, 0, 0, 0, 0) // platform ID 1
	}
	return h
}

// gtpuFrame is a GTP-U G-PDU over UDP over IPv4 carrying f.
func gtpuFrame(f Flow, teid uint32, seq bool) []byte {
	return Frame(eth(layers.EthernetTypeIPv4), gtpuLayers(f, teid, seq)...)
}

func gtpuLayers(f Flow, teid uint32, seq bool) []gopacket.SerializableLayer {
	return cat(udpOver(outer4a, outer4b, 2152, 2152), l(&gtpuLayer{teid: teid, seq: seq}), inner(f))
}

// gtpuLayer is a GTP-U G-PDU header (3GPP TS 29.281) as a layer, its
// length field set from the user packet after it: gopacket's GTPv1U
// writes its optional fields after the payload.
type gtpuLayer struct {
	teid uint32
	seq  bool
}

func (g *gtpuLayer) LayerType() gopacket.LayerType { return layers.LayerTypeGTPv1U }

func (g *gtpuLayer) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	h := gtpuHeader(g.teid, g.seq, len(b.Bytes()))
	p, err := b.PrependBytes(len(h))
	if err != nil {
		return err
	}
	copy(p, h)
	return nil
}

// gtpuHeader is a GTP-U G-PDU header before a user packet of n bytes:
// version 1, protocol type GTP, the TEID; with seq, the sequence number
// 11, N-PDU number and next extension header type 0 follow the 8 bytes.
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

// VXLANCapture returns the frames of a capture between two VXLAN tunnel
// endpoints, the traffic a cloud's traffic mirroring delivers: of every
// eight frames seven are VXLAN (VNI 42) carrying one of flows TCP flows
// between 10.0.0.0/16 hosts, the outer UDP source port taken from the inner
// flow as RFC 7348 asks, and the eighth a plain TCP frame of one of
// flows/4 flows between two other hosts. The same seed gives the same
// frames.
func VXLANCapture(frames, flows int, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := make([][]byte, 0, frames)
	for i := range frames {
		n := rng.IntN(flows)
		if i%8 == 7 {
			n %= max(flows/4, 1)
			f := Flow{Src: netip.AddrFrom4([4]byte{203, 0, 113, 10}), Dst: netip.AddrFrom4([4]byte{203, 0, 113, 20}),
				SrcPort: uint16(40000 + n), DstPort: 443}
			out = append(out, Frame(eth(layers.EthernetTypeIPv4), inner(f)...))
			continue
		}
		f := Flow{Src: netip.AddrFrom4([4]byte{10, 0, byte(n >> 8), byte(n)}), Dst: netip.AddrFrom4([4]byte{10, 0, 200, byte(n % 7)}),
			SrcPort: uint16(33000 + n), DstPort: 80}
		sport := uint16(49152 + uint32(n)*2654435761%16384)
		out = append(out, Frame(eth(layers.EthernetTypeIPv4), cat(udpOver(outer4a, outer4b, sport, 4789),
			l(&layers.VXLAN{ValidIDFlag: true, VNI: 42}, eth(layers.EthernetTypeIPv4)), inner(f))...))
	}
	return out
}

// FragmentedUDP returns the frames of a capture of flows UDP flows, one
// per address pair, every other one over IPv6: each flow sends eight
// datagrams of 1,200 to 3,999 bytes, from one port to another, and each
// datagram is cut into 2 to 4 fragments with probability one in four, as
// DNS over large responses, SIP and NFS over UDP cut theirs. The flows'
// datagrams are interleaved at random; a datagram's fragments follow each
// other, in order. The same seed gives the same frames.
func FragmentedUDP(flows int, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	type dgram struct{ flow int }
	var order []dgram
	for f := range flows {
		for range 8 {
			order = append(order, dgram{f})
		}
	}
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	var out [][]byte
	for n, d := range order {
		f := Flow{SrcPort: uint16(20000 + d.flow), DstPort: uint16(7000 + d.flow%3), UDP: true}
		if d.flow%2 == 0 {
			f.Src, f.Dst = netip.AddrFrom4([4]byte{10, 20, byte(d.flow >> 8), byte(d.flow)}), netip.AddrFrom4([4]byte{10, 30, byte(d.flow >> 8), byte(d.flow)})
		} else {
			f.Src = netip.AddrFrom16([16]byte{0xfd, 0, 0, 20, 14: byte(d.flow >> 8), 15: byte(d.flow)})
			f.Dst = netip.AddrFrom16([16]byte{0xfd, 0, 0, 30, 14: byte(d.flow >> 8), 15: byte(d.flow)})
		}
		payload := make([]byte, 1200+rng.IntN(2800))
		for i := range payload {
			payload[i] = byte(i)
		}
		ip := ipHeader(f.Src, f.Dst, layers.IPProtocolUDP)
		u := &layers.UDP{SrcPort: layers.UDPPort(f.SrcPort), DstPort: layers.UDPPort(f.DstPort)}
		u.SetNetworkLayerForChecksum(ip)
		whole := Frame(eth(ipType(f.Src)), ip.(gopacket.SerializableLayer), u, gopacket.Payload(payload))
		if rng.IntN(4) != 0 {
			out = append(out, whole)
			continue
		}
		k := 2 + rng.IntN(3)
		out = append(out, Fragment(whole, ((8+len(payload))/k+7)&^7, uint32(n+1))...)
	}
	return out
}

// Fragment cuts the IP packet of an Ethernet frame (untagged, with no
// extension headers) into fragments of datagram id, each carrying size
// bytes of what follows the IP header (a multiple of 8), the last the
// rest: IPv4 fragments get id's low 16 bits as their identification,
// IPv6 ones a fragment header with id.
func Fragment(frame []byte, size int, id uint32) [][]byte {
	et := binary.BigEndian.Uint16(frame[12:14])
	hl := 20
	if et == 0x86dd {
		hl = 40
	}
	hdr, data := frame[:14+hl], frame[14+hl:]
	var out [][]byte
	for off := 0; off < len(data); off += size {
		end := min(off+size, len(data))
		more := end < len(data)
		f := append([]byte(nil), hdr...)
		ip := f[14:]
		if et == 0x86dd {
			nh := ip[6]
			ip[6] = 44
			fo := uint16(off)
			if more {
				fo |= 1
			}
			f = append(f, nh, 0)
			f = binary.BigEndian.AppendUint16(f, fo)
			f = binary.BigEndian.AppendUint32(f, id)
			binary.BigEndian.PutUint16(f[14+4:], uint16(8+end-off))
		} else {
			fo := uint16(off / 8)
			if more {
				fo |= 0x2000
			}
			binary.BigEndian.PutUint16(ip[4:], uint16(id))
			binary.BigEndian.PutUint16(ip[6:], fo)
			binary.BigEndian.PutUint16(ip[2:], uint16(20+end-off))
			ip[10], ip[11] = 0, 0
			binary.BigEndian.PutUint16(ip[10:], checksum(ip[:20]))
		}
		out = append(out, append(f, data[off:end]...))
	}
	return out
}
