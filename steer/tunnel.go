package steer

import (
	"encoding/binary"
	"github.com/rpsgo/rps/internal/wire"

	"github.com/rpsgo/rps/hash"
)

// Tunnels, opened when HashConfig.Tunnels is TunnelsInner. Each is told
// from the IP header before it: IP protocol 4 or 41 (IP in IP), 47 (GRE),
// or UDP to a tunnel's destination port (VXLAN, GENEVE, GTP-U, MPLS). A fragment
// is never opened: every fragment of an outer datagram follows the outer
// 2-tuple, as its first fragment does. The rules, per tunnel:
//
//   - VXLAN (RFC 7348), UDP to one of HashConfig.VXLANPorts: 8 bytes, the
//     I flag (0x08 in the first byte) set, the VNI in bytes 4-6; then an
//     Ethernet frame, walked as a frame (VLAN tags, shims, IP).
//   - GENEVE (RFC 8926), UDP to 6081: 8 bytes, version 0, then the options
//     (their total length in 4-byte units in the first byte), skipped; the
//     protocol type is an EtherType: 0x6558 an Ethernet frame, else the
//     payload is classified by that EtherType (IPv4, IPv6, MPLS, ...).
//   - GRE version 0 (RFC 2784, 2890): the routing bit must be clear; the
//     checksum, key and sequence fields are skipped by their flags, and the
//     key is recorded. The protocol type is an EtherType: 0x6558
//     (transparent Ethernet, NVGRE) an Ethernet frame; 0x88be ERSPAN type
//     II (8 bytes, version 1) or, without a sequence number, type I (no
//     header), then an Ethernet frame; 0x22eb ERSPAN type III (12 bytes,
//     version 2, and the 8-byte platform sub-header when its O bit is set),
//     then an Ethernet frame when its frame type is 0; 0x8909 Cisco
//     MetaData in its GRE form (8 bytes: the EtherType of what follows, a
//     version, a length, an option, the security group tag, recorded),
//     then what that EtherType names, as for GRE's own; anything else is
//     classified by that EtherType.
//   - GTP-U (3GPP TS 29.281), UDP to 2152: version 1, protocol type 1, 8
//     bytes, and 4 more (sequence number, N-PDU number, next extension
//     header type) when any of the E, S and PN flags is set; extension
//     headers are skipped by their length (in 4-byte units, at most
//     maxGTPUExtHeaders). Only a G-PDU (message type 255) carries a user
//     packet, IPv4 or IPv6 by its first nibble; the header's length field
//     bounds it.
//   - MPLS over UDP (RFC 7510), UDP to 6635: an MPLS label stack follows
//     the UDP header, walked as shim.go walks one, after an EncapMPLSUDP
//     entry that marks the tunnel (as IP in IP's EncapIPIP does).
//   - IP in IP: the payload of protocol 4 is an IPv4 packet, of 41 an IPv6
//     one.
//
// A UDP length below 8 (zero, as RFC 2675 and Linux's BIG TCP write it for
// a datagram over 64 KiB) leaves the payload to the packet's end, as an
// IPv4 total length of zero and an IPv6 payload length of zero do (see
// classify.go).
//
// A tunnel header cut short or malformed gives its Bad reason
// (ReasonBadVXLAN, ...); a tunnel that carries no IP packet gives
// ReasonTunnelNonIP; either way the frame is hashed by the tunnel's own IP
// header, and the key records the headers read whole.

// TunnelMode says whether the classifier opens tunnels ([HashConfig]).
type TunnelMode uint8

// The tunnel modes.
const (
	TunnelsOuter TunnelMode = iota // hashes a tunnelled frame by its outer header, as a NIC does
	// TunnelsInner opens VXLAN, GENEVE, GRE, ERSPAN, GTP-U, IP in IP and
	// MPLS over UDP, MaxTunnelDepth deep, and hashes the innermost header.
	TunnelsInner
)

var tunnelModeNames = []string{TunnelsOuter: "outer", TunnelsInner: "inner"}

// String returns "outer" or "inner".
func (m TunnelMode) String() string { return name(tunnelModeNames, "TunnelMode", uint8(m)) }

// MarshalText encodes the mode by name.
func (m TunnelMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText parses "outer" or "inner", in any case.
func (m *TunnelMode) UnmarshalText(b []byte) error {
	v, err := parseName(tunnelModeNames, "tunnel mode", string(b))
	if err == nil {
		*m = TunnelMode(v)
	}
	return err
}

// VXLANPort is IANA's VXLAN port, the default of HashConfig.VXLANPorts.
const VXLANPort = 4789

// The ports of the other UDP tunnels, fixed, and shared with
// internal/bpfsteer.
const (
	genevePort  = wire.GENEVEPort
	gtpuPort    = wire.GTPUPort
	mplsUDPPort = wire.MPLSUDPPort
)

// Tunnel header constants.
const (
	udpHeaderLen       = 8
	vxlanHeaderLen     = 8
	vxlanFlagI         = 0x08
	geneveHeaderLen    = 8
	greHeaderLen       = 4
	greFlagChecksum    = 0x8000
	greFlagRouting     = 0x4000
	greFlagKey         = 0x2000
	greFlagSeq         = 0x1000
	greVersionMask     = 0x0007
	erspan2HeaderLen   = 8
	erspan3HeaderLen   = 12
	erspan3PlatformLen = 8
	gtpuHeaderLen      = 8
	gtpuOptLen         = 4 // sequence number, N-PDU number, next extension type
	gtpuGPDU           = 0xff
	maxGTPUExtHeaders  = 8

	etherTypeTEB     = 0x6558 // transparent Ethernet bridging
	etherTypeERSPAN2 = 0x88be // ERSPAN types I and II
	etherTypeERSPAN3 = 0x22eb
)

// portSet is a set of UDP ports, one bit each.
type portSet [1 << 16 / 64]uint64

func newPortSet(vxlan []uint16) *portSet {
	s := new(portSet)
	for _, p := range append([]uint16{genevePort, gtpuPort, mplsUDPPort}, vxlan...) {
		s[p>>6] |= 1 << (p & 63)
	}
	return s
}

func (s *portSet) has(p uint16) bool { return s[p>>6]&(1<<(p&63)) != 0 }

// tunnel opens the tunnel that an IP packet of protocol proto with
// transport header l4 (whose ports are in out.Key) is, if it is one, and
// reports whether it was: the caller then finds the inner packet hashed,
// or no hash and the reason why not. It returns false for a packet that
// is no tunnel, and for one nested too deep (with ReasonTooDeep).
func (c *Classifier) tunnel(l4 []byte, proto uint8, out *Classification) bool {
	switch proto {
	case protoIPIP, protoIPv6, protoGRE:
	case protoUDP:
		if len(l4) < transportPortBytes || !c.tunnels.has(out.Key.DstPort) {
			return false
		}
	default:
		return false
	}
	if out.Key.Depth >= MaxTunnelDepth {
		out.Reason = ReasonTooDeep
		return false
	}
	port := out.Key.DstPort
	enter(out)
	switch proto {
	case protoIPIP:
		if c.push(out, EncapIPIP, false, 0) {
			c.ether(etherTypeIPv4, l4, out)
		}
	case protoIPv6:
		if c.push(out, EncapIPIP, false, 0) {
			c.ether(etherTypeIPv6, l4, out)
		}
	case protoGRE:
		c.gre(l4, out)
	default:
		c.udpTunnel(l4, port, out)
	}
	leave(out)
	return true
}

// enter begins a tunnel: one IP header more outside the tuple, whose
// ports are the inner packet's, if it has any.
func enter(out *Classification) {
	out.Key.Depth++
	out.Key.SrcPort, out.Key.DstPort = 0, 0
}

// leave ends a tunnel: if the inside was not hashed, the IP header
// outside it is the deepest read whole, and a non-IP inside is told
// apart from a non-IP frame.
func leave(out *Classification) {
	if out.HashType != hash.None {
		return
	}
	out.Key.Depth--
	out.Key.Fragment, out.frag = false, fragNone
	if out.Reason == ReasonNonIP {
		out.Reason = ReasonTunnelNonIP
	}
}

// simpleUDPTunnel is Classify's way into a tunnel for an untagged simple
// IPv4 packet p (isSimpleIPv4) to a tunnel port: the outer header needs
// no more checks, and if the inside cannot be hashed the fast path
// classifies the outer packet.
func (c *Classifier) simpleUDPTunnel(p []byte, out *Classification) {
	if tl := int(binary.BigEndian.Uint16(p[2:4])); tl < len(p) {
		p = p[:tl]
	}
	port := binary.BigEndian.Uint16(p[22:24])
	enter(out)
	c.udpTunnel(p[ipv4MinHeaderLen:], port, out)
	leave(out)
	if out.HashType == hash.None {
		out.EtherType = etherTypeIPv4
		c.simpleIPv4((*[simpleIPv4Len]byte)(p), out)
	}
}

// udpTunnel opens the UDP tunnel named by the destination port: u is the
// UDP header and what follows.
func (c *Classifier) udpTunnel(u []byte, port uint16, out *Classification) {
	bad := ReasonBadVXLAN
	switch port {
	case genevePort:
		bad = ReasonBadGENEVE
	case gtpuPort:
		bad = ReasonBadGTPU
	case mplsUDPPort:
		bad = ReasonBadMPLS
	}
	if len(u) < udpHeaderLen {
		out.Reason = bad
		return
	}
	if l := int(binary.BigEndian.Uint16(u[4:6])); l >= udpHeaderLen && l < len(u) {
		u = u[:l]
	}
	t := u[udpHeaderLen:]
	switch port {
	case genevePort:
		c.geneve(t, out)
	case gtpuPort:
		c.gtpu(t, out)
	case mplsUDPPort:
		if c.push(out, EncapMPLSUDP, false, 0) {
			c.mpls(t, out)
		}
	default:
		c.vxlan(t, out)
	}
}

// vxlanTuple is ipv4Tuple for the tunnel most traffic mirrors arrive in:
// if frame is an untagged simple IPv4 packet (isSimpleIPv4) to a VXLAN
// port with a sound VXLAN header, and the inner frame one that ipv4Tuple
// takes, it writes the inner packet's hash input to t as ipv4Tuple does;
// else it returns false, and the frame takes the general path. Both give
// the same flowid, hash type, EtherType and reason.
func (c *Classifier) vxlanTuple(frame []byte, t *[hash.IPv4Tuple4Len]byte) (hash.HashType, bool) {
	ip := simpleIPv4Of(frame)
	if ip == nil || c.notTunnel4(ip) {
		return hash.None, false
	}
	p := frame[ethHeaderLen:]
	if tl := int(binary.BigEndian.Uint16(p[2:4])); tl < len(p) {
		p = p[:tl]
	}
	if port := binary.BigEndian.Uint16(p[22:24]); !isVXLANPort(port) || len(p) < ipv4MinHeaderLen+udpHeaderLen {
		return hash.None, false
	}
	u := p[ipv4MinHeaderLen:]
	if l := int(binary.BigEndian.Uint16(u[4:6])); l >= udpHeaderLen && l < len(u) {
		u = u[:l]
	}
	if len(u) < udpHeaderLen+vxlanHeaderLen || u[udpHeaderLen]&vxlanFlagI == 0 {
		return hash.None, false
	}
	return c.ipv4Tuple(u[udpHeaderLen+vxlanHeaderLen:], t)
}

// isVXLANPort reports whether a tunnel's UDP port names VXLAN: every one
// but the fixed ports of the other UDP tunnels.
func isVXLANPort(port uint16) bool {
	return port != genevePort && port != gtpuPort && port != mplsUDPPort
}

// vxlan opens a VXLAN header v.
func (c *Classifier) vxlan(v []byte, out *Classification) {
	if len(v) < vxlanHeaderLen || v[0]&vxlanFlagI == 0 {
		out.Reason = ReasonBadVXLAN
		return
	}
	if c.push(out, EncapVXLAN, true, binary.BigEndian.Uint32(v[4:8])>>8) {
		c.innerEthernet(v[vxlanHeaderLen:], out)
	}
}

// geneve opens a GENEVE header g.
func (c *Classifier) geneve(g []byte, out *Classification) {
	if len(g) < geneveHeaderLen || g[0]>>6 != 0 {
		out.Reason = ReasonBadGENEVE
		return
	}
	hl := geneveHeaderLen + int(g[0]&0x3f)<<2
	if len(g) < hl {
		out.Reason = ReasonBadGENEVE
		return
	}
	if c.push(out, EncapGENEVE, true, binary.BigEndian.Uint32(g[4:8])>>8) {
		c.payload(binary.BigEndian.Uint16(g[2:4]), g[hl:], out)
	}
}

// payload classifies a tunnel's payload p of protocol type et (an
// EtherType): an Ethernet frame for 0x6558, else what the EtherType names.
func (c *Classifier) payload(et uint16, p []byte, out *Classification) {
	if et == etherTypeTEB {
		c.innerEthernet(p, out)
		return
	}
	c.ether(et, p, out)
}

// gre opens a GRE header g.
func (c *Classifier) gre(g []byte, out *Classification) {
	if len(g) < greHeaderLen {
		out.Reason = ReasonBadGRE
		return
	}
	flags := binary.BigEndian.Uint16(g[0:2])
	et := binary.BigEndian.Uint16(g[2:4])
	if flags&(greVersionMask|greFlagRouting) != 0 {
		out.Reason = ReasonBadGRE
		return
	}
	hl := greHeaderLen
	if flags&greFlagChecksum != 0 {
		hl += 4
	}
	keyAt := hl
	if flags&greFlagKey != 0 {
		hl += 4
	}
	if flags&greFlagSeq != 0 {
		hl += 4
	}
	if len(g) < hl {
		out.Reason = ReasonBadGRE
		return
	}
	var key uint32
	if flags&greFlagKey != 0 {
		key = binary.BigEndian.Uint32(g[keyAt : keyAt+4])
	}
	if !c.push(out, EncapGRE, flags&greFlagKey != 0, key) {
		return
	}
	p := g[hl:]
	switch et {
	case etherTypeERSPAN2:
		if flags&greFlagSeq == 0 { // type I: the mirrored frame follows
			if c.push(out, EncapERSPAN1, false, 0) {
				c.innerEthernet(p, out)
			}
			return
		}
		if len(p) < erspan2HeaderLen || p[0]>>4 != 1 {
			out.Reason = ReasonBadERSPAN
			return
		}
		if c.push(out, EncapERSPAN2, true, uint32(binary.BigEndian.Uint16(p[2:4])&0x03ff)) {
			c.innerEthernet(p[erspan2HeaderLen:], out)
		}
	case etherTypeERSPAN3:
		c.erspan3(p, out)
	case etherTypeCMD:
		c.greCMD(p, out)
	default:
		c.payload(et, p, out)
	}
}

// greCMD opens Cisco MetaData in its GRE form, m: the EtherType of the
// payload first, then the version, length, option and tag.
func (c *Classifier) greCMD(m []byte, out *Classification) {
	if len(m) < cmdHeaderLen {
		out.Reason = ReasonBadCMD
		return
	}
	if !c.push(out, EncapCMD, true, uint32(binary.BigEndian.Uint16(m[6:8]))) {
		return
	}
	if et := binary.BigEndian.Uint16(m[0:2]); et != etherTypeTEB {
		c.afterCMD(et, m[cmdHeaderLen:], out)
		return
	}
	c.innerEthernet(m[cmdHeaderLen:], out)
}

// erspan3 opens an ERSPAN type III header e.
func (c *Classifier) erspan3(e []byte, out *Classification) {
	if len(e) < erspan3HeaderLen || e[0]>>4 != 2 {
		out.Reason = ReasonBadERSPAN
		return
	}
	hl := erspan3HeaderLen
	if e[11]&0x01 != 0 { // O: a platform-specific sub-header follows
		hl += erspan3PlatformLen
	}
	if len(e) < hl {
		out.Reason = ReasonBadERSPAN
		return
	}
	if !c.push(out, EncapERSPAN3, true, uint32(binary.BigEndian.Uint16(e[2:4])&0x03ff)) {
		return
	}
	if ft := e[10] >> 2 & 0x1f; ft != 0 { // frame type: 0 is Ethernet
		out.Reason = ReasonTunnelNonIP
		return
	}
	c.innerEthernet(e[hl:], out)
}

// gtpu opens a GTP-U header g.
func (c *Classifier) gtpu(g []byte, out *Classification) {
	if len(g) < gtpuHeaderLen || g[0]>>5 != 1 || g[0]&0x10 == 0 {
		out.Reason = ReasonBadGTPU
		return
	}
	end := gtpuHeaderLen + int(binary.BigEndian.Uint16(g[2:4]))
	hl := gtpuHeaderLen
	if g[0]&0x07 != 0 { // E, S or PN: the optional fields are present
		hl += gtpuOptLen
		if len(g) < hl {
			out.Reason = ReasonBadGTPU
			return
		}
		for n, next := 0, g[hl-1]; next != 0; n++ {
			// An extension header: its length in 4-byte units (counting
			// the length and next-type bytes), the next type last.
			if n >= maxGTPUExtHeaders || len(g) <= hl || g[hl] == 0 || len(g) < hl+int(g[hl])<<2 {
				out.Reason = ReasonBadGTPU
				return
			}
			hl += int(g[hl]) << 2
			next = g[hl-1]
		}
	}
	if end < hl {
		out.Reason = ReasonBadGTPU
		return
	}
	if end < len(g) {
		g = g[:end]
	}
	if !c.push(out, EncapGTPU, true, binary.BigEndian.Uint32(g[4:8])) {
		return
	}
	p := g[hl:]
	switch {
	case g[1] != gtpuGPDU || len(p) == 0:
		out.Reason = ReasonTunnelNonIP
	case p[0]>>4 == 4:
		c.ether(etherTypeIPv4, p, out)
	case p[0]>>4 == 6:
		c.ether(etherTypeIPv6, p, out)
	default:
		out.Reason = ReasonTunnelNonIP
	}
}
