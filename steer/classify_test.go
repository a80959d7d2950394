package steer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/rpsgo/rps/hash"
)

// Frame builders. They write every header by hand, so a test states each
// byte that matters; TestClassifyGopacketBuilt cross-checks them against
// frames serialized by gopacket.

type vlanTag struct{ tpid, tci uint16 }

func tag(vid uint16) vlanTag  { return vlanTag{etherTypeVLAN, vid} }
func stag(vid uint16) vlanTag { return vlanTag{etherTypeQinQ, vid} }

var (
	testDstMAC = []byte{0x02, 0, 0, 0, 0, 1}
	testSrcMAC = []byte{0x02, 0, 0, 0, 0, 2}
)

// ethFrame returns an Ethernet II frame carrying payload, with the tags
// inserted outermost first.
func ethFrame(etherType uint16, payload []byte, tags ...vlanTag) []byte {
	b := make([]byte, 0, ethHeaderLen+vlanTagLen*len(tags)+len(payload))
	b = append(b, testDstMAC...)
	b = append(b, testSrcMAC...)
	for _, t := range tags {
		b = binary.BigEndian.AppendUint16(b, t.tpid)
		b = binary.BigEndian.AppendUint16(b, t.tci)
	}
	b = binary.BigEndian.AppendUint16(b, etherType)
	return append(b, payload...)
}

// ipv4Packet returns an IPv4 packet with optWords 32-bit words of options
// (NOPs) and a correct total length. Callers edit the header afterwards
// for malformed cases.
func ipv4Packet(src, dst netip.Addr, proto uint8, optWords int, payload []byte) []byte {
	hl := ipv4MinHeaderLen + 4*optWords
	b := make([]byte, hl, hl+len(payload))
	b[0] = 0x40 | byte(hl/4)
	binary.BigEndian.PutUint16(b[2:4], uint16(hl+len(payload)))
	binary.BigEndian.PutUint16(b[4:6], 0x1234) // id
	b[8] = 64
	b[9] = proto
	s, d := src.As4(), dst.As4()
	copy(b[12:16], s[:])
	copy(b[16:20], d[:])
	for i := ipv4MinHeaderLen; i < hl; i++ {
		b[i] = 1 // NOP option
	}
	return append(b, payload...)
}

// ipv6Packet returns an IPv6 packet whose first next header is nh and whose
// payload length is len(payload).
func ipv6Packet(src, dst netip.Addr, nh uint8, payload []byte) []byte {
	b := make([]byte, ipv6HeaderLen, ipv6HeaderLen+len(payload))
	b[0] = 0x60
	binary.BigEndian.PutUint16(b[4:6], uint16(len(payload)))
	b[6] = nh
	b[7] = 64
	s, d := src.As16(), dst.As16()
	copy(b[8:24], s[:])
	copy(b[24:40], d[:])
	return append(b, payload...)
}

// optsHdr returns a hop-by-hop or destination options header of
// (units+1)*8 bytes, filled with one PadN option so that a TLV parser
// accepts it.
func optsHdr(nh uint8, units int, rest []byte) []byte {
	l := (units + 1) * 8
	b := make([]byte, l, l+len(rest))
	b[0], b[1] = nh, byte(units)
	b[2], b[3] = 1, byte(l-4) // PadN covering the rest
	return append(b, rest...)
}

// routingHdr returns a routing header (type 0, segments left 0) of
// (units+1)*8 bytes.
func routingHdr(nh uint8, units int, rest []byte) []byte {
	l := (units + 1) * 8
	b := make([]byte, l, l+len(rest))
	b[0], b[1] = nh, byte(units)
	return append(b, rest...)
}

// fragHdr returns an IPv6 fragment header.
func fragHdr(nh uint8, offset uint16, more bool, rest []byte) []byte {
	b := make([]byte, ipv6FragHeaderLen, ipv6FragHeaderLen+len(rest))
	b[0] = nh
	fo := offset << 3
	if more {
		fo |= 1
	}
	binary.BigEndian.PutUint16(b[2:4], fo)
	binary.BigEndian.PutUint32(b[4:8], 0xdeadbeef)
	return append(b, rest...)
}

// ahHdr returns an authentication header with an ICV of icvWords words
// (its length field counts 4-byte words minus 2).
func ahHdr(nh uint8, icvWords int, rest []byte) []byte {
	l := 12 + 4*icvWords
	b := make([]byte, l, l+len(rest))
	b[0], b[1] = nh, byte(l/4-2)
	binary.BigEndian.PutUint32(b[4:8], 0x100) // SPI
	return append(b, rest...)
}

func tcpHdr(sp, dp uint16, payload ...byte) []byte {
	b := make([]byte, 20, 20+len(payload))
	binary.BigEndian.PutUint16(b[0:2], sp)
	binary.BigEndian.PutUint16(b[2:4], dp)
	b[12] = 5 << 4
	b[13] = 0x10 // ACK
	binary.BigEndian.PutUint16(b[14:16], 65535)
	return append(b, payload...)
}

func udpHdr(sp, dp uint16, payload ...byte) []byte {
	b := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(b[0:2], sp)
	binary.BigEndian.PutUint16(b[2:4], dp)
	binary.BigEndian.PutUint16(b[4:6], uint16(8+len(payload)))
	return append(b, payload...)
}

func sctpHdr(sp, dp uint16) []byte {
	b := make([]byte, 12)
	binary.BigEndian.PutUint16(b[0:2], sp)
	binary.BigEndian.PutUint16(b[2:4], dp)
	binary.BigEndian.PutUint32(b[4:8], 0xc0ffee)
	return b
}

// edit returns b after f changed it.
func edit(b []byte, f func(b []byte)) []byte { f(b); return b }

func cat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

func rep(n int, v byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = v
	}
	return b
}

var (
	a4 = netip.MustParseAddr("192.0.2.1")
	b4 = netip.MustParseAddr("198.51.100.7")
	a6 = netip.MustParseAddr("2001:db8::1")
	b6 = netip.MustParseAddr("2001:db8:ffff::2")
)

const (
	sport = 40000
	dport = 443
)

func msHasher(t testing.TB) *hash.Toeplitz {
	t.Helper()
	h, err := hash.NewToeplitz(hash.MicrosoftKey[:])
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func newTestClassifier(t testing.TB, h *hash.Toeplitz, symmetric, udp4 bool) *Classifier {
	t.Helper()
	c, err := NewClassifier(HashConfig{Key: h.Key(), Symmetric: symmetric, UDP4Tuple: udp4})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// expectedTuple builds, from a key and a hash type alone, the tuple the
// classifier must have hashed, with the hash package's own encoders.
func expectedTuple(k FlowKey, ht hash.HashType, symmetric bool) []byte {
	four := ht.Is4Tuple() || ht == hash.OpaqueHash
	if k.Src.Is4In6() || k.Dst.Is4In6() {
		// An IPv6 packet may carry IPv4-mapped addresses; hash.NewTuple*
		// unmap them, but the hash covers the packet's 16-byte addresses.
		return mappedTuple(k, four, symmetric)
	}
	var t hash.Tuple
	switch {
	case ht == hash.None:
	case four && symmetric:
		t = hash.NewTuple4Sym(k.Src, k.Dst, k.SrcPort, k.DstPort)
	case four:
		t = hash.NewTuple4(k.Src, k.Dst, k.SrcPort, k.DstPort)
	case symmetric:
		t = hash.NewTuple2Sym(k.Src, k.Dst)
	default:
		t = hash.NewTuple2(k.Src, k.Dst)
	}
	return t.Bytes()
}

// mappedTuple encodes an IPv6 tuple with IPv4-mapped addresses, which
// hash.NewTuple* cannot express, by hand.
func mappedTuple(k FlowKey, four, symmetric bool) []byte {
	src, dst, sp, dp := k.Src, k.Dst, k.SrcPort, k.DstPort
	if !four {
		sp, dp = 0, 0
	}
	s, d := src.As16(), dst.As16()
	// Byte-wise order of the 16-byte forms (hash.Canonical unmaps first,
	// for its own 8-byte encoding of mapped addresses).
	if c := bytes.Compare(s[:], d[:]); symmetric && (c > 0 || c == 0 && sp > dp) {
		s, d, sp, dp = d, s, dp, sp
	}
	b := append(s[:], d[:]...)
	if four {
		b = binary.BigEndian.AppendUint16(b, sp)
		b = binary.BigEndian.AppendUint16(b, dp)
	}
	return b
}

// checkHash verifies the hash-related fields of got against its own key.
func checkHash(t *testing.T, h *hash.Toeplitz, got *Classification, symmetric bool) {
	t.Helper()
	if got.HashType == hash.None {
		if got.FlowID != 0 || len(got.Tuple()) != 0 {
			t.Errorf("HashType NONE with FlowID %#x, tuple %x", got.FlowID, got.Tuple())
		}
		return
	}
	want := expectedTuple(got.Key, got.HashType, symmetric)
	if string(got.Tuple()) != string(want) {
		t.Errorf("tuple %x, want %x", got.Tuple(), want)
	}
	if wantID := h.Sum(want); got.FlowID != wantID {
		t.Errorf("FlowID %#08x, want %#08x", got.FlowID, wantID)
	}
}

type classifyCase struct {
	name      string
	frame     []byte
	vlan      int // > 0: classify with ClassifyVLAN(vlan)
	udp4      bool
	tunnels   bool // classify with TunnelsInner
	reason    Reason
	ht        hash.HashType
	etherType uint16
	key       FlowKey
}

func tcp4(opt int, tags ...vlanTag) []byte {
	return ethFrame(etherTypeIPv4, ipv4Packet(a4, b4, protoTCP, opt, tcpHdr(sport, dport, 'h', 'i')), tags...)
}

func key4(proto uint8, sp, dp uint16) FlowKey {
	return FlowKey{Src: a4, Dst: b4, Proto: proto, SrcPort: sp, DstPort: dp}
}

func key6(proto uint8, sp, dp uint16) FlowKey {
	return FlowKey{Src: a6, Dst: b6, Proto: proto, SrcPort: sp, DstPort: dp}
}

func withVLANs(k FlowKey, ids ...uint16) FlowKey {
	k.NVLAN = uint8(copy(k.VLANs[:], ids))
	return k
}

func withFrag(k FlowKey) FlowKey { k.Fragment = true; return k }

func ip6frame(nh uint8, payload []byte, tags ...vlanTag) []byte {
	return ethFrame(etherTypeIPv6, ipv6Packet(a6, b6, nh, payload), tags...)
}

func classifyCases() []classifyCase {
	tcp := tcpHdr(sport, dport, 'x')
	icmp := []byte{8, 0, 0, 0, 0, 1, 0, 1}
	cases := []classifyCase{
		// IPv4 transports.
		{name: "tcp4", frame: tcp4(0), ht: hash.RSSTCPIPv4, etherType: etherTypeIPv4, key: key4(protoTCP, sport, dport)},
		{name: "udp4 2-tuple, ports recorded", frame: ethFrame(etherTypeIPv4, ipv4Packet(a4, b4, protoUDP, 0, udpHdr(sport, 53, 1, 2))),
			ht: hash.RSSIPv4, etherType: etherTypeIPv4, key: key4(protoUDP, sport, 53)},
		{name: "udp4 4-tuple", udp4: true, frame: ethFrame(etherTypeIPv4, ipv4Packet(a4, b4, protoUDP, 0, udpHdr(sport, 53, 1, 2))),
			ht: hash.RSSUDPIPv4, etherType: etherTypeIPv4, key: key4(protoUDP, sport, 53)},
		{name: "sctp4 2-tuple", frame: ethFrame(etherTypeIPv4, ipv4Packet(a4, b4, protoSCTP, 0, sctpHdr(5000, 5001))),
			ht: hash.RSSIPv4, etherType: etherTypeIPv4, key: key4(protoSCTP, 5000, 5001)},
		{name: "sctp4 4-tuple opaque", udp4: true, frame: ethFrame(etherTypeIPv4, ipv4Packet(a4, b4, protoSCTP, 0, sctpHdr(5000, 5001))),
			ht: hash.OpaqueHash, etherType: etherTypeIPv4, key: key4(protoSCTP, 5000, 5001)},
		{name: "icmp4", frame: ethFrame(etherTypeIPv4, ipv4Packet(a4, b4, 1, 0, icmp)),
			ht: hash.RSSIPv4, etherType: etherTypeIPv4, key: key4(1, 0, 0)},
		{name: "icmp4 udp4 on", udp4: true, frame: ethFrame(etherTypeIPv4, ipv4Packet(a4, b4, 1, 0, icmp)),
			ht: hash.RSSIPv4, etherType: etherTypeIPv4, key: key4(1, 0, 0)},
		{name: "tcp4 options", frame: tcp4(3), ht: hash.RSSTCPIPv4, etherType: etherTypeIPv4, key: key4(protoTCP, sport, dport)},
		{name: "tcp4 max options", frame: tcp4(10), ht: hash.RSSTCPIPv4, etherType: etherTypeIPv4, key: key4(protoTCP, sport, dport)},
		{name: "tcp4 DF is no fragment", frame: edit(tcp4(0), func(b []byte) { b[ethHeaderLen+6] = 0x40 }),
			ht: hash.RSSTCPIPv4, etherType: etherTypeIPv4, key: key4(protoTCP, sport, dport)},
		{name: "tcp4 ports only (4 bytes)", frame: ethFrame(etherTypeIPv4, ipv4Packet(a4, b4, protoTCP, 0, tcpHdr(sport, dport)[:4])),
			ht: hash.RSSTCPIPv4, etherType: etherTypeIPv4, key: key4(protoTCP, sport, dport)},
		{name: "tcp4 snap cut (total length past frame)", frame: tcp4(0)[:ethHeaderLen+ipv4MinHeaderLen+6],
			ht: hash.RSSTCPIPv4, etherType: etherTypeIPv4, key: key4(protoTCP, sport, dport)},
		{name: "udp4 with ethernet padding", frame: append(ethFrame(etherTypeIPv4, ipv4Packet(a4, b4, protoUDP, 0, udpHdr(sport, 53))), rep(18, 0xee)...),
			ht: hash.RSSIPv4, etherType: etherTypeIPv4, key: key4(protoUDP, sport, 53)},

		// IPv4 fragments: 2-tuple, ports never read.
		{name: "ipv4 first fragment", frame: edit(tcp4(0), func(b []byte) { b[ethHeaderLen+6] = 0x20 }),
			ht: hash.RSSIPv4, etherType: etherTypeIPv4, key: withFrag(key4(protoTCP, 0, 0))},
		{name: "ipv4 later fragment", frame: edit(tcp4(0), func(b []byte) { binary.BigEndian.PutUint16(b[ethHeaderLen+6:], 185) }),
			ht: hash.RSSIPv4, etherType: etherTypeIPv4, key: withFrag(key4(protoTCP, 0, 0))},
		{name: "ipv4 fragment udp4 on", udp4: true,
			frame: edit(ethFrame(etherTypeIPv4, ipv4Packet(a4, b4, protoUDP, 0, udpHdr(sport, 53))), func(b []byte) { b[ethHeaderLen+6] = 0x3f }),
			ht:    hash.RSSIPv4, etherType: etherTypeIPv4, key: withFrag(key4(protoUDP, 0, 0))},
		{name: "ipv4 fragment without transport bytes", frame: ethFrame(etherTypeIPv4, edit(ipv4Packet(a4, b4, protoUDP, 0, nil), func(b []byte) { b[6] = 0x20 })),
			ht: hash.RSSIPv4, etherType: etherTypeIPv4, key: withFrag(key4(protoUDP, 0, 0))},

		// Truncated transport: 2-tuple and a reason.
		{name: "tcp4 3 bytes", frame: ethFrame(etherTypeIPv4, ipv4Packet(a4, b4, protoTCP, 0, []byte{1, 2, 3})),
			reason: ReasonShortTransport, ht: hash.RSSIPv4, etherType: etherTypeIPv4, key: key4(protoTCP, 0, 0)},
		{name: "udp4 none udp4 on", udp4: true, frame: ethFrame(etherTypeIPv4, ipv4Packet(a4, b4, protoUDP, 0, nil)),
			reason: ReasonShortTransport, ht: hash.RSSIPv4, etherType: etherTypeIPv4, key: key4(protoUDP, 0, 0)},
		{name: "sctp4 2 bytes", udp4: true, frame: ethFrame(etherTypeIPv4, ipv4Packet(a4, b4, protoSCTP, 0, []byte{1, 2})),
			reason: ReasonShortTransport, ht: hash.RSSIPv4, etherType: etherTypeIPv4, key: key4(protoSCTP, 0, 0)},
		{name: "tcp4 ports in padding only", frame: append(ethFrame(etherTypeIPv4, ipv4Packet(a4, b4, protoTCP, 0, []byte{0x9c, 0x40})), 1, 0xbb, 0, 0, 0, 0),
			reason: ReasonShortTransport, ht: hash.RSSIPv4, etherType: etherTypeIPv4, key: key4(protoTCP, 0, 0)},

		// Link layer.
		{name: "empty", frame: nil, reason: ReasonShortEthernet},
		{name: "short ethernet", frame: tcp4(0)[:13], reason: ReasonShortEthernet},
		{name: "arp", frame: ethFrame(0x0806, rep(28, 0)), reason: ReasonNonIP, etherType: 0x0806},
		{name: "802.3 length", frame: ethFrame(0x002e, rep(46, 0xaa)), reason: ReasonNonIP, etherType: 0x002e},
		{name: "ethernet header only", frame: ethFrame(etherTypeIPv4, nil), reason: ReasonShortIPv4, etherType: etherTypeIPv4},
		{name: "vlan", frame: tcp4(0, tag(100)), ht: hash.RSSTCPIPv4, etherType: etherTypeIPv4, key: withVLANs(key4(protoTCP, sport, dport), 100)},
		{name: "vlan priority bits dropped", frame: tcp4(0, tag(0xe000|100)), ht: hash.RSSTCPIPv4, etherType: etherTypeIPv4, key: withVLANs(key4(protoTCP, sport, dport), 100)},
		{name: "qinq", frame: tcp4(0, stag(7), tag(100)), ht: hash.RSSTCPIPv4, etherType: etherTypeIPv4, key: withVLANs(key4(protoTCP, sport, dport), 7, 100)},
		{name: "legacy qinq 0x9100", frame: tcp4(0, vlanTag{etherTypeQinQOld, 9}, tag(100)), ht: hash.RSSTCPIPv4, etherType: etherTypeIPv4, key: withVLANs(key4(protoTCP, sport, dport), 9, 100)},
		{name: "4 tags", frame: tcp4(0, stag(1), stag(2), tag(3), tag(4095)), ht: hash.RSSTCPIPv4, etherType: etherTypeIPv4, key: withVLANs(key4(protoTCP, sport, dport), 1, 2, 3, 4095)},
		{name: "5 tags", frame: tcp4(0, stag(1), stag(2), tag(3), tag(4), tag(5)), reason: ReasonTooManyVLANs, etherType: etherTypeVLAN, key: withVLANs(FlowKey{}, 1, 2, 3, 4)},
		{name: "out-of-band tag", vlan: 0x2000 | 42, frame: tcp4(0), ht: hash.RSSTCPIPv4, etherType: etherTypeIPv4, key: withVLANs(key4(protoTCP, sport, dport), 42)},
		{name: "out-of-band tag + 3", vlan: 42, frame: tcp4(0, stag(1), tag(2), tag(3)), ht: hash.RSSTCPIPv4, etherType: etherTypeIPv4, key: withVLANs(key4(protoTCP, sport, dport), 42, 1, 2, 3)},
		{name: "out-of-band tag + 4", vlan: 42, frame: tcp4(0, stag(1), tag(2), tag(3), tag(4)), reason: ReasonTooManyVLANs, etherType: etherTypeVLAN, key: withVLANs(FlowKey{}, 42, 1, 2, 3)},
		{name: "out-of-band tag, short ethernet", vlan: 42, frame: []byte{1, 2, 3}, reason: ReasonShortEthernet, key: withVLANs(FlowKey{}, 42)},
		{name: "short vlan", frame: tcp4(0, tag(100))[:ethHeaderLen+2], reason: ReasonShortVLAN, etherType: etherTypeVLAN},
		{name: "short inner vlan", frame: tcp4(0, stag(7), tag(100))[:ethHeaderLen+7], reason: ReasonShortVLAN, etherType: etherTypeVLAN, key: withVLANs(FlowKey{}, 7)},
		{name: "vlan then arp", frame: ethFrame(0x0806, rep(28, 0), tag(5)), reason: ReasonNonIP, etherType: 0x0806, key: withVLANs(FlowKey{}, 5)},

		// Unusable IPv4 headers.
		{name: "short ipv4", frame: tcp4(0)[:ethHeaderLen+19], reason: ReasonShortIPv4, etherType: etherTypeIPv4},
		{name: "ipv4 version 6", frame: edit(tcp4(0), func(b []byte) { b[ethHeaderLen] = 0x65 }), reason: ReasonBadIPVersion, etherType: etherTypeIPv4},
		{name: "ipv4 IHL 4", frame: edit(tcp4(0), func(b []byte) { b[ethHeaderLen] = 0x44 }), reason: ReasonBadIHL, etherType: etherTypeIPv4, key: key4(protoTCP, 0, 0)},
		{name: "ipv4 IHL past frame", frame: edit(tcp4(0), func(b []byte) { b[ethHeaderLen] = 0x4f }), reason: ReasonBadIHL, etherType: etherTypeIPv4, key: key4(protoTCP, 0, 0)},
		{name: "ipv4 total length 1", frame: edit(tcp4(0), func(b []byte) { b[ethHeaderLen+2], b[ethHeaderLen+3] = 0, 1 }), reason: ReasonBadIPLength, etherType: etherTypeIPv4, key: key4(protoTCP, 0, 0)},
		{name: "ipv4 total length 0 is the frame (BIG TCP)", frame: edit(tcp4(2), func(b []byte) { b[ethHeaderLen+2], b[ethHeaderLen+3] = 0, 0 }),
			ht: hash.RSSTCPIPv4, etherType: etherTypeIPv4, key: key4(protoTCP, sport, dport)},
		{name: "ipv4 total length < IHL", frame: edit(tcp4(2), func(b []byte) { b[ethHeaderLen+2], b[ethHeaderLen+3] = 0, 24 }), reason: ReasonBadIPLength, etherType: etherTypeIPv4, key: key4(protoTCP, 0, 0)},

		// IPv6 transports.
		{name: "tcp6", frame: ip6frame(protoTCP, tcp), ht: hash.RSSTCPIPv6, etherType: etherTypeIPv6, key: key6(protoTCP, sport, dport)},
		{name: "tcp6 vlan", frame: ip6frame(protoTCP, tcp, tag(3)), ht: hash.RSSTCPIPv6, etherType: etherTypeIPv6, key: withVLANs(key6(protoTCP, sport, dport), 3)},
		{name: "udp6 2-tuple", frame: ip6frame(protoUDP, udpHdr(sport, 53)), ht: hash.RSSIPv6, etherType: etherTypeIPv6, key: key6(protoUDP, sport, 53)},
		{name: "udp6 4-tuple", udp4: true, frame: ip6frame(protoUDP, udpHdr(sport, 53)), ht: hash.RSSUDPIPv6, etherType: etherTypeIPv6, key: key6(protoUDP, sport, 53)},
		{name: "sctp6 2-tuple", frame: ip6frame(protoSCTP, sctpHdr(1, 2)), ht: hash.RSSIPv6, etherType: etherTypeIPv6, key: key6(protoSCTP, 1, 2)},
		{name: "sctp6 4-tuple opaque", udp4: true, frame: ip6frame(protoSCTP, sctpHdr(1, 2)), ht: hash.OpaqueHash, etherType: etherTypeIPv6, key: key6(protoSCTP, 1, 2)},
		{name: "icmp6", frame: ip6frame(58, []byte{128, 0, 0, 0, 0, 1, 0, 1}), ht: hash.RSSIPv6, etherType: etherTypeIPv6, key: key6(58, 0, 0)},
		{name: "esp6", frame: ip6frame(50, rep(16, 7)), ht: hash.RSSIPv6, etherType: etherTypeIPv6, key: key6(50, 0, 0)},
		{name: "tcp6 ipv4-mapped addresses", frame: ethFrame(etherTypeIPv6, ipv6Packet(netip.AddrFrom16(a4.As16()), netip.AddrFrom16(b4.As16()), protoTCP, tcp)),
			ht: hash.RSSTCPIPv6, etherType: etherTypeIPv6, key: FlowKey{Src: netip.AddrFrom16(a4.As16()), Dst: netip.AddrFrom16(b4.As16()), Proto: protoTCP, SrcPort: sport, DstPort: dport}},
		{name: "no next header", frame: ip6frame(59, nil), ht: hash.RSSIPv6, etherType: etherTypeIPv6, key: key6(59, 0, 0)},
		{name: "tcp6 short transport", frame: ip6frame(protoTCP, []byte{1, 2, 3}), reason: ReasonShortTransport, ht: hash.RSSIPv6, etherType: etherTypeIPv6, key: key6(protoTCP, 0, 0)},
		{name: "tcp6 payload length cuts padding", frame: append(ip6frame(protoTCP, []byte{1, 2}), 3, 4, 5, 6),
			reason: ReasonShortTransport, ht: hash.RSSIPv6, etherType: etherTypeIPv6, key: key6(protoTCP, 0, 0)},
		{name: "tcp6 payload length 0 means frame", frame: edit(ip6frame(protoTCP, tcp), func(b []byte) { b[ethHeaderLen+4], b[ethHeaderLen+5] = 0, 0 }),
			ht: hash.RSSTCPIPv6, etherType: etherTypeIPv6, key: key6(protoTCP, sport, dport)},
		{name: "tcp6 payload length past frame", frame: ip6frame(protoTCP, tcp)[:ethHeaderLen+ipv6HeaderLen+4],
			ht: hash.RSSTCPIPv6, etherType: etherTypeIPv6, key: key6(protoTCP, sport, dport)},

		// IPv6 extension headers, one of each kind, then all of them.
		{name: "hop-by-hop", frame: ip6frame(protoHopByHop, optsHdr(protoTCP, 0, tcp)), ht: hash.RSSTCPIPv6, etherType: etherTypeIPv6, key: key6(protoTCP, sport, dport)},
		{name: "routing", frame: ip6frame(protoRouting, routingHdr(protoTCP, 2, tcp)), ht: hash.RSSTCPIPv6, etherType: etherTypeIPv6, key: key6(protoTCP, sport, dport)},
		{name: "destination options", frame: ip6frame(protoDstOpts, optsHdr(protoUDP, 1, udpHdr(sport, 53))), ht: hash.RSSIPv6, etherType: etherTypeIPv6, key: key6(protoUDP, sport, 53)},
		{name: "ah", frame: ip6frame(protoAH, ahHdr(protoTCP, 3, tcp)), ht: hash.RSSTCPIPv6, etherType: etherTypeIPv6, key: key6(protoTCP, sport, dport)},
		{name: "atomic fragment", frame: ip6frame(protoFragment, fragHdr(protoTCP, 0, false, tcp)), ht: hash.RSSTCPIPv6, etherType: etherTypeIPv6, key: key6(protoTCP, sport, dport)},
		{name: "atomic fragment, reserved bits set", frame: ip6frame(protoFragment, edit(fragHdr(protoTCP, 0, false, tcp), func(b []byte) { b[1], b[3] = 0xff, 0x06 })),
			ht: hash.RSSTCPIPv6, etherType: etherTypeIPv6, key: key6(protoTCP, sport, dport)},
		{name: "all extension kinds", udp4: true,
			frame: ip6frame(protoHopByHop, optsHdr(protoDstOpts, 0, optsHdr(protoRouting, 0, routingHdr(protoFragment, 1,
				fragHdr(protoAH, 0, false, ahHdr(protoDstOpts, 1, optsHdr(protoUDP, 2, udpHdr(sport, 53)))))))),
			ht: hash.RSSUDPIPv6, etherType: etherTypeIPv6, key: key6(protoUDP, sport, 53)},
		{name: "8 extension headers", frame: ip6frame(protoDstOpts, nestOpts(8, tcp)), ht: hash.RSSTCPIPv6, etherType: etherTypeIPv6, key: key6(protoTCP, sport, dport)},
		{name: "9 extension headers", frame: ip6frame(protoDstOpts, nestOpts(9, tcp)), reason: ReasonBadExtHeader, etherType: etherTypeIPv6, key: key6(protoDstOpts, 0, 0)},
		{name: "extension past packet", frame: ip6frame(protoHopByHop, edit(optsHdr(protoTCP, 0, tcp), func(b []byte) { b[1] = 4 })),
			reason: ReasonBadExtHeader, etherType: etherTypeIPv6, key: key6(protoHopByHop, 0, 0)},
		{name: "extension past payload length", frame: append(ip6frame(protoRouting, routingHdr(protoTCP, 0, nil)[:6]), 0, 0, 1, 2, 3, 4),
			reason: ReasonBadExtHeader, etherType: etherTypeIPv6, key: key6(protoRouting, 0, 0)},
		{name: "extension of 1 byte", frame: ip6frame(protoDstOpts, []byte{protoTCP}), reason: ReasonBadExtHeader, etherType: etherTypeIPv6, key: key6(protoDstOpts, 0, 0)},
		{name: "ah past packet", frame: ip6frame(protoAH, ahHdr(protoTCP, 1, nil)[:15]), reason: ReasonBadExtHeader, etherType: etherTypeIPv6, key: key6(protoAH, 0, 0)},
		{name: "short fragment header", frame: ip6frame(protoFragment, fragHdr(protoTCP, 0, false, nil)[:7]), reason: ReasonBadExtHeader, etherType: etherTypeIPv6, key: key6(protoFragment, 0, 0)},

		// IPv6 fragments.
		{name: "ipv6 first fragment", frame: ip6frame(protoFragment, fragHdr(protoTCP, 0, true, tcp)), ht: hash.RSSIPv6, etherType: etherTypeIPv6, key: withFrag(key6(protoTCP, 0, 0))},
		{name: "ipv6 last fragment", frame: ip6frame(protoFragment, fragHdr(protoUDP, 100, false, udpHdr(sport, 53))), ht: hash.RSSIPv6, etherType: etherTypeIPv6, key: withFrag(key6(protoUDP, 0, 0))},
		{name: "ipv6 fragment without payload", udp4: true, frame: ip6frame(protoFragment, fragHdr(protoUDP, 100, true, nil)), ht: hash.RSSIPv6, etherType: etherTypeIPv6, key: withFrag(key6(protoUDP, 0, 0))},
		{name: "ipv6 fragment stops the walk", frame: ip6frame(protoHopByHop, optsHdr(protoFragment, 0, fragHdr(protoDstOpts, 0, true, optsHdr(protoTCP, 0, tcp)))),
			ht: hash.RSSIPv6, etherType: etherTypeIPv6, key: withFrag(key6(protoDstOpts, 0, 0))},

		// Unusable IPv6 headers.
		{name: "short ipv6", frame: ip6frame(protoTCP, tcp)[:ethHeaderLen+39], reason: ReasonShortIPv6, etherType: etherTypeIPv6},
		{name: "ipv6 version 4", frame: edit(ip6frame(protoTCP, tcp), func(b []byte) { b[ethHeaderLen] = 0x45 }), reason: ReasonBadIPVersion, etherType: etherTypeIPv6},
		{name: "ipv4 in ipv6 ethertype", frame: ethFrame(etherTypeIPv6, cat(ipv4Packet(a4, b4, protoTCP, 0, tcp), rep(20, 0))), reason: ReasonBadIPVersion, etherType: etherTypeIPv6},
	}
	return append(cases, encapCases()...)
}

// sameClassification compares two results as the API shows them: every
// field, and of the tuple what Tuple returns (its other bytes are left
// as they were).
func sameClassification(a, b *Classification) bool {
	return a.Key == b.Key && a.EtherType == b.EtherType && a.HashType == b.HashType && a.FlowID == b.FlowID &&
		a.Reason == b.Reason && a.keyless == b.keyless && string(a.Tuple()) == string(b.Tuple())
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// nestOpts returns n destination options headers chained in front of rest,
// the last one announcing TCP.
func nestOpts(n int, rest []byte) []byte {
	b := rest
	nh := uint8(protoTCP)
	for i := 0; i < n; i++ {
		b = optsHdr(nh, 0, b)
		nh = protoDstOpts
	}
	return b
}

func TestClassify(t *testing.T) {
	h := msHasher(t)
	seen := make(map[Reason]bool)
	for _, symmetric := range []bool{false, true} {
		var classifiers [2][2]*Classifier // [udp4][tunnels]
		for i, udp4 := range []bool{false, true} {
			for j, m := range []TunnelMode{TunnelsOuter, TunnelsInner} {
				var err error
				classifiers[i][j], err = NewClassifier(HashConfig{Key: h.Key(), Symmetric: symmetric, UDP4Tuple: udp4, Tunnels: m})
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, tc := range classifyCases() {
			c := classifiers[b2i(tc.udp4)][b2i(tc.tunnels)]
			name := tc.name
			if symmetric {
				name = "symmetric/" + name
			}
			t.Run(name, func(t *testing.T) {
				var got Classification
				// Prefill with another result: Classify must overwrite all.
				c.ClassifyVLAN(ip6frame(protoUDP, udpHdr(1, 2)), 77, &got)
				if tc.vlan > 0 {
					c.ClassifyVLAN(tc.frame, uint16(tc.vlan), &got)
				} else {
					c.Classify(tc.frame, &got)
				}
				seen[got.Reason] = true
				if got.Reason != tc.reason {
					t.Errorf("Reason %v, want %v", got.Reason, tc.reason)
				}
				if got.HashType != tc.ht {
					t.Errorf("HashType %v, want %v", got.HashType, tc.ht)
				}
				if got.EtherType != tc.etherType {
					t.Errorf("EtherType %#04x, want %#04x", got.EtherType, tc.etherType)
				}
				if got.Key != tc.key {
					t.Errorf("Key\n got %+v\nwant %+v", got.Key, tc.key)
				}
				checkHash(t, h, &got, symmetric)
				if tc.ht != hash.None {
					if want := expectedTuple(tc.key, tc.ht, symmetric); got.FlowID != h.Sum(want) {
						t.Errorf("FlowID %#08x, want %#08x", got.FlowID, h.Sum(want))
					}
				}
				// A second run on a fresh value gives the same result.
				var fresh Classification
				if tc.vlan > 0 {
					c.ClassifyVLAN(tc.frame, uint16(tc.vlan), &fresh)
				} else {
					c.Classify(tc.frame, &fresh)
				}
				if !sameClassification(&fresh, &got) {
					t.Errorf("result depends on out's previous contents:\n%+v\n%+v", fresh, got)
				}
			})
		}
	}
	for r := Reason(0); r < numReasons; r++ {
		if !seen[r] && r != ReasonOrphanFragment && r != ReasonBadChecksum { // the dispatcher's reasons (TestFollowFragmentsInDispatcher, TestDispatcherVerifiesChecksums)
			t.Errorf("no case yields reason %v", r)
		}
	}
}

// TestClassifyMicrosoftVectors checks flowids against Microsoft's RSS
// verification table (also FreeBSD's default key).
func TestClassifyMicrosoftVectors(t *testing.T) {
	h := msHasher(t)
	c := newTestClassifier(t, h, false, false)
	src4, dst4 := netip.MustParseAddr("66.9.149.187"), netip.MustParseAddr("161.142.100.80")
	src6, dst6 := netip.MustParseAddr("3ffe:2501:200:1fff::7"), netip.MustParseAddr("3ffe:2501:200:3::1")
	for _, tc := range []struct {
		name  string
		frame []byte
		ht    hash.HashType
		want  uint32
	}{
		{"tcp4", ethFrame(etherTypeIPv4, ipv4Packet(src4, dst4, protoTCP, 0, tcpHdr(2794, 1766))), hash.RSSTCPIPv4, 0x51ccc178},
		{"ipv4", ethFrame(etherTypeIPv4, ipv4Packet(src4, dst4, 1, 0, nil)), hash.RSSIPv4, 0x323e8fc2},
		{"tcp4 vlan", ethFrame(etherTypeIPv4, ipv4Packet(src4, dst4, protoTCP, 0, tcpHdr(2794, 1766)), tag(12)), hash.RSSTCPIPv4, 0x51ccc178},
		{"tcp6", ethFrame(etherTypeIPv6, ipv6Packet(src6, dst6, protoTCP, tcpHdr(2794, 1766))), hash.RSSTCPIPv6, 0x40207d3d},
		{"ipv6", ethFrame(etherTypeIPv6, ipv6Packet(src6, dst6, 58, nil)), hash.RSSIPv6, 0x2cc18cd5},
	} {
		var got Classification
		c.Classify(tc.frame, &got)
		if got.HashType != tc.ht || got.FlowID != tc.want {
			t.Errorf("%s: %v %#08x, want %v %#08x", tc.name, got.HashType, got.FlowID, tc.ht, tc.want)
		}
	}
}

// randomFlow returns random endpoints: IPv4 or IPv6, sometimes with equal
// addresses (so the port decides the canonical order).
func randomFlow(r *rand.Rand, v6 bool) (src, dst netip.Addr, sp, dp uint16) {
	var b [32]byte
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	if v6 {
		src, dst = netip.AddrFrom16([16]byte(b[:16])), netip.AddrFrom16([16]byte(b[16:]))
	} else {
		src, dst = netip.AddrFrom4([4]byte(b[:4])), netip.AddrFrom4([4]byte(b[4:8]))
	}
	if r.IntN(8) == 0 {
		dst = src
	}
	return src, dst, uint16(r.Uint32()), uint16(r.Uint32())
}

func flowFrame(src, dst netip.Addr, proto uint8, sp, dp uint16, tags ...vlanTag) []byte {
	var l4 []byte
	switch proto {
	case protoTCP:
		l4 = tcpHdr(sp, dp)
	case protoUDP:
		l4 = udpHdr(sp, dp)
	case protoSCTP:
		l4 = sctpHdr(sp, dp)
	default:
		l4 = rep(8, 0)
	}
	if src.Is4() {
		return ethFrame(etherTypeIPv4, ipv4Packet(src, dst, proto, 0, l4), tags...)
	}
	return ethFrame(etherTypeIPv6, ipv6Packet(src, dst, proto, l4), tags...)
}

func TestClassifySymmetric(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	key, err := hash.RandomKey(hash.DefaultKeyLen)
	if err != nil {
		t.Fatal(err)
	}
	h, err := hash.NewToeplitz(key)
	if err != nil {
		t.Fatal(err)
	}
	for _, udp4 := range []bool{false, true} {
		sym := newTestClassifier(t, h, true, udp4)
		asym := newTestClassifier(t, h, false, udp4)
		differ, distinct := 0, 0
		for i := 0; i < 2000; i++ {
			src, dst, sp, dp := randomFlow(r, i%2 == 1)
			proto := []uint8{protoTCP, protoUDP, protoSCTP, 1}[r.IntN(4)]
			fwd, rev := flowFrame(src, dst, proto, sp, dp), flowFrame(dst, src, proto, dp, sp)
			if proto == 1 {
				sp, dp = 0, 0 // no ports read
			}
			var a, b Classification
			sym.Classify(fwd, &a)
			sym.Classify(rev, &b)
			if a.FlowID != b.FlowID || a.HashType != b.HashType || a.HashType == hash.None {
				t.Fatalf("%v:%d -> %v:%d proto %d: %v %#x vs reverse %v %#x", src, sp, dst, dp, proto, a.HashType, a.FlowID, b.HashType, b.FlowID)
			}
			if a.Key.Src != src || a.Key.Dst != dst || a.Key.SrcPort != sp || a.Key.DstPort != dp ||
				b.Key.Src != dst || b.Key.Dst != src || b.Key.SrcPort != dp || b.Key.DstPort != sp {
				t.Fatalf("symmetric mode changed the key: %+v / %+v", a.Key, b.Key)
			}
			checkHash(t, h, &a, true)
			checkHash(t, h, &b, true)
			asym.Classify(fwd, &a)
			asym.Classify(rev, &b)
			checkHash(t, h, &a, false)
			checkHash(t, h, &b, false)
			if src != dst {
				distinct++
				if a.FlowID != b.FlowID {
					differ++
				}
			}
		}
		// Without canonical order a random key almost never hashes both
		// directions alike: this shows the test above could fail.
		if differ < distinct*99/100 {
			t.Errorf("asymmetric mode: only %d of %d flows hash differently in each direction", differ, distinct)
		}
	}
}

// TestClassifyVLANInvariant: tagged (in the frame or out of band) and
// untagged copies of a flow hash alike.
func TestClassifyVLANInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	h := msHasher(t)
	c := newTestClassifier(t, h, false, true)
	for i := 0; i < 500; i++ {
		src, dst, sp, dp := randomFlow(r, i%2 == 0)
		proto := []uint8{protoTCP, protoUDP}[i%4/2]
		var base Classification
		c.Classify(flowFrame(src, dst, proto, sp, dp), &base)
		if base.Reason != ReasonOK || base.HashType == hash.None {
			t.Fatalf("untagged: %v %v", base.Reason, base.HashType)
		}
		var tags []vlanTag
		for n := 1; n <= MaxVLANDepth; n++ {
			tags = append(tags, vlanTag{[]uint16{etherTypeVLAN, etherTypeQinQ, etherTypeQinQOld}[r.IntN(3)], uint16(r.Uint32())})
			var got Classification
			c.Classify(flowFrame(src, dst, proto, sp, dp, tags...), &got)
			if got.FlowID != base.FlowID || got.HashType != base.HashType || got.Key.Flow() != base.Key {
				t.Fatalf("%d tags: %v %#x %+v, untagged %v %#x %+v", n, got.HashType, got.FlowID, got.Key, base.HashType, base.FlowID, base.Key)
			}
			if int(got.Key.NVLAN) != n {
				t.Fatalf("%d tags: NVLAN %d", n, got.Key.NVLAN)
			}
			for j := 0; j < n; j++ {
				if got.Key.VLANs[j] != tags[j].tci&0xfff {
					t.Fatalf("VLAN %d = %d, want %d", j, got.Key.VLANs[j], tags[j].tci&0xfff)
				}
			}
			if n < MaxVLANDepth {
				oob := uint16(r.Uint32())
				c.ClassifyVLAN(flowFrame(src, dst, proto, sp, dp, tags...), oob, &got)
				if got.FlowID != base.FlowID || got.Key.NVLAN != uint8(n+1) || got.Key.VLANs[0] != oob&0xfff {
					t.Fatalf("out-of-band tag + %d: %#x %+v", n, got.FlowID, got.Key)
				}
			}
		}
	}
}

// TestClassifyFragmentPortsNeverRead: a fragment's bytes after the IP header
// never reach the key or the hash, whatever they are.
func TestClassifyFragmentPortsNeverRead(t *testing.T) {
	h := msHasher(t)
	c := newTestClassifier(t, h, false, true)
	var want Classification
	for i, l4 := range [][]byte{nil, {1}, {1, 2, 3, 4}, tcpHdr(1, 2), tcpHdr(65535, 80), rep(100, 0xff)} {
		for _, v6 := range []bool{false, true} {
			var f []byte
			if v6 {
				f = ip6frame(protoFragment, fragHdr(protoTCP, 8, true, l4))
			} else {
				f = ethFrame(etherTypeIPv4, edit(ipv4Packet(a4, b4, protoTCP, 0, l4), func(b []byte) { b[6], b[7] = 0x20, 1 }))
			}
			var got Classification
			c.Classify(f, &got)
			if got.Reason != ReasonOK || !got.Key.Fragment || got.Key.SrcPort != 0 || got.Key.DstPort != 0 || got.HashType.Is4Tuple() {
				t.Errorf("payload %d v6=%v: %+v", i, v6, got)
			}
			if !v6 {
				if i > 0 && !sameClassification(&got, &want) {
					t.Errorf("payload %d changed the classification: %+v vs %+v", i, got, want)
				}
				want = got
			}
		}
	}
}

func TestClassifyAllocs(t *testing.T) {
	h := msHasher(t)
	c := newTestClassifier(t, h, true, true)
	inner, err := NewClassifier(HashConfig{Key: h.Key(), Tunnels: TunnelsInner})
	if err != nil {
		t.Fatal(err)
	}
	frames := [][]byte{}
	for _, tc := range classifyCases() {
		frames = append(frames, tc.frame)
	}
	var out Classification
	allocs := testing.AllocsPerRun(100, func() {
		for _, f := range frames {
			c.Classify(f, &out)
			c.ClassifyVLAN(f, 5, &out)
			inner.Classify(f, &out)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per run of %d frames", allocs, len(frames))
	}
}

func TestNewClassifier(t *testing.T) {
	// The dispatcher's key rules: a key shorter than an IPv6 4-tuple needs
	// is refused, nil is a random key.
	if _, err := NewClassifier(HashConfig{Key: hash.MicrosoftKey[:16]}); !errors.Is(err, ErrConfig) {
		t.Errorf("16-byte key: err %v, want ErrConfig", err)
	}
	a, err := NewClassifier(HashConfig{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewClassifier(HashConfig{})
	if a.h.Sum([]byte{1, 2, 3, 4}) == b.h.Sum([]byte{1, 2, 3, 4}) {
		t.Error("two nil keys gave one hash: the key is not random")
	}
	h := msHasher(t)
	c := newTestClassifier(t, h, false, false)
	if c.h.Sum([]byte{1, 2, 3, 4}) != h.Sum([]byte{1, 2, 3, 4}) {
		t.Error("the classifier does not hash with the configured key")
	}
}

// TestClassifyGopacketBuilt classifies frames serialized by gopacket, as a
// check on the hand-written builders and on the classifier.
func TestClassifyGopacketBuilt(t *testing.T) {
	h := msHasher(t)
	c := newTestClassifier(t, h, false, true)
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr(testSrcMAC), DstMAC: net.HardwareAddr(testDstMAC)}
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	for _, tc := range []struct {
		name string
		ls   func() []gopacket.SerializableLayer
		ht   hash.HashType
		key  FlowKey
	}{
		{"tcp4 qinq", func() []gopacket.SerializableLayer {
			eth.EthernetType = layers.EthernetTypeQinQ
			ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: a4.AsSlice(), DstIP: b4.AsSlice()}
			tcp := &layers.TCP{SrcPort: sport, DstPort: dport, ACK: true, Window: 100}
			if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
				t.Fatal(err)
			}
			return []gopacket.SerializableLayer{eth,
				&layers.Dot1Q{VLANIdentifier: 10, Type: layers.EthernetTypeDot1Q},
				&layers.Dot1Q{VLANIdentifier: 20, Type: layers.EthernetTypeIPv4},
				ip, tcp, gopacket.Payload("hello")}
		}, hash.RSSTCPIPv4, withVLANs(key4(protoTCP, sport, dport), 10, 20)},
		{"udp6 hop-by-hop", func() []gopacket.SerializableLayer {
			eth.EthernetType = layers.EthernetTypeIPv6
			ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolIPv6HopByHop, SrcIP: a6.AsSlice(), DstIP: b6.AsSlice()}
			hbh := &layers.IPv6HopByHop{}
			hbh.NextHeader = layers.IPProtocolUDP
			hbh.Options = []*layers.IPv6HopByHopOption{{OptionType: 1, OptionData: []byte{0, 0, 0, 0}}}
			udp := &layers.UDP{SrcPort: sport, DstPort: 53}
			if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
				t.Fatal(err)
			}
			return []gopacket.SerializableLayer{eth, ip, hbh, udp, gopacket.Payload("q")}
		}, hash.RSSUDPIPv6, key6(protoUDP, sport, 53)},
	} {
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, opts, tc.ls()...); err != nil {
			t.Fatalf("%s: serialize: %v", tc.name, err)
		}
		var got Classification
		c.Classify(buf.Bytes(), &got)
		if got.Reason != ReasonOK || got.HashType != tc.ht || got.Key != tc.key {
			t.Errorf("%s: %v %v %+v, want ok %v %+v", tc.name, got.Reason, got.HashType, got.Key, tc.ht, tc.key)
		}
		checkHash(t, h, &got, false)
	}
}
