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
	for _, k := range []struct {
		n    int
		port uint16
		wrap func(c *conn) wrapFunc
	}{
		{VXLANConnections, 80, func(*conn) wrapFunc {
			return udpTunnel(v4(192, 0, 2, 101), v4(192, 0, 2, 102), 4789, false, vxlanHeader(5001)) // VNI 5001
		}},
		{GENEVEConnections, 443, func(*conn) wrapFunc {
			return udpTunnel(v4(192, 0, 2, 111), v4(192, 0, 2, 112), 6081, false, geneve(77, typeTEB, nil)) // Ethernet, VNI 77
		}},
		{GREConnections, 22, func(*conn) wrapFunc {
			return ipTunnel(v4(198, 51, 100, 1), v4(198, 51, 100, 2), protoGRE, gre(typeIPv4, 9, noField, false, nil))
		}},
		{ERSPANConnections, 80, func(*conn) wrapFunc { return erspanTunnel(v4(198, 51, 100, 5), v4(198, 51, 100, 6)) }},
		{GTPUConnections, 443, func(c *conn) wrapFunc { return gtpuTunnel(v4(10, 200, 0, 1), v4(10, 200, 0, 2), c.cPort) }},
		{IPIPConnections, 5432, func(*conn) wrapFunc {
			return ipTunnel(v4(198, 51, 100, 9), v4(198, 51, 100, 10), protoIPv4, nil)
		}},
		{MPLSConnections, 80, func(*conn) wrapFunc { return mplsShim(1600) }},
		{PPPoEConnections, 80, func(c *conn) wrapFunc { return pppoeShim(c.cPort) }},
		{NestedConnections, 443, func(*conn) wrapFunc {
			greKey7 := ipTunnel(v4(10, 9, 0, 1), v4(10, 9, 0, 2), protoGRE, gre(typeIPv4, 7, noField, false, nil))
			vx := udpTunnel(v4(192, 0, 2, 101), v4(192, 0, 2, 102), 4789, false, vxlanHeader(5002))
			return func(g *gen, frame []byte, fromClient bool) []byte {
				return vx(g, greKey7(g, frame, fromClient), fromClient)
			}
		}},
		{InnerVLANConns, 80, func(*conn) wrapFunc {
			vx := udpTunnel(v4(192, 0, 2, 101), v4(192, 0, 2, 102), 4789, false, vxlanHeader(5003))
			return func(g *gen, frame []byte, fromClient bool) []byte {
				return vx(g, withTag(frame, typeVLAN, 100), fromClient)
			}
		}},
		{PseudowireConns, 80, func(*conn) wrapFunc { return pseudowireTunnel(2000) }},
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
		g.add(at(1), udpOver(vtepA, vtepB, g.nextID(), 50000, 4789, []byte{0x08, 0, 0, 0})) // VXLAN cut short
		echo := binary.BigEndian.AppendUint32([]byte{0x32, 0x01, 0, 4}, 0)                  // version 1, S, echo request, TEID 0
		echo = append(echo, 0, byte(i), 0, 0)
		g.add(at(2), udpOver(v4(10, 200, 0, 1), v4(10, 200, 0, 2), g.nextID(), 2152, 2152, echo))
		padi := append(slices.Clone(broadcast), hostMAC(v4(172, 16, 0, 9))...)
		padi = append(padi, 0x88, 0x63, 0x11, 0x09, 0, 0, 0, 4, 0x01, 0x01, 0, 0) // PADI with an empty service name
		g.add(at(3), padi)
		lcp := pppoeShim(0x4000)(g, append(slices.Clone(tcp[:14]), 0x09, byte(i), 0, 8, 0, 0, 0, 0), true)
		lcp[20], lcp[21] = 0xc0, 0x21 // PPP protocol LCP: an echo request
		g.add(at(4), lcp)
		// One VXLAN datagram of 2,500 bytes in two outer fragments.
		whole := vx(g, tcp, true)
		for j, f := range Fragment(whole, (1400-20)&^7, uint32(binary.BigEndian.Uint16(whole[18:]))) {
			g.add(at(5)+time.Duration(j)*time.Microsecond, f)
		}
	}
}

// nextID is the next IPv4 identification the generator's hosts use.
func (g *gen) nextID() uint16 {
	g.ipid++
	return g.ipid
}

// ends orders a tunnel's endpoints for a frame from the client (a's side)
// or the server.
func ends(a, b net.IP, fromClient bool) (src, dst net.IP) {
	if fromClient {
		return a, b
	}
	return b, a
}

// A wrapFunc encapsulates a frame of a path from the client or the server.
type wrapFunc = func(g *gen, frame []byte, fromClient bool) []byte

// udpTunnel wraps a frame behind hdr in UDP to port between a (the
// client's side) and b; ipOnly drops the frame's Ethernet header. The UDP
// source port is a hash of the inner ports, as a VTEP picks it (GTP-U
// uses its own port).
func udpTunnel(a, b net.IP, port uint16, ipOnly bool, hdr []byte) wrapFunc {
	return func(g *gen, frame []byte, fromClient bool) []byte {
		src, dst := ends(a, b, fromClient)
		sport := port
		if port != 2152 {
			sport = vxlanSourcePort(frame)
		}
		if ipOnly {
			frame = frame[14:]
		}
		return udpOver(src, dst, g.nextID(), sport, port, cat(hdr, frame))
	}
}

// ipTunnel wraps a frame's IP packet behind hdr in IPv4 of protocol proto
// between a and b.
func ipTunnel(a, b net.IP, proto uint8, hdr []byte) wrapFunc {
	return func(g *gen, frame []byte, fromClient bool) []byte {
		src, dst := ends(a, b, fromClient)
		return ipOver(src, dst, g.nextID(), proto, cat(hdr, frame[14:]))
	}
}

// erspanTunnel mirrors a frame with ERSPAN type II (session 5) over GRE
// with a sequence number, from a switch at a to a collector at b,
// whichever way the frame went.
func erspanTunnel(a, b net.IP) wrapFunc {
	seq := int64(0)
	return func(g *gen, frame []byte, _ bool) []byte {
		seq++
		return ipOver(a, b, g.nextID(), protoGRE, gre(typeERSPAN2, noField, seq, false, cat(erspan2(5, 1), frame)))
	}
}

// gtpuTunnel carries a frame's IP packet in a G-PDU between gateways a and
// b, with a TEID per user and direction.
func gtpuTunnel(a, b net.IP, user uint16) wrapFunc {
	return func(g *gen, frame []byte, fromClient bool) []byte {
		teid := 0x10000 + uint32(user)
		if !fromClient {
			teid |= 0x1000000
		}
		return udpTunnel(a, b, 2152, true, gtpuHeader(teid, false, len(frame)-14))(g, frame, fromClient)
	}
}

// mplsShim puts a frame's IP packet under one label, on the same link.
func mplsShim(label uint32) wrapFunc {
	return func(_ *gen, frame []byte, _ bool) []byte { return withShim(frame, typeMPLS, mplsLabel(label, true)) }
}

// pppoeShim puts a frame's IP packet in a PPPoE session (a session ID per
// client).
func pppoeShim(session uint16) wrapFunc {
	return func(_ *gen, frame []byte, _ bool) []byte {
		return withShim(frame, typePPPoE, pppoeSession(session, frame[14:]))
	}
}

// pseudowireTunnel carries a whole frame over MPLS (one label, a control
// word), as an Ethernet pseudowire does.
func pseudowireTunnel(label uint32) wrapFunc {
	seq := uint16(0)
	return func(_ *gen, frame []byte, _ bool) []byte {
		seq++
		return ethernet(switchMAC, switchMAC, typeMPLS, pseudowire(label, seq, frame))
	}
}
