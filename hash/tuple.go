package hash

import (
	"encoding/binary"
	"net/netip"
)

// Tuple lengths, as FreeBSD's rss_hash_ip*_*tuple build them.
const (
	IPv4Tuple2Len = 8  // src addr, dst addr
	IPv4Tuple4Len = 12 // src addr, dst addr, src port, dst port
	IPv6Tuple2Len = 32
	IPv6Tuple4Len = 36
	MaxTupleLen   = IPv6Tuple4Len
)

// Tuple is the byte string the software hash is computed over: source
// address, destination address and, for a 4-tuple, source port and
// destination port, all in network byte order. It is a value with fixed
// storage, so building one allocates nothing.
type Tuple struct {
	b [MaxTupleLen]byte
	n uint8
}

// Bytes returns the encoded tuple. The slice aliases t.
func (t *Tuple) Bytes() []byte { return t.b[:t.n] }

// Len returns the encoded length: 8, 12, 32, 36, or 0 for the zero Tuple.
func (t *Tuple) Len() int { return int(t.n) }

// NewTuple2 encodes the 2-tuple (src, dst) as rss_hash_ip4_2tuple or
// rss_hash_ip6_2tuple would. An IPv4-mapped IPv6 address counts as IPv4 when
// both are IPv4 or mapped; mixed or invalid families give the zero Tuple.
func NewTuple2(src, dst netip.Addr) Tuple {
	var t Tuple
	src, dst = src.Unmap(), dst.Unmap()
	switch {
	case src.Is4() && dst.Is4():
		a, b := src.As4(), dst.As4()
		copy(t.b[0:4], a[:])
		copy(t.b[4:8], b[:])
		t.n = IPv4Tuple2Len
	case src.Is6() && dst.Is6():
		a, b := src.As16(), dst.As16()
		copy(t.b[0:16], a[:])
		copy(t.b[16:32], b[:])
		t.n = IPv6Tuple2Len
	}
	return t
}

// NewTuple4 encodes the 4-tuple (src, dst, sport, dport) as
// rss_hash_ip4_4tuple or rss_hash_ip6_4tuple would. Mixed or invalid address
// families give the zero Tuple.
func NewTuple4(src, dst netip.Addr, sport, dport uint16) Tuple {
	t := NewTuple2(src, dst)
	if t.n == 0 {
		return t
	}
	binary.BigEndian.PutUint16(t.b[t.n:], sport)
	binary.BigEndian.PutUint16(t.b[t.n+2:], dport)
	t.n += 4
	return t
}

// Canonical puts the two endpoints of a connection in a fixed order, the
// lower (address, port) first, so that both directions of a connection
// produce the same tuple and hash alike under any key. For a 2-tuple pass
// zero ports. Addresses are compared with IPv4-mapped IPv6 addresses
// unmapped, as the tuple encodes them, so the order does not depend on
// which side of a socket saw the mapped form.
func Canonical(src, dst netip.Addr, sport, dport uint16) (a, b netip.Addr, aport, bport uint16) {
	if c := src.Unmap().Compare(dst.Unmap()); c > 0 || (c == 0 && sport > dport) {
		return dst, src, dport, sport
	}
	return src, dst, sport, dport
}

// NewTuple4Sym is NewTuple4 over the endpoints in [Canonical] order.
func NewTuple4Sym(src, dst netip.Addr, sport, dport uint16) Tuple {
	return NewTuple4(Canonical(src, dst, sport, dport))
}

// NewTuple2Sym is NewTuple2 over the addresses in [Canonical] order.
func NewTuple2Sym(src, dst netip.Addr) Tuple {
	a, b, _, _ := Canonical(src, dst, 0, 0)
	return NewTuple2(a, b)
}
