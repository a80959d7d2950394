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
// window is precomputed for every (byte position, byte value) pair, so the
// portable path costs one table load and XOR per input byte. On amd64 CPUs
// with GFNI and AVX-512 the same sum comes from Galois-field affine
// instructions instead: per key, one 8x8 bit matrix per key byte turns an
// input byte into its contribution to one byte of the hash, eight of them
// per instruction, and an XOR reduction adds the contributions up. Which
// path runs is decided once, in [NewToeplitz], from the CPU's features.
//
// A Toeplitz is immutable after [NewToeplitz] and safe for concurrent use.
type Toeplitz struct {
	// acc is the state of the accelerated path; acc.on is false where it
	// is not available (other architectures, CPUs without GFNI).
	acc accel
	// maxIn is len(key) - 4, the longest input the key covers.
	maxIn int
	key   []byte
	// tab[i][v] is the hash contribution of byte value v at input position i.
	tab [][256]uint32
}

// NewToeplitz returns a hasher for key, which must be 8 to 64 bytes long. The
// key is copied. A key of n bytes hashes inputs of up to n-4 bytes.
func NewToeplitz(key []byte) (*Toeplitz, error) {
	return newToeplitz(key, haveAccel)
}

// newToeplitz is NewToeplitz with the choice of path made by the caller, so
// that tests can run the portable path on any CPU. useAccel is ignored
// where the accelerated path is not available.
func newToeplitz(key []byte, useAccel bool) (*Toeplitz, error) {
	if len(key) < MinKeyLen || len(key) > MaxKeyLen {
		return nil, fmt.Errorf("hash: key of %d bytes: %w", len(key), ErrKeyLength)
	}
	t := &Toeplitz{key: append([]byte(nil), key...)}
	n := len(key) - 4
	t.maxIn = n
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
	if useAccel && haveAccel {
		t.acc.init(t.key)
	}
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
func (t *Toeplitz) MaxInput() int { return t.maxIn }

// Accelerated reports whether Sum uses the GFNI instructions rather than the
// portable tables.
func (t *Toeplitz) Accelerated() bool { return t.acc.on }

// Sum returns the Toeplitz hash of data. Bytes past [Toeplitz.MaxInput] are
// ignored (a Toeplitz hash is only defined while the key window lasts), so a
// longer input hashes like its prefix; it never panics. Sum allocates nothing.
//
// Inputs of 8, 12, 32 and 36 bytes (the IPv4 and IPv6 2- and 4-tuples) have
// specialised code on both paths.
func (t *Toeplitz) Sum(data []byte) uint32 {
	// One call, so that Sum inlines into its callers: on amd64 sumAny is
	// assembly that branches on t.acc.on and runs either the GFNI code or
	// sumGo; elsewhere it is sumGo.
	return sumAny(t, data)
}

// SumTuple hashes a [Tuple]; it is Sum(tp.Bytes()) without the slice.
func (t *Toeplitz) SumTuple(tp *Tuple) uint32 {
	return t.Sum(tp.b[:tp.n])
}

// sumGo is the portable table-driven path, Sum without the accelerator.
func sumGo(t *Toeplitz, data []byte) uint32 {
	if len(data) > t.maxIn {
		data = data[:t.maxIn]
	}
	switch len(data) {
	case IPv4Tuple4Len:
		// sum12, written out here: it is too big to be inlined.
		d := data[:12]
		q := (*[12][256]uint32)(t.tab[:12])
		h0 := q[0][d[0]] ^ q[1][d[1]] ^ q[2][d[2]] ^ q[3][d[3]]
		h1 := q[4][d[4]] ^ q[5][d[5]] ^ q[6][d[6]] ^ q[7][d[7]]
		h2 := q[8][d[8]] ^ q[9][d[9]] ^ q[10][d[10]] ^ q[11][d[11]]
		return h0 ^ h1 ^ h2
	case IPv6Tuple4Len:
		return sum36(t.tab, data)
	case IPv4Tuple2Len:
		return sum8(t.tab, data)
	case IPv6Tuple2Len:
		return sum32(t.tab, data)
	}
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

// SumTuples hashes a batch: dst[i] = t.SumTuple(&tps[i]) for i below
// min(len(dst), len(tps)), and returns that count. With GFNI one call runs
// the whole batch in assembly, which saves the per-call cost of Sum.
func (t *Toeplitz) SumTuples(dst []uint32, tps []Tuple) int {
	n := min(len(dst), len(tps))
	dst, tps = dst[:n], tps[:n]
	if t.acc.on && t.maxIn >= MaxTupleLen && n > 0 {
		sumTuplesAccel(t, dst, tps)
		return n
	}
	for i := range tps {
		dst[i] = sumGo(t, tps[i].b[:tps[i].n])
	}
	return n
}

// SumIPv4Tuples hashes a batch of 12-byte inputs, the layout of an IPv4
// 4-tuple: dst[i] = t.Sum(in[i][:]) for i below min(len(dst), len(in)), and
// returns that count. A Toeplitz hash is linear, so zero bytes at the end
// of an input change nothing: an IPv4 2-tuple with its ports set to zero
// hashes as the 2-tuple. With GFNI, 16 inputs take about the time of five
// calls to Sum (about 1 ns each), which makes this the form for a
// dispatcher's batches.
func (t *Toeplitz) SumIPv4Tuples(dst []uint32, in [][IPv4Tuple4Len]byte) int {
	n := min(len(dst), len(in))
	dst, in = dst[:n], in[:n]
	if n == 0 || sumIPv4Accel(t, dst, in) {
		return n
	}
	for i := range in {
		dst[i] = sumGo(t, in[i][:])
	}
	return n
}
