#include "textflag.h"
#include "go_asm.h"

// The GFNI Toeplitz sum; accel_amd64.go explains the method.
//
// Registers: DI the block table (accel.blk), SI the input, CX its length
// (cut to MaxInput), Z0 the input bytes with zeros past the end, Z2 the
// XOR of the affine results of the 8-lane blocks so far.

// FIRST computes block 0 into Z2.
#define FIRST \
	VMOVDQU64 (DI), Z1; \
	VPERMB Z0, Z1, Z1; \
	VGF2P8AFFINEQB $0, 64(DI), Z1, Z2

// BLOCK computes block b (indices at off, matrices at off+64) and adds it
// to Z2.
#define BLOCK(off) \
	VMOVDQU64 off(DI), Z1; \
	VPERMB Z0, Z1, Z1; \
	VGF2P8AFFINEQB $0, off+64(DI), Z1, Z1; \
	VPXORQ Z1, Z2, Z2

// iota<> is the byte sequence 0, 1, ..., 63.
DATA iota<>+0(SB)/8, $0x0706050403020100
DATA iota<>+8(SB)/8, $0x0f0e0d0c0b0a0908
DATA iota<>+16(SB)/8, $0x1716151413121110
DATA iota<>+24(SB)/8, $0x1f1e1d1c1b1a1918
DATA iota<>+32(SB)/8, $0x2726252423222120
DATA iota<>+40(SB)/8, $0x2f2e2d2c2b2a2928
DATA iota<>+48(SB)/8, $0x3736353433323130
DATA iota<>+56(SB)/8, $0x3f3e3d3c3b3a3938
GLOBL iota<>(SB), RODATA|NOPTR, $64

// func sumAny(t *Toeplitz, data []byte) uint32
TEXT ·sumAny(SB), NOSPLIT, $0-36
	MOVQ t+0(FP), DI
	CMPB Toeplitz_acc+accel_on(DI), $0
	JEQ portable
	MOVQ data_base+8(FP), SI
	MOVQ data_len+16(FP), CX
	MOVQ Toeplitz_maxIn(DI), R8
	CMPQ CX, R8
	CMOVQGT R8, CX
	MOVQ Toeplitz_acc+accel_blk(DI), DI

	// The tuple lengths load exactly their bytes. Block b is needed
	// when the length is at least 8b-2.
	CMPQ CX, $12
	JNE not12
	VMOVQ (SI), X0
	VPINSRD $2, 8(SI), X0, X0
	FIRST
	BLOCK(128)
	JMP reduce

not12:
	CMPQ CX, $36
	JNE not36
	VMOVDQU (SI), Y0
	VMOVD 32(SI), X1
	VINSERTI32X4 $2, X1, Z0, Z0
	FIRST
	BLOCK(128)
	BLOCK(256)
	BLOCK(384)
	BLOCK(512)
	JMP reduce

not36:
	CMPQ CX, $8
	JNE not8
	VMOVQ (SI), X0
	FIRST
	BLOCK(128)
	JMP reduce

not8:
	CMPQ CX, $32
	JNE generic
	VMOVDQU (SI), Y0
	FIRST
	BLOCK(128)
	BLOCK(256)
	BLOCK(384)
	BLOCK(512)
	JMP reduce

generic:
	TESTQ CX, CX
	JEQ zero
	MOVQ $1, AX
	SHLQ CX, AX
	DECQ AX
	KMOVQ AX, K1
	// A masked load whose 64 bytes cross into the next page costs a
	// microcode assist (about 100 ns) even when that page is mapped.
	MOVQ SI, R9
	ANDQ $4095, R9
	CMPQ R9, $4032
	JA shifted
	VMOVDQU8.Z (SI), K1, Z0
	JMP blocks

shifted:
	// Near the end of a page: load the 64 bytes that end where the input
	// ends (they start in the input's first page, as it has more than 63
	// bytes before it), then move the input down to byte 0.
	VMOVDQU64 -64(SI)(CX*1), Z1
	MOVQ CX, AX
	NEGQ AX
	VPBROADCASTB AX, Z0
	VPADDB iota<>(SB), Z0, Z0
	VPERMB.Z Z1, Z0, K1, Z0

blocks:
	FIRST
	CMPQ CX, $6
	JLT reduce
	BLOCK(128)
	CMPQ CX, $14
	JLT reduce
	BLOCK(256)
	CMPQ CX, $22
	JLT reduce
	BLOCK(384)
	CMPQ CX, $30
	JLT reduce
	BLOCK(512)
	CMPQ CX, $38
	JLT reduce
	BLOCK(640)
	CMPQ CX, $46
	JLT reduce
	BLOCK(768)
	CMPQ CX, $54
	JLT reduce
	BLOCK(896)

reduce:
	// XOR the eight lanes; bytes 0..3 of the result are the hash, most
	// significant byte first.
	VEXTRACTI64X4 $1, Z2, Y1
	VPXOR Y1, Y2, Y2
	VEXTRACTI128 $1, Y2, X1
	VPXOR X1, X2, X2
	VPSHUFD $0x4e, X2, X1
	VPXOR X1, X2, X2
	VMOVD X2, AX
	BSWAPL AX
	VZEROUPPER
	MOVL AX, ret+32(FP)
	RET

zero:
	MOVL $0, ret+32(FP)
	RET

portable:
	JMP ·sumGo(SB)

// ones<> is 64 bytes of 0xff then 64 zero bytes: the 64 bytes at
// ones<>+64-n are a mask of n leading 0xff bytes.
DATA ones<>+0(SB)/8, $-1
DATA ones<>+8(SB)/8, $-1
DATA ones<>+16(SB)/8, $-1
DATA ones<>+24(SB)/8, $-1
DATA ones<>+32(SB)/8, $-1
DATA ones<>+40(SB)/8, $-1
DATA ones<>+48(SB)/8, $-1
DATA ones<>+56(SB)/8, $-1
DATA ones<>+64(SB)/8, $0
DATA ones<>+72(SB)/8, $0
DATA ones<>+80(SB)/8, $0
DATA ones<>+88(SB)/8, $0
DATA ones<>+96(SB)/8, $0
DATA ones<>+104(SB)/8, $0
DATA ones<>+112(SB)/8, $0
DATA ones<>+120(SB)/8, $0
GLOBL ones<>(SB), RODATA|NOPTR, $128

// func gfniTuples(blk *[1024]byte, dst *uint32, tps *Tuple, n int)
//
// The batch form. A Tuple's 36 bytes are always readable, so a tuple of
// up to 16 bytes is loaded as 16 bytes and a longer one whole, and the
// bytes past its length are cleared with a mask from ones<>. Up to 13
// bytes need 2 blocks, up to 36 bytes 5.
TEXT ·gfniTuples(SB), NOSPLIT, $0-32
	MOVQ blk+0(FP), DI
	MOVQ dst+8(FP), DX
	MOVQ tps+16(FP), SI
	MOVQ n+24(FP), R10
	LEAQ ones<>+64(SB), R11
	TESTQ R10, R10
	JLE tdone

tloop:
	MOVBQZX Tuple_n(SI), CX
	MOVQ R11, AX
	SUBQ CX, AX
	CMPQ CX, $16
	JGT tlong
	VMOVDQU Tuple_b(SI), X0
	VPANDQ (AX), Z0, Z0
	FIRST
	BLOCK(128)
	JMP treduce

tlong:
	VMOVDQU Tuple_b(SI), Y0
	VMOVD Tuple_b+32(SI), X1
	VINSERTI32X4 $2, X1, Z0, Z0
	VPANDQ (AX), Z0, Z0
	FIRST
	BLOCK(128)
	BLOCK(256)
	BLOCK(384)
	BLOCK(512)

treduce:
	VEXTRACTI64X4 $1, Z2, Y1
	VPXOR Y1, Y2, Y2
	VEXTRACTI128 $1, Y2, X1
	VPXOR X1, X2, X2
	VPSHUFD $0x4e, X2, X1
	VPXOR X1, X2, X2
	VMOVD X2, AX
	BSWAPL AX
	MOVL AX, (DX)
	ADDQ $4, DX
	ADDQ $Tuple__size, SI
	DECQ R10
	JNZ tloop
	VZEROUPPER

tdone:
	RET

// func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL eaxArg+0(FP), AX
	MOVL ecxArg+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv() (eax, edx uint32)
TEXT ·xgetbv(SB), NOSPLIT, $0-8
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	MOVL DX, edx+4(FP)
	RET
