package synth

import (
	"encoding/binary"
	"net"
	"slices"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// tunnels adds TCP/IPv4 connections between clients and servers of their
// own that the tap sees encapsulated: in VXLAN, GENEVE, GRE, ERSPAN,
// GTP-U, IP in IP, MPLS and PPPoE. Each kind runs between one pair of
// endpoints (VTEPs, GRE peers, a GTP-U gateway pair, a label-switched
// link, an access concentrator), so by their outer headers a kind's
// connections are one or two flows. The inner addresses are 172.16.0.0/14
// clients and 203.0.113.0/24 servers. They are generated after the rest,
// so the rest of the capture is what it was without them.
func (g *gen) tunnels() {
	type wrapFunc = func(g *gen, frame []byte, fromClient bool) []byte
	for _, k := range []struct {
		n    int
		port uint16
		wrap func(c *conn) wrapFunc
	}{
		{VXLANConnections, 80, func(*conn) wrapFunc {
			return udpTunnel(v4(192, 0, 2, 101), v4(192, 0, 2, 102), 4789, false, vxlanHeader(5001)) // VNI 5001
		}},
		{GENEVEConnections, 443, func(*conn) wrapFunc {
			return udpTunnel(v4(192, 0, 2, 111), v4(192, 0, 2, 112), 6081, false, geneve(77, 0x6558, nil)) // Ethernet, VNI 77
		}},
		{GREConnections, 22, func(*conn) wrapFunc {
			return ipTunnel(v4(198, 51, 100, 1), v4(198, 51, 100, 2), layers.IPProtocolGRE, []byte{0x20, 0, 0x08, 0, 0, 0, 0, 9}) // key 9, IPv4
		}},
		{ERSPANConnections, 80, func(*conn) wrapFunc { return erspan(v4(198, 51, 100, 5), v4(198, 51, 100, 6)) }},
		{GTPUConnections, 443, func(c *conn) wrapFunc { return gtpuTunnel(v4(10, 200, 0, 1), v4(10, 200, 0, 2), c.cPort) }},
		{IPIPConnections, 5432, func(*conn) wrapFunc {
			return ipTunnel(v4(198, 51, 100, 9), v4(198, 51, 100, 10), layers.IPProtocolIPv4, nil)
		}},
		{MPLSConnections, 80, func(*conn) wrapFunc { return mpls(1600) }},
		{PPPoEConnections, 80, func(c *conn) wrapFunc { return pppoe(c.cPort) }},
		{NestedConnections, 443, func(*conn) wrapFunc {
			gre := ipTunnel(v4(10, 9, 0, 1), v4(10, 9, 0, 2), layers.IPProtocolGRE, []byte{0x20, 0, 0x08, 0, 0, 0, 0, 7}) // key 7
			vx := udpTunnel(v4(192, 0, 2, 101), v4(192, 0, 2, 102), 4789, false, vxlanHeader(5002))
			return func(g *gen, frame []byte, fromClient bool) []byte {
				return vx(g, gre(g, frame, fromClient), fromClient)
			}
		}},
		{InnerVLANConns, 80, func(*conn) wrapFunc {
			vx := udpTunnel(v4(192, 0, 2, 101), v4(192, 0, 2, 102), 4789, false, vxlanHeader(5003))
			return func(g *gen, frame []byte, fromClient bool) []byte { return vx(g, withTag(frame, 100), fromClient) }
		}},
		{PseudowireConns, 80, func(*conn) wrapFunc { return pseudowire(2000) }},
	} {
		for range k.n {
			p := path{cIP: v4(172, 16, byte(g.rng.intn(4)), byte(g.rng.between(2, 250))), sIP: v4(203, 0, 113, byte(g.rng.between(1, 20)))}
			c := g.newConn(p, k.port, g.rng.dur(0, span))
			c.p.wrap = k.wrap(c)
			g.conversation(c, "inner.example.org")
		}
	}
}

// tunnelOddities adds the frames of TunnelOddities.
func (g *gen) tunnelOddities() {
	vtepA, vtepB := v4(192, 0, 2, 101), v4(192, 0, 2, 102)
	vx := udpTunnel(vtepA, vtepB, 4789, false, vxlanHeader(5001))
	arp := g.serialize(&layers.Ethernet{SrcMAC: hostMAC(v4(172, 16, 0, 9)), DstMAC: broadcast, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: layers.ARPRequest, SourceHwAddress: hostMAC(v4(172, 16, 0, 9)), SourceProtAddress: v4(172, 16, 0, 9),
			DstHwAddress: make([]byte, 6), DstProtAddress: v4(172, 16, 0, 1)})
	// A frame for the headers that need one: its ports give the VTEP's
	// source port.
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: v4(172, 16, 0, 9), DstIP: v4(203, 0, 113, 1)}
	seg := &layers.TCP{SrcPort: 40000, DstPort: 80, ACK: true, Window: 501}
	if err := seg.SetNetworkLayerForChecksum(ip); err != nil && g.err == nil {
		g.err = err
	}
	tcp := g.serialize(&layers.Ethernet{SrcMAC: routerMAC, DstMAC: routerMAC, EthernetType: layers.EthernetTypeIPv4}, ip, seg, gopacket.Payload(g.text(2400)))
	for i := range TunnelOddities {
		at := func(s int) time.Duration { return time.Duration(5+10*i+s) * time.Second }
		g.add(at(0), vx(g, arp, true))
		cut := g.outerIPv4(vtepA, vtepB, layers.IPProtocolUDP, &layers.UDP{SrcPort: 50000, DstPort: 4789}, []byte{0x08, 0, 0, 0})
		g.add(at(1), cut)
		echo := binary.BigEndian.AppendUint32([]byte{0x32, 0x01, 0, 4}, 0) // version 1, S, echo request, TEID 0
		echo = append(echo, 0, byte(i), 0, 0)
		g.add(at(2), g.outerIPv4(v4(10, 200, 0, 1), v4(10, 200, 0, 2), layers.IPProtocolUDP, &layers.UDP{SrcPort: 2152, DstPort: 2152}, echo))
		padi := append(slices.Clone(broadcast), hostMAC(v4(172, 16, 0, 9))...)
		padi = append(padi, 0x88, 0x63, 0x11, 0x09, 0, 0, 0, 4, 0x01, 0x01, 0, 0) // PADI with an empty service name
		g.add(at(3), padi)
		lcp := pppoe(0x4000)(g, append(slices.Clone(tcp[:14]), 0x09, byte(i), 0, 8, 0, 0, 0, 0), true)
		lcp[20], lcp[21] = 0xc0, 0x21 // PPP protocol LCP: an echo request
		g.add(at(4), lcp)
		// One VXLAN datagram of 2,500 bytes in two outer fragments.
		whole := vx(g, tcp, true)
		for j, f := range Fragment(whole, (1400-20)&^7, uint32(binary.BigEndian.Uint16(whole[18:]))) {
			g.add(at(5)+time.Duration(j)*time.Microsecond, f)
		}
	}
}

// withTag inserts an 802.1Q tag after a frame's MAC addresses.
func withTag(frame []byte, vid uint16) []byte {
	f := slices.Clone(frame[:12])
	f = append(f, 0x81, 0x00, byte(vid>>8), byte(vid))
	return append(f, frame[12:]...)
}

// pseudowire carries a whole frame over MPLS (one label, a control word),
// as an Ethernet pseudowire does.
func pseudowire(label uint32) func(g *gen, frame []byte, fromClient bool) []byte {
	seq := uint16(0)
	return func(g *gen, frame []byte, _ bool) []byte {
		seq++
		f := append(slices.Clone(switchMAC), switchMAC...)
		f = binary.BigEndian.AppendUint16(f, 0x8847)
		f = binary.BigEndian.AppendUint32(f, label<<12|0x100|64)
		f = append(f, 0, 0, byte(seq>>8), byte(seq)) // the control word: 0, sequence
		return append(f, frame...)
	}
}

// outerIPv4 serializes an Ethernet and IPv4 header from src to dst around
// l4 (a UDP header, or nil) and payload.
func (g *gen) outerIPv4(src, dst net.IP, proto layers.IPProtocol, l4 *layers.UDP, payload []byte) []byte {
	g.ipid++
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: proto, SrcIP: src, DstIP: dst, Id: g.ipid}
	ls := []gopacket.SerializableLayer{&layers.Ethernet{SrcMAC: hostMAC(src), DstMAC: routerMAC, EthernetType: layers.EthernetTypeIPv4}, ip}
	if l4 != nil {
		if err := l4.SetNetworkLayerForChecksum(ip); err != nil && g.err == nil {
			g.err = err
		}
		ls = append(ls, l4)
	}
	return g.serialize(append(ls, gopacket.Payload(payload))...)
}

// ends orders a tunnel's endpoints for a frame from the client (a's side)
// or the server.
func ends(a, b net.IP, fromClient bool) (src, dst net.IP) {
	if fromClient {
		return a, b
	}
	return b, a
}

// udpTunnel wraps a frame behind hdr in UDP to port between a (the
// client's side) and b; ipOnly drops the frame's Ethernet header. The UDP
// source port is a hash of the inner ports, as a VTEP picks it (GTP-U
// uses its own port).
func udpTunnel(a, b net.IP, port uint16, ipOnly bool, hdr []byte) func(g *gen, frame []byte, fromClient bool) []byte {
	return func(g *gen, frame []byte, fromClient bool) []byte {
		src, dst := ends(a, b, fromClient)
		sport := port
		if port != 2152 {
			h := uint32(binary.BigEndian.Uint16(frame[34:]))*2654435761 ^ uint32(binary.BigEndian.Uint16(frame[36:]))
			sport = uint16(49152 + h%16384)
		}
		if ipOnly {
			frame = frame[14:]
		}
		return g.outerIPv4(src, dst, layers.IPProtocolUDP, &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(port)},
			append(slices.Clone(hdr), frame...))
	}
}

// ipTunnel wraps a frame's IP packet behind hdr in IPv4 of protocol proto
// between a and b.
func ipTunnel(a, b net.IP, proto layers.IPProtocol, hdr []byte) func(g *gen, frame []byte, fromClient bool) []byte {
	return func(g *gen, frame []byte, fromClient bool) []byte {
		src, dst := ends(a, b, fromClient)
		return g.outerIPv4(src, dst, proto, nil, append(slices.Clone(hdr), frame[14:]...))
	}
}

// erspan mirrors a frame with ERSPAN type II (session 5) over GRE with a
// sequence number, from a switch at a to a collector at b, whichever way
// the frame went.
func erspan(a, b net.IP) func(g *gen, frame []byte, fromClient bool) []byte {
	seq := uint32(0)
	return func(g *gen, frame []byte, _ bool) []byte {
		seq++
		hdr := binary.BigEndian.AppendUint32([]byte{0x10, 0, 0x88, 0xbe}, seq)
		hdr = append(hdr, 0x10, 0x00, 0x00, 0x05, 0, 0, 0, 1) // version 1, VLAN 0, session 5, index 1
		return g.outerIPv4(a, b, layers.IPProtocolGRE, nil, append(hdr, frame...))
	}
}

// gtpuTunnel carries a frame's IP packet in a G-PDU between gateways a and b,
// with a TEID per user and direction.
func gtpuTunnel(a, b net.IP, user uint16) func(g *gen, frame []byte, fromClient bool) []byte {
	return func(g *gen, frame []byte, fromClient bool) []byte {
		teid := 0x10000 + uint32(user)
		if !fromClient {
			teid |= 0x1000000
		}
		hdr := gtpuHeader(teid, false, len(frame)-14)
		return udpTunnel(a, b, 2152, true, hdr)(g, frame, fromClient)
	}
}

// mpls puts a frame's IP packet under one label, on the same link.
func mpls(label uint32) func(g *gen, frame []byte, fromClient bool) []byte {
	return func(g *gen, frame []byte, _ bool) []byte {
		f := slices.Clone(frame[:12])
		f = binary.BigEndian.AppendUint16(f, 0x8847)
		f = binary.BigEndian.AppendUint32(f, label<<12|0x100|64) // bottom of stack, TTL 64
		return append(f, frame[14:]...)
	}
}

// pppoe puts a frame's IP packet in a PPPoE session (a session ID per
// client) as PPP protocol 0x0021.
func pppoe(session uint16) func(g *gen, frame []byte, fromClient bool) []byte {
	return func(g *gen, frame []byte, _ bool) []byte {
		ip := frame[14:]
		f := slices.Clone(frame[:12])
		f = binary.BigEndian.AppendUint16(f, 0x8864)
		f = append(f, 0x11, 0x00)
		f = binary.BigEndian.AppendUint16(f, session)
		f = binary.BigEndian.AppendUint16(f, uint16(2+len(ip)))
		f = binary.BigEndian.AppendUint16(f, 0x0021)
		return append(f, ip...)
	}
}
