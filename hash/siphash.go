package hash

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// SipHashKeyLen is the length of a SipHash key: 128 bits.
const SipHashKeyLen = 16

// ErrSipHashKeyLength is returned for a SipHash key that is not
// [SipHashKeyLen] bytes long.
var ErrSipHashKeyLength = errors.New("SipHash key must be 16 bytes")

// SipHash computes SipHash-2-4 (Aumasson and Bernstein, 2012) with one
// fixed 128-bit key: a keyed pseudorandom function, the one Linux's flow
// hash uses. Unlike a Toeplitz hash it is not linear: seeing which inputs
// collide tells nothing about which other inputs will, so an attacker who
// can observe a few collisions (by timing, say) cannot make more without
// the key.
//
// A SipHash is immutable after [NewSipHash] and safe for concurrent use.
type SipHash struct {
	// v is the state after the key is loaded, before any input.
	v [4]uint64
}

// NewSipHash returns a hasher for key, which must be [SipHashKeyLen] bytes:
// the key's two halves are read as little-endian 64-bit words, k0 then k1,
// as the algorithm's reference does.
func NewSipHash(key []byte) (*SipHash, error) {
	if len(key) != SipHashKeyLen {
		return nil, fmt.Errorf("hash: SipHash key of %d bytes: %w", len(key), ErrSipHashKeyLength)
	}
	k0 := binary.LittleEndian.Uint64(key[0:8])
	k1 := binary.LittleEndian.Uint64(key[8:16])
	v0 := k0 ^ 0x736f6d6570736575 // "somepseu"
	v1 := k1 ^ 0x646f72616e646f6d // "dorandom"
	v2 := k0 ^ 0x6c7967656e657261 // "lygenera"
	v3 := k1 ^ 0x7465646279746573 // "tedbytes"
	return &SipHash{v: [4]uint64{v0, v1, v2, v3}}, nil
}

// Sum64 returns the 64-bit SipHash-2-4 of data. It allocates nothing.
func (s *SipHash) Sum64(data []byte) uint64 {
	v0, v1, v2, v3 := s.v[0], s.v[1], s.v[2], s.v[3]
	if len(data) == IPv4Tuple4Len { // the common case, written out
		v0, v1, v2, v3 = sipWord(v0, v1, v2, v3, binary.LittleEndian.Uint64(data))
		b := uint64(IPv4Tuple4Len)<<56 | uint64(binary.LittleEndian.Uint32(data[8:12]))
		v0, v1, v2, v3 = sipWord(v0, v1, v2, v3, b)
		return sipFinal(v0, v1, v2, v3)
	}
	n := len(data)
	// The last word: the remaining bytes, little-endian, with the input's
	// length (mod 256) in the top byte.
	b := uint64(n) << 56
	if n < 8 {
		v0, v1, v2, v3 = sipWord(v0, v1, v2, v3, b|lastBytes(data))
		return sipFinal(v0, v1, v2, v3)
	}
	v0, v1, v2, v3 = sipWord(v0, v1, v2, v3, binary.LittleEndian.Uint64(data))
	for data = data[8:]; len(data) >= 8; data = data[8:] {
		v0, v1, v2, v3 = sipWord(v0, v1, v2, v3, binary.LittleEndian.Uint64(data))
	}
	v0, v1, v2, v3 = sipWord(v0, v1, v2, v3, b|lastBytes(data))
	return sipFinal(v0, v1, v2, v3)
}

// lastBytes packs fewer than 8 bytes into a word, little-endian.
func lastBytes(d []byte) uint64 {
	var b uint64
	for i := len(d) - 1; i >= 0; i-- {
		b = b<<8 | uint64(d[i])
	}
	return b
}

// sipWord compresses a word: two SipRounds.
func sipWord(v0, v1, v2, v3, m uint64) (uint64, uint64, uint64, uint64) {
	v3 ^= m
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	return v0 ^ m, v1, v2, v3
}

// Sum returns a 32-bit flowid: the low 32 bits of [SipHash.Sum64], as
// Linux truncates its siphash flow hash. It allocates nothing.
func (s *SipHash) Sum(data []byte) uint32 { return uint32(s.Sum64(data)) }

// SumTuple hashes a [Tuple]; it is Sum(tp.Bytes()) without the slice.
func (s *SipHash) SumTuple(tp *Tuple) uint32 { return s.Sum(tp.b[:tp.n]) }

// sipFinal is the finalization: four SipRounds, and the state folded.
func sipFinal(v0, v1, v2, v3 uint64) uint64 {
	v2 ^= 0xff
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	return v0 ^ v1 ^ v2 ^ v3
}

// sipRound is one SipRound of the algorithm.
func sipRound(v0, v1, v2, v3 uint64) (uint64, uint64, uint64, uint64) {
	v0 += v1
	v1 = bits.RotateLeft64(v1, 13)
	v1 ^= v0
	v0 = bits.RotateLeft64(v0, 32)
	v2 += v3
	v3 = bits.RotateLeft64(v3, 16)
	v3 ^= v2
	v0 += v3
	v3 = bits.RotateLeft64(v3, 21)
	v3 ^= v0
	v2 += v1
	v1 = bits.RotateLeft64(v1, 17)
	v1 ^= v2
	v2 = bits.RotateLeft64(v2, 32)
	return v0, v1, v2, v3
}
