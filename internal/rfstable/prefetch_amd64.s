#include "textflag.h"

// func probeSets(sets unsafe.Pointer, setMask, altShift uint32, ids []uint32, hints []Hint)
//
// For each flowid: s1 = flowid & setMask; compare the eight tags of set s1
// with the flowid (PCMPEQL on two halves, MOVMSKPS), mask with the set's
// valid byte; on a match store hint s1*8+way+1 and prefetch the entry, else
// store 0 and prefetch the set ((s1 ^ (flowid*0x9E3779B1 >> altShift | 1)) &
// setMask), the same alternate as Table.alt. A set is 576 bytes.
TEXT ·probeSets(SB), NOSPLIT, $0-64
	MOVQ sets+0(FP), DI
	MOVL setMask+8(FP), R8
	MOVL altShift+12(FP), CX
	MOVQ ids_base+16(FP), SI
	MOVQ ids_len+24(FP), R9
	MOVQ hints_base+40(FP), R10
	TESTQ R9, R9
	JEQ pdone
ploop:
	MOVL (SI), AX
	MOVL AX, BX
	ANDL R8, BX
	IMUL3Q $576, BX, R11
	ADDQ DI, R11
	MOVQ AX, X0
	PSHUFL $0, X0, X0
	MOVOU (R11), X1
	MOVOU 16(R11), X2
	PCMPEQL X0, X1
	PCMPEQL X0, X2
	MOVMSKPS X1, DX
	MOVMSKPS X2, R12
	SHLL $4, R12
	ORL R12, DX
	MOVBLZX 32(R11), R12
	ANDL R12, DX
	JZ psecond
	BSFL DX, DX
	MOVL BX, R12
	SHLL $3, R12
	LEAL 1(R12)(DX*1), R12
	MOVL R12, (R10)
	SHLQ $6, DX
	PREFETCHT0 64(R11)(DX*1)
	JMP pnext
psecond:
	MOVL $0, (R10)
	IMUL3L $0x9E3779B1, AX, AX
	SHRL CX, AX
	ORL $1, AX
	XORL BX, AX
	ANDL R8, AX
	IMUL3Q $576, AX, R12
	PREFETCHT0 (DI)(R12*1)
pnext:
	ADDQ $4, SI
	ADDQ $4, R10
	DECQ R9
	JNE ploop
pdone:
	RET

// func prefetchScaled(base unsafe.Pointer, mask uint32, size uintptr, ids []uint32)
//
// PREFETCHT0 base + (id & mask) * size for each id.
TEXT ·prefetchScaled(SB), NOSPLIT, $0-48
	MOVQ base+0(FP), DI
	MOVL mask+8(FP), R8
	MOVQ size+16(FP), R11
	MOVQ ids_base+24(FP), SI
	MOVQ ids_len+32(FP), R9
	TESTQ R9, R9
	JEQ sdone
sloop:
	MOVL (SI), AX
	ANDL R8, AX
	IMULQ R11, AX
	PREFETCHT0 (DI)(AX*1)
	ADDQ $4, SI
	DECQ R9
	JNE sloop
sdone:
	RET
