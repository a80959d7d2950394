//go:build amd64

package hash

import "unsafe"

// The accelerated path follows the idea of DPDK's rte_thash_gfni.
//
// Write the hash as four bytes, H[0] the most significant. Input byte j
// adds to H[k] the eight key bits that start at key bit 8(j+k), each one
// masked by one bit of the byte, and that is a linear map of the byte over
// GF(2): H[k] ^= M[j+k](data[j]), where the 8x8 bit matrix M[p] depends only
// on key bytes p and p+1. VGF2P8AFFINEQB applies one such matrix per 64-bit
// lane to each of the lane's eight bytes. So lane p of the work gets M[p]
// and, by one VPERMB, the input bytes p, p-1, p-2, p-3 in its bytes 0..3
// (zero bytes elsewhere); its result bytes 0..3 are then contributions to
// H[0..3]. XOR-ing all lanes together leaves H in bytes 0..3 of one lane.
// An input of n bytes needs lanes 0..n+2, eight lanes to a 512-bit
// register: two registers for 12 bytes, five for 36.

// accelBlocks is the number of 8-lane blocks for the longest input (60
// bytes, lanes 0..62); each block holds 64 bytes of VPERMB indices and 64
// bytes of matrices.
const accelBlocks = 8

// haveAccel reports whether the CPU and OS support the instructions of the
// accelerated path: GFNI, AVX-512 F, BW and VBMI, AVX2, and the OS saving
// the AVX-512 registers.
var haveAccel = detectAccel()

func detectAccel() bool {
	maxID, _, _, _ := cpuid(0, 0)
	if maxID < 7 {
		return false
	}
	const (
		osxsave = 1 << 27
		avx     = 1 << 28
	)
	if _, _, ecx1, _ := cpuid(1, 0); ecx1&(osxsave|avx) != osxsave|avx {
		return false
	}
	// XCR0: SSE and AVX state (bits 1, 2), opmask and ZMM state (5, 6, 7).
	if xcr0, _ := xgetbv(); xcr0&0xe6 != 0xe6 {
		return false
	}
	const (
		avx2     = 1 << 5
		avx512f  = 1 << 16
		avx512bw = 1 << 30
		vbmi     = 1 << 1
		gfni     = 1 << 8
	)
	_, ebx7, ecx7, _ := cpuid(7, 0)
	return ebx7&(avx2|avx512f|avx512bw) == avx2|avx512f|avx512bw &&
		ecx7&(vbmi|gfni) == vbmi|gfni
}

// accel is the per-key state of the accelerated path.
type accel struct {
	on bool
	// blk is 64-byte aligned: block b is the VPERMB indices of lanes
	// 8b..8b+7 followed by their matrices.
	blk *[accelBlocks * 128]byte
	// wide is 64-byte aligned: the matrices of the 16-way form for 12-byte
	// inputs (gfni12x16), 64 bytes per input byte j, lane l holding
	// M[j + l%4].
	wide *[12 * 64]byte
}

// init builds the matrices for key and turns the path on.
func (a *accel) init(key []byte) {
	const size = accelBlocks * 128
	blk := (*[size]byte)(aligned64(size))
	keyByte := func(i int) uint32 {
		if i < len(key) {
			return uint32(key[i])
		}
		return 0
	}
	for p := 0; p < accelBlocks*8; p++ {
		idx := blk[p/8*128+p%8*8:][:8]
		mat := blk[p/8*128+64+p%8*8:][:8]
		for q := range idx {
			// Byte 63 of the input register is always zero (inputs
			// are at most 60 bytes), and so is every byte past the input.
			idx[q] = 63
			if q < 4 && p-q >= 0 {
				idx[q] = byte(p - q)
			}
		}
		// Matrix row m (byte m of the lane's qword) selects the input
		// bits that meet key bits 8p+m.. 8p+m+7: VGF2P8AFFINEQB makes
		// result bit 7-m from row m, and the hash counts bits MSB first.
		k16 := keyByte(p)<<8 | keyByte(p+1)
		for m := range mat {
			mat[m] = byte(k16 << m >> 8)
		}
	}
	a.blk = blk
	a.wide = (*[12 * 64]byte)(aligned64(12 * 64))
	for j := 0; j < 12; j++ {
		for l := 0; l < 8; l++ {
			p := j + l%4
			copy(a.wide[j*64+l*8:][:8], blk[p/8*128+64+p%8*8:][:8])
		}
	}
	a.on = true
}

// aligned64 returns size zero bytes that start on a 64-byte boundary.
func aligned64(size int) []byte {
	buf := make([]byte, size+63)
	off := int(-uintptr(unsafe.Pointer(&buf[0])) & 63)
	return buf[off : off+size]
}

// sumAny is Sum: if t.acc.on it hashes data with GFNI, otherwise it jumps
// to sumGo. In accel_amd64.s.
//
//go:noescape
func sumAny(t *Toeplitz, data []byte) uint32

// cpuid executes CPUID with the given EAX and ECX. In accel_amd64.s.
func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)

// xgetbv executes XGETBV with ECX = 0 (XCR0). In accel_amd64.s.
func xgetbv() (eax, edx uint32)

// sumTuplesAccel hashes tps into dst (len(dst) == len(tps) > 0) with GFNI;
// t.acc.on and t.maxIn >= MaxTupleLen.
func sumTuplesAccel(t *Toeplitz, dst []uint32, tps []Tuple) {
	gfniTuples(t.acc.blk, &dst[0], &tps[0], len(tps))
}

// sumIPv4Accel hashes in into dst (len(dst) == len(in)) with GFNI, 16 at
// a time, and reports true; false, with nothing done, when the path is off
// or the key is too short for 12-byte inputs.
func sumIPv4Accel(t *Toeplitz, dst []uint32, in [][IPv4Tuple4Len]byte) bool {
	if !t.acc.on || t.maxIn < IPv4Tuple4Len {
		return false
	}
	full := len(in) &^ 15
	if full > 0 {
		gfni12x16(t.acc.wide, &dst[0], &in[0], full/16)
	}
	if r := len(in) - full; r > 0 {
		var buf [16][IPv4Tuple4Len]byte
		var out [16]uint32
		copy(buf[:], in[full:])
		gfni12x16(t.acc.wide, &out[0], &buf[0], 1)
		copy(dst[full:], out[:r])
	}
	return true
}

// gfni12x16 hashes 16*groups 12-byte inputs from in into dst, 16 per
// group. In accel_amd64.s.
//
//go:noescape
func gfni12x16(wide *[12 * 64]byte, dst *uint32, in *[IPv4Tuple4Len]byte, groups int)

// gfniTuples hashes n tuples from tps into dst. In accel_amd64.s.
//
//go:noescape
func gfniTuples(blk *[accelBlocks * 128]byte, dst *uint32, tps *Tuple, n int)
