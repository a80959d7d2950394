package steer

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// serialize builds a frame with gopacket, lengths and checksums computed.
func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// csumFrame is a frame of transport proto (TCP, UDP or ICMP) with
// payload, over IPv4 or IPv6, behind VLAN tags, PPPoE or MPLS as shim
// says, its checksums computed by gopacket.
func csumFrame(t testing.TB, v6 bool, proto layers.IPProtocol, shim string, payload []byte) []byte {
	t.Helper()
	var ip gopacket.NetworkLayer
	var ipl gopacket.SerializableLayer
	et := layers.EthernetTypeIPv4
	if v6 {
		x := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: proto, SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2")}
		if proto == layers.IPProtocolICMPv4 {
			x.NextHeader = layers.IPProtocolICMPv6
		}
		ip, ipl, et = x, x, layers.EthernetTypeIPv6
	} else {
		x := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: proto, SrcIP: net.IPv4(10, 0, 0, 1), DstIP: net.IPv4(10, 0, 0, 2)}
		ip, ipl = x, x
	}
	var l4 gopacket.SerializableLayer
	switch proto {
	case layers.IPProtocolTCP:
		x := &layers.TCP{SrcPort: 40000, DstPort: 80, Seq: 7, ACK: true, Window: 512}
		x.SetNetworkLayerForChecksum(ip)
		l4 = x
	case layers.IPProtocolUDP:
		x := &layers.UDP{SrcPort: 4000, DstPort: 53}
		x.SetNetworkLayerForChecksum(ip)
		l4 = x
	default:
		l4 = gopacket.Payload{8, 0, 0, 0, 0, 1, 0, 1} // an echo request, its checksum left wrong
	}
	ls := []gopacket.SerializableLayer{}
	switch shim {
	case "vlan":
		ls = append(ls, &layers.Ethernet{EthernetType: layers.EthernetTypeDot1Q, SrcMAC: testSrcMAC, DstMAC: testDstMAC},
			&layers.Dot1Q{VLANIdentifier: 7, Type: et})
	case "pppoe":
		ppp := layers.PPPTypeIPv4
		if v6 {
			ppp = layers.PPPTypeIPv6
		}
		ls = append(ls, &layers.Ethernet{EthernetType: layers.EthernetTypePPPoESession, SrcMAC: testSrcMAC, DstMAC: testDstMAC},
			&layers.PPPoE{Version: 1, Type: 1, Code: layers.PPPoECodeSession, SessionId: 3}, &layers.PPP{PPPType: ppp})
	case "mpls":
		ls = append(ls, &layers.Ethernet{EthernetType: layers.EthernetTypeMPLSUnicast, SrcMAC: testSrcMAC, DstMAC: testDstMAC},
			&layers.MPLS{Label: 16, TTL: 64}, &layers.MPLS{Label: 17, StackBottom: true, TTL: 64})
	default:
		ls = append(ls, &layers.Ethernet{EthernetType: et, SrcMAC: testSrcMAC, DstMAC: testDstMAC})
	}
	return serialize(t, append(ls, ipl, l4, gopacket.Payload(payload))...)
}

// naiveChecksum is RFC 1071 written plainly, 16 bits at a time: the
// reference the tests hold the 64-bit sum to.
func naiveChecksum(parts ...[]byte) uint16 {
	var s uint32
	var odd []byte
	for _, p := range parts {
		p = append(odd, p...)
		odd = nil
		for len(p) >= 2 {
			s += uint32(p[0])<<8 | uint32(p[1])
			p = p[2:]
		}
		odd = p
	}
	if len(odd) == 1 {
		s += uint32(odd[0]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// TestChecksumSum: the 64-bit sum folds to what a plain 16-bit sum gives,
// for every length from 0 to 200 bytes and any start, on random bytes
// and on all-ones (where the carries pile up).
func TestChecksumSum(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n <= 200; n++ {
		for _, fill := range []string{"random", "ones"} {
			b := make([]byte, n+3)
			for i := range b {
				b[i] = byte(r.Uint32())
				if fill == "ones" {
					b[i] = 0xff
				}
			}
			for start := 0; start < 3; start++ {
				p := b[start : start+n]
				if got, want := fold(sum(0, p)), naiveChecksum(p); got != want && !(got == 0xffff && want == 0) && !(got == 0 && want == 0xffff) {
					t.Fatalf("%s, %d bytes from %d: %#04x, want %#04x", fill, n, start, got, want)
				}
			}
		}
	}
}

// TestVerifyChecksums: frames gopacket wrote are good whatever their
// shims, a byte changed in the IPv4 header or the transport segment makes
// them bad, and what cannot be verified is unknown.
func TestVerifyChecksums(t *testing.T) {
	tcp, udp, icmp := layers.IPProtocolTCP, layers.IPProtocolUDP, layers.IPProtocolICMPv4
	payload := []byte("the payload, of an odd length")
	for _, v6 := range []bool{false, true} {
		for _, shim := range []string{"", "vlan", "pppoe", "mpls"} {
			for _, proto := range []layers.IPProtocol{tcp, udp} {
				f := csumFrame(t, v6, proto, shim, payload)
				if got := verifyChecksums(f); got != ChecksumGood {
					t.Errorf("v6=%v %s %v: %v, want good", v6, shim, proto, got)
				}
				bad := append([]byte(nil), f...)
				bad[len(bad)-3] ^= 0x10 // the payload
				if got := verifyChecksums(bad); got != ChecksumBad {
					t.Errorf("v6=%v %s %v, payload changed: %v, want bad", v6, shim, proto, got)
				}
				if got := verifyChecksums(f[:len(f)-1]); got != ChecksumUnknown {
					t.Errorf("v6=%v %s %v, cut short: %v, want unknown", v6, shim, proto, got)
				}
			}
		}
	}
	ipAt := ethHeaderLen
	v4 := csumFrame(t, false, tcp, "", payload)
	udp4 := csumFrame(t, false, udp, "", payload)
	udp6 := csumFrame(t, true, udp, "", payload)
	for _, tc := range []struct {
		name  string
		frame []byte
		want  Checksum
	}{
		{"ipv4 header byte changed", edit(append([]byte(nil), v4...), func(b []byte) { b[ipAt+8]-- }), ChecksumBad},
		{"ipv4 udp without checksum", edit(append([]byte(nil), udp4...), func(b []byte) { b[ipAt+26], b[ipAt+27] = 0, 0 }), ChecksumGood},
		{"ipv6 udp without checksum", edit(append([]byte(nil), udp6...), func(b []byte) { b[ipAt+46], b[ipAt+47] = 0, 0 }), ChecksumBad},
		{"ipv4 fragment: its header", edit(append([]byte(nil), v4...), func(b []byte) {
			b[ipAt+6] = 0x20 // MF
			b[ipAt+10], b[ipAt+11] = 0, 0
			binary.BigEndian.PutUint16(b[ipAt+10:], ^naiveChecksum(b[ipAt:ipAt+20]))
		}), ChecksumGood},
		{"ipv4 icmp: its header", csumFrame(t, false, icmp, "", nil), ChecksumGood},
		{"ipv6 icmp: nothing", csumFrame(t, true, icmp, "", nil), ChecksumUnknown},
		{"ipv4 cut in the segment, header good", v4[:len(v4)-5], ChecksumUnknown},
		{"ipv6 fragment", ip6frame(protoFragment, fragHdr(protoUDP, 0, true, udpHdr(1, 2))), ChecksumUnknown},
		{"ipv6 routing header with segments left", ip6frame(protoRouting, edit(routingHdr(protoUDP, 2, udpHdr(1, 2)), func(b []byte) { b[3] = 1 })), ChecksumUnknown},
		{"arp", ethFrame(0x0806, rep(28, 0)), ChecksumUnknown},
		{"runt", []byte{1, 2, 3}, ChecksumUnknown},
		{"ipv4 bad header length", edit(append([]byte(nil), v4...), func(b []byte) { b[ipAt] = 0x44 }), ChecksumUnknown},
	} {
		if got := verifyChecksums(tc.frame); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	// An IPv6 packet with options before its transport header is
	// verified over the pseudo-header of its own addresses.
	dst := csumFrame(t, true, udp, "", payload)
	withOpts := ip6frame(protoDstOpts, optsHdr(protoUDP, 0, dst[ethHeaderLen+ipv6HeaderLen:]))
	copy(withOpts[ethHeaderLen+8:ethHeaderLen+40], dst[ethHeaderLen+8:ethHeaderLen+40])
	if got := verifyChecksums(withOpts); got != ChecksumGood {
		t.Errorf("ipv6 with destination options: %v, want good", got)
	}
}

// TestDispatcherVerifiesChecksums: with VerifyChecksums the handler finds
// the verdict on each packet, queued or handled inline, a bad frame is
// handled with ReasonBadChecksum, counted, and what the source said is
// kept; without, the source's word alone.
func TestDispatcherVerifiesChecksums(t *testing.T) {
	good := csumFrame(t, false, layers.IPProtocolTCP, "", []byte("hello"))
	bad := edit(append([]byte(nil), good...), func(b []byte) { b[ethHeaderLen+40] ^= 1 }) // the payload
	short := edit(append([]byte(nil), good...), func(b []byte) { b[ethHeaderLen+2], b[ethHeaderLen+3] = 0, 22 })[:ethHeaderLen+22]
	frames := []Frame{
		{Data: good}, {Data: bad}, {Data: bad, Checksum: ChecksumGood}, {Data: bad, Checksum: ChecksumPartial},
		{Data: short},
	}
	for _, verify := range []bool{false, true} {
		for _, mode := range []DispatchMode{DispatchDeferred, DispatchDirect} {
			want := []Checksum{ChecksumUnknown, ChecksumUnknown, ChecksumGood, ChecksumPartial, ChecksumUnknown}
			reasons := []Reason{ReasonOK, ReasonOK, ReasonOK, ReasonOK, ReasonShortTransport}
			if verify {
				want[0], want[1], want[4] = ChecksumGood, ChecksumBad, ChecksumBad // the IPv4 header of short changed
				reasons[1] = ReasonBadChecksum
			}
			got, d := handleAll(t, Config{Workers: 1, Dispatch: mode, VerifyChecksums: verify}, frames)
			for i, p := range got {
				if p.Checksum != want[i] || p.Reason != reasons[i] {
					t.Errorf("verify=%v %v frame %d: %v %v, want %v %v", verify, mode, i, p.Checksum, p.Reason, want[i], reasons[i])
				}
			}
			st := checkAccounting(t, d, uint64(len(frames)))
			if n, w := st.Reasons[ReasonBadChecksum], uint64(reasons[1]/ReasonBadChecksum); n != w || st.Reasons[ReasonOK] != uint64(len(frames))-1-w {
				t.Errorf("verify=%v %v: reasons %v", verify, mode, st.Reasons)
			}
		}
	}
}
