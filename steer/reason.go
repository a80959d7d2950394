package steer

// Reason says why the classifier could not classify a frame fully. The frame
// is still delivered: the classifier never drops (an IDS wants to see
// malformed frames). Reasons are counted per dispatcher and shown in the
// report.
//
// Two kinds of outcome follow a reason:
//   - the link or IP header is unusable: the frame gets HashType NONE and no
//     flowid, and the SOURCE policy places it;
//   - the IP header is sound but what follows is not: the frame gets a
//     2-tuple hash of its addresses.
type Reason uint8

// The reasons. ReasonOK and ReasonNonIP are normal outcomes; the rest mark
// malformed or truncated frames.
const (
	ReasonOK             Reason = iota // fully classified
	ReasonNonIP                        // not IPv4 or IPv6 (ARP, LLDP, ...): HashType NONE
	ReasonShortEthernet                // shorter than an Ethernet header: NONE
	ReasonShortVLAN                    // a VLAN tag runs past the frame: NONE
	ReasonTooManyVLANs                 // more than MaxVLANDepth stacked tags: NONE
	ReasonShortIPv4                    // fewer than 20 bytes of IPv4 header: NONE
	ReasonBadIPVersion                 // the IP version field disagrees with the EtherType: NONE
	ReasonBadIHL                       // IHL below 5, or the header runs past the frame: NONE
	ReasonBadIPLength                  // IPv4 total length below the header length: NONE
	ReasonShortIPv6                    // fewer than 40 bytes of IPv6 header: NONE
	ReasonBadExtHeader                 // an IPv6 extension header runs past the packet, or the chain is too long: NONE
	ReasonShortTransport               // the TCP/UDP/SCTP header is truncated: 2-tuple hash
	numReasons
)

// NumReasons is the number of Reason values, for arrays indexed by Reason.
const NumReasons = int(numReasons)

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
}

// String returns the reason's short name, as the report prints it.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "unknown"
}

// Malformed reports whether the reason marks a malformed or truncated frame
// (every reason except ReasonOK and ReasonNonIP).
func (r Reason) Malformed() bool { return r > ReasonNonIP && r < numReasons }
