package hash

import (
	"errors"
	"fmt"
)

// ErrKeyLength is returned for a key shorter than [MinKeyLen] or longer than
// [MaxKeyLen] bytes.
var ErrKeyLength = errors.New("key length must be 8 to 64 bytes")

// Toeplitz computes the Toeplitz hash with one fixed key.
//
// For input bit i (counting from the most significant bit of byte 0), the
// hash XORs in the 32-bit window of the key that starts at key bit i. The
// window is precomputed for every (byte position, byte value) pair, so [Sum]
// costs one table load and XOR per input byte; on amd64 CPUs with GFNI the
// same result comes from Galois-field affine instructions instead.
//
// A Toeplitz is immutable after [NewToeplitz] and safe for concurrent use.
type Toeplitz struct {
	key []byte
	// tab[i][v] is the hash contribution of byte value v at input position i.
	tab [][256]uint32
	// gfni holds the per-key matrices of the GFNI path, nil when unused.
	gfni *gfniTables
}

// NewToeplitz returns a hasher for key, which must be 8 to 64 bytes long. The
// key is copied. A key of n bytes hashes inputs of up to n-4 bytes.
func NewToeplitz(key []byte) (*Toeplitz, error) {
	if len(key) < MinKeyLen || len(key) > MaxKeyLen {
		return nil, fmt.Errorf("hash: key of %d bytes: %w", len(key), ErrKeyLength)
	}
	t := &Toeplitz{key: append([]byte(nil), key...)}
	n := len(key) - 4
	t.tab = make([][256]uint32, n)
	for i := 0; i < n; i++ {
		// w[b] is the 32-bit key window starting at bit 8*i+b.
		var w [8]uint32
		for b := 0; b < 8; b++ {
			w[b] = window(t.key, 8*i+b)
		}
		for v := 0; v < 256; v++ {
			var h uint32
			for b := 0; b < 8; b++ {
				if v&(0x80>>b) != 0 {
					h ^= w[b]
				}
			}
			t.tab[i][v] = h
		}
	}
	t.gfni = newGFNITables(t.key)
	return t, nil
}

// window returns the 32 bits of key starting at bit offset off (MSB first).
func window(key []byte, off int) uint32 {
	var w uint32
	for j := 0; j < 32; j++ {
		bit := off + j
		if key[bit/8]&(0x80>>(bit%8)) != 0 {
			w |= 1 << (31 - j)
		}
	}
	return w
}

// Key returns a copy of the key.
func (t *Toeplitz) Key() []byte { return append([]byte(nil), t.key...) }

// MaxInput is the longest input the key covers: len(key) - 4 bytes.
func (t *Toeplitz) MaxInput() int { return len(t.tab) }

// Sum returns the Toeplitz hash of data. Bytes past [Toeplitz.MaxInput] are
// ignored (a Toeplitz hash is only defined while the key window lasts), so a
// longer input hashes like its prefix; it never panics. Sum allocates nothing.
func (t *Toeplitz) Sum(data []byte) uint32 {
	if len(data) > len(t.tab) {
		data = data[:len(t.tab)]
	}
	if t.gfni != nil && len(data) >= gfniMinLen {
		return t.gfni.sum(data)
	}
	return t.sumTable(data)
}

// sumTable is the portable table-driven path.
func (t *Toeplitz) sumTable(data []byte) uint32 {
	tab := t.tab[:len(data)]
	var h0, h1, h2, h3 uint32
	i := 0
	for ; i+4 <= len(data); i += 4 {
		h0 ^= tab[i][data[i]]
		h1 ^= tab[i+1][data[i+1]]
		h2 ^= tab[i+2][data[i+2]]
		h3 ^= tab[i+3][data[i+3]]
	}
	for ; i < len(data); i++ {
		h0 ^= tab[i][data[i]]
	}
	return h0 ^ h1 ^ h2 ^ h3
}

// SumTuple hashes a [Tuple]; it is Sum(tp.Bytes()) without the slice.
func (t *Toeplitz) SumTuple(tp *Tuple) uint32 {
	return t.Sum(tp.b[:tp.n])
}
