package bpfsteer

import (
	"github.com/cilium/ebpf/asm"

	"github.com/rpsgo/rps/hash"
)

// SipHash-2-4 registers: the state, the message word and a temporary.
const (
	sipV0  = asm.R1
	sipV1  = asm.R2
	sipV2  = asm.R3
	sipV3  = asm.R4
	sipM   = asm.R5
	sipTmp = asm.R0
)

// siphash hashes the tuple (8, 12, 32 or 36 bytes, rEnd) into R0 with
// SipHash-2-4 as package hash does: the state after the key from the
// SipHash map, the tuple's little-endian 64-bit words, a last word of the
// remaining bytes with the length in its top byte, two rounds per word,
// four to finish; the flowid is the low 32 bits. It branches on the
// family in rVal only: the 4 bytes after a 2-tuple are zero ports, so the
// last word is those 4 bytes and the length, whichever the tuple.
func (b *builder) siphash() {
	b.lookup0(SipHashMapName, "hash_null")
	for i, v := range []asm.Register{sipV0, sipV1, sipV2, sipV3} {
		b.emit(asm.LoadMem(v, asm.R0, int16(8*i), asm.DWord))
	}
	b.sipWordAt(0)
	b.emit(
		asm.Mov.Imm(sipM, hash.IPv4Tuple2Len),
		asm.JEq.Imm(rVal, hash.IPv4Tuple2Len, "sip_last"),
	)
	for i := int16(8); i < hash.IPv6Tuple2Len; i += 8 {
		b.sipWordAt(i)
	}
	b.emit(asm.Mov.Imm(sipM, hash.IPv6Tuple2Len))
	b.label("sip_last") // sipM: the offset of the last 4 bytes
	b.emit(
		asm.Add.Reg(sipM, rTup),
		asm.LoadMem(sipM, sipM, 0, asm.Word),
		asm.HostTo(asm.LE, sipM, asm.Word),
		asm.Mov.Reg(sipTmp, rEnd),
		asm.LSh.Imm(sipTmp, 56),
		asm.Or.Reg(sipM, sipTmp),
	)
	b.sipCompress()
	b.emit(asm.Xor.Imm(sipV2, 0xff))
	for i := 0; i < 4; i++ {
		b.sipRound()
	}
	b.emit(
		asm.Xor.Reg(sipV0, sipV1),
		asm.Xor.Reg(sipV0, sipV2),
		asm.Xor.Reg(sipV0, sipV3),
	)
	b.emit(asm.Mov.Reg(asm.R0, sipV0))
}

// sipWordAt compresses the tuple's 8 bytes at off.
func (b *builder) sipWordAt(off int16) {
	b.emit(
		asm.LoadMem(sipM, rTup, off, asm.DWord),
		asm.HostTo(asm.LE, sipM, asm.DWord),
	)
	b.sipCompress()
}

// sipCompress mixes the word in sipM into the state: two SipRounds.
func (b *builder) sipCompress() {
	b.emit(asm.Xor.Reg(sipV3, sipM))
	b.sipRound()
	b.sipRound()
	b.emit(asm.Xor.Reg(sipV0, sipM))
}

// sipRound is one SipRound.
func (b *builder) sipRound() {
	b.emit(asm.Add.Reg(sipV0, sipV1))
	b.rotl(sipV1, 13)
	b.emit(asm.Xor.Reg(sipV1, sipV0))
	b.rotl(sipV0, 32)
	b.emit(asm.Add.Reg(sipV2, sipV3))
	b.rotl(sipV3, 16)
	b.emit(
		asm.Xor.Reg(sipV3, sipV2),
		asm.Add.Reg(sipV0, sipV3),
	)
	b.rotl(sipV3, 21)
	b.emit(
		asm.Xor.Reg(sipV3, sipV0),
		asm.Add.Reg(sipV2, sipV1),
	)
	b.rotl(sipV1, 17)
	b.emit(asm.Xor.Reg(sipV1, sipV2))
	b.rotl(sipV2, 32)
}

// rotl rotates the 64-bit r left by k bits, through sipTmp.
func (b *builder) rotl(r asm.Register, k int32) {
	b.emit(
		asm.Mov.Reg(sipTmp, r),
		asm.LSh.Imm(r, k),
		asm.RSh.Imm(sipTmp, 64-k),
		asm.Or.Reg(r, sipTmp),
	)
}
