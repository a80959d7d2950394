package steer

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/rpsgo/rps/hash"
)

// The classifier's depth limits: past them a frame gets ReasonTooManyVLANs
// or ReasonTooDeep, and is hashed by the deepest IP header read.
const (
	MaxVLANDepth   = 4 // stacked 802.1Q/802.1ad tags in one Ethernet header
	MaxEncaps      = 8 // shim and tunnel headers a FlowKey records (Encaps)
	MaxTunnelDepth = 4 // nested tunnels TunnelsInner opens
)

// FlowKey is a flow's key: the tuple hashed (the innermost, with tunnels
// opened) and its context (VLAN IDs, labels, tunnel IDs), never hashed. A
// comparable 136-byte value without padding, it is a fast map key.
type FlowKey struct {
	Src, Dst         netip.Addr // network addresses; invalid for non-IP frames
	SrcPort, DstPort uint16     // transport ports; zero when not read
	Proto            uint8      // IP protocol number (6 TCP, 17 UDP, ...)
	Fragment         bool       // an IPv4 or IPv6 fragment (ports read only in a first fragment, with FragmentsFollow)
	NVLAN            uint8      // number of VLAN tags recorded in VLANs
	pad0             uint8      // always zero: no padding before VLANs, so maps hash the key as memory
	// VLANs are the outer Ethernet header's VLAN IDs, outermost first; an
	// inner frame's tags are in Encaps.
	VLANs  [MaxVLANDepth]uint16
	Depth  uint8  // how many tunnels the tuple is inside
	NEncap uint8  // the number of headers in Encaps
	pad1   uint16 // always zero: no padding before Encaps
	// Encaps are the shim and tunnel headers walked after the outer VLAN
	// tags, outermost first; a tunnel whose inside could not be hashed is
	// listed too, and Depth counts only those around the tuple.
	Encaps [MaxEncaps]Encap
	pad2   uint32 // always zero: no padding at the end
}

// Flow returns the key without its outer VLAN IDs: what a flow meter counts.
func (k FlowKey) Flow() FlowKey {
	k.NVLAN = 0
	k.VLANs = [MaxVLANDepth]uint16{}
	return k
}

// Canonical returns the key with its endpoints in hash.Canonical's order,
// and whether it swapped them: one key for both directions.
func (k FlowKey) Canonical() (c FlowKey, swapped bool) {
	if o := k.Src.Unmap().Compare(k.Dst.Unmap()); o > 0 || (o == 0 && k.SrcPort > k.DstPort) {
		k.Src, k.Dst = k.Dst, k.Src
		k.SrcPort, k.DstPort = k.DstPort, k.SrcPort
		return k, true
	}
	return k, false
}

// Encapsulation names the layers walked, joined by "+" ("vlan:7+vxlan:42").
func (k *FlowKey) Encapsulation() string {
	var b strings.Builder
	for _, id := range k.VLANs[:min(k.NVLAN, MaxVLANDepth)] {
		e := Encap{Kind: EncapVLAN, HasID: true, ID: uint32(id)}
		b.WriteString(e.String())
		b.WriteByte('+')
	}
	for _, e := range k.Encaps[:min(k.NEncap, MaxEncaps)] {
		b.WriteString(e.String())
		b.WriteByte('+')
	}
	return strings.TrimSuffix(b.String(), "+")
}

// Encap is one shim or tunnel header the classifier walked.
type Encap struct {
	Kind  EncapKind
	HasID bool   // the header carries an identifier, ID
	pad   uint16 // always zero, so that FlowKey has no padding
	ID    uint32 // VLAN ID, label, session ID, VNI, GRE key, TEID or security group tag
}

// String is the kind and its identifier, if any ("vlan:7", "gre:key=9").
func (e Encap) String() string {
	s := e.Kind.String()
	switch {
	case !e.HasID:
		return s
	case e.Kind == EncapGRE:
		return s + ":key=" + strconv.FormatUint(uint64(e.ID), 10)
	}
	return s + ":" + strconv.FormatUint(uint64(e.ID), 10)
}

// EncapKind names a shim (always walked) or a tunnel (with TunnelsInner).
type EncapKind uint8

// The kinds of encapsulation.
const (
	EncapNone       EncapKind = iota // an unused entry
	EncapVLAN                        // an 802.1Q or 802.1ad tag of an inner Ethernet frame (ID: the VLAN ID)
	EncapMPLS                        // an MPLS label stack entry, EtherType 0x8847 or 0x8848 (ID: the label)
	EncapPseudowire                  // an MPLS pseudowire control word, before an Ethernet frame
	EncapPPPoE                       // a PPPoE session header, EtherType 0x8864 (ID: the session ID)
	EncapVXLAN                       // VXLAN, RFC 7348 (ID: the VNI)
	EncapGENEVE                      // GENEVE, RFC 8926 (ID: the VNI)
	EncapGRE                         // GRE version 0, RFC 2784 and 2890 (ID: the key, when present)
	EncapERSPAN1                     // ERSPAN type I: GRE protocol 0x88be without a sequence number, no header of its own
	EncapERSPAN2                     // ERSPAN type II, GRE protocol 0x88be (ID: the session ID)
	EncapERSPAN3                     // ERSPAN type III, GRE protocol 0x22eb (ID: the session ID)
	EncapGTPU                        // a GTP-U G-PDU, 3GPP TS 29.281 (ID: the TEID)
	EncapIPIP                        // IPv4 or IPv6 inside IPv4 or IPv6, IP protocol 4 or 41
	EncapCMD                         // Cisco MetaData, EtherType or GRE protocol 0x8909 (ID: the security group tag)
	EncapMPLSUDP                     // MPLS over UDP, RFC 7510, before the labels it carries (EncapMPLS each)
	numEncapKinds
)

var encapNames = [...]string{
	EncapNone: "none", EncapVLAN: "vlan", EncapMPLS: "mpls", EncapPseudowire: "pw", EncapPPPoE: "pppoe",
	EncapVXLAN: "vxlan", EncapGENEVE: "geneve", EncapGRE: "gre", EncapERSPAN1: "erspan1",
	EncapERSPAN2: "erspan2", EncapERSPAN3: "erspan3", EncapGTPU: "gtpu", EncapIPIP: "ipip", EncapCMD: "cmd",
	EncapMPLSUDP: "mplsudp",
}

// String returns the kind's short name ("vlan", "mpls", "pw", "vxlan",
// ...).
func (k EncapKind) String() string {
	if int(k) < len(encapNames) {
		return encapNames[k]
	}
	return "unknown"
}

// MarshalText encodes the kind by name.
func (k EncapKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText parses a kind's name, in any case.
func (k *EncapKind) UnmarshalText(b []byte) error {
	v, err := parseName(encapNames[:], "encapsulation", string(b))
	*k = EncapKind(v)
	return err
}

// Tunnel reports whether the kind is a tunnel rather than a shim.
func (k EncapKind) Tunnel() bool { return k >= EncapVXLAN && k < numEncapKinds && k != EncapCMD }

// Classification is what Classifier.Classify finds for a frame: its key,
// hash type, flowid and reason.
type Classification struct {
	Key       FlowKey
	EtherType uint16        // 0x0800 or 0x86dd for IP (in a shim or tunnel too), else the last header's
	HashType  hash.HashType // NONE for non-IP and unusable frames
	FlowID    uint32        // the hash (Toeplitz or SipHash); zero with HashType NONE
	Reason    Reason        // ReasonOK, or why the classification stopped short

	tuple    [hash.MaxTupleLen]byte // the bytes fed to the hash, for tracing
	tupleLen uint8
	keyless  bool // flowOnly stopped at the hash: Key and tuple were not set
	// With FragmentsFollow, a fragment's kind (fragFirst, fragLater; else
	// fragNone) and its datagram's identification and protocol (IPv4's; 0
	// for IPv6), for the producer's table (followFragment).
	frag      uint8
	fragProto uint8
	fragID    uint32
}

// reset readies c for a classification: every field zero but two that
// need no clearing, the tuple's bytes past tupleLen (only Tuple's are
// defined) and the entries of Key.Encaps past Key.NEncap, which every
// classification leaves zero. Clearing the whole value costs the fast
// path more than the rest of its work on the key.
func (c *Classification) reset() {
	c.resetFast()
	c.clearTuple()
}

// clearTuple is the part of reset that the fast paths (simpleIPv4,
// simpleIPv6) need not do, as they write these fields themselves.
func (c *Classification) clearTuple() {
	k := &c.Key
	k.Src, k.Dst = netip.Addr{}, netip.Addr{}
	k.SrcPort, k.DstPort, k.Proto = 0, 0, 0
	c.EtherType, c.HashType, c.FlowID, c.tupleLen = 0, hash.None, 0, 0
}

// resetFast is reset without clearTuple: what a path that ends in
// simpleIPv4 or simpleIPv6, which write the rest, must clear.
func (c *Classification) resetFast() {
	k := &c.Key
	if k.NEncap != 0 {
		k.Encaps = [MaxEncaps]Encap{}
	}
	k.Fragment, k.NVLAN, k.VLANs, k.Depth, k.NEncap = false, 0, [MaxVLANDepth]uint16{}, 0, 0
	c.Reason, c.keyless, c.frag = ReasonOK, false, fragNone
}

// Tuple returns the bytes hashed for FlowID (none for a source's hash).
func (c *Classification) Tuple() []byte { return c.tuple[:c.tupleLen] }
