package steer

import (
	"encoding/binary"
	"math/bits"
)

const tcpMinHeaderLen = 20

// Checksums. An IDS or a meter needs to know whether a frame's checksums
// hold; the kernel often knows already. Linux's AF_PACKET ring says it in
// tp_status: TP_STATUS_CSUM_VALID when the NIC or the stack found the
// transport checksum good (skb_csum_unnecessary: CHECKSUM_UNNECESSARY),
// TP_STATUS_CSUMNOTREADY when the frame was sent by this host, or by a
// guest, with its checksum left to offload (CHECKSUM_PARTIAL): its bytes
// hold only the pseudo-header's sum, and a check in software would fail.
// A source that knows says it in [Frame.Checksum] (package afpacket
// does; an AF_XDP frame comes with no such word); the handler finds it,
// or the dispatcher's own verdict, in [Packet.Checksum].
//
// Config.VerifyChecksums verifies, in software, the checksums of every
// frame its source said nothing of, as Suricata's checksum-validation
// does: in the worker, before the handler, so that the cost is spread
// over the workers with the handlers' and the dispatching goroutine pays
// nothing. What is verified is the first IP packet in the frame (after
// VLAN tags, PPPoE and MPLS shims), the one a NIC's offload verifies: its
// IPv4 header checksum, and its TCP or UDP checksum (IPv4 and IPv6, over
// the pseudo-header of RFC 793, 768 and 8200) when the packet is whole in
// the frame and not a fragment; the packets inside a tunnel are not (an
// outer UDP checksum covers their bytes). The verdict:
//
//   - ChecksumGood: every checksum verified holds, and the transport one
//     was verified when the packet has one (a fragment's belongs to its
//     datagram: an IPv4 fragment is good on its header alone). A UDP
//     checksum of zero over IPv4 means none was computed (RFC 768).
//   - ChecksumBad: one does not hold; over IPv6 a UDP checksum of zero
//     is bad (RFC 8200, section 8.1). The frame is handled all the same;
//     if it had no classification reason its Reason becomes
//     [ReasonBadChecksum], counted in Stats.Reasons.
//   - ChecksumUnknown: nothing could be verified, or not everything: not
//     IP, cut short by the snap length, an IPv6 fragment, IPv6 with a
//     routing header still to visit (its pseudo-header holds the final
//     destination), a jumbogram, or IPv6 without TCP or UDP.
//
// A frame the source says good is taken as good, one it says partial is
// left so, as Suricata leaves them.

// Checksum is what is known of a frame's checksums.
type Checksum uint8

// The checksum states.
const (
	ChecksumUnknown Checksum = iota // not verified
	ChecksumGood                    // verified good, by the kernel, the NIC or in software
	ChecksumBad                     // verified in software and found wrong
	ChecksumPartial                 // sent by this host with checksum offload: none to verify
)

var checksumNames = []string{ChecksumUnknown: "unknown", ChecksumGood: "good", ChecksumBad: "bad", ChecksumPartial: "partial"}

// String returns "unknown", "good", "bad" or "partial".
func (c Checksum) String() string { return name(checksumNames, "Checksum", uint8(c)) }

// MarshalText encodes the state by name.
func (c Checksum) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText parses a state's name, in any case.
func (c *Checksum) UnmarshalText(b []byte) error {
	v, err := parseName(checksumNames, "checksum state", string(b))
	if err == nil {
		*c = Checksum(v)
	}
	return err
}

// verifyChecksums verifies the checksums of the first IP packet of frame
// (see Config.VerifyChecksums).
func verifyChecksums(frame []byte) Checksum {
	if len(frame) < ethHeaderLen {
		return ChecksumUnknown
	}
	et, p := binary.BigEndian.Uint16(frame[12:14]), frame[ethHeaderLen:]
	for n := 0; ; n++ { // the shims before the IP header, as the classifier walks them
		switch {
		case n > MaxVLANDepth+MaxEncaps:
			return ChecksumUnknown
		case isVLAN(et) && len(p) >= vlanTagLen:
			et, p = binary.BigEndian.Uint16(p[2:4]), p[vlanTagLen:]
			continue
		case et == etherTypePPPoESession && len(p) >= pppoeHeaderLen+2 && p[0] == pppoeVerType:
			switch binary.BigEndian.Uint16(p[pppoeHeaderLen:]) {
			case pppIPv4:
				return verifyIPv4(p[pppoeHeaderLen+2:])
			case pppIPv6:
				return verifyIPv6(p[pppoeHeaderLen+2:])
			}
		case (et == etherTypeMPLS || et == etherTypeMPLSMulticast) && len(p) >= mplsEntryLen:
			bos := binary.BigEndian.Uint32(p)&mplsBottomOfStack != 0
			p = p[mplsEntryLen:]
			if !bos {
				continue
			}
			if len(p) > 0 && p[0]>>4 == 4 {
				return verifyIPv4(p)
			}
			if len(p) > 0 && p[0]>>4 == 6 {
				return verifyIPv6(p)
			}
		case et == etherTypeIPv4:
			return verifyIPv4(p)
		case et == etherTypeIPv6:
			return verifyIPv6(p)
		}
		return ChecksumUnknown
	}
}

// verifyIPv4 verifies an IPv4 packet's header checksum and, when it is
// whole and not a fragment, its TCP or UDP checksum.
func verifyIPv4(p []byte) Checksum {
	if len(p) < ipv4MinHeaderLen || p[0]>>4 != 4 {
		return ChecksumUnknown
	}
	hl := int(p[0]&0x0f) << 2
	tl := int(binary.BigEndian.Uint16(p[2:4]))
	if hl < ipv4MinHeaderLen || hl > len(p) || tl < hl {
		return ChecksumUnknown
	}
	if fold(sum(0, p[:hl])) != 0xffff {
		return ChecksumBad
	}
	proto := p[9]
	switch {
	case binary.BigEndian.Uint16(p[6:8])&ipv4FragMask != 0, proto != protoTCP && proto != protoUDP:
		return ChecksumGood // the header is all there is to verify
	case tl > len(p):
		return ChecksumUnknown // cut short
	}
	l4 := p[hl:tl]
	if proto == protoUDP && len(l4) >= udpHeaderLen && binary.BigEndian.Uint16(l4[6:8]) == 0 {
		return ChecksumGood // no checksum computed (RFC 768)
	}
	s := uint64(fold(sum(0, p[12:20]))) + uint64(proto) + uint64(len(l4))
	return verifyTransport(s, l4, proto)
}

// verifyIPv6 verifies an IPv6 packet's TCP or UDP checksum when the
// packet is whole, no fragment, and its extension headers leave its
// pseudo-header's destination the header's own.
func verifyIPv6(p []byte) Checksum {
	if len(p) < ipv6HeaderLen || p[0]>>4 != 6 {
		return ChecksumUnknown
	}
	pl := int(binary.BigEndian.Uint16(p[4:6]))
	if pl == 0 || ipv6HeaderLen+pl > len(p) {
		return ChecksumUnknown // a jumbogram, or cut short
	}
	p = p[:ipv6HeaderLen+pl]
	nh, off := p[6], ipv6HeaderLen
	for n := 0; n < maxIPv6ExtHeaders; n++ {
		switch nh {
		case protoTCP, protoUDP:
			l4 := p[off:]
			s := uint64(fold(sum(0, p[8:40]))) + uint64(len(l4)) + uint64(nh)
			return verifyTransport(s, l4, nh)
		case protoHopByHop, protoDstOpts, protoRouting:
			if off+2 > len(p) {
				return ChecksumUnknown
			}
			if nh == protoRouting && off+4 <= len(p) && p[off+3] != 0 {
				return ChecksumUnknown // segments left: the final destination is another
			}
			nh, off = p[off], off+(int(p[off+1])+1)<<3
		case protoFragment:
			if off+ipv6FragHeaderLen > len(p) || binary.BigEndian.Uint16(p[off+2:off+4])&ipv6FragOffMMask != 0 {
				return ChecksumUnknown // a fragment's checksum is its datagram's
			}
			nh, off = p[off], off+ipv6FragHeaderLen
		default:
			return ChecksumUnknown
		}
		if off > len(p) {
			return ChecksumUnknown
		}
	}
	return ChecksumUnknown
}

// verifyTransport adds a TCP or UDP segment l4 to the pseudo-header's sum
// s (under 2^18) and says whether the whole folds to all ones.
func verifyTransport(s uint64, l4 []byte, proto uint8) Checksum {
	hl := tcpMinHeaderLen
	if proto == protoUDP {
		hl = udpHeaderLen
	}
	if len(l4) < hl {
		return ChecksumUnknown
	}
	if proto == protoUDP && binary.BigEndian.Uint16(l4[6:8]) == 0 {
		return ChecksumBad // over IPv6 (IPv4's zero is taken before)
	}
	if fold(sum(s, l4)) != 0xffff {
		return ChecksumBad
	}
	return ChecksumGood
}

// sum adds b, as big-endian 16-bit words (a last odd byte padded with
// zero), to the ones' complement sum s (RFC 1071), eight bytes at a time:
// the carries out of 64 bits are added back, so folding the result to 16
// bits gives the checksum's sum.
func sum(s uint64, b []byte) uint64 {
	var c uint64
	for len(b) >= 32 {
		s, c = bits.Add64(s, binary.BigEndian.Uint64(b[0:8]), c)
		s, c = bits.Add64(s, binary.BigEndian.Uint64(b[8:16]), c)
		s, c = bits.Add64(s, binary.BigEndian.Uint64(b[16:24]), c)
		s, c = bits.Add64(s, binary.BigEndian.Uint64(b[24:32]), c)
		b = b[32:]
	}
	for len(b) >= 8 {
		s, c = bits.Add64(s, binary.BigEndian.Uint64(b), c)
		b = b[8:]
	}
	s, c = bits.Add64(s, c, 0)
	s += c
	var tail uint64
	for i, v := range b { // up to 7 bytes, at their places in a 64-bit word
		tail |= uint64(v) << (56 - 8*i)
	}
	s, c = bits.Add64(s, tail, 0)
	return s + c
}

// fold folds a 64-bit ones' complement sum to 16 bits.
func fold(s uint64) uint16 {
	s = s>>32 + s&0xffffffff
	s = s>>32 + s&0xffffffff
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	return uint16(s)
}
