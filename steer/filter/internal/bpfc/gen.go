package bpfc

import "encoding/binary"

// This file builds the tests of each primitive in the order and shape
// libpcap's gencode.c gives them (which checks come first, at which
// offsets, joined how), so that a program has its outcome on every frame.

// EtherTypes and LLC SAPs.
const (
	ethIP       = 0x0800
	ethARP      = 0x0806
	ethRARP     = 0x8035
	ethIPv6     = 0x86dd
	ethMOPDL    = 0x6001
	ethMOPRC    = 0x6002
	ethDN       = 0x6003
	ethLAT      = 0x6004
	ethSCA      = 0x6007
	ethATALK    = 0x809b
	ethAARP     = 0x80f3
	eth8021Q    = 0x8100
	ethIPX      = 0x8137
	ethMPLS     = 0x8847
	eth8021AD   = 0x88a8
	ethLoopback = 0x9000
	eth8021QinQ = 0x9100

	sapIP      = 0x06
	sap8021D   = 0x42
	sapSNAP    = 0xaa
	sapIPX     = 0xe0
	sapNetBEUI = 0xf0
	sapISONS   = 0xfe

	protoICMP   = 1
	protoIGMP   = 2
	protoTCP    = 6
	protoIGRP   = 9
	protoUDP    = 17
	protoFrag   = 44
	protoESP    = 50
	protoAH     = 51
	protoICMPv6 = 58
	protoPIM    = 103
	protoVRRP   = 112
	protoSCTP   = 132
	protoUndef  = -1

	isoCLNP = 0x81
	isoESIS = 0x82
	isoISIS = 0x83

	isisL1LANIIH = 15
	isisL2LANIIH = 16
	isisPTPIIH   = 17
	isisL1LSP    = 18
	isisL2LSP    = 20
	isisL1CSNP   = 24
	isisL2CSNP   = 25
	isisL1PSNP   = 26
	isisL2PSNP   = 27
)

// Where an offset is counted from (libpcap's e_offrel).
const (
	orPacket = iota
	orLinkHdr
	orLLC
	orPrevMPLS
	orLinkPl
	orLinkPlNosnap
	orLinkType
	orTranIPv4
	orTranIPv6
)

// arth is an arithmetic value: what it computes, the checks libpcap makes
// before it (tcp[0] only on the first fragment of IPv4 TCP), and the
// first instruction of its code when that loads a constant (libpcap
// refuses a division whose divisor's code starts with ld #0).
type arth struct {
	v        *val
	checks   *cond
	firstImm bool
	firstK   uint32
}

func (p *parser) loadi(k uint32) arth {
	return arth{v: p.vs.konst(k), firstImm: true, firstK: k}
}

func (p *parser) arthOp(op uint16, a0, a1 arth) (arth, error) {
	switch op {
	case aluDIV:
		if a1.firstImm && a1.firstK == 0 {
			return a0, exprErrorf("division by zero")
		}
	case aluMOD:
		if a1.firstImm && a1.firstK == 0 {
			return a0, exprErrorf("modulus by zero")
		}
	case aluLSH, aluRSH:
		if a1.firstImm && a1.firstK > 31 {
			return a0, exprErrorf("shift by more than 31 bits")
		}
	}
	// libpcap keeps the checks of the left operand only.
	return arth{v: p.vs.aluX(op, a0.v, a1.v), checks: a0.checks, firstImm: a0.firstImm, firstK: a0.firstK}, nil
}

func (p *parser) arthNeg(a arth) arth {
	a.v = p.vs.neg(a.v)
	return a
}

// relation is "a0 op a1" (reversed: its negation), after the checks of
// both operands.
func (p *parser) relation(code uint16, reversed bool, a0, a1 arth) *cond {
	var t test
	if a1.v.isConst() {
		t = test{op: clsJMP | code | srcK, a: a0.v, k: a1.v.k}
	} else {
		t = test{op: clsJMP | code | srcX, a: a0.v, x: a1.v}
	}
	if code == jmpJEQ {
		t.a1 = p.vs.aluX(aluSUB, a0.v, a1.v)
	}
	c := &cond{kind: cTest, t: t}
	if reversed {
		c = not(c)
	}
	checks := a0.checks
	if checks == nil {
		checks = a1.checks
	} else if a1.checks != nil {
		checks = and(checks, a1.checks)
	}
	if checks != nil {
		c = and(checks, c)
	}
	return c
}

func (p *parser) testK(op uint16, a *val, k uint32) *cond {
	return &cond{kind: cTest, t: test{op: clsJMP | op | srcK, a: a, k: k}}
}

// load returns the value at off from rel, as libpcap's gen_load_a.
func (p *parser) loadRel(rel int, off uint32, size uint16) *val {
	o := &p.off
	switch rel {
	case orLLC:
		return p.absrel(o.linkpl+off, size)
	case orPrevMPLS:
		return p.absrel(o.linkpl+o.nl-4+off, size)
	case orLinkPl:
		return p.absrel(o.linkpl+o.nl+off, size)
	case orLinkPlNosnap:
		return p.absrel(o.linkpl+o.nlNosnap+off, size)
	case orLinkType:
		return p.absrel(o.linktype+off, size)
	case orTranIPv4:
		return p.vs.ind(size, o.linkpl+o.nl+off, p.iphdrlen())
	case orTranIPv6:
		return p.absrel(o.linkpl+o.nl+40+off, size)
	}
	return p.vs.abs(size, off) // orPacket, orLinkHdr
}

// absrel is the value at off from a link-layer offset with its variable
// part, if any.
func (p *parser) absrel(off uint32, size uint16) *val {
	if p.off.variable {
		return p.vs.ind(size, off, p.vs.variable())
	}
	return p.vs.abs(size, off)
}

// iphdrlen is what libpcap puts in X to reach the IPv4 payload: the IPv4
// header length, plus the variable part of the link-layer offset.
func (p *parser) iphdrlen() *val {
	o := &p.off
	if o.variable {
		vr := p.vs.variable()
		v := p.vs.ind(szB, o.linkpl+o.nl, vr)
		v = p.vs.aluK(aluAND, v, 0xf)
		v = p.vs.aluK(aluLSH, v, 2)
		return p.vs.aluX(aluADD, v, vr)
	}
	return p.vs.msh(o.linkpl + o.nl)
}

// ncmp compares the field at off from rel, masked, with v (libpcap's
// gen_ncmp); reverse negates a > or >= test.
func (p *parser) ncmp(rel int, off uint32, size uint16, mask uint32, jtype uint16, reverse bool, v uint32) *cond {
	load := p.loadRel(rel, off, size)
	if mask != 0xffffffff {
		m := p.vs.aluK(aluAND, load, mask)
		if jtype == jmpJEQ && v == 0 {
			// libpcap's first optimizer pass makes "and #m; jeq #0"
			// a jset #m with its branches swapped.
			return &cond{kind: cTest, t: test{op: clsJMP | jmpJSET | srcK, a: load, k: mask, a1: m, swap: true}}
		}
		load = m
	}
	c := p.testK(jtype, load, v)
	if reverse && (jtype == jmpJGT || jtype == jmpJGE) {
		c = not(c)
	}
	return c
}

func (p *parser) cmp(rel int, off uint32, size uint16, v uint32) *cond {
	return p.ncmp(rel, off, size, 0xffffffff, jmpJEQ, false, v)
}
func (p *parser) cmpGT(rel int, off uint32, size uint16, v uint32) *cond {
	return p.ncmp(rel, off, size, 0xffffffff, jmpJGT, false, v)
}
func (p *parser) cmpGE(rel int, off uint32, size uint16, v uint32) *cond {
	return p.ncmp(rel, off, size, 0xffffffff, jmpJGE, false, v)
}
func (p *parser) cmpLT(rel int, off uint32, size uint16, v uint32) *cond {
	return p.ncmp(rel, off, size, 0xffffffff, jmpJGE, true, v)
}
func (p *parser) cmpLE(rel int, off uint32, size uint16, v uint32) *cond {
	return p.ncmp(rel, off, size, 0xffffffff, jmpJGT, true, v)
}
func (p *parser) mcmp(rel int, off uint32, size uint16, v, mask uint32) *cond {
	return p.ncmp(rel, off, size, mask, jmpJEQ, false, v)
}

// bcmp compares the bytes at off with b, from the last word back.
func (p *parser) bcmp(rel int, off uint32, b []byte) *cond {
	var c *cond
	add := func(t *cond) {
		if c == nil {
			c = t
		} else {
			c = and(c, t)
		}
	}
	size := uint32(len(b))
	for size >= 4 {
		add(p.cmp(rel, off+size-4, szW, binary.BigEndian.Uint32(b[size-4:])))
		size -= 4
	}
	for size >= 2 {
		add(p.cmp(rel, off+size-2, szH, uint32(binary.BigEndian.Uint16(b[size-2:]))))
		size -= 2
	}
	if size > 0 {
		add(p.cmp(rel, off, szB, uint32(b[0])))
	}
	return c
}

func (p *parser) snap(org, ptype uint32) *cond {
	return p.bcmp(orLLC, 0, []byte{sapSNAP, sapSNAP, 0x03, byte(org >> 16), byte(org >> 8), byte(org), byte(ptype >> 8), byte(ptype)})
}

// linktype tests the frame's type field (or the LLC SAP for values of at
// most 1500), or under MPLS the IP version.
func (p *parser) linktype(proto uint32) (*cond, error) {
	if p.off.labels > 0 {
		var version uint32
		switch proto {
		case ethIP:
			version = 0x40
		case ethIPv6:
			version = 0x60
		default:
			return nil, exprErrorf("unsupported protocol over mpls")
		}
		bos := p.mcmp(orLinkPl, 0xfffffffe, szB, 0x01, 0x01) // the bottom of stack bit
		return and(bos, p.mcmp(orLinkPl, 0, szB, version, 0xf0)), nil
	}
	notLen := func() *cond { return not(p.cmpGT(orLinkType, 0, szH, ethermtu)) }
	switch proto {
	case sapISONS, sapIP, sapNetBEUI:
		return and(notLen(), p.cmp(orLLC, 0, szH, proto<<8|proto)), nil
	case sapIPX:
		b1 := or(p.cmp(orLLC, 0, szB, sapIPX), p.cmp(orLLC, 0, szH, 0xffff))
		b1 = or(p.snap(0, ethIPX), b1)
		b1 = and(notLen(), b1)
		return or(p.cmp(orLinkType, 0, szH, ethIPX), b1), nil
	case ethATALK, ethAARP:
		b0 := notLen()
		var b1 *cond
		if proto == ethATALK {
			b1 = p.snap(0x080007, ethATALK)
		} else {
			b1 = p.snap(0, ethAARP)
		}
		b1 = and(b0, b1)
		return or(p.cmp(orLinkType, 0, szH, proto), b1), nil
	}
	if proto <= ethermtu {
		return and(notLen(), p.cmp(orLinkType, 2, szB, proto)), nil
	}
	return p.cmp(orLinkType, 0, szH, proto), nil
}

// eachDir is f(dir), or for "src and dst" ("src or dst", or no
// direction) f(dSrc) and (or) f(dDst).
func eachDir(dir uint8, f func(dir uint8) (*cond, error)) (*cond, error) {
	if dir == dSrc || dir == dDst {
		return f(dir)
	}
	a, err := f(dSrc)
	if err != nil {
		return nil, err
	}
	b, err := f(dDst)
	if err != nil {
		return nil, err
	}
	if dir == dAnd {
		return and(a, b), nil
	}
	return or(a, b), nil
}

// hostop tests an IPv4 address field against addr/mask.
func (p *parser) hostop(addr, mask uint32, dir uint8, proto uint32, srcOff, dstOff uint32) (*cond, error) {
	if dir != dSrc && dir != dDst {
		return eachDir(dir, func(d uint8) (*cond, error) { return p.hostop(addr, mask, d, proto, srcOff, dstOff) })
	}
	off := srcOff
	if dir == dDst {
		off = dstOff
	}
	lt, err := p.linktype(proto)
	if err != nil {
		return nil, err
	}
	return and(lt, p.mcmp(orLinkPl, off, szW, addr, mask)), nil
}

func (p *parser) hostop6(addr, mask [16]byte, dir uint8, srcOff, dstOff uint32) (*cond, error) {
	if dir != dSrc && dir != dDst {
		return eachDir(dir, func(d uint8) (*cond, error) { return p.hostop6(addr, mask, d, srcOff, dstOff) })
	}
	off := srcOff
	if dir == dDst {
		off = dstOff
	}
	word := func(i int) *cond {
		return p.mcmp(orLinkPl, off+uint32(4*i), szW, binary.BigEndian.Uint32(addr[4*i:]), binary.BigEndian.Uint32(mask[4*i:]))
	}
	b := word(3)
	b = and(word(2), b)
	b = and(word(1), b)
	b = and(word(0), b)
	lt, err := p.linktype(ethIPv6)
	if err != nil {
		return nil, err
	}
	return and(lt, b), nil
}

// notImplemented are the protocols for which libpcap says host filtering
// is not implemented.
var notImplemented = map[uint8]string{
	qATALK: "AppleTalk", qLAT: "LAT", qSCA: "SCA", qMOPRC: "MOPRC", qMOPDL: "MOPDL",
	qAARP: "AARP", qISO: "ISO", qIPX: "IPX",
}

func typeName(typ uint8) string {
	if typ == aNet {
		return "net"
	}
	return "host"
}

// host tests an IPv4 address or network in IPv4, ARP and RARP (IPv4 only
// under MPLS), or in the protocol qualified.
func (p *parser) host(addr, mask uint32, proto, dir, typ uint8) (*cond, error) {
	switch proto {
	case qDefault:
		b0, err := p.host(addr, mask, qIP, dir, typ)
		if err != nil || p.off.labels > 0 {
			return b0, err
		}
		b1, err := p.host(addr, mask, qARP, dir, typ)
		if err != nil {
			return nil, err
		}
		b1 = or(b0, b1)
		b0, err = p.host(addr, mask, qRARP, dir, typ)
		if err != nil {
			return nil, err
		}
		return or(b1, b0), nil
	case qIP:
		return p.hostop(addr, mask, dir, ethIP, 12, 16)
	case qARP:
		return p.hostop(addr, mask, dir, ethARP, 14, 24)
	case qRARP:
		return p.hostop(addr, mask, dir, ethRARP, 14, 24)
	case qLink:
		return nil, exprErrorf("link-layer modifier applied to %s", typeName(typ))
	case qDECNET:
		return nil, unsupportedf("decnet %s", typeName(typ))
	case qIPV6:
		return nil, exprErrorf("'ip6' modifier applied to ip host")
	}
	if what, ok := notImplemented[proto]; ok {
		return nil, exprErrorf("%s host filtering not implemented", what)
	}
	return nil, exprErrorf("'%s' modifier applied to %s", protoNames[proto], typeName(typ))
}

func (p *parser) host6(addr, mask [16]byte, proto, dir, typ uint8) (*cond, error) {
	switch proto {
	case qDefault, qIPV6:
		return p.hostop6(addr, mask, dir, 8, 24)
	case qLink:
		return nil, exprErrorf("link-layer modifier applied to ip6 %s", typeName(typ))
	case qATALK:
		return nil, exprErrorf("AppleTalk modifier applied to ip6 %s", typeName(typ))
	}
	return nil, exprErrorf("'%s' modifier applied to ip6 %s", protoNames[proto], typeName(typ))
}

// ehost tests an Ethernet address field.
func (p *parser) ehost(mac []byte, dir uint8) *cond {
	c, _ := eachDir(dir, func(d uint8) (*cond, error) {
		if d == dSrc {
			return p.bcmp(orLinkHdr, 6, mac), nil
		}
		return p.bcmp(orLinkHdr, 0, mac), nil
	})
	return c
}

// ipfrag is true for an IPv4 packet that is not a fragment after the
// first.
func (p *parser) ipfrag() *cond {
	return not(p.testK(jmpJSET, p.loadRel(orLinkPl, 6, szH), 0x1fff))
}

// portsDir tests the source, destination or both ports with atom.
func portsDir(dir uint8, atom func(off uint32) *cond) *cond {
	switch dir {
	case dSrc:
		return atom(0)
	case dDst:
		return atom(2)
	case dAnd:
		return and(atom(0), atom(2))
	}
	return or(atom(0), atom(2))
}

// ipProtos runs op for TCP, UDP and SCTP when proto is protoUndef
// (in libpcap's order), else for proto.
func ipProtos(proto int, op func(uint32) *cond) *cond {
	if proto != protoUndef {
		return op(uint32(proto))
	}
	tmp := op(protoTCP)
	b := or(tmp, op(protoUDP))
	return or(op(protoSCTP), b)
}

// transport tests a field of the transport header, at an offset atom
// gets from portsDir, in IPv4 (proto and not a later fragment) or IPv6
// (proto right after the fixed header), for TCP, UDP and SCTP when proto
// is protoUndef.
func (p *parser) transport(v6 bool, proto int, dir uint8, atom func(rel int, off uint32) *cond) (*cond, error) {
	eth, rel := uint32(ethIP), orTranIPv4
	if v6 {
		eth, rel = ethIPv6, orTranIPv6
	}
	lt, err := p.linktype(eth)
	if err != nil {
		return nil, err
	}
	b := ipProtos(proto, func(pr uint32) *cond {
		var b0 *cond
		if v6 {
			b0 = p.cmp(orLinkPl, 6, szB, pr)
		} else {
			b0 = and(p.cmp(orLinkPl, 9, szB, pr), p.ipfrag())
		}
		return and(b0, portsDir(dir, func(off uint32) *cond { return atom(rel, off) }))
	})
	return and(lt, b), nil
}

// ports is "port" (or "portrange" from lo to hi) in IPv6 or IPv4.
func (p *parser) ports(lo, hi uint32, isRange bool, proto int, dir uint8) (*cond, error) {
	if lo > hi {
		lo, hi = hi, lo
	}
	atom := func(rel int, off uint32) *cond {
		if isRange {
			return and(p.cmpGE(rel, off, szH, lo), p.cmpLE(rel, off, szH, hi))
		}
		return p.cmp(rel, off, szH, lo)
	}
	b4, err := p.transport(false, proto, dir, atom)
	if err != nil {
		return nil, err
	}
	b6, err := p.transport(true, proto, dir, atom)
	if err != nil {
		return nil, err
	}
	return or(b6, b4), nil
}

// proto tests the protocol field of the qualified protocol for v.
func (p *parser) proto(v uint32, proto, dir uint8) (*cond, error) {
	if dir != qDefault {
		return nil, exprErrorf("direction applied to 'proto'")
	}
	switch proto {
	case qDefault:
		b0, err := p.proto(v, qIP, dir)
		if err != nil {
			return nil, err
		}
		b1, err := p.proto(v, qIPV6, dir)
		if err != nil {
			return nil, err
		}
		return or(b0, b1), nil
	case qLink:
		return p.linktype(v)
	case qIP:
		lt, err := p.linktype(ethIP)
		if err != nil {
			return nil, err
		}
		return and(lt, p.cmp(orLinkPl, 9, szB, v)), nil
	case qIPV6:
		lt, err := p.linktype(ethIPv6)
		if err != nil {
			return nil, err
		}
		// Also right after a fragment header.
		b1 := and(p.cmp(orLinkPl, 6, szB, protoFrag), p.cmp(orLinkPl, 40, szB, v))
		b1 = or(p.cmp(orLinkPl, 6, szB, v), b1)
		return and(lt, b1), nil
	case qISO:
		lt, err := p.linktype(sapISONS)
		if err != nil {
			return nil, err
		}
		return and(lt, p.cmp(orLinkPlNosnap, 0, szB, v)), nil
	case qISIS:
		b0, err := p.proto(isoISIS, qISO, qDefault)
		if err != nil {
			return nil, err
		}
		return and(b0, p.cmp(orLinkPlNosnap, 4, szB, v)), nil
	case qARP, qRARP, qLAT, qSCA, qMOPRC, qMOPDL:
		return nil, exprErrorf("%s does not encapsulate another protocol", protoNames[proto])
	case qATALK:
		return nil, exprErrorf("AppleTalk encapsulation is not specifiable")
	case qDECNET:
		return nil, exprErrorf("DECNET encapsulation is not specifiable")
	case qCLNP:
		return nil, exprErrorf("'clnp proto' is not supported")
	}
	return nil, exprErrorf("'%s proto' is bogus", protoNames[proto])
}

// abbrevLink are the protocol names that test the link-layer type.
var abbrevLink = map[uint8]uint32{
	qIP: ethIP, qARP: ethARP, qRARP: ethRARP, qATALK: ethATALK, qAARP: ethAARP, qDECNET: ethDN,
	qSCA: ethSCA, qLAT: ethLAT, qMOPDL: ethMOPDL, qMOPRC: ethMOPRC, qIPV6: ethIPv6, qISO: sapISONS,
	qSTP: sap8021D, qIPX: sapIPX, qNETBEUI: sapNetBEUI,
}

// abbrevProto are the protocol names that test a protocol field: the
// value, and the protocol whose field it is.
var abbrevProto = map[uint8]struct {
	v uint32
	q uint8
}{
	qSCTP: {protoSCTP, qDefault}, qTCP: {protoTCP, qDefault}, qUDP: {protoUDP, qDefault},
	qICMP: {protoICMP, qIP}, qIGMP: {protoIGMP, qIP}, qIGRP: {protoIGRP, qIP}, qPIM: {protoPIM, qDefault},
	qVRRP: {protoVRRP, qIP}, qCARP: {protoVRRP, qIP}, qICMPV6: {protoICMPv6, qIPV6},
	qAH: {protoAH, qDefault}, qESP: {protoESP, qDefault}, qESIS: {isoESIS, qISO}, qISIS: {isoISIS, qISO},
	qCLNP: {isoCLNP, qISO},
}

// abbrevISIS are the IS-IS PDU types of the IS-IS names, in libpcap's
// order.
var abbrevISIS = map[uint8][]uint32{
	qISISL1:   {isisL1LANIIH, isisPTPIIH, isisL1LSP, isisL1CSNP, isisL1PSNP},
	qISISL2:   {isisL2LANIIH, isisPTPIIH, isisL2LSP, isisL2CSNP, isisL2PSNP},
	qISISIIH:  {isisL1LANIIH, isisL2LANIIH, isisPTPIIH},
	qISISLSP:  {isisL1LSP, isisL2LSP},
	qISISSNP:  {isisL1CSNP, isisL2CSNP, isisL1PSNP, isisL2PSNP},
	qISISCSNP: {isisL1CSNP, isisL2CSNP},
	qISISPSNP: {isisL1PSNP, isisL2PSNP},
}

// protoAbbrev is a protocol name alone: "tcp", "ip6", "arp".
func (p *parser) protoAbbrev(proto uint8) (*cond, error) {
	if eth, ok := abbrevLink[proto]; ok {
		return p.linktype(eth)
	}
	if a, ok := abbrevProto[proto]; ok {
		return p.proto(a.v, a.q, qDefault)
	}
	if types, ok := abbrevISIS[proto]; ok {
		var c *cond
		for i, t := range types {
			b, err := p.proto(t, qISIS, qDefault)
			if err != nil {
				return nil, err
			}
			switch i {
			case 0:
				c = b
			case 1:
				c = or(c, b)
			default:
				c = or(b, c)
			}
		}
		return c, nil
	}
	if proto == qLink {
		return nil, exprErrorf("link layer applied in wrong context")
	}
	return nil, exprErrorf("'radio' is not a valid protocol type")
}

// load is proto[idx:size]: the field at idx from the start of the
// protocol's header, after the checks that the frame carries it.
func (p *parser) load(proto uint8, idx arth, size uint32) (arth, error) {
	var sz uint16
	switch size {
	case 1:
		sz = szB
	case 2:
		sz = szH
	case 4:
		sz = szW
	default:
		return idx, exprErrorf("data size must be 1, 2, or 4")
	}
	o := &p.off
	out := arth{checks: idx.checks, firstImm: idx.firstImm, firstK: idx.firstK}
	withIdx := func(b *cond) *cond {
		if idx.checks != nil {
			return and(idx.checks, b)
		}
		return b
	}
	x := idx.v
	switch proto {
	case qLink:
		out.v = p.vs.ind(sz, 0, x)
	case qIP, qARP, qRARP, qATALK, qDECNET, qSCA, qLAT, qMOPRC, qMOPDL, qIPV6:
		if o.variable {
			x = p.vs.aluX(aluADD, x, p.vs.variable())
		}
		out.v = p.vs.ind(sz, o.linkpl+o.nl, x)
		b, err := p.protoAbbrev(proto)
		if err != nil {
			return idx, err
		}
		out.checks = withIdx(b)
	case qSCTP, qTCP, qUDP, qICMP, qIGMP, qIGRP, qPIM, qVRRP, qCARP:
		x = p.vs.aluX(aluADD, x, p.iphdrlen())
		out.v = p.vs.ind(sz, o.linkpl+o.nl, x)
		pb, err := p.protoAbbrev(proto)
		if err != nil {
			return idx, err
		}
		b := withIdx(and(pb, p.ipfrag()))
		ip, err := p.protoAbbrev(qIP)
		if err != nil {
			return idx, err
		}
		out.checks = and(ip, b)
	case qICMPV6:
		ip6, err := p.protoAbbrev(qIPV6)
		if err != nil {
			return idx, err
		}
		b := withIdx(ip6)
		out.checks = and(b, p.cmp(orLinkPl, 6, szB, protoICMPv6))
		if o.variable {
			x = p.vs.aluX(aluADD, x, p.vs.variable())
		}
		out.v = p.vs.ind(sz, o.linkpl+o.nl+40, x)
	case qRADIO:
		return idx, exprErrorf("radio information not present in capture")
	default:
		return idx, exprErrorf("unsupported index operation")
	}
	return out, nil
}

// castTerm is [proto] broadcast or [proto] multicast.
func (p *parser) castTerm(proto uint8, k tokKind) (*cond, error) {
	if k == tBROADCAST {
		switch proto {
		case qDefault, qLink:
			return p.ehost([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, dDst), nil
		case qIP:
			return nil, unsupportedf("ip broadcast (it needs the interface's netmask)")
		}
		return nil, exprErrorf("only link-layer/IP broadcast filters supported")
	}
	switch proto {
	case qDefault, qLink:
		return p.testK(jmpJSET, p.loadRel(orLinkHdr, 0, szB), 1), nil
	case qIP:
		lt, err := p.linktype(ethIP)
		if err != nil {
			return nil, err
		}
		return and(lt, p.cmpGE(orLinkPl, 16, szB, 224)), nil
	case qIPV6:
		lt, err := p.linktype(ethIPv6)
		if err != nil {
			return nil, err
		}
		return and(lt, p.cmp(orLinkPl, 24, szB, 255)), nil
	}
	return nil, exprErrorf("link-layer multicast filters supported only on ethernet/FDDI/token ring/ARCNET/802.11/ATM LANE/Fibre Channel")
}

// byteop is "byte IDX OP VAL", IDX counted from the link-layer header.
func (p *parser) byteop() (*cond, error) {
	p.next()
	if p.peek() != tNUM {
		return nil, p.unexpected()
	}
	idx := p.next().num
	op := p.next()
	if p.peek() != tNUM {
		return nil, p.unexpected()
	}
	v := p.next().num
	switch op.kind {
	case tEQ:
		return p.cmp(orLinkHdr, idx, szB, v), nil
	case tLT:
		return p.cmpLT(orLinkHdr, idx, szB, v), nil
	case tGT:
		return p.cmpGT(orLinkHdr, idx, szB, v), nil
	case tAmp, tPipe:
		return nil, unsupportedf("byte %s (libpcap's program for it loads no byte)", op.text)
	}
	return nil, syntaxErrorf("syntax error at %s", op)
}

// vlan is "vlan [ID]": an 802.1Q, 802.1ad or QinQ tag (with that ID);
// every primitive after it looks past one more tag. In a live program the
// first one also matches a tag the kernel took out of the frame.
func (p *parser) vlan(vid uint32, has bool) (*cond, error) {
	if p.off.labels > 0 {
		return nil, exprErrorf("no VLAN match after MPLS")
	}
	if has && vid > 0x0fff {
		return nil, exprErrorf("VLAN tag %d greater than maximum %d", vid, 0x0fff)
	}
	tpid := func() *cond {
		b, _ := p.linktype(eth8021Q)
		b1, _ := p.linktype(eth8021AD)
		b = or(b, b1)
		b1, _ = p.linktype(eth8021QinQ)
		return or(b, b1)
	}
	vidTest := func() *cond { return p.mcmp(orLinkPl, 0, szH, vid, 0x0fff) }
	ext := p.live && p.off.vlans == 0
	p.off.vlans++
	if !ext {
		b := tpid()
		if has {
			b = and(b, vidTest())
		}
		p.off.linkpl += 4
		p.off.linktype += 4
		return b, nil
	}
	// The tag may be out of band (SKF_AD_VLAN_TAG_PRESENT) or in the frame;
	// only in the second case does what follows move by 4 bytes.
	present := p.testK(jmpJEQ, p.vs.abs(szB, offsetVLANTagPresent), 1)
	b := or(present, &cond{kind: cAddV, k: 4, a: tpid()})
	if has {
		inFrame := vidTest()
		oob := p.testK(jmpJEQ, p.vs.aluK(aluAND, p.vs.abs(szB, offsetVLANTag), 0x0fff), vid)
		again := p.testK(jmpJEQ, p.vs.abs(szB, offsetVLANTagPresent), 1)
		b = and(b, &cond{kind: cIf, a: again, b: oob, c: inFrame})
	}
	p.off.variable = true
	return b, nil
}

// mpls is "mpls [LABEL]": an MPLS label stack entry (with that label);
// every primitive after it looks past one more entry.
func (p *parser) mpls(label uint32, has bool) (*cond, error) {
	var b *cond
	if p.off.labels > 0 {
		b = p.mcmp(orPrevMPLS, 2, szB, 0, 0x01) // the previous entry is not the bottom
	} else {
		var err error
		if b, err = p.linktype(ethMPLS); err != nil {
			return nil, err
		}
	}
	if has {
		if label > 0xfffff {
			return nil, exprErrorf("MPLS label %d greater than maximum %d", label, 0xfffff)
		}
		b = and(b, p.mcmp(orLinkPl, 0, szW, label<<12, 0xfffff000))
	}
	p.off.nlNosnap += 4
	p.off.nl += 4
	p.off.labels++
	return b, nil
}
