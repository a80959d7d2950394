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

// The 16-way form for 12-byte inputs (gfni12x16). Where the one-input form
// spreads an input over lanes, this one spreads input bytes over registers:
// for input byte j, lane l = 4g+k of a register holds byte j of inputs
// 8g..8g+7 (one per byte), and its matrix M[j+k] turns each of them into
// its contribution to hash byte H[k]. So after the affine step the twelve
// registers need only a vertical XOR: byte t of lane 4g+k of the sum is
// H[k] of input 8g+t. A last VPERMB puts each input's four bytes together,
// least significant first.
//
// The 192 bytes of 16 inputs are in Z0, Z1, Z2. The bytes of inputs 0..7
// (offsets 0..95) are gathered from Z0:Z1 into lanes 0..3 under K1; those
// of inputs 8..15 (96..191) from Z1:Z2 into lanes 4..7 under K2. VPERMI2B
// writes its result over its indices and keeps the indices of the bytes
// masked off, so one index register serves both gathers.

// gather12<> holds, for each input byte j, the 64 VPERMI2B indices.
// fin12<> is the final VPERMB: output byte 4T+b, for input T = 8g+t, is
// byte (4g+3-b)*8+t of the sum.
DATA gather12<>+0(SB)/8, $0x54483c3024180c00
DATA gather12<>+8(SB)/8, $0x54483c3024180c00
DATA gather12<>+16(SB)/8, $0x54483c3024180c00
DATA gather12<>+24(SB)/8, $0x54483c3024180c00
DATA gather12<>+32(SB)/8, $0x74685c5044382c20
DATA gather12<>+40(SB)/8, $0x74685c5044382c20
DATA gather12<>+48(SB)/8, $0x74685c5044382c20
DATA gather12<>+56(SB)/8, $0x74685c5044382c20
DATA gather12<>+64(SB)/8, $0x55493d3125190d01
DATA gather12<>+72(SB)/8, $0x55493d3125190d01
DATA gather12<>+80(SB)/8, $0x55493d3125190d01
DATA gather12<>+88(SB)/8, $0x55493d3125190d01
DATA gather12<>+96(SB)/8, $0x75695d5145392d21
DATA gather12<>+104(SB)/8, $0x75695d5145392d21
DATA gather12<>+112(SB)/8, $0x75695d5145392d21
DATA gather12<>+120(SB)/8, $0x75695d5145392d21
DATA gather12<>+128(SB)/8, $0x564a3e32261a0e02
DATA gather12<>+136(SB)/8, $0x564a3e32261a0e02
DATA gather12<>+144(SB)/8, $0x564a3e32261a0e02
DATA gather12<>+152(SB)/8, $0x564a3e32261a0e02
DATA gather12<>+160(SB)/8, $0x766a5e52463a2e22
DATA gather12<>+168(SB)/8, $0x766a5e52463a2e22
DATA gather12<>+176(SB)/8, $0x766a5e52463a2e22
DATA gather12<>+184(SB)/8, $0x766a5e52463a2e22
DATA gather12<>+192(SB)/8, $0x574b3f33271b0f03
DATA gather12<>+200(SB)/8, $0x574b3f33271b0f03
DATA gather12<>+208(SB)/8, $0x574b3f33271b0f03
DATA gather12<>+216(SB)/8, $0x574b3f33271b0f03
DATA gather12<>+224(SB)/8, $0x776b5f53473b2f23
DATA gather12<>+232(SB)/8, $0x776b5f53473b2f23
DATA gather12<>+240(SB)/8, $0x776b5f53473b2f23
DATA gather12<>+248(SB)/8, $0x776b5f53473b2f23
DATA gather12<>+256(SB)/8, $0x584c4034281c1004
DATA gather12<>+264(SB)/8, $0x584c4034281c1004
DATA gather12<>+272(SB)/8, $0x584c4034281c1004
DATA gather12<>+280(SB)/8, $0x584c4034281c1004
DATA gather12<>+288(SB)/8, $0x786c6054483c3024
DATA gather12<>+296(SB)/8, $0x786c6054483c3024
DATA gather12<>+304(SB)/8, $0x786c6054483c3024
DATA gather12<>+312(SB)/8, $0x786c6054483c3024
DATA gather12<>+320(SB)/8, $0x594d4135291d1105
DATA gather12<>+328(SB)/8, $0x594d4135291d1105
DATA gather12<>+336(SB)/8, $0x594d4135291d1105
DATA gather12<>+344(SB)/8, $0x594d4135291d1105
DATA gather12<>+352(SB)/8, $0x796d6155493d3125
DATA gather12<>+360(SB)/8, $0x796d6155493d3125
DATA gather12<>+368(SB)/8, $0x796d6155493d3125
DATA gather12<>+376(SB)/8, $0x796d6155493d3125
DATA gather12<>+384(SB)/8, $0x5a4e42362a1e1206
DATA gather12<>+392(SB)/8, $0x5a4e42362a1e1206
DATA gather12<>+400(SB)/8, $0x5a4e42362a1e1206
DATA gather12<>+408(SB)/8, $0x5a4e42362a1e1206
DATA gather12<>+416(SB)/8, $0x7a6e62564a3e3226
DATA gather12<>+424(SB)/8, $0x7a6e62564a3e3226
DATA gather12<>+432(SB)/8, $0x7a6e62564a3e3226
DATA gather12<>+440(SB)/8, $0x7a6e62564a3e3226
DATA gather12<>+448(SB)/8, $0x5b4f43372b1f1307
DATA gather12<>+456(SB)/8, $0x5b4f43372b1f1307
DATA gather12<>+464(SB)/8, $0x5b4f43372b1f1307
DATA gather12<>+472(SB)/8, $0x5b4f43372b1f1307
DATA gather12<>+480(SB)/8, $0x7b6f63574b3f3327
DATA gather12<>+488(SB)/8, $0x7b6f63574b3f3327
DATA gather12<>+496(SB)/8, $0x7b6f63574b3f3327
DATA gather12<>+504(SB)/8, $0x7b6f63574b3f3327
DATA gather12<>+512(SB)/8, $0x5c5044382c201408
DATA gather12<>+520(SB)/8, $0x5c5044382c201408
DATA gather12<>+528(SB)/8, $0x5c5044382c201408
DATA gather12<>+536(SB)/8, $0x5c5044382c201408
DATA gather12<>+544(SB)/8, $0x7c7064584c403428
DATA gather12<>+552(SB)/8, $0x7c7064584c403428
DATA gather12<>+560(SB)/8, $0x7c7064584c403428
DATA gather12<>+568(SB)/8, $0x7c7064584c403428
DATA gather12<>+576(SB)/8, $0x5d5145392d211509
DATA gather12<>+584(SB)/8, $0x5d5145392d211509
DATA gather12<>+592(SB)/8, $0x5d5145392d211509
DATA gather12<>+600(SB)/8, $0x5d5145392d211509
DATA gather12<>+608(SB)/8, $0x7d7165594d413529
DATA gather12<>+616(SB)/8, $0x7d7165594d413529
DATA gather12<>+624(SB)/8, $0x7d7165594d413529
DATA gather12<>+632(SB)/8, $0x7d7165594d413529
DATA gather12<>+640(SB)/8, $0x5e52463a2e22160a
DATA gather12<>+648(SB)/8, $0x5e52463a2e22160a
DATA gather12<>+656(SB)/8, $0x5e52463a2e22160a
DATA gather12<>+664(SB)/8, $0x5e52463a2e22160a
DATA gather12<>+672(SB)/8, $0x7e72665a4e42362a
DATA gather12<>+680(SB)/8, $0x7e72665a4e42362a
DATA gather12<>+688(SB)/8, $0x7e72665a4e42362a
DATA gather12<>+696(SB)/8, $0x7e72665a4e42362a
DATA gather12<>+704(SB)/8, $0x5f53473b2f23170b
DATA gather12<>+712(SB)/8, $0x5f53473b2f23170b
DATA gather12<>+720(SB)/8, $0x5f53473b2f23170b
DATA gather12<>+728(SB)/8, $0x5f53473b2f23170b
DATA gather12<>+736(SB)/8, $0x7f73675b4f43372b
DATA gather12<>+744(SB)/8, $0x7f73675b4f43372b
DATA gather12<>+752(SB)/8, $0x7f73675b4f43372b
DATA gather12<>+760(SB)/8, $0x7f73675b4f43372b
GLOBL gather12<>(SB), RODATA|NOPTR, $768
DATA fin12<>+0(SB)/8, $0x0109111900081018
DATA fin12<>+8(SB)/8, $0x030b131b020a121a
DATA fin12<>+16(SB)/8, $0x050d151d040c141c
DATA fin12<>+24(SB)/8, $0x070f171f060e161e
DATA fin12<>+32(SB)/8, $0x2129313920283038
DATA fin12<>+40(SB)/8, $0x232b333b222a323a
DATA fin12<>+48(SB)/8, $0x252d353d242c343c
DATA fin12<>+56(SB)/8, $0x272f373f262e363e
GLOBL fin12<>(SB), RODATA|NOPTR, $64

// BYTE12(j) gathers input byte j into Z3 and applies its matrices.
#define BYTE12(j) \
	VMOVDQU64 gather12<>+((j)*64)(SB), Z3; \
	VPERMI2B Z1, Z0, K1, Z3; \
	VPERMI2B Z2, Z1, K2, Z3; \
	VGF2P8AFFINEQB $0, ((j)*64)(DI), Z3, Z3

// PAIR12(j) adds the results for input bytes j and j+1 to Z5.
#define PAIR12(j) \
	BYTE12(j); \
	VMOVDQA64 Z3, Z4; \
	BYTE12(j+1); \
	VPTERNLOGQ $0x96, Z4, Z3, Z5

// func gfni12x16(wide *[768]byte, dst *uint32, in *[12]byte, groups int)
TEXT ·gfni12x16(SB), NOSPLIT, $0-32
	MOVQ wide+0(FP), DI
	MOVQ dst+8(FP), DX
	MOVQ in+16(FP), SI
	MOVQ groups+24(FP), CX
	MOVQ $0x00000000ffffffff, AX
	KMOVQ AX, K1
	KNOTQ K1, K2
	VMOVDQU64 fin12<>(SB), Z6

loop12:
	VMOVDQU64 (SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VPXORQ Z5, Z5, Z5
	PAIR12(0)
	PAIR12(2)
	PAIR12(4)
	PAIR12(6)
	PAIR12(8)
	PAIR12(10)
	VPERMB Z5, Z6, Z7
	VMOVDQU64 Z7, (DX)
	ADDQ $192, SI
	ADDQ $64, DX
	DECQ CX
	JNZ loop12
	VZEROUPPER
	RET
