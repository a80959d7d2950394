package synth

// This file builds frames in every encapsulation (Cases, BigCases) and the
// captures made of them (VXLANCapture, FragmentedUDP), with the headers of
// headers.go.

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/netip"
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
	outer4a = net.IP{192, 0, 2, 1}
	outer4b = net.IP{192, 0, 2, 2}
	outer6a = net.ParseIP("2001:db8::1")
	outer6b = net.ParseIP("2001:db8::2")
	mid4a   = net.IP{198, 51, 100, 1} // a second tunnel's, inside the first
	mid4b   = net.IP{198, 51, 100, 2}
)

// Cases are the encapsulations, each at least once; the names are unique.
var Cases = []Case{
	{Name: "plain", Build: plain},
	{Name: "vlan", Inner: "vlan:7", Outer: "vlan:7", Build: func(f Flow) []byte { return withTag(plain(f), typeVLAN, 7) }},
	{Name: "qinq", Inner: "vlan:100+vlan:7", Outer: "vlan:100+vlan:7", Build: func(f Flow) []byte {
		return withTag(withTag(plain(f), typeVLAN, 7), typeQinQ, 100)
	}},
	{Name: "vxlan", Inner: "vlan:7+vxlan:42", Outer: "vlan:7", Tunnel: true, Build: func(f Flow) []byte {
		return withTag(udpOver(outer4a, outer4b, 0, 50000, 4789, cat(vxlanHeader(42), plain(f))), typeVLAN, 7)
	}},
	{Name: "vxlan6-inner-vlan", Inner: "vxlan:43+vlan:9", Tunnel: true, Build: func(f Flow) []byte {
		return udpOver(outer6a, outer6b, 0, 50001, 4789, cat(vxlanHeader(43), withTag(plain(f), typeVLAN, 9)))
	}},
	{Name: "vxlan-legacy-port", Inner: "vxlan:44", Tunnel: true, Build: func(f Flow) []byte {
		return udpOver(outer4a, outer4b, 0, 50002, 8472, cat(vxlanHeader(44), plain(f)))
	}},
	{Name: "geneve", Inner: "geneve:77", Tunnel: true, Build: func(f Flow) []byte {
		return udpOver(outer4a, outer4b, 0, 50003, 6081, cat(geneve(77, typeTEB, geneveOption), plain(f)))
	}},
	{Name: "geneve-ip", Inner: "geneve:78", Tunnel: true, Build: func(f Flow) []byte {
		return udpOver(outer4a, outer4b, 0, 50004, 6081, cat(geneve(78, f.etherType(), nil), f.packet()))
	}},
	{Name: "gre-key", Inner: "gre:key=9", Tunnel: true, Build: func(f Flow) []byte {
		return ipOver(outer4a, outer4b, 0, protoGRE, gre(f.etherType(), 9, noField, false, f.packet()))
	}},
	{Name: "gre-ipip", Inner: "gre:key=9+ipip", Tunnel: true, Build: func(f Flow) []byte {
		ipip := ipPacket(mid4a, mid4b, 0, f.ipInIP(), f.packet())
		return ipOver(outer4a, outer4b, 0, protoGRE, gre(typeIPv4, 9, noField, false, ipip))
	}},
	{Name: "gre-csum-seq", Inner: "gre", Tunnel: true, Build: func(f Flow) []byte {
		return ipOver(outer4a, outer4b, 0, protoGRE, gre(f.etherType(), noField, 7, true, f.packet()))
	}},
	{Name: "nvgre", Inner: "gre:key=1280", Tunnel: true, Build: func(f Flow) []byte {
		// NVGRE: the key is the 24-bit virtual subnet ID and an 8-bit flow ID.
		return ipOver(outer6a, outer6b, 0, protoGRE, gre(typeTEB, 5<<8, noField, false, plain(f)))
	}},
	{Name: "erspan1", Inner: "gre+erspan1", Tunnel: true, Build: func(f Flow) []byte {
		return ipOver(outer4a, outer4b, 0, protoGRE, gre(typeERSPAN2, noField, noField, false, plain(f)))
	}},
	{Name: "erspan2", Inner: "gre+erspan2:5", Tunnel: true, Build: func(f Flow) []byte {
		return ipOver(outer4a, outer4b, 0, protoGRE, gre(typeERSPAN2, noField, 1, false, cat(erspan2(5, 3), plain(f))))
	}},
	{Name: "erspan3", Inner: "gre+erspan3:6", Tunnel: true, Build: func(f Flow) []byte {
		return ipOver(outer4a, outer4b, 0, protoGRE, gre(typeERSPAN3, noField, 1, false, cat(erspan3(6, false), plain(f))))
	}},
	{Name: "erspan3-platform", Inner: "gre+erspan3:6", Tunnel: true, Build: func(f Flow) []byte {
		return ipOver(outer4a, outer4b, 0, protoGRE, gre(typeERSPAN3, noField, 2, false, cat(erspan3(6, true), plain(f))))
	}},
	{Name: "gtpu", Inner: "gtpu:1234", Tunnel: true, Build: func(f Flow) []byte { return gtpuFrame(f, 1234, false) }},
	{Name: "gtpu-seq", Inner: "gtpu:1235", Tunnel: true, Build: func(f Flow) []byte { return gtpuFrame(f, 1235, true) }},
	{Name: "ipip", Inner: "ipip", Tunnel: true, Build: func(f Flow) []byte {
		return ipOver(outer4a, outer4b, 0, f.ipInIP(), f.packet())
	}},
	{Name: "ipip6", Inner: "ipip", Tunnel: true, Build: func(f Flow) []byte {
		return ipOver(outer6a, outer6b, 0, f.ipInIP(), f.packet())
	}},
	{Name: "mpls", Inner: "mpls:1600", Outer: "mpls:1600", Build: func(f Flow) []byte {
		return withShim(plain(f), typeMPLS, mplsLabel(1600, true))
	}},
	{Name: "mpls-stack", Inner: "mpls:16+mpls:1601", Outer: "mpls:16+mpls:1601", Build: func(f Flow) []byte {
		return withShim(plain(f), typeMPLS, cat(mplsLabel(16, false), mplsLabel(1601, true)))
	}},
	{Name: "mpls-pw", Inner: "mpls:2000+pw+vlan:5", Outer: "mpls:2000+pw+vlan:5", Build: func(f Flow) []byte {
		return ethernet(switchMAC, switchMAC, typeMPLS, pseudowire(2000, 1, withTag(plain(f), typeVLAN, 5)))
	}},
	{Name: "pppoe", Inner: "pppoe:17", Outer: "pppoe:17", Build: func(f Flow) []byte {
		return withShim(plain(f), typePPPoE, pppoeSession(17, f.packet()))
	}},
	{Name: "vlan-vxlan-gre", Inner: "vlan:7+vxlan:42+gre:key=9", Outer: "vlan:7", Tunnel: true, Build: func(f Flow) []byte {
		inner := ipOver(mid4a, mid4b, 0, protoGRE, gre(f.etherType(), 9, noField, false, f.packet()))
		return withTag(udpOver(outer4a, outer4b, 0, 50005, 4789, cat(vxlanHeader(42), inner)), typeVLAN, 7)
	}},
	{Name: "mpls-gtpu", Inner: "mpls:300+gtpu:99", Outer: "mpls:300", Tunnel: true, Build: func(f Flow) []byte {
		return withShim(gtpuFrame(f, 99, false), typeMPLS, mplsLabel(300, true))
	}},
	{Name: "cmd", Inner: "vlan:7+cmd:10", Outer: "vlan:7+cmd:10", Build: func(f Flow) []byte {
		return withTag(withShim(plain(f), typeCMD, cmdEth(10, f.etherType())), typeVLAN, 7)
	}},
	{Name: "gre-cmd", Inner: "gre:key=40+cmd:5", Tunnel: true, Build: func(f Flow) []byte {
		return ipOver(outer4a, outer4b, 0, protoGRE, gre(typeCMD, 40, noField, false, cat(cmdGRE(f.etherType(), 5), f.packet())))
	}},
	{Name: "mplsudp", Inner: "mplsudp+mpls:100", Tunnel: true, Build: func(f Flow) []byte {
		return udpOver(outer4a, outer4b, 0, 50006, 6635, cat(mplsLabel(100, true), f.packet()))
	}},
	{Name: "mplsudp6-pw", Inner: "mplsudp+mpls:200+pw", Tunnel: true, Build: func(f Flow) []byte {
		return udpOver(outer6a, outer6b, 0, 50007, 6635, pseudowire(200, 0, plain(f)))
	}},
}

// geneveOption is one 8-byte GENEVE option: class 0x0102, type 3, 4 bytes
// of data.
var geneveOption = []byte{0x01, 0x02, 0x03, 0x01, 0xde, 0xad, 0xbe, 0xef}

// gtpuFrame is a GTP-U G-PDU over UDP over IPv4 carrying f.
func gtpuFrame(f Flow, teid uint32, seq bool) []byte {
	p := f.packet()
	return udpOver(outer4a, outer4b, 0, 2152, 2152, cat(gtpuHeader(teid, seq, len(p)), p))
}

// BigLen is the size of the transport payload of BigCases' packets: over
// 64 KiB, so that none of their length fields can hold it.
const BigLen = 70000

// BigCases carry the flow in a packet over 64 KiB, as Linux's BIG TCP
// sends one and RFC 2675 defines an IPv6 jumbogram: an IPv4 total length
// of zero; an IPv6 payload length of zero and a hop-by-hop header with the
// Jumbo Payload option; a UDP length of zero. A tunnel over IPv6 is a
// jumbogram too, since what it carries is as large. Their frames are over
// 64 KiB: written with a snap length they are cut, as a capture cuts them.
var BigCases = []Case{
	{Name: "big", Build: func(f Flow) []byte { return f.ethernet(bigPacket(f)) }},
	{Name: "vxlan-jumbo", Inner: "vxlan:5001", Tunnel: true, Build: func(f Flow) []byte {
		return bigTunnel(udpHeader(50008, 4789, cat(vxlanHeader(5001), f.ethernet(bigPacket(f)))))
	}},
	{Name: "geneve-jumbo", Inner: "geneve:77", Tunnel: true, Build: func(f Flow) []byte {
		return bigTunnel(udpHeader(50009, 6081, cat(geneve(77, f.etherType(), geneveOption), bigPacket(f))))
	}},
}

// bigTunnel is an Ethernet frame carrying a UDP datagram over 64 KiB
// between the IPv6 tunnel endpoints, a jumbogram.
func bigTunnel(udp []byte) []byte {
	return ethernet(hostMAC(outer6a), routerMAC, typeIPv6, jumbo6(outer6a, outer6b, protoUDP, udp))
}

// bigPacket is the flow's IP packet with BigLen bytes of payload: BIG
// TCP's IPv4 (total length zero) or an IPv6 jumbogram, the UDP length
// zero; no checksums.
func bigPacket(f Flow) []byte {
	l4 := f.transport(make([]byte, BigLen))
	src, dst := f.Src.AsSlice(), f.Dst.AsSlice()
	if f.Src.Is6() {
		return jumbo6(src, dst, f.proto(), l4)
	}
	h := []byte{0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, f.proto(), 0, 0} // total length 0, DF
	h = append(append(h, src...), dst...)
	return append(h, l4...)
}

// jumbo6 is an IPv6 jumbogram (RFC 2675) carrying payload of protocol nh:
// a payload length of zero, and a hop-by-hop header of 8 bytes holding the
// Jumbo Payload option.
func jumbo6(src, dst net.IP, nh uint8, payload []byte) []byte {
	h := []byte{0x60, 0, 0, 0, 0, 0, 0, 64} // payload length 0, next header hop-by-hop
	h = append(append(h, src...), dst...)
	h = append(h, nh, 0, 0xc2, 4)
	h = binary.BigEndian.AppendUint32(h, uint32(8+len(payload)))
	return append(h, payload...)
}

// VXLANPorts are the UDP ports the cases use for VXLAN: IANA's and Linux's
// legacy one (the "vxlan-legacy-port" case).
const VXLANPorts = "4789,8472"

// plain is f's frame, unencapsulated: its packet carrying a short payload.
func plain(f Flow) []byte { return f.ethernet(f.packet()) }

// packet is f's IP packet carrying a short payload.
func (f Flow) packet() []byte { return f.packetWith([]byte("payload of the inner flow")) }

// packetWith is f's IP packet carrying payload.
func (f Flow) packetWith(payload []byte) []byte {
	return ipPacket(f.Src.AsSlice(), f.Dst.AsSlice(), 0, f.proto(), f.transport(payload))
}

// transport is f's TCP header (sequence and acknowledgement number 1,
// PSH|ACK, a window of 512) or UDP header before payload, checksum zero.
func (f Flow) transport(payload []byte) []byte {
	if f.UDP {
		return udpHeader(f.SrcPort, f.DstPort, payload)
	}
	h := binary.BigEndian.AppendUint16(nil, f.SrcPort)
	h = binary.BigEndian.AppendUint16(h, f.DstPort)
	h = append(h, 0, 0, 0, 1, 0, 0, 0, 1, 0x50, 0x18, 0x02, 0, 0, 0, 0, 0)
	return append(h, payload...)
}

// ethernet is an Ethernet frame from f's source host carrying the IP
// packet p.
func (f Flow) ethernet(p []byte) []byte {
	return ethernet(hostMAC(f.Src.AsSlice()), routerMAC, f.etherType(), p)
}

func (f Flow) proto() uint8 {
	if f.UDP {
		return protoUDP
	}
	return protoTCP
}

func (f Flow) etherType() uint16 { return etherType(f.Src.AsSlice()) }

// ipInIP is the IP protocol of an IP header carrying f's packet.
func (f Flow) ipInIP() uint8 {
	if f.Src.Is6() {
		return protoIPv6
	}
	return protoIPv4
}

// cat is its arguments, one after another.
func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
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
			out = append(out, plain(f))
			continue
		}
		f := Flow{Src: netip.AddrFrom4([4]byte{10, 0, byte(n >> 8), byte(n)}), Dst: netip.AddrFrom4([4]byte{10, 0, 200, byte(n % 7)}),
			SrcPort: uint16(33000 + n), DstPort: 80}
		sport := uint16(49152 + uint32(n)*2654435761%16384)
		out = append(out, udpOver(outer4a, outer4b, 0, sport, 4789, cat(vxlanHeader(42), plain(f))))
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
		whole := f.ethernet(f.packetWith(payload))
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
