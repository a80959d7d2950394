package steer

// Reason says why the classifier could not classify a frame fully; the
// frame is delivered all the same. A bad header before IP gives HashType
// NONE (in a tunnel, the outer hash), one after it a 2-tuple hash.
type Reason uint8

// The reasons. ReasonOK, the non-IP ones and ReasonOrphanFragment are
// normal outcomes; the rest mark malformed frames ([Reason.Malformed]).
const (
	ReasonOK             Reason = iota // fully classified
	ReasonNonIP                        // not IPv4 or IPv6 (ARP, LLDP, PPPoE discovery, ...): HashType NONE
	ReasonShortEthernet                // shorter than an Ethernet header: NONE
	ReasonShortVLAN                    // a VLAN tag runs past the frame: NONE
	ReasonTooManyVLANs                 // more than MaxVLANDepth stacked tags in one Ethernet header: NONE
	ReasonShortIPv4                    // fewer than 20 bytes of IPv4 header: NONE
	ReasonBadIPVersion                 // the IP version field disagrees with the EtherType: NONE
	ReasonBadIHL                       // IHL below 5, or the header runs past the frame: NONE
	ReasonBadIPLength                  // IPv4 total length below the header length, but not zero: NONE
	ReasonShortIPv6                    // fewer than 40 bytes of IPv6 header: NONE
	ReasonBadExtHeader                 // an IPv6 extension header runs past the packet, or the chain is too long: NONE
	ReasonShortTransport               // the TCP/UDP/SCTP header is truncated: 2-tuple hash
	ReasonBadPPPoE                     // a PPPoE session header cut short, or not version 1 type 1 code 0: NONE
	ReasonPPPNonIP                     // a PPPoE session carries PPP other than IPv4 (0x0021) or IPv6 (0x0057), such as LCP: NONE
	ReasonBadMPLS                      // an MPLS label stack or pseudowire control word cut short, or no payload after it: NONE
	ReasonMPLSNonIP                    // the payload under an MPLS label stack starts with neither 4, 6 nor a control word's 0: NONE
	ReasonTooDeep                      // more than MaxEncaps shims and tunnel headers, or tunnels nested deeper than MaxTunnelDepth
	ReasonTunnelNonIP                  // a tunnel carries no IP packet (ARP in VXLAN, a GTP-U echo): the outer hash
	ReasonBadVXLAN                     // a VXLAN header cut short, or its I flag clear: the outer hash
	ReasonBadGENEVE                    // a GENEVE header or its options cut short, or a version other than 0: the outer hash
	ReasonBadGRE                       // a GRE header cut short, or a version other than 0, or the routing bit set: the outer hash
	ReasonBadERSPAN                    // an ERSPAN header or its platform sub-header cut short, or the wrong version: the outer hash
	ReasonBadGTPU                      // a GTP-U header or its extension headers cut short or malformed, or not version 1: the outer hash
	ReasonBadCMD                       // a Cisco MetaData header cut short: NONE, or inside a tunnel the outer hash
	ReasonOrphanFragment               // FragmentsFollow: a later fragment whose first fragment the input has not seen (yet): 2-tuple hash
	ReasonBadChecksum                  // Config.VerifyChecksums: an IPv4 header, TCP or UDP checksum does not hold; hashed as classified
	numReasons
)

var reasonNames = [...]string{
	ReasonOK:             "ok",
	ReasonNonIP:          "non-ip",
	ReasonShortEthernet:  "short-ethernet",
	ReasonShortVLAN:      "short-vlan",
	ReasonTooManyVLANs:   "too-many-vlans",
	ReasonShortIPv4:      "short-ipv4",
	ReasonBadIPVersion:   "bad-ip-version",
	ReasonBadIHL:         "bad-ihl",
	ReasonBadIPLength:    "bad-ip-length",
	ReasonShortIPv6:      "short-ipv6",
	ReasonBadExtHeader:   "bad-ext-header",
	ReasonShortTransport: "short-transport",
	ReasonBadPPPoE:       "bad-pppoe",
	ReasonPPPNonIP:       "ppp-non-ip",
	ReasonBadMPLS:        "bad-mpls",
	ReasonMPLSNonIP:      "mpls-non-ip",
	ReasonTooDeep:        "too-deep",
	ReasonTunnelNonIP:    "tunnel-non-ip",
	ReasonBadVXLAN:       "bad-vxlan",
	ReasonBadGENEVE:      "bad-geneve",
	ReasonBadGRE:         "bad-gre",
	ReasonBadERSPAN:      "bad-erspan",
	ReasonBadGTPU:        "bad-gtpu",
	ReasonBadCMD:         "bad-cmd",
	ReasonOrphanFragment: "orphan-fragment",
	ReasonBadChecksum:    "bad-checksum",
}

// String returns the reason's name, or "unknown" past the last reason.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "unknown"
}

// Malformed reports whether r marks a malformed frame (not OK, not non-IP).
func (r Reason) Malformed() bool {
	switch r {
	case ReasonOK, ReasonNonIP, ReasonPPPNonIP, ReasonMPLSNonIP, ReasonTunnelNonIP, ReasonOrphanFragment:
		return false
	}
	return r < numReasons
}
