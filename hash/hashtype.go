package hash

import "strconv"

// HashType says what a flowid was computed from, with the names and values
// of FreeBSD's M_HASHTYPE_* (sys/sys/mbuf.h). Types with the HASHPROP bit
// (0x80) are real hashes with RSS properties; OPAQUE only promises ordering.
// FreeBSD's RSS CPU lookup (rss_hash2cpuid, sys/net/rss_config.c) maps only
// the six RSS types without _EX to a CPU; OPAQUE_HASH and the _EX types get
// none (NETISR_CPUID_NONE). FreeBSD's main branch also has the flag
// M_HASHTYPE_INNER (0x40): the hash was computed over a tunnel's inner
// headers, and M_HASHTYPE_GET masks the flag off. It has no value here:
// package steer's TunnelsInner hashes the inner headers and gives the inner
// tuple's type.
type HashType uint8

// The hash types. The _EX variants describe NIC hashing over the addresses
// in IPv6 extension headers; the software hash never assigns them.
const (
	HashPropBit HashType = 0x80 // M_HASHTYPE_HASHPROP: the value is a hash

	None         HashType = 0                    // M_HASHTYPE_NONE: no hash
	RSSIPv4      HashType = HashPropBit | 1      // M_HASHTYPE_RSS_IPV4: IPv4 2-tuple
	RSSTCPIPv4   HashType = HashPropBit | 2      // M_HASHTYPE_RSS_TCP_IPV4: TCPv4 4-tuple
	RSSIPv6      HashType = HashPropBit | 3      // M_HASHTYPE_RSS_IPV6: IPv6 2-tuple
	RSSTCPIPv6   HashType = HashPropBit | 4      // M_HASHTYPE_RSS_TCP_IPV6: TCPv6 4-tuple
	RSSIPv6Ex    HashType = HashPropBit | 5      // M_HASHTYPE_RSS_IPV6_EX: IPv6 2-tuple + ext headers
	RSSTCPIPv6Ex HashType = HashPropBit | 6      // M_HASHTYPE_RSS_TCP_IPV6_EX: TCPv6 4-tuple + ext headers
	RSSUDPIPv4   HashType = HashPropBit | 7      // M_HASHTYPE_RSS_UDP_IPV4: UDPv4 4-tuple
	RSSUDPIPv6   HashType = HashPropBit | 9      // M_HASHTYPE_RSS_UDP_IPV6: UDPv6 4-tuple
	RSSUDPIPv6Ex HashType = HashPropBit | 10     // M_HASHTYPE_RSS_UDP_IPV6_EX: UDPv6 4-tuple + ext headers
	Opaque       HashType = 0x3f                 // M_HASHTYPE_OPAQUE: ordering, not affinity
	OpaqueHash   HashType = HashPropBit | Opaque // M_HASHTYPE_OPAQUE_HASH: ordering and hash, no RSS type
)

var hashTypeNames = map[HashType]string{
	None:         "NONE",
	RSSIPv4:      "RSS_IPV4",
	RSSTCPIPv4:   "RSS_TCP_IPV4",
	RSSIPv6:      "RSS_IPV6",
	RSSTCPIPv6:   "RSS_TCP_IPV6",
	RSSIPv6Ex:    "RSS_IPV6_EX",
	RSSTCPIPv6Ex: "RSS_TCP_IPV6_EX",
	RSSUDPIPv4:   "RSS_UDP_IPV4",
	RSSUDPIPv6:   "RSS_UDP_IPV6",
	RSSUDPIPv6Ex: "RSS_UDP_IPV6_EX",
	Opaque:       "OPAQUE",
	OpaqueHash:   "OPAQUE_HASH",
}

// String returns the FreeBSD name without the M_HASHTYPE_ prefix, such as
// "RSS_TCP_IPV4", or "HashType(0x..)" for a value FreeBSD does not define.
func (h HashType) String() string {
	if s, ok := hashTypeNames[h]; ok {
		return s
	}
	return "HashType(0x" + strconv.FormatUint(uint64(h), 16) + ")"
}

// IsHash reports whether the flowid is a hash (M_HASHTYPE_ISHASH): every type
// but NONE and OPAQUE.
func (h HashType) IsHash() bool { return h&HashPropBit != 0 }

// Is4Tuple reports whether the type covers ports as well as addresses.
func (h HashType) Is4Tuple() bool {
	switch h {
	case RSSTCPIPv4, RSSTCPIPv6, RSSTCPIPv6Ex, RSSUDPIPv4, RSSUDPIPv6, RSSUDPIPv6Ex:
		return true
	}
	return false
}
