package hash

import (
	"fmt"
	"math/bits"
	"strings"
)

// Types is a set of RSS hash types: which tuples a software hash may use,
// as FreeBSD's rss_gethashconfig returns it (a mask of RSS_HASHTYPE_*
// bits, whose values these are). For each packet the longest tuple the set
// allows is hashed: TCP over IPv4 gets its 4-tuple (RSS_TCP_IPV4) when
// [TypeTCPIPv4] is in the set, and its 2-tuple (RSS_IPV4) otherwise; UDP
// likewise with [TypeUDPIPv4]; everything else over IPv4, fragments
// included, its 2-tuple. The same holds for IPv6. FreeBSD's
// rss_mbuf_software_hash_v4 has a third case, which the library leaves out:
// with the 4-tuple type in the set, a TCP segment whose whole 20-byte header
// is not in the first mbuf (a UDP datagram shorter than 8 bytes) gets no
// hash at all; package steer hashes any 4 bytes of ports.
//
// A set is written, and parsed by [Types.UnmarshalText], as its names
// joined by commas: "ipv4,tcp_ipv4,ipv6,tcp_ipv6" is [DefaultTypes].
type Types uint16

// The hash types a set can hold (FreeBSD's RSS_HASHTYPE_RSS_*).
const (
	TypeIPv4    Types = 1 << 1 // RSS_HASHTYPE_RSS_IPV4: the IPv4 2-tuple
	TypeTCPIPv4 Types = 1 << 2 // RSS_HASHTYPE_RSS_TCP_IPV4: the TCP/IPv4 4-tuple
	TypeIPv6    Types = 1 << 3 // RSS_HASHTYPE_RSS_IPV6: the IPv6 2-tuple
	TypeTCPIPv6 Types = 1 << 4 // RSS_HASHTYPE_RSS_TCP_IPV6: the TCP/IPv6 4-tuple
	TypeUDPIPv4 Types = 1 << 7 // RSS_HASHTYPE_RSS_UDP_IPV4: the UDP/IPv4 4-tuple
	TypeUDPIPv6 Types = 1 << 9 // RSS_HASHTYPE_RSS_UDP_IPV6: the UDP/IPv6 4-tuple

	// DefaultTypes is FreeBSD's default set (rss_gethashconfig) without its
	// two _EX types (RSS_IPV6_EX, RSS_TCP_IPV6_EX), which only a NIC
	// computes and a Types cannot hold: TCP by its 4-tuple, everything else
	// by its addresses (UDP too, so that a fragmented datagram stays with
	// its unfragmented siblings).
	DefaultTypes = TypeIPv4 | TypeTCPIPv4 | TypeIPv6 | TypeTCPIPv6
	// AllTypes is every type a set can hold: UDP by its 4-tuple as well.
	AllTypes = DefaultTypes | TypeUDPIPv4 | TypeUDPIPv6
)

var typeNames = [...]struct {
	t    Types
	name string
}{
	{TypeIPv4, "ipv4"}, {TypeTCPIPv4, "tcp_ipv4"}, {TypeUDPIPv4, "udp_ipv4"},
	{TypeIPv6, "ipv6"}, {TypeTCPIPv6, "tcp_ipv6"}, {TypeUDPIPv6, "udp_ipv6"},
}

// Has reports whether every type of u is in t.
func (t Types) Has(u Types) bool { return t&u == u }

// Len is the number of types in the set.
func (t Types) Len() int { return bits.OnesCount16(uint16(t)) }

// String returns the set's names joined by commas, IPv4 types first, or
// "none" for the empty set. Bits that name no type are shown in hex.
func (t Types) String() string {
	if t == 0 {
		return "none"
	}
	var names []string
	rest := t
	for _, n := range typeNames {
		if t&n.t != 0 {
			names = append(names, n.name)
			rest &^= n.t
		}
	}
	if rest != 0 {
		names = append(names, fmt.Sprintf("0x%x", uint16(rest)))
	}
	return strings.Join(names, ",")
}

// MarshalText encodes the set as String does.
func (t Types) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText parses names joined by commas, in any case ("ipv4",
// "tcp_ipv4", "udp_ipv4", "ipv6", "tcp_ipv6", "udp_ipv6"; "none" or the
// empty string for the empty set). An unknown name is an error that lists
// the known ones.
func (t *Types) UnmarshalText(b []byte) error {
	var set Types
	for _, f := range strings.Split(string(b), ",") {
		f = strings.TrimSpace(f)
		if f == "" || strings.EqualFold(f, "none") {
			continue
		}
		found := false
		for _, n := range typeNames {
			if strings.EqualFold(f, n.name) {
				set |= n.t
				found = true
			}
		}
		if !found {
			return fmt.Errorf("hash: unknown hash type %q: want a comma-separated list of ipv4, tcp_ipv4, udp_ipv4, ipv6, tcp_ipv6, udp_ipv6", f)
		}
	}
	*t = set
	return nil
}

// Algorithm names a hash function a flowid can be computed with.
type Algorithm uint8

// The hash functions.
const (
	// AlgorithmToeplitz is the Toeplitz hash of RSS ([Toeplitz]), the
	// default: the flowid a NIC or FreeBSD's software RSS computes for the
	// same key. It is linear, so whoever learns a few colliding inputs can
	// make more.
	AlgorithmToeplitz Algorithm = iota
	// AlgorithmSipHash is SipHash-2-4 ([SipHash]), a keyed pseudorandom
	// function as Linux's flow hash uses: collisions seen teach nothing
	// about others. Its flowid matches no NIC's.
	AlgorithmSipHash
)

var algorithmNames = [...]string{AlgorithmToeplitz: "toeplitz", AlgorithmSipHash: "siphash"}

// String returns "toeplitz" or "siphash".
func (a Algorithm) String() string {
	if int(a) < len(algorithmNames) {
		return algorithmNames[a]
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// MarshalText encodes the algorithm by name.
func (a Algorithm) MarshalText() ([]byte, error) {
	if int(a) >= len(algorithmNames) {
		return nil, fmt.Errorf("hash: unknown algorithm %d", uint8(a))
	}
	return []byte(a.String()), nil
}

// UnmarshalText parses "toeplitz" or "siphash", in any case.
func (a *Algorithm) UnmarshalText(b []byte) error {
	for i, n := range algorithmNames {
		if strings.EqualFold(string(b), n) {
			*a = Algorithm(i)
			return nil
		}
	}
	return fmt.Errorf("hash: unknown algorithm %q: want toeplitz or siphash", b)
}
