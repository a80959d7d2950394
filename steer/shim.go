package steer

import "encoding/binary"

// Shims, always walked like VLAN tags: they hide the IP header, they are
// not overlays. Their identifiers go to the key's Encaps, never to the
// hash.
//
//   - PPPoE session (EtherType 0x8864, RFC 2516): 6 bytes, version 1 and
//     type 1 (0x11), code 0, the session ID recorded; then the PPP
//     protocol, two bytes or one when compressed (RFC 1661: an odd first
//     byte): 0x0021 is IPv4, 0x0057 IPv6, anything else (LCP, IPCP, ...)
//     [ReasonPPPNonIP]. The PPPoE length bounds the payload. Discovery
//     (0x8863) is non-IP.
//   - MPLS (EtherTypes 0x8847 and 0x8848, RFC 3032): 4-byte label stack
//     entries, each label recorded, to the one with the bottom-of-stack
//     bit (at most MaxEncaps entries in all). The payload is told by its
//     first nibble: 4 IPv4, 6 IPv6, 0 a pseudowire control word (RFC 4385,
//     4 bytes) followed by an Ethernet frame, walked as a frame (RFC 4448);
//     anything else is [ReasonMPLSNonIP].
//   - Cisco MetaData (CMD, EtherType 0x8909), the security group tag of
//     Cisco TrustSec that switches insert after the MAC addresses and VLAN
//     tags: 8 bytes, a version, a length, an option type, the 16-bit tag
//     (recorded), then the EtherType of what follows. Inside GRE (protocol
//     0x8909, as ERSPAN sessions and GRE keepalives of such switches send
//     it) the same 8 bytes start with that EtherType instead (tunnel.go).
//     Neither form's version, length or option is checked, as tcpdump and
//     Wireshark check none. A CMD header straight after another is not
//     walked: [ReasonNonIP].

// Shim header constants.
const (
	etherTypePPPoESession  = 0x8864
	etherTypeMPLS          = 0x8847
	etherTypeMPLSMulticast = 0x8848
	pppoeHeaderLen         = 6
	pppoeVerType           = 0x11
	pppIPv4                = 0x0021
	pppIPv6                = 0x0057
	mplsEntryLen           = 4
	mplsBottomOfStack      = 0x100
	pwControlWordLen       = 4
	etherTypeCMD           = 0x8909 // Cisco MetaData
	cmdHeaderLen           = 8
)

// pppoe walks a PPPoE session header p to the packet inside.
func (c *Classifier) pppoe(p []byte, out *Classification) {
	if len(p) < pppoeHeaderLen+1 || p[0] != pppoeVerType || p[1] != 0 {
		out.Reason = ReasonBadPPPoE
		return
	}
	if !c.push(out, EncapPPPoE, true, uint32(binary.BigEndian.Uint16(p[2:4]))) {
		return
	}
	if end := pppoeHeaderLen + int(binary.BigEndian.Uint16(p[4:6])); end < len(p) {
		p = p[:end]
	}
	if len(p) < pppoeHeaderLen+1 { // the length leaves no PPP protocol
		out.Reason = ReasonBadPPPoE
		return
	}
	hl := pppoeHeaderLen + 1
	proto := uint16(p[pppoeHeaderLen])
	if proto&1 == 0 { // not compressed: two bytes
		if len(p) < pppoeHeaderLen+2 {
			out.Reason = ReasonBadPPPoE
			return
		}
		proto = binary.BigEndian.Uint16(p[pppoeHeaderLen:])
		hl++
	}
	switch proto {
	case pppIPv4:
		c.ether(etherTypeIPv4, p[hl:], out)
	case pppIPv6:
		c.ether(etherTypeIPv6, p[hl:], out)
	default:
		out.Reason = ReasonPPPNonIP
	}
}

// mpls walks an MPLS label stack p to the packet under it.
func (c *Classifier) mpls(p []byte, out *Classification) {
	for {
		if len(p) < mplsEntryLen {
			out.Reason = ReasonBadMPLS
			return
		}
		e := binary.BigEndian.Uint32(p)
		if !c.push(out, EncapMPLS, true, e>>12) {
			return
		}
		p = p[mplsEntryLen:]
		if e&mplsBottomOfStack != 0 {
			break
		}
	}
	if len(p) == 0 {
		out.Reason = ReasonBadMPLS
		return
	}
	switch p[0] >> 4 {
	case 4:
		c.ether(etherTypeIPv4, p, out)
	case 6:
		c.ether(etherTypeIPv6, p, out)
	case 0:
		if len(p) < pwControlWordLen {
			out.Reason = ReasonBadMPLS
			return
		}
		if c.push(out, EncapPseudowire, false, 0) {
			c.innerEthernet(p[pwControlWordLen:], out)
		}
	default:
		out.Reason = ReasonMPLSNonIP
	}
}

// cmd walks a Cisco MetaData header p in its Ethernet form (version,
// length, option, tag, EtherType) to what follows it.
func (c *Classifier) cmd(p []byte, out *Classification) {
	if len(p) < cmdHeaderLen {
		out.Reason = ReasonBadCMD
		return
	}
	if c.push(out, EncapCMD, true, uint32(binary.BigEndian.Uint16(p[4:6]))) {
		c.afterCMD(binary.BigEndian.Uint16(p[6:8]), p[cmdHeaderLen:], out)
	}
}

// afterCMD classifies the payload p of EtherType et that follows a CMD
// header, as ether does, but for another CMD header.
func (c *Classifier) afterCMD(et uint16, p []byte, out *Classification) {
	if et == etherTypeCMD {
		out.EtherType, out.Reason = et, ReasonNonIP
		return
	}
	c.ether(et, p, out)
}
