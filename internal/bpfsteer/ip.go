package bpfsteer

import (
	"fmt"

	"github.com/cilium/ebpf/asm"

	"github.com/rpsgo/rps/hash"
)

// ipFunc emits fnIP: the IP header at fOff, of the version in R3 (4 or 6),
// checked as user space checks it, its addresses and, when the hash types
// say so, its ports written to the tuple, fTLen set. It returns retFail
// for an unusable header, retHashed for a packet that is complete, and,
// with Tunnels, retIPIP4, retIPIP6, retGRE, retVXLAN, retGENEVE, retGTPU or retMPLS
// for a tunnel, with fOff at the transport header and fEnd at the packet's end.
// A fragment is complete: never a tunnel.
func (b *builder) ipFunc() {
	b.enter(fnIP)
	b.emit(asm.JEq.Imm(asm.R3, 6, "ip6"))
	b.ipv4()
	b.ipv6()
	b.transport(4, hash.IPv4Tuple2Len, b.types.Has(hash.TypeTCPIPv4), b.types.Has(hash.TypeUDPIPv4))
	b.transport(6, hash.IPv6Tuple2Len, b.types.Has(hash.TypeTCPIPv6), b.types.Has(hash.TypeUDPIPv6))
	b.label("ip_done")
	b.emit(
		asm.Mov.Imm(asm.R0, retHashed),
		asm.Return(),
	)
	if b.opts.Tunnels {
		for _, t := range []struct {
			label string
			ret   int32
		}{{"ip_ipip4", retIPIP4}, {"ip_ipip6", retIPIP6}, {"ip_gre", retGRE},
			{"ip_vxlan", retVXLAN}, {"ip_geneve", retGENEVE}, {"ip_gtpu", retGTPU}, {"ip_mplsudp", retMPLS}} {
			b.label(t.label)
			b.emit(asm.Mov.Imm(asm.R0, t.ret))
			if t.ret != retMPLS {
				b.emit(asm.Ja.Label("ip_tunnel"))
			}
		}
		b.label("ip_tunnel")
		if b.follow { // a first fragment is never opened
			b.emit(
				asm.LoadMem(asm.R1, rSt, fFrag, asm.Word),
				asm.JNE.Imm(asm.R1, fragNone, "ip_done"),
			)
		}
		b.leave()
	}
	b.failWith("ip_fail")
}

// twoTuple makes the tuple a 2-tuple of family n (its length, 8 or 32):
// fTLen and fFam n, the ports zero. It uses R1.
func (b *builder) twoTuple(n int32) {
	b.emit(
		asm.Mov.Imm(asm.R1, n),
		asm.StoreMem(rSt, fTLen, asm.R1, asm.DWord),
		asm.StoreMem(rSt, fFam, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(rSt, fTuple+int16(n), asm.R1, asm.Word),
	)
}

// fragment is a fragment's end: its n-byte 2-tuple, complete.
func (b *builder) fragment(n int32) {
	b.twoTuple(n)
	b.emit(asm.Ja.Label("ip_done"))
}

// ipv4 checks the IPv4 header as the user-space classifier does, copies
// the addresses into the tuple, and finds the transport header and the
// packet's end (the smaller of the total length and rLim; rLim for a
// total length of zero).
func (b *builder) ipv4() {
	b.read(20, "ip_fail")
	b.emit(
		// version
		asm.LoadMem(asm.R1, asm.RFP, sHdr, asm.Byte),
		asm.Mov.Reg(asm.R2, asm.R1),
		asm.RSh.Imm(asm.R2, 4),
		asm.JNE.Imm(asm.R2, 4, "ip_fail"),
		// R1 = header length, at least 20 and within the packet
		asm.And.Imm(asm.R1, 0x0f),
		asm.LSh.Imm(asm.R1, 2),
		asm.JLT.Imm(asm.R1, 20, "ip_fail"),
		asm.Mov.Reg(asm.R2, rLim),
		asm.Sub.Reg(asm.R2, rPos), // R2 = bytes from the IP header to the end
		asm.JGT.Reg(asm.R1, asm.R2, "ip_fail"),
	)
	// R3 = total length, at least the header length; zero (BIG TCP) is
	// what is left of the packet
	b.loadBE16(asm.R3, sHdr+2)
	b.emit(
		asm.JNE.Imm(asm.R3, 0, "v4_tl"),
		asm.Mov.Reg(asm.R3, asm.R2),
	)
	b.label("v4_tl")
	b.emit(
		asm.JLT.Reg(asm.R3, asm.R1, "ip_fail"),
		// addresses
		asm.LoadMem(asm.R4, asm.RFP, sHdr+12, asm.Word),
		asm.StoreMem(rSt, fTuple, asm.R4, asm.Word),
		asm.LoadMem(asm.R4, asm.RFP, sHdr+16, asm.Word),
		asm.StoreMem(rSt, fTuple+4, asm.R4, asm.Word),
	)
	// a fragment: addresses only (with FollowFragments, but a first one)
	b.loadBE16(asm.R4, sHdr+6)
	b.emit(
		asm.And.Imm(asm.R4, 0x3fff),
		asm.JNE.Imm(asm.R4, 0, "v4_frag"),
	)
	b.label("v4_whole")
	b.emit(
		// the packet ends at min(total length, rLim)
		asm.JLE.Reg(asm.R3, asm.R2, "v4_end"),
		asm.Mov.Reg(asm.R3, asm.R2),
	)
	b.label("v4_end")
	b.emit(
		asm.Mov.Reg(rLim, rPos),
		asm.Add.Reg(rLim, asm.R3),
		asm.Add.Reg(rPos, asm.R1),
		asm.LoadMem(asm.R5, asm.RFP, sHdr+9, asm.Byte),
		asm.Ja.Label("l4_4"),
	)
	b.label("v4_frag")
	if b.follow {
		// The datagram's key: addresses, identification, protocol.
		for _, f := range []struct {
			from, to int16
			size     asm.Size
		}{{sHdr + 12, fFKey, asm.Word}, {sHdr + 16, fFKey + 16, asm.Word},
			{sHdr + 4, fFKey + fragKeyID, asm.Half}, {sHdr + 9, fFKey + fragKeyProto, asm.Byte}} {
			b.emit(
				asm.LoadMem(asm.R0, asm.RFP, f.from, f.size),
				asm.StoreMem(rSt, f.to, asm.R0, f.size),
			)
		}
		b.emit(
			asm.StoreImm(rSt, fFKey+fragKeyFam, 4, asm.Byte),
			asm.StoreImm(rSt, fFrag, fragFirst, asm.Word),
			asm.And.Imm(asm.R4, 0x1fff), // the offset: zero in a first fragment
			asm.JEq.Imm(asm.R4, 0, "v4_whole"),
			asm.StoreImm(rSt, fFrag, fragLater, asm.Word),
		)
	}
	b.fragment(hash.IPv4Tuple2Len)
}

// ipv6 checks the IPv6 header, copies the addresses into the tuple and
// walks the extension headers; a real fragment gets a 2-tuple.
func (b *builder) ipv6() {
	b.label("ip6")
	b.read(40, "ip_fail")
	b.hiNibble(asm.R1, sHdr)
	b.emit(asm.JNE.Imm(asm.R1, 6, "ip_fail"))
	for i := int16(0); i < 32; i += 8 {
		b.emit(
			asm.LoadMem(asm.R1, asm.RFP, sHdr+8+i, asm.DWord),
			asm.StoreMem(rSt, fTuple+i, asm.R1, asm.DWord),
		)
	}
	// The packet ends at 40 + payload length when that is non-zero and
	// shorter than what is left.
	b.loadBE16(asm.R3, sHdr+4)
	b.emit(
		asm.JEq.Imm(asm.R3, 0, "v6_end"),
		asm.Add.Imm(asm.R3, 40),
	)
	b.cutTo(asm.R3, "v6_end")
	b.emit(
		asm.LoadMem(asm.R5, asm.RFP, sHdr+6, asm.Byte),
		asm.Add.Imm(rPos, 40),
	)
	// R5 is the next header; each load below clobbers it, and it is read
	// again from the header just loaded. With FollowFragments a header
	// that cannot be walked after a first fragment's fragment header
	// ends the walk as that header would have without FollowFragments
	// ("ext_fail"): the packet is a fragment, its 2-tuple hashed.
	fail := "ip_fail"
	if b.follow {
		fail = "ext_fail"
	}
	for n := 0; n <= maxExtHeaders; n++ {
		opt, ah, frag := fmt.Sprintf("ext%d_opt", n), fmt.Sprintf("ext%d_ah", n), fmt.Sprintf("ext%d_frag", n)
		next := fmt.Sprintf("ext%d", n+1)
		if n == maxExtHeaders {
			// one header too many: the chain is too long
			opt, ah, frag = fail, fail, fail
		}
		b.emit(
			asm.JEq.Imm(asm.R5, 0, opt),
			asm.JEq.Imm(asm.R5, 43, opt),
			asm.JEq.Imm(asm.R5, 60, opt),
			asm.JEq.Imm(asm.R5, 51, ah),
			asm.JEq.Imm(asm.R5, 44, frag),
			asm.Ja.Label("l4_6"),
		)
		if n == maxExtHeaders {
			break
		}
		// hop-by-hop, routing, destination options: (len+1)*8 bytes
		// AH: (len+2)*4 bytes; both need their first two bytes in the packet
		for _, isAH := range []bool{false, true} {
			if isAH {
				b.label(ah)
			} else {
				b.label(opt)
			}
			b.read(2, fail)
			b.emit(asm.LoadMem(asm.R1, asm.RFP, sHdr+1, asm.Byte))
			if isAH {
				b.emit(asm.Add.Imm(asm.R1, 2), asm.LSh.Imm(asm.R1, 2))
			} else {
				b.emit(asm.Add.Imm(asm.R1, 1), asm.LSh.Imm(asm.R1, 3))
			}
			b.needReg(asm.R1, fail)
			b.emit(
				asm.LoadMem(asm.R5, asm.RFP, sHdr, asm.Byte),
				asm.Add.Reg(rPos, asm.R1),
				asm.Ja.Label(next),
			)
		}
		// fragment header: 8 bytes; offset or M set is a real fragment
		b.label(frag)
		b.read(8, fail)
		b.loadBE16(asm.R1, sHdr+2)
		b.emit(asm.And.Imm(asm.R1, 0xfff9))
		if b.follow {
			b.v6FragKey(frag + "_walk")
		} else {
			b.emit(asm.JNE.Imm(asm.R1, 0, "v6_frag"))
		}
		b.label(frag + "_walk")
		b.emit(
			asm.LoadMem(asm.R5, asm.RFP, sHdr, asm.Byte),
			asm.Add.Imm(rPos, 8),
		)
		b.label(next)
	}
	if b.follow {
		b.label("ext_fail")
		b.emit(
			asm.LoadMem(asm.R0, rSt, fFrag, asm.Word),
			asm.JEq.Imm(asm.R0, fragNone, "ip_fail"),
		)
	}
	b.label("v6_frag")
	b.fragment(hash.IPv6Tuple2Len)
}

// v6FragKey is FollowFragments' fragment header (its offset and M flag in
// R1, its 8 bytes at sHdr): an atomic one is walked through (walk); a
// real one after a first fragment's ends the walk ("v6_frag"), as do
// later ones; else it writes the datagram's key and kind, and a first
// fragment is walked through to its transport header.
func (b *builder) v6FragKey(walk string) {
	b.emit(
		asm.JEq.Imm(asm.R1, 0, walk),
		asm.LoadMem(asm.R0, rSt, fFrag, asm.Word),
		asm.JNE.Imm(asm.R0, fragNone, "v6_frag"),
	)
	for i := int16(0); i < 32; i += 8 { // the addresses, from the tuple
		b.emit(
			asm.LoadMem(asm.R0, rSt, fTuple+i, asm.DWord),
			asm.StoreMem(rSt, fFKey+i, asm.R0, asm.DWord),
		)
	}
	b.emit(
		asm.LoadMem(asm.R0, asm.RFP, sHdr+4, asm.Word),
		asm.StoreMem(rSt, fFKey+fragKeyID, asm.R0, asm.Word),
		asm.StoreImm(rSt, fFKey+fragKeyFam, 6, asm.Byte),
		asm.StoreImm(rSt, fFrag, fragFirst, asm.Word),
		asm.And.Imm(asm.R1, 0xfff8), // the offset: zero in a first fragment
		asm.JEq.Imm(asm.R1, 0, walk),
		asm.StoreImm(rSt, fFrag, fragLater, asm.Word),
		asm.Ja.Label("v6_frag"),
	)
}

// transport finishes the tuple of an IP header of version v whose
// 2-tuple is n bytes: the protocol in R5, rPos at the transport header,
// rLim at the packet's end. TCP, UDP and SCTP have their ports read when
// four bytes of transport header lie within the packet (user space reads
// them whatever the hash types, for the tunnel ports); TCP's go into the
// tuple when tcp4 says so, UDP's and SCTP's when udp4 does. With Tunnels,
// UDP to a tunnel port and IP protocols 4, 41 and 47 are tunnels.
func (b *builder) transport(v int, n int32, tcp4, udp4 bool) {
	p := fmt.Sprintf("l4_%d", v)
	b.label(p)
	b.emit(asm.StoreMem(asm.RFP, sProto, asm.R5, asm.DWord))
	b.twoTuple(n)
	b.emit(
		asm.JEq.Imm(asm.R5, protoTCP, p+"_ports"),
		asm.JEq.Imm(asm.R5, protoUDP, p+"_ports"),
		asm.JEq.Imm(asm.R5, protoSCTP, p+"_ports"),
	)
	if b.opts.Tunnels {
		b.emit(
			asm.JEq.Imm(asm.R5, protoIPIP, "ip_ipip4"),
			asm.JEq.Imm(asm.R5, protoIPv6, "ip_ipip6"),
			asm.JEq.Imm(asm.R5, protoGRE, "ip_gre"),
		)
	}
	b.emit(asm.Ja.Label("ip_done"))
	b.label(p + "_ports")
	b.need(4, "ip_done") // truncated: 2-tuple, and no tunnel
	b.loadBytes(rPos, 0, sPorts, 4, "ip_done")
	b.emit(asm.LoadMem(asm.R5, asm.RFP, sProto, asm.DWord))
	if tcp4 {
		b.emit(asm.JEq.Imm(asm.R5, protoTCP, p+"_4tuple"))
	}
	if udp4 {
		b.emit(
			asm.JEq.Imm(asm.R5, protoUDP, p+"_4tuple"),
			asm.JEq.Imm(asm.R5, protoSCTP, p+"_4tuple"),
		)
	}
	if tcp4 || udp4 {
		b.emit(asm.Ja.Label(p + "_udp"))
		b.label(p + "_4tuple")
		b.emit(
			asm.LoadMem(asm.R1, asm.RFP, sPorts, asm.Word),
			asm.StoreMem(rSt, fTuple+int16(n), asm.R1, asm.Word),
			asm.Mov.Imm(asm.R1, n+4),
			asm.StoreMem(rSt, fTLen, asm.R1, asm.DWord),
		)
		b.label(p + "_udp")
	}
	if !b.opts.Tunnels {
		b.emit(asm.Ja.Label("ip_done"))
		return
	}
	b.emit(asm.JNE.Imm(asm.R5, protoUDP, "ip_done"))
	// The kind, not the port, goes on: a port matched is a value the
	// verifier would follow the tunnel with once per port.
	b.loadBE16(asm.R1, sPorts+2)
	b.emit(
		asm.JEq.Imm(asm.R1, GENEVEPort, "ip_geneve"),
		asm.JEq.Imm(asm.R1, GTPUPort, "ip_gtpu"),
		asm.JEq.Imm(asm.R1, MPLSUDPPort, "ip_mplsudp"),
	)
	for _, port := range b.opts.vxlanPorts() {
		b.emit(asm.JEq.Imm(asm.R1, int32(port), "ip_vxlan"))
	}
	b.emit(asm.Ja.Label("ip_done"))
}
