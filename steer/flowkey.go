package steer

import (
	"net/netip"

	"github.com/rpsgo/rps/hash"
)

// MaxVLANDepth is how many stacked 802.1Q/802.1ad tags the classifier walks
// (FreeBSD and Linux walk two in hardware; QinQinQ exists in the wild). A
// frame with more gets [ReasonTooManyVLANs].
const MaxVLANDepth = 4

// FlowKey is what the classifier extracts from a frame: the fields RSS hashes
// and the context around them. It is a fixed-size comparable value, usable as
// a map key; building it allocates nothing.
type FlowKey struct {
	Src, Dst         netip.Addr // network addresses; invalid for non-IP frames
	SrcPort, DstPort uint16     // transport ports; zero when not read
	Proto            uint8      // IP protocol number (6 TCP, 17 UDP, ...)
	Fragment         bool       // an IPv4 or IPv6 fragment (ports not read)
	NVLAN            uint8      // number of VLAN tags recorded in VLANs
	// VLANs are the VLAN IDs, outermost first. They are recorded, never
	// hashed: a tagged and an untagged copy of one flow hash alike, as in RSS.
	VLANs [MaxVLANDepth]uint16
}

// Flow returns the key without its VLAN IDs: the unit a flow meter counts.
func (k FlowKey) Flow() FlowKey {
	k.NVLAN = 0
	k.VLANs = [MaxVLANDepth]uint16{}
	return k
}

// Classification is the result of classifying one frame (the ether_demux
// step): the flow key, what kind of hash it gets, the hash itself, and why
// the frame could not be classified fully, if it could not.
type Classification struct {
	Key       FlowKey
	EtherType uint16        // the innermost EtherType (0x0800, 0x86dd, 0x0806, ...)
	HashType  hash.HashType // NONE for non-IP and unusable frames
	FlowID    uint32        // the Toeplitz hash; zero with HashType NONE
	Reason    Reason        // ReasonOK, or why the classification stopped short

	tuple    [hash.MaxTupleLen]byte // the bytes fed to the hash, for tracing
	tupleLen uint8
	keyless  bool // flowOnly stopped at the hash: Key and tuple were not set
}

// Tuple returns the bytes that were hashed to give FlowID: empty for NONE and
// for a hash the source supplied.
func (c *Classification) Tuple() []byte { return c.tuple[:c.tupleLen] }
