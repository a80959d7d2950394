package bpfsteer

import (
	"fmt"

	"github.com/cilium/ebpf/asm"
)

// The parsing functions. Each is a BPF-to-BPF function called with the
// skb in R1 and the parse state (in the main program's stack) in R2; it
// keeps them in rCtx and rSt, reads fOff and fEnd into rPos and rLim, and
// writes them back when it succeeds. Every read of the packet is checked
// against rLim first (user space's slice: a header may end before the
// frame, cut by an IP total length, a UDP, PPPoE or GTP-U length), then
// read with bpf_skb_load_bytes into the function's own stack.
//
// Shim and tunnel headers are counted in fNEnc as user space records them
// in FlowKey.Encaps. User space stops at the first one past MaxEncaps;
// the program checks the count before each IP header (fnSeg's return),
// which every walk to a hashed header passes. The outcome is the same:
// the headers walked after one IP header all belong to the tunnel it
// opens, and any failure inside that tunnel has one result, its flowid.
// Checked there only, the count decides no branch while the verifier
// follows the walk, so paths that differ in it alone are pruned as one.

// A function's own stack.
const (
	sHdr   = -40 // 40 bytes: the header being read
	sProto = -48 // 8 bytes: the IP protocol while the ports are read; fnTun's kind
	sPorts = -56 // 4 bytes: the ports
	sAux   = -64 // 8 bytes: GTP-U's end (its length field + 8)
	sAux2  = -72 // 8 bytes: GTP-U's message type
	sAux3  = -80 // 8 bytes: GTP-U's header length so far
)

// segRounds bounds fnSeg's walk: each round after the first follows an
// MPLS pseudowire (a label and a control word, two encapsulations), so
// MaxEncaps allows MaxEncaps/2 of them.
const segRounds = MaxEncaps/2 + 1

// enter begins a parsing function.
func (b *builder) enter(name string) {
	b.label(name)
	b.emit(
		asm.Mov.Reg(rCtx, asm.R1),
		asm.Mov.Reg(rSt, asm.R2),
		asm.LoadMem(rPos, rSt, fOff, asm.DWord),
		asm.LoadMem(rLim, rSt, fEnd, asm.DWord),
	)
}

// leave stores rPos and rLim and returns R0.
func (b *builder) leave() {
	b.emit(
		asm.StoreMem(rSt, fOff, rPos, asm.DWord),
		asm.StoreMem(rSt, fEnd, rLim, asm.DWord),
		asm.Return(),
	)
}

// failWith returns retFail from a function.
func (b *builder) failWith(label string) {
	b.label(label)
	b.emit(
		asm.Mov.Imm(asm.R0, retFail),
		asm.Return(),
	)
}

// call2 calls fn from a parsing function with the skb and the state.
func (b *builder) call2(fn string) {
	b.emit(
		asm.Mov.Reg(asm.R1, rCtx),
		asm.Mov.Reg(asm.R2, rSt),
		asm.Call.Label(fn),
	)
}

// callFrom calls fn from a parsing function, handing it rPos and rLim
// through the state and taking them back.
func (b *builder) callFrom(fn string) {
	b.emit(
		asm.StoreMem(rSt, fOff, rPos, asm.DWord),
		asm.StoreMem(rSt, fEnd, rLim, asm.DWord),
	)
	b.call2(fn)
	b.emit(
		asm.LoadMem(rPos, rSt, fOff, asm.DWord),
		asm.LoadMem(rLim, rSt, fEnd, asm.DWord),
	)
}

// need jumps to fail unless n bytes from rPos lie before rLim. It uses R0.
func (b *builder) need(n int32, fail string) {
	b.emit(
		asm.Mov.Reg(asm.R0, rPos),
		asm.Add.Imm(asm.R0, n),
		asm.JGT.Reg(asm.R0, rLim, fail),
	)
}

// read checks that n bytes from rPos lie before rLim and loads them into
// the function's header buffer, jumping to fail if they do not.
func (b *builder) read(n int32, fail string) {
	b.need(n, fail)
	b.loadBytes(rPos, 0, sHdr, n, fail)
}

// needReg is need for rPos + r bytes.
func (b *builder) needReg(r asm.Register, fail string) {
	b.emit(
		asm.Mov.Reg(asm.R0, rPos),
		asm.Add.Reg(asm.R0, r),
		asm.JGT.Reg(asm.R0, rLim, fail),
	)
}

// cutTo narrows the packet to the r bytes from rPos when that ends before
// rLim (user space: p = p[:r] if r < len(p)). It uses R0.
func (b *builder) cutTo(r asm.Register, label string) {
	b.emit(
		asm.Mov.Reg(asm.R0, rLim),
		asm.Sub.Reg(asm.R0, rPos),
		asm.JGE.Reg(r, asm.R0, label),
		asm.Mov.Reg(rLim, rPos),
		asm.Add.Reg(rLim, r),
	)
	b.label(label)
}

// encap counts one shim or tunnel header. It uses R0.
func (b *builder) encap() {
	b.emit(
		asm.LoadMem(asm.R0, rSt, fNEnc, asm.DWord),
		asm.Add.Imm(asm.R0, 1),
		asm.StoreMem(rSt, fNEnc, asm.R0, asm.DWord),
	)
}

// isVLAN jumps to yes when r is a VLAN tag's TPID.
func (b *builder) isVLAN(r asm.Register, yes string) {
	b.emit(
		asm.JEq.Imm(r, 0x8100, yes),
		asm.JEq.Imm(r, 0x88a8, yes),
		asm.JEq.Imm(r, 0x9100, yes),
	)
}

// segFunc emits fnSeg: from fEt at fOff (an EtherType, or kindEthernet) to
// an IP header, walking inner Ethernet headers and their VLAN tags
// (fnEth), Cisco MetaData, PPPoE sessions and MPLS label stacks (fnMPLS)
// on the way, as steer's ether, innerEthernet, cmd, pppoe and mpls do. It returns 4 or 6,
// with fOff at the IP header, or retFail, also when more than MaxEncaps
// headers were walked since the frame began.
func (b *builder) segFunc() {
	b.enter(fnSeg)
	b.emit(asm.LoadMem(asm.R1, rSt, fEt, asm.DWord))
	for r := 0; r < segRounds; r++ {
		p := fmt.Sprintf("seg%d_", r)
		b.emit(asm.JNE.Imm(asm.R1, kindEthernet, p+"et"))
		b.callFrom(fnEth)
		b.emit(
			asm.JEq.Imm(asm.R0, retFail, "seg_fail"),
			asm.Mov.Reg(asm.R1, asm.R0),
		)
		b.label(p + "et")
		b.cmd(p)
		b.emit(
			asm.JEq.Imm(asm.R1, etIPv4, "seg_ip4"),
			asm.JEq.Imm(asm.R1, etIPv6, "seg_ip6"),
			asm.JEq.Imm(asm.R1, etPPPoE, "seg_pppoe"),
			asm.JEq.Imm(asm.R1, etMPLS, p+"mpls"),
			asm.JNE.Imm(asm.R1, etMPLSMC, "seg_fail"),
		)
		b.label(p + "mpls")
		b.callFrom(fnMPLS)
		b.emit(
			asm.JEq.Imm(asm.R0, 4, "seg_ip4"),
			asm.JEq.Imm(asm.R0, 6, "seg_ip6"),
			asm.JNE.Imm(asm.R0, kindEthernet, "seg_fail"),
		)
		if r == segRounds-1 {
			// One pseudowire too many: past MaxEncaps.
			b.emit(asm.Ja.Label("seg_fail"))
			break
		}
		b.emit(asm.Mov.Imm(asm.R1, kindEthernet))
	}
	b.pppoe()
	b.label("seg_ip4")
	b.emit(
		asm.Mov.Imm(asm.R0, 4),
		asm.Ja.Label("seg_ret"),
	)
	b.label("seg_ip6")
	b.emit(asm.Mov.Imm(asm.R0, 6))
	b.label("seg_ret")
	b.emit(
		asm.LoadMem(asm.R1, rSt, fNEnc, asm.DWord),
		// A copy of its own: the verifier narrows R1, not the count.
		asm.Or.Imm(asm.R1, 0),
		asm.JGT.Imm(asm.R1, MaxEncaps, "seg_fail"),
	)
	b.leave()
	b.failWith("seg_fail")
	b.mplsFunc()
}

// cmd walks, when the EtherType in R1 is Cisco MetaData's, its Ethernet
// form at rPos, in fnSeg's round p: version, length, option and tag, then
// the EtherType of what follows, left in R1 for the round's dispatch,
// which walks no second CMD header.
func (b *builder) cmd(p string) {
	b.emit(asm.JNE.Imm(asm.R1, etCMD, p+"no_cmd"))
	b.read(8, "seg_fail")
	b.encap()
	b.loadBE16(asm.R1, sHdr+6)
	b.emit(asm.Add.Imm(rPos, 8))
	b.label(p + "no_cmd")
}

// pppoe walks a PPPoE session header (RFC 2516) at rPos to the IP packet
// inside, in fnSeg: version and type 0x11, code 0, the length bounding the
// payload, then the PPP protocol, one byte when compressed (odd), else
// two: 0x21 IPv4, 0x57 IPv6, anything else is not IP.
func (b *builder) pppoe() {
	b.label("seg_pppoe")
	b.need(7, "seg_fail")
	b.loadBytes(rPos, 0, sHdr, 6, "seg_fail")
	b.emit(
		asm.LoadMem(asm.R1, asm.RFP, sHdr, asm.Byte),
		asm.JNE.Imm(asm.R1, 0x11, "seg_fail"),
		asm.LoadMem(asm.R1, asm.RFP, sHdr+1, asm.Byte),
		asm.JNE.Imm(asm.R1, 0, "seg_fail"),
	)
	b.encap()
	b.loadBE16(asm.R1, sHdr+4)
	b.emit(asm.Add.Imm(asm.R1, 6))
	b.cutTo(asm.R1, "pppoe_cut")
	b.need(7, "seg_fail")
	b.loadBytes(rPos, 6, sHdr, 1, "seg_fail")
	b.emit(
		asm.LoadMem(asm.R1, asm.RFP, sHdr, asm.Byte),
		asm.Mov.Reg(asm.R2, asm.R1),
		asm.And.Imm(asm.R2, 1),
		asm.JEq.Imm(asm.R2, 0, "pppoe_long"),
		asm.Add.Imm(rPos, 7),
		asm.Ja.Label("pppoe_proto"),
	)
	b.label("pppoe_long")
	b.need(8, "seg_fail")
	b.loadBytes(rPos, 6, sHdr, 2, "seg_fail")
	b.loadBE16(asm.R1, sHdr)
	b.emit(asm.Add.Imm(rPos, 8))
	b.label("pppoe_proto")
	b.emit(
		asm.JEq.Imm(asm.R1, 0x21, "seg_ip4"),
		asm.JEq.Imm(asm.R1, 0x57, "seg_ip6"),
		asm.Ja.Label("seg_fail"),
	)
}

// fnMPLS is the MPLS function's name.
const fnMPLS = "rps_mpls"

// mplsFunc emits fnMPLS: an MPLS label stack (RFC 3032) at fOff, up to
// the entry with the bottom-of-stack bit (at most MaxEncaps entries), then
// the payload by its first nibble: 4 or 6 returned, fOff at the IP
// header; 0 a pseudowire control word (RFC 4385), kindEthernet returned,
// fOff at the Ethernet frame after it; anything else retFail.
func (b *builder) mplsFunc() {
	b.enter(fnMPLS)
	for l := 0; l < MaxEncaps; l++ {
		b.read(4, "mpls_fail")
		b.encap()
		b.emit(
			asm.Add.Imm(rPos, 4),
			asm.LoadMem(asm.R1, asm.RFP, sHdr+2, asm.Byte),
			asm.And.Imm(asm.R1, 1), // S, bit 8 of the entry
			asm.JNE.Imm(asm.R1, 0, "mpls_bos"),
		)
	}
	b.emit(asm.Ja.Label("mpls_fail"))
	b.label("mpls_bos")
	b.read(1, "mpls_fail")
	b.hiNibble(asm.R1, sHdr)
	b.emit(
		asm.Mov.Reg(asm.R0, asm.R1),
		asm.JEq.Imm(asm.R1, 4, "mpls_ret"),
		asm.JEq.Imm(asm.R1, 6, "mpls_ret"),
		asm.JNE.Imm(asm.R1, 0, "mpls_fail"),
	)
	b.need(4, "mpls_fail")
	b.encap()
	b.emit(
		asm.Add.Imm(rPos, 4),
		asm.Mov.Imm(asm.R0, kindEthernet),
	)
	b.label("mpls_ret")
	b.leave()
	b.failWith("mpls_fail")
}

// ethFunc emits fnEth: an Ethernet frame inside a tunnel or a pseudowire
// at fOff, 14 bytes, and its VLAN tags, each counted, up to MaxVLANDepth.
// It returns the EtherType after them, fOff at what follows, or retFail
// (0, which is no EtherType the program walks).
func (b *builder) ethFunc() {
	b.enter(fnEth)
	b.need(ethHeaderLen, "eth_fail")
	b.loadBytes(rPos, 12, sHdr, 2, "eth_fail")
	b.loadBE16(asm.R1, sHdr)
	b.emit(asm.Add.Imm(rPos, ethHeaderLen))
	for v := 0; v <= MaxVLANDepth; v++ {
		tag := fmt.Sprintf("eth_tag%d", v)
		b.isVLAN(asm.R1, tag)
		b.emit(asm.Ja.Label("eth_done"))
		b.label(tag)
		if v == MaxVLANDepth {
			b.emit(asm.Ja.Label("eth_fail"))
			break
		}
		b.read(4, "eth_fail")
		b.encap()
		b.loadBE16(asm.R1, sHdr+2)
		b.emit(asm.Add.Imm(rPos, 4))
	}
	b.label("eth_done")
	b.emit(asm.Mov.Reg(asm.R0, asm.R1))
	b.leave()
	b.failWith("eth_fail")
}
