package filter

import (
	"encoding/binary"
	"hash/fnv"
	"math/rand"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/rpsgo/rps/internal/sample"
)

// This file builds the frames the differential tests run programs over:
// the repository's captures, frames made with gopacket for what they lack
// (tags, MPLS, fragments, IPv6 extension headers, ICMP and ICMPv6 types,
// ARP, LLC and SNAP, TCP flags, other EtherTypes), and copies of some of
// them cut short, where a program's outcome depends on which loads it
// makes.

// readPcap returns the frames of a classic pcap file (little-endian, as
// the samples are), their captured bytes.
func readPcap(t testing.TB, b []byte) [][]byte {
	t.Helper()
	if len(b) < 24 || binary.LittleEndian.Uint32(b) != 0xa1b2c3d4 {
		t.Fatal("not a little-endian pcap file")
	}
	var out [][]byte
	for b = b[24:]; len(b) >= 16; {
		n := int(binary.LittleEndian.Uint32(b[8:]))
		if 16+n > len(b) {
			t.Fatal("truncated pcap record")
		}
		out = append(out, b[16:16+n])
		b = b[16+n:]
	}
	return out
}

// captureFrames returns the frames of both sample captures, without the
// ones that differ from a frame already taken only in fields no generated
// expression tells apart (IPv4 ID and checksum, TCP sequence numbers and
// checksum, payload), and of those at most max, evenly spread (all with
// max 0).
func captureFrames(t testing.TB, max int) [][]byte {
	seen := map[uint64]bool{}
	var out [][]byte
	for _, file := range [][]byte{sample.Pcap, sample.Tunnels} {
		for _, f := range readPcap(t, file) {
			sig := make([]byte, min(len(f), 96))
			copy(sig, f)
			for _, r := range [][2]int{{18, 20}, {24, 26}, {38, 46}, {50, 52}} {
				for i := r[0]; i < r[1] && i < len(sig); i++ {
					sig[i] = 0
				}
			}
			h := fnv.New64a()
			h.Write(sig)
			binary.Write(h, binary.LittleEndian, uint32(len(f)))
			if k := h.Sum64(); !seen[k] {
				seen[k] = true
				out = append(out, f)
			}
		}
	}
	if max > 0 && len(out) > max {
		spread := make([][]byte, max)
		for i := range spread {
			spread[i] = out[i*len(out)/max]
		}
		out = spread
	}
	return out
}

var (
	macA  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
	macB  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x02}
	macBC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	macMC = net.HardwareAddr{0x01, 0x00, 0x5e, 0x00, 0x00, 0x01}
	mac6  = net.HardwareAddr{0x33, 0x33, 0, 0, 0, 0x01}
)

var (
	genV4 = []string{"10.0.0.1", "10.0.0.2", "192.168.1.7", "192.0.2.10", "224.0.0.5", "255.255.255.255", "0.0.0.0", "172.16.5.4"}
	genV6 = []string{"fd00::1", "fd00::2", "2001:db8::9", "fe80::1", "ff02::1", "::1"}
	// genPorts are the ports of the generated frames (and of the
	// expressions).
	genPorts = []uint16{0, 22, 53, 80, 123, 443, 1024, 5201, 8000, 8080, 33000, 65535}
)

// serialize builds a frame of ls.
func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	var netLayer gopacket.NetworkLayer
	for _, l := range ls {
		switch l := l.(type) {
		case *layers.IPv4:
			netLayer = l
		case *layers.IPv6:
			netLayer = l
		case *layers.TCP:
			l.SetNetworkLayerForChecksum(netLayer)
		case *layers.UDP:
			l.SetNetworkLayerForChecksum(netLayer)
		}
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// linkHeaders returns the link-layer headers for a payload of EtherType
// typ: plain, one 802.1Q tag, QinQ (802.1ad and 0x9100 outside), three
// tags; src and dst vary.
func linkHeaders(r *rand.Rand, typ layers.EthernetType) [][]gopacket.SerializableLayer {
	macs := []net.HardwareAddr{macA, macB, macBC, macMC, mac6}
	eth := func(t layers.EthernetType) *layers.Ethernet {
		return &layers.Ethernet{SrcMAC: macs[r.Intn(2)], DstMAC: macs[r.Intn(len(macs))], EthernetType: t}
	}
	vids := []uint16{0, 1, 100, 200, 4095}
	tag := func(next layers.EthernetType) *layers.Dot1Q {
		return &layers.Dot1Q{VLANIdentifier: vids[r.Intn(len(vids))], Priority: uint8(r.Intn(8)), Type: next}
	}
	return [][]gopacket.SerializableLayer{
		{eth(typ)},
		{eth(layers.EthernetTypeDot1Q), tag(typ)},
		{eth(layers.EthernetTypeQinQ), tag(layers.EthernetTypeDot1Q), tag(typ)},
		{eth(0x9100), tag(layers.EthernetTypeDot1Q), tag(typ)},
		{eth(layers.EthernetTypeDot1Q), tag(layers.EthernetTypeDot1Q), tag(layers.EthernetTypeDot1Q), tag(typ)},
	}
}

// l4 returns transport layers with their IP protocol.
func l4(r *rand.Rand) (layers.IPProtocol, []gopacket.SerializableLayer) {
	port := func() layers.TCPPort { return layers.TCPPort(genPorts[r.Intn(len(genPorts))]) }
	switch r.Intn(9) {
	case 0, 1, 2:
		flags := r.Intn(256)
		tcp := &layers.TCP{SrcPort: port(), DstPort: port(), Seq: r.Uint32(), Ack: r.Uint32(), Window: 512,
			FIN: flags&1 != 0, SYN: flags&2 != 0, RST: flags&4 != 0, PSH: flags&8 != 0,
			ACK: flags&16 != 0, URG: flags&32 != 0, ECE: flags&64 != 0, CWR: flags&128 != 0}
		return layers.IPProtocolTCP, []gopacket.SerializableLayer{tcp, gopacket.Payload(make([]byte, r.Intn(40)))}
	case 3, 4:
		udp := &layers.UDP{SrcPort: layers.UDPPort(port()), DstPort: layers.UDPPort(port())}
		return layers.IPProtocolUDP, []gopacket.SerializableLayer{udp, gopacket.Payload(make([]byte, r.Intn(30)))}
	case 5:
		sctp := &layers.SCTP{SrcPort: layers.SCTPPort(port()), DstPort: layers.SCTPPort(port())}
		return layers.IPProtocolSCTP, []gopacket.SerializableLayer{sctp, gopacket.Payload(make([]byte, 16))}
	case 6:
		types := []uint8{0, 3, 5, 8, 11, 13, 17}
		icmp := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(types[r.Intn(len(types))], uint8(r.Intn(4))), Id: 1, Seq: 2}
		return layers.IPProtocolICMPv4, []gopacket.SerializableLayer{icmp, gopacket.Payload(make([]byte, 8))}
	}
	protos := []layers.IPProtocol{2, 9, 47, 50, 51, 103, 112}
	return protos[r.Intn(len(protos))], []gopacket.SerializableLayer{gopacket.Payload(randBytes(r, 4+r.Intn(30)))}
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	r.Read(b)
	return b
}

func ipv4Layer(r *rand.Rand, proto layers.IPProtocol) *layers.IPv4 {
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: proto, Id: uint16(r.Intn(65536)),
		SrcIP: net.ParseIP(genV4[r.Intn(len(genV4))]).To4(), DstIP: net.ParseIP(genV4[r.Intn(len(genV4))]).To4()}
	switch r.Intn(6) {
	case 0: // a first fragment
		ip.Flags = layers.IPv4MoreFragments
	case 1: // a later fragment
		ip.FragOffset = uint16(1 + r.Intn(100))
		ip.Flags = layers.IPv4Flag(r.Intn(2))
	case 2:
		ip.Flags = layers.IPv4DontFragment
	case 3: // options: IHL 6 or 7
		ip.Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}
		if r.Intn(2) == 0 {
			ip.Options = append(ip.Options, ip.Options...)
		}
	}
	return ip
}

func ipv6Layer(r *rand.Rand, next layers.IPProtocol) *layers.IPv6 {
	return &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: next,
		SrcIP: net.ParseIP(genV6[r.Intn(len(genV6))]), DstIP: net.ParseIP(genV6[r.Intn(len(genV6))])}
}

// l3 returns the network layers of a frame and its EtherType.
func l3(r *rand.Rand) (layers.EthernetType, []gopacket.SerializableLayer) {
	switch k := r.Intn(12); {
	case k < 5:
		proto, rest := l4(r)
		return layers.EthernetTypeIPv4, append([]gopacket.SerializableLayer{ipv4Layer(r, proto)}, rest...)
	case k < 9:
		var proto layers.IPProtocol
		var rest []gopacket.SerializableLayer
		if r.Intn(3) == 0 {
			types := []uint8{1, 2, 3, 128, 129, 133, 134, 135, 136, 143}
			proto = layers.IPProtocolICMPv6
			rest = []gopacket.SerializableLayer{gopacket.Payload(append([]byte{types[r.Intn(len(types))], uint8(r.Intn(3)), 0, 0}, make([]byte, 20)...))}
		} else {
			proto, rest = l4(r)
		}
		// An extension header first, sometimes: hop-by-hop, routing,
		// fragment (first or later), destination options.
		ext := []struct {
			nh  layers.IPProtocol
			hdr func(next layers.IPProtocol) []byte
		}{
			{0, func(n layers.IPProtocol) []byte { return []byte{byte(n), 0, 1, 4, 0, 0, 0, 0} }},
			{43, func(n layers.IPProtocol) []byte { return []byte{byte(n), 0, 0, 0, 0, 0, 0, 0} }},
			{44, func(n layers.IPProtocol) []byte { return []byte{byte(n), 0, 0, 1, 0, 0, 0, 7} }},
			{44, func(n layers.IPProtocol) []byte { return []byte{byte(n), 0, 0, 0x18, 0, 0, 0, 7} }},
			{60, func(n layers.IPProtocol) []byte { return []byte{byte(n), 0, 1, 4, 0, 0, 0, 0} }},
		}
		if r.Intn(3) == 0 {
			e := ext[r.Intn(len(ext))]
			var payload []byte
			for _, l := range rest {
				payload = append(payload, serializeAny(l)...)
			}
			return layers.EthernetTypeIPv6, []gopacket.SerializableLayer{ipv6Layer(r, e.nh), gopacket.Payload(append(e.hdr(proto), payload...))}
		}
		return layers.EthernetTypeIPv6, append([]gopacket.SerializableLayer{ipv6Layer(r, proto)}, rest...)
	case k < 10:
		op := uint16(1 + r.Intn(2))
		arp := &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: op, SourceHwAddress: macA, SourceProtAddress: net.ParseIP(genV4[r.Intn(len(genV4))]).To4(),
			DstHwAddress: macB, DstProtAddress: net.ParseIP(genV4[r.Intn(len(genV4))]).To4()}
		typ := layers.EthernetTypeARP
		if r.Intn(3) == 0 {
			typ = 0x8035 // RARP
		}
		return typ, []gopacket.SerializableLayer{arp}
	}
	others := []layers.EthernetType{0x809b, 0x80f3, 0x8137, 0x6001, 0x6002, 0x6003, 0x6004, 0x6007, 0x88cc, 0x9000, 0x8864, 0x0800, 0x86dd}
	return others[r.Intn(len(others))], []gopacket.SerializableLayer{gopacket.Payload(randBytes(r, 4+r.Intn(60)))}
}

// serializeAny serializes one layer on its own (checksums left zero).
func serializeAny(l gopacket.SerializableLayer) []byte {
	buf := gopacket.NewSerializeBuffer()
	if err := l.SerializeTo(buf, gopacket.SerializeOptions{FixLengths: true}); err != nil {
		panic(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// llcFrames are 802.3 frames (a length, not a type): STP, OSI (CLNP,
// ES-IS, IS-IS of several PDU types), NetBEUI, IPX (802.2 and raw), SNAP
// with AppleTalk, AARP and IPX, IP over 802.2.
func llcFrames(t testing.TB, r *rand.Rand) [][]byte {
	payloads := [][]byte{
		{0x42, 0x42, 0x03, 0, 0, 0, 0},
		{0xfe, 0xfe, 0x03, 0x81, 0, 0, 0, 0},
		{0xfe, 0xfe, 0x03, 0x82, 0, 0, 0, 0},
		{0xf0, 0xf0, 0x03, 0, 0},
		{0xe0, 0xe0, 0x03, 0xff, 0xff},
		{0xff, 0xff, 0, 0x30},
		{0xaa, 0xaa, 0x03, 0x08, 0x00, 0x07, 0x80, 0x9b, 0, 0},
		{0xaa, 0xaa, 0x03, 0x00, 0x00, 0x00, 0x80, 0xf3, 0, 0},
		{0xaa, 0xaa, 0x03, 0x00, 0x00, 0x00, 0x81, 0x37, 0, 0},
		{0x06, 0x06, 0x03, 0x45, 0, 0},
		{0xe0, 0x06, 0x03},
	}
	for _, pdu := range []byte{15, 16, 17, 18, 20, 24, 25, 26, 27, 99} {
		payloads = append(payloads, []byte{0xfe, 0xfe, 0x03, 0x83, 27, 1, 0, pdu, 1, 0, 0})
	}
	var out [][]byte
	for _, p := range payloads {
		p = append(p, make([]byte, r.Intn(40))...)
		b := make([]byte, 14, 14+len(p))
		copy(b, []byte(macB))
		copy(b[6:], []byte(macA))
		binary.BigEndian.PutUint16(b[12:], uint16(len(p)))
		out = append(out, append(b, p...))
		tagged := append(append(append([]byte(nil), b[:12]...), 0x81, 0x00, 0, 100), b[12:]...)
		out = append(out, append(tagged, p...))
	}
	return out
}

// mplsFrames are MPLS frames with one to three labels over IPv4, IPv6 or
// something else.
func mplsFrames(t testing.TB, r *rand.Rand) [][]byte {
	labels := []uint32{0, 3, 16, 100, 1000, 0xfffff}
	var out [][]byte
	for i := 0; i < 60; i++ {
		n := 1 + r.Intn(3)
		ls := []gopacket.SerializableLayer{&layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeMPLSUnicast}}
		for j := 0; j < n; j++ {
			ls = append(ls, &layers.MPLS{Label: labels[r.Intn(len(labels))], TTL: 64, StackBottom: j == n-1 || r.Intn(8) == 0})
		}
		switch r.Intn(3) {
		case 0:
			proto, rest := l4(r)
			ls = append(append(ls, ipv4Layer(r, proto)), rest...)
		case 1:
			proto, rest := l4(r)
			ls = append(append(ls, ipv6Layer(r, proto)), rest...)
		default:
			ls = append(ls, gopacket.Payload(randBytes(r, 30)))
		}
		out = append(out, serialize(t, ls...))
	}
	return out
}

// generatedFrames returns the gopacket-made frames, and copies of some
// of them cut at random lengths.
func generatedFrames(t testing.TB) [][]byte {
	r := rand.New(rand.NewSource(1))
	var out [][]byte
	for i := 0; i < 500; i++ {
		typ, l3s := l3(r)
		links := linkHeaders(r, typ)
		link := links[0]
		if r.Intn(3) == 0 {
			link = links[r.Intn(len(links))]
		}
		out = append(out, serialize(t, append(append([]gopacket.SerializableLayer{}, link...), l3s...)...))
	}
	out = append(out, llcFrames(t, r)...)
	out = append(out, mplsFrames(t, r)...)
	for i, p := range corpus() {
		if i%8 == 0 || p.runt {
			out = append(out, p.data)
		}
	}
	n := len(out)
	for i := 0; i < n; i += 2 {
		f := out[i]
		if len(f) > 0 {
			out = append(out, f[:r.Intn(len(f))])
		}
	}
	return out
}
