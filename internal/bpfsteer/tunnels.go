package bpfsteer

import (
	"fmt"

	"github.com/cilium/ebpf/asm"
)

// tunFunc emits fnTun: the tunnel fnIP found (its kind in R3), from the
// transport header at fOff, to the header it carries, as steer's tunnel.go
// opens them. It first saves the flowid of the IP header around the
// tunnel (fSaved), the answer if anything inside fails. It returns
// retNext with fEt and fOff naming the next header, or retFail.
//
//   - IP in IP (protocols 4 and 41): IPv4 or IPv6 at once.
//   - UDP (VXLAN, GENEVE, GTP-U, by the destination port fnIP matched): the
//     8-byte header, its length bounding the payload when it is at least 8
//     and shorter than the packet.
//   - VXLAN (RFC 7348): 8 bytes, the I flag set; an Ethernet frame.
//   - GENEVE (RFC 8926): 8 bytes, version 0, options skipped by their
//     length; 0x6558 an Ethernet frame, else the protocol type is the
//     EtherType of the payload.
//   - GRE (RFC 2784, 2890): version 0, routing clear, the checksum, key and
//     sequence fields skipped by their flags; 0x6558 an Ethernet frame;
//     0x88be ERSPAN type I without a sequence number (no header), type II
//     with one (8 bytes, version 1); 0x22eb ERSPAN type III (12 bytes,
//     version 2, the 8-byte platform sub-header when O is set, frame type 0
//     only); both then an Ethernet frame; 0x8909 Cisco MetaData in its GRE
//     form (8 bytes, the EtherType of the payload first); else the
//     protocol type is the EtherType of the payload.
//   - MPLS over UDP (RFC 7510): the UDP header, then a label stack, which
//     fnSeg walks.
//   - GTP-U (3GPP TS 29.281): version 1, protocol type 1, 8 bytes and 4 more
//     when E, S or PN is set, extension headers skipped by their length (at
//     most maxGTPUExtHeaders); the length field bounds the payload; a G-PDU
//     (type 255) only, IPv4 or IPv6 by its first nibble.
func (b *builder) tunFunc() {
	b.label(fnTun)
	b.emit(
		asm.Mov.Reg(rCtx, asm.R1),
		asm.Mov.Reg(rSt, asm.R2),
	)
	b.emit(asm.StoreMem(asm.RFP, sProto, asm.R3, asm.DWord)) // the kind
	b.call2(fnHash)
	b.emit(
		asm.StoreMem(rSt, fSaved, asm.R0, asm.DWord),
		asm.LoadMem(asm.R3, asm.RFP, sProto, asm.DWord),
		asm.LoadMem(rPos, rSt, fOff, asm.DWord),
		asm.LoadMem(rLim, rSt, fEnd, asm.DWord),
	)
	b.encap() // the tunnel's own header: IPIP, GRE, VXLAN, GENEVE, GTP-U
	b.emit(
		asm.Mov.Imm(asm.R1, etIPv4),
		asm.JEq.Imm(asm.R3, retIPIP4, "tun_next"),
		asm.Mov.Imm(asm.R1, etIPv6),
		asm.JEq.Imm(asm.R3, retIPIP6, "tun_next"),
		asm.JEq.Imm(asm.R3, retGRE, "gre"),
	)
	b.udp()
	b.vxlan()
	b.geneve()
	b.gre()
	b.gtpu()
	b.label("tun_eth")
	b.emit(asm.Mov.Imm(asm.R1, kindEthernet))
	b.label("tun_next") // R1: what follows, at rPos
	b.emit(
		asm.StoreMem(rSt, fEt, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, retNext),
	)
	b.leave()
	b.failWith("tun_fail")
}

// udp walks the UDP header and picks the tunnel by the kind fnIP told:
// GENEVE, GTP-U, MPLS over UDP (whose label stack fnSeg walks at the next
// depth), or VXLAN, which follows.
func (b *builder) udp() {
	b.read(8, "tun_fail")
	b.loadBE16(asm.R1, sHdr+4)
	b.emit(
		asm.Add.Imm(rPos, 8),
		asm.JLT.Imm(asm.R1, 8, "udp_len"),
		asm.Add.Imm(asm.R1, -8), // the length from the header's end
	)
	b.cutTo(asm.R1, "udp_len")
	b.emit(
		asm.LoadMem(asm.R2, asm.RFP, sProto, asm.DWord),
		asm.JEq.Imm(asm.R2, retGENEVE, "geneve"),
		asm.JEq.Imm(asm.R2, retGTPU, "gtpu"),
		asm.Mov.Imm(asm.R1, etMPLS), // MPLS over UDP: a label stack follows
		asm.JEq.Imm(asm.R2, retMPLS, "tun_next"),
	)
}

// vxlan follows udp.
func (b *builder) vxlan() {
	b.read(8, "tun_fail")
	b.emit(
		asm.LoadMem(asm.R1, asm.RFP, sHdr, asm.Byte),
		asm.And.Imm(asm.R1, 0x08), // I: the VNI is valid
		asm.JEq.Imm(asm.R1, 0, "tun_fail"),
		asm.Add.Imm(rPos, 8),
		asm.Ja.Label("tun_eth"),
	)
}

func (b *builder) geneve() {
	b.label("geneve")
	b.read(8, "tun_fail")
	b.emit(
		asm.LoadMem(asm.R2, asm.RFP, sHdr, asm.Byte),
		asm.Mov.Reg(asm.R1, asm.R2),
		asm.RSh.Imm(asm.R1, 6),
		asm.JNE.Imm(asm.R1, 0, "tun_fail"), // version
		asm.And.Imm(asm.R2, 0x3f),
		asm.LSh.Imm(asm.R2, 2),
		asm.Add.Imm(asm.R2, 8), // header and options
	)
	b.needReg(asm.R2, "tun_fail")
	b.loadBE16(asm.R1, sHdr+2)
	b.emit(
		asm.Add.Reg(rPos, asm.R2),
		asm.JEq.Imm(asm.R1, etTEB, "tun_eth"),
		asm.Ja.Label("tun_next"),
	)
}

// GRE flags (the first 16 bits).
const (
	greChecksum = 0x8000
	greRouting  = 0x4000
	greKey      = 0x2000
	greSeq      = 0x1000
	greVersion  = 0x0007
)

func (b *builder) gre() {
	b.label("gre")
	b.read(4, "tun_fail")
	b.loadBE16(asm.R3, sHdr) // flags, kept to the ERSPAN test
	b.emit(
		asm.Mov.Reg(asm.R1, asm.R3),
		asm.And.Imm(asm.R1, greRouting|greVersion),
		asm.JNE.Imm(asm.R1, 0, "tun_fail"),
		asm.Mov.Imm(asm.R2, 4),
	)
	for i, f := range []int32{greChecksum, greKey, greSeq} {
		skip := fmt.Sprintf("gre_f%d", i)
		b.emit(
			asm.Mov.Reg(asm.R1, asm.R3),
			asm.And.Imm(asm.R1, f),
			asm.JEq.Imm(asm.R1, 0, skip),
			asm.Add.Imm(asm.R2, 4),
		)
		b.label(skip)
	}
	b.needReg(asm.R2, "tun_fail")
	b.loadBE16(asm.R1, sHdr+2)
	b.emit(
		asm.Add.Reg(rPos, asm.R2),
		asm.JEq.Imm(asm.R1, etTEB, "tun_eth"),
		asm.JEq.Imm(asm.R1, etERSPAN3, "erspan3"),
		asm.JEq.Imm(asm.R1, etCMD, "gre_cmd"),
		asm.JNE.Imm(asm.R1, etERSPAN2, "tun_next"),
		asm.And.Imm(asm.R3, greSeq),
		asm.JNE.Imm(asm.R3, 0, "erspan2"),
	)
	// ERSPAN type I: the mirrored frame follows.
	b.encap()
	b.emit(asm.Ja.Label("tun_eth"))
	b.label("erspan2")
	b.need(8, "tun_fail")
	b.loadBytes(rPos, 0, sHdr, 1, "tun_fail")
	b.hiNibble(asm.R1, sHdr)
	b.emit(
		asm.JNE.Imm(asm.R1, 1, "tun_fail"), // version
		asm.Add.Imm(rPos, 8),
	)
	b.encap()
	b.emit(asm.Ja.Label("tun_eth"))
	// Cisco MetaData in its GRE form: the EtherType of what follows, then
	// version, length, option and tag; another CMD header after it is not
	// walked (user space: not IP).
	b.label("gre_cmd")
	b.read(8, "tun_fail")
	b.encap()
	b.loadBE16(asm.R1, sHdr)
	b.emit(
		asm.Add.Imm(rPos, 8),
		asm.JEq.Imm(asm.R1, etTEB, "tun_eth"),
		asm.JEq.Imm(asm.R1, etCMD, "tun_fail"),
		asm.Ja.Label("tun_next"),
	)
	b.label("erspan3")
	b.read(12, "tun_fail")
	b.hiNibble(asm.R1, sHdr)
	b.emit(
		asm.JNE.Imm(asm.R1, 2, "tun_fail"), // version
		asm.Mov.Imm(asm.R2, 12),
		asm.LoadMem(asm.R1, asm.RFP, sHdr+11, asm.Byte),
		asm.And.Imm(asm.R1, 1), // O: the platform sub-header follows
		asm.JEq.Imm(asm.R1, 0, "erspan3_len"),
		asm.Add.Imm(asm.R2, 8),
	)
	b.label("erspan3_len")
	b.needReg(asm.R2, "tun_fail")
	b.emit(
		asm.LoadMem(asm.R1, asm.RFP, sHdr+10, asm.Byte),
		asm.And.Imm(asm.R1, 0x1f<<2), // the frame type: 0 is Ethernet
		asm.JNE.Imm(asm.R1, 0, "tun_fail"),
		asm.Add.Reg(rPos, asm.R2),
	)
	b.encap()
	b.emit(asm.Ja.Label("tun_eth"))
}

// gtpu walks a GTP-U header. Its end (8 + the length field), message type
// and header length live in the function's stack across the loads of the
// extension headers.
func (b *builder) gtpu() {
	b.label("gtpu")
	b.read(8, "tun_fail")
	b.emit(
		asm.LoadMem(asm.R1, asm.RFP, sHdr, asm.Byte),
		asm.Mov.Reg(asm.R2, asm.R1),
		asm.RSh.Imm(asm.R2, 5),
		asm.JNE.Imm(asm.R2, 1, "tun_fail"), // version 1
		asm.Mov.Reg(asm.R2, asm.R1),
		asm.And.Imm(asm.R2, 0x10),
		asm.JEq.Imm(asm.R2, 0, "tun_fail"), // protocol type GTP
		asm.LoadMem(asm.R2, asm.RFP, sHdr+1, asm.Byte),
		asm.StoreMem(asm.RFP, sAux2, asm.R2, asm.DWord),
	)
	b.loadBE16(asm.R2, sHdr+2)
	b.emit(
		asm.Add.Imm(asm.R2, 8),
		asm.StoreMem(asm.RFP, sAux, asm.R2, asm.DWord),
		asm.Mov.Imm(asm.R2, 8),
		asm.StoreMem(asm.RFP, sAux3, asm.R2, asm.DWord),
		asm.And.Imm(asm.R1, 0x07), // E, S or PN: the optional fields are there
		asm.JEq.Imm(asm.R1, 0, "gtpu_end"),
		asm.Mov.Imm(asm.R2, 12),
		asm.StoreMem(asm.RFP, sAux3, asm.R2, asm.DWord),
	)
	b.need(12, "tun_fail")
	b.loadBytes(rPos, 11, sHdr, 1, "tun_fail")
	for n := 0; n <= maxGTPUExtHeaders; n++ {
		// R1: the next extension header's type; sAux3: the length so far.
		b.emit(
			asm.LoadMem(asm.R1, asm.RFP, sHdr, asm.Byte),
			asm.JEq.Imm(asm.R1, 0, "gtpu_end"),
		)
		if n == maxGTPUExtHeaders {
			b.emit(asm.Ja.Label("tun_fail"))
			break
		}
		// The extension's length in 4-byte units, which must be there, be
		// non-zero and fit; its last byte is the next type.
		b.emit(
			asm.LoadMem(asm.R2, asm.RFP, sAux3, asm.DWord),
			asm.Add.Reg(asm.R2, rPos),
			asm.JGE.Reg(asm.R2, rLim, "tun_fail"),
		)
		b.loadBytes(asm.R2, 0, sHdr, 1, "tun_fail")
		b.emit(
			asm.LoadMem(asm.R1, asm.RFP, sHdr, asm.Byte),
			asm.JEq.Imm(asm.R1, 0, "tun_fail"),
			asm.LSh.Imm(asm.R1, 2),
			asm.LoadMem(asm.R2, asm.RFP, sAux3, asm.DWord),
			asm.Add.Reg(asm.R2, asm.R1),
			asm.StoreMem(asm.RFP, sAux3, asm.R2, asm.DWord),
		)
		b.needReg(asm.R2, "tun_fail")
		b.emit(asm.Add.Reg(asm.R2, rPos))
		b.loadBytes(asm.R2, -1, sHdr, 1, "tun_fail")
	}
	b.label("gtpu_end")
	// The length field must cover the header; it bounds the payload.
	b.emit(
		asm.LoadMem(asm.R1, asm.RFP, sAux, asm.DWord),
		asm.LoadMem(asm.R2, asm.RFP, sAux3, asm.DWord),
		asm.JLT.Reg(asm.R1, asm.R2, "tun_fail"),
	)
	b.cutTo(asm.R1, "gtpu_cut")
	b.emit(
		asm.LoadMem(asm.R1, asm.RFP, sAux2, asm.DWord),
		asm.JNE.Imm(asm.R1, 0xff, "tun_fail"), // a G-PDU only
		asm.LoadMem(asm.R2, asm.RFP, sAux3, asm.DWord),
		asm.Add.Reg(rPos, asm.R2),
	)
	b.read(1, "tun_fail")
	b.hiNibble(asm.R2, sHdr)
	b.emit(
		asm.Mov.Imm(asm.R1, etIPv4),
		asm.JEq.Imm(asm.R2, 4, "tun_next"),
		asm.Mov.Imm(asm.R1, etIPv6),
		asm.JEq.Imm(asm.R2, 6, "tun_next"),
		asm.Ja.Label("tun_fail"),
	)
}
