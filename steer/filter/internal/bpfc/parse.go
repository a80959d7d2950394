package bpfc

// Qualifiers (pcap-filter(7)): the protocol, the direction and the kind of
// address of a primitive, as libpcap's grammar carries them from one
// primitive to the next ("host a or b" is "host a or host b").
type qual struct {
	proto uint8
	dir   uint8
	addr  uint8
}

// Protocol qualifiers.
const (
	qDefault uint8 = iota
	qLink
	qIP
	qARP
	qRARP
	qSCTP
	qTCP
	qUDP
	qICMP
	qIGMP
	qIGRP
	qATALK
	qDECNET
	qLAT
	qSCA
	qMOPRC
	qMOPDL
	qIPV6
	qICMPV6
	qAH
	qESP
	qPIM
	qVRRP
	qAARP
	qISO
	qESIS
	qISIS
	qCLNP
	qSTP
	qIPX
	qNETBEUI
	qISISL1
	qISISL2
	qISISIIH
	qISISSNP
	qISISCSNP
	qISISPSNP
	qISISLSP
	qRADIO
	qCARP
	qUndef = 0xff
)

// Direction qualifiers (qDefault and qUndef as above).
const (
	dSrc uint8 = iota + 1
	dDst
	dOr
	dAnd
)

// Address qualifiers (qDefault and qUndef as above).
const (
	aHost uint8 = iota + 1
	aNet
	aPort
	aPortrange
	aProto
)

// qerr is the qualifier a bare id after a non-id primitive inherits: using
// it is a syntax error.
var qerr = qual{qUndef, qUndef, qUndef}

// protoOf maps the protocol keywords to their qualifier.
var protoOf = map[tokKind]uint8{
	tLINK: qLink, tIP: qIP, tARP: qARP, tRARP: qRARP, tSCTP: qSCTP, tTCP: qTCP, tUDP: qUDP,
	tICMP: qICMP, tIGMP: qIGMP, tIGRP: qIGRP, tPIM: qPIM, tVRRP: qVRRP, tCARP: qCARP,
	tATALK: qATALK, tAARP: qAARP, tDECNET: qDECNET, tLAT: qLAT, tSCA: qSCA, tMOPDL: qMOPDL,
	tMOPRC: qMOPRC, tIPV6: qIPV6, tICMPV6: qICMPV6, tAH: qAH, tESP: qESP, tISO: qISO,
	tESIS: qESIS, tISIS: qISIS, tL1: qISISL1, tL2: qISISL2, tIIH: qISISIIH, tLSP: qISISLSP,
	tSNP: qISISSNP, tCSNP: qISISCSNP, tPSNP: qISISPSNP, tCLNP: qCLNP, tSTP: qSTP, tIPX: qIPX,
	tNETBEUI: qNETBEUI, tRADIO: qRADIO,
}

// protoNames names the protocol qualifiers in messages.
var protoNames = map[uint8]string{
	qLink: "link", qIP: "ip", qARP: "arp", qRARP: "rarp", qSCTP: "sctp", qTCP: "tcp", qUDP: "udp",
	qICMP: "icmp", qIGMP: "igmp", qIGRP: "igrp", qATALK: "atalk", qDECNET: "decnet", qLAT: "lat",
	qSCA: "sca", qMOPRC: "moprc", qMOPDL: "mopdl", qIPV6: "ip6", qICMPV6: "icmp6", qAH: "ah",
	qESP: "esp", qPIM: "pim", qVRRP: "vrrp", qAARP: "aarp", qISO: "iso", qESIS: "esis",
	qISIS: "isis", qCLNP: "clnp", qSTP: "stp", qIPX: "ipx", qNETBEUI: "netbeui", qISISL1: "l1",
	qISISL2: "l2", qISISIIH: "iih", qISISSNP: "snp", qISISCSNP: "csnp", qISISPSNP: "psnp",
	qISISLSP: "lsp", qRADIO: "radio", qCARP: "carp",
}

// unsupportedTokens are keywords of constructs this compiler leaves to
// libpcap, with the name an error gives them.
var unsupportedTokens = map[tokKind]string{
	tPROTOCHAIN: "protochain", tGATEWAY: "gateway", tTYPE: "802.11 type", tSUBTYPE: "802.11 subtype",
	tDIR: "802.11 direction", tADDR1: "addr1", tADDR2: "addr2", tADDR3: "addr3", tADDR4: "addr4",
	tRA: "ra", tTA: "ta", tINBOUND: "inbound", tOUTBOUND: "outbound", tIFINDEX: "ifindex",
	tPPPOED: "pppoed", tPPPOES: "pppoes", tGENEVE: "geneve", tLANE: "lane", tLLC: "llc",
	tMETAC: "metac", tBCC: "bcc", tOAM: "oam", tOAMF4: "oamf4", tOAMF4EC: "oamf4ec",
	tOAMF4SC: "oamf4sc", tSC: "sc", tILMIC: "ilmic", tVPI: "vpi", tVCI: "vci",
	tCONNECTMSG: "connectmsg", tMETACONNECT: "metaconnect", tPFIFNAME: "ifname", tPFRSET: "ruleset",
	tPFRNR: "rulenum", tPFSRNR: "subrulenum", tPFREASON: "reason", tPFACTION: "action",
	tFISU: "fisu", tLSSU: "lssu", tMSU: "msu", tHFISU: "hfisu", tHLSSU: "hlssu", tHMSU: "hmsu",
	tSIO: "sio", tOPC: "opc", tDPC: "dpc", tSLS: "sls", tHSIO: "hsio", tHOPC: "hopc",
	tHDPC: "hdpc", tHSLS: "hsls", tAID: "ARCnet address",
}

// offsets are libpcap's offsets of the link-layer type field and payload
// (constant parts), and of the network layer in the payload, which vlan
// and mpls move for the primitives after them.
type offsets struct {
	linktype, linkpl uint32
	nl, nlNosnap     uint32
	// variable: the link-layer offsets also have a variable part (live,
	// after the first vlan, whose tag may or may not be in the frame).
	variable bool
	vlans    int
	labels   int
}

type parser struct {
	toks []token
	pos  int
	vs   vals
	live bool
	off  offsets
}

func (p *parser) peek() tokKind { return p.toks[p.pos].kind }
func (p *parser) peekAt(n int) tokKind {
	if p.pos+n < len(p.toks) {
		return p.toks[p.pos+n].kind
	}
	return tEOF
}
func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.kind != tEOF {
		p.pos++
	}
	return t
}

func (p *parser) unexpected() error {
	t := p.toks[p.pos]
	if name, ok := unsupportedTokens[t.kind]; ok {
		return unsupportedf("%s", name)
	}
	return syntaxErrorf("syntax error at %s", t)
}

func (p *parser) expect(k tokKind) error {
	if p.peek() != k {
		return p.unexpected()
	}
	p.next()
	return nil
}

// parse parses a whole expression. An empty one is nil: accept all.
func (p *parser) parse() (*cond, error) {
	if p.peek() == tEOF {
		return nil, nil
	}
	c, _, err := p.expr(qerr)
	if err != nil {
		return nil, err
	}
	if p.peek() != tEOF {
		return nil, p.unexpected()
	}
	return c, nil
}

// expr parses terms and ids joined by and/or, which libpcap gives equal
// precedence, left to right. inh is the qualifier the first term sees
// before it.
func (p *parser) expr(inh qual) (*cond, qual, error) {
	e, err := p.elem(inh, ctxStart)
	if err != nil {
		return nil, qual{}, err
	}
	c, q := e.c, e.q
	for p.peek() == tAnd || p.peek() == tOr {
		op := p.next().kind
		e, err := p.elem(q, ctxAfterOp)
		if err != nil {
			return nil, qual{}, err
		}
		if op == tAnd {
			c = and(c, e.c)
		} else {
			c = or(c, e.c)
		}
		q = e.q
	}
	return c, q, nil
}

// elemKind is what an element of an expression turned out to be.
type elemKind uint8

const (
	eTerm elemKind = iota // a primitive, relation or parenthesized expression
	eID                   // an address or number that takes the inherited qualifiers
	ePnum                 // a bare number (an id or arithmetic, by what follows)
	eArth                 // arithmetic with no relation yet
)

// context says which elements the grammar allows where one starts.
type context uint8

const (
	ctxStart   context = iota // the first of an expression: a term
	ctxAfterOp                // after and/or: a term or an id
	ctxHead                   // after qualifiers: an id
	ctxParen                  // the first inside parentheses: any
)

type elem struct {
	kind elemKind
	c    *cond
	q    qual
	ar   arth
}

// elem parses one element where ctx allows it, inh being the qualifier it
// inherits (libpcap's $<blk>0).
func (p *parser) elem(inh qual, ctx context) (elem, error) {
	e, err := p.elemRaw(inh, ctx)
	if err != nil {
		return e, err
	}
	switch e.kind {
	case ePnum:
		switch ctx {
		case ctxAfterOp, ctxHead:
			c, err := p.ncode("", e.ar.v.k, inh)
			if err != nil {
				return e, err
			}
			return elem{kind: eID, c: c, q: inh}, nil
		case ctxStart:
			return e, p.unexpected()
		}
	case eArth:
		if ctx != ctxParen {
			return e, p.unexpected()
		}
	case eID:
		if ctx == ctxStart {
			return e, p.unexpected()
		}
	case eTerm:
		if ctx == ctxHead {
			return e, p.unexpected()
		}
	}
	return e, nil
}

func (p *parser) elemRaw(inh qual, ctx context) (elem, error) {
	switch k := p.peek(); {
	case k == tNot:
		p.next()
		inner := ctx
		if ctx == ctxParen {
			inner = ctxAfterOp
		}
		e, err := p.elem(inh, inner)
		if err != nil {
			return e, err
		}
		e.c = not(e.c)
		return e, nil
	case k == tLParen:
		p.next()
		e, err := p.paren(inh)
		if err != nil {
			return e, err
		}
		if e.kind == ePnum || e.kind == eArth {
			return p.arthRest(e)
		}
		return e, nil
	case k == tNUM:
		return p.arthRest(elem{kind: ePnum, ar: p.loadi(p.next().num)})
	case k == tMinus || k == tLEN || (protoOf[k] != 0 && p.peekAt(1) == tLBrack):
		a, err := p.arith(0)
		if err != nil {
			return elem{}, err
		}
		return p.arthRest(elem{kind: eArth, ar: a})
	case k == tID || k == tHID || k == tHID6 || k == tEID || k == tAID:
		c, err := p.nid(inh)
		return elem{kind: eID, c: c, q: inh}, err
	}
	c, q, err := p.rterm()
	return elem{kind: eTerm, c: c, q: q}, err
}

// arthRest continues the arithmetic of e with what follows it: more
// operators, and a relation, which makes it a term.
func (p *parser) arthRest(e elem) (elem, error) {
	if isArithOp(p.peek()) {
		a, err := p.arithLoop(e.ar, 0)
		if err != nil {
			return e, err
		}
		e = elem{kind: eArth, ar: a}
	}
	code, reversed, ok := relop(p.peek())
	if !ok {
		return e, nil
	}
	p.next()
	rhs, err := p.arith(0)
	if err != nil {
		return e, err
	}
	return elem{kind: eTerm, c: p.relation(code, reversed, e.ar, rhs), q: qerr}, nil
}

// paren parses what follows '(' up to and with its ')': an expression, a
// list of ids joined by and/or, a number or arithmetic.
func (p *parser) paren(inh qual) (elem, error) {
	first, err := p.elem(inh, ctxParen)
	if err != nil {
		return first, err
	}
	switch first.kind {
	case ePnum:
		if p.peek() == tRParen {
			p.next()
			return first, nil
		}
		if p.peek() != tAnd && p.peek() != tOr {
			return first, p.unexpected()
		}
		c, err := p.ncode("", first.ar.v.k, inh)
		if err != nil {
			return first, err
		}
		first = elem{kind: eID, c: c, q: inh}
	case eArth:
		return first, p.expect(tRParen)
	}
	c, q := first.c, first.q
	for p.peek() == tAnd || p.peek() == tOr {
		op := p.next().kind
		var e elem
		if first.kind == eID {
			e, err = p.elem(inh, ctxHead) // in a list of ids, ids only
		} else {
			e, err = p.elem(q, ctxAfterOp)
		}
		if err != nil {
			return e, err
		}
		if op == tAnd {
			c = and(c, e.c)
		} else {
			c = or(c, e.c)
		}
		q = e.q
	}
	if err := p.expect(tRParen); err != nil {
		return first, err
	}
	// A parenthesized expression takes the qualifier from before it.
	return elem{kind: first.kind, c: c, q: inh}, nil
}

// rterm parses a primitive that sets its own qualifiers: qualifiers and
// an id, a protocol name, or one of the other primitives.
func (p *parser) rterm() (*cond, qual, error) {
	k := p.peek()
	proto := protoOf[k]
	if proto != 0 {
		switch p.peekAt(1) {
		case tSRC, tDST, tHOST, tNET, tPORT, tPORTRANGE, tPROTO, tPROTOCHAIN, tGATEWAY,
			tADDR1, tADDR2, tADDR3, tADDR4, tRA, tTA:
			return p.head()
		case tBROADCAST, tMULTICAST:
			p.next()
			c, err := p.castTerm(proto, p.next().kind)
			return c, qerr, err
		case tTYPE, tSUBTYPE, tDIR:
			return nil, qerr, unsupportedf("802.11 %s", p.toks[p.pos+1].text)
		}
		p.next()
		c, err := p.protoAbbrev(proto)
		return c, qerr, err
	}
	switch k {
	case tSRC, tDST, tHOST, tNET, tPORT, tPORTRANGE, tPROTO, tPROTOCHAIN, tGATEWAY,
		tADDR1, tADDR2, tADDR3, tADDR4, tRA, tTA:
		return p.head()
	case tBROADCAST, tMULTICAST:
		c, err := p.castTerm(qDefault, p.next().kind)
		return c, qerr, err
	case tLESS, tGREATER:
		p.next()
		if p.peek() != tNUM {
			return nil, qerr, p.unexpected()
		}
		n := p.next().num
		if k == tLESS {
			return not(p.testK(jmpJGT, p.vs.length(), n)), qerr, nil
		}
		return p.testK(jmpJGE, p.vs.length(), n), qerr, nil
	case tCBYTE:
		c, err := p.byteop()
		return c, qerr, err
	case tVLAN, tMPLS:
		p.next()
		var n uint32
		has := p.peek() == tNUM || p.peek() == tLParen
		if has {
			var err error
			if n, err = p.pnum(); err != nil {
				return nil, qerr, err
			}
		}
		var c *cond
		var err error
		if k == tVLAN {
			c, err = p.vlan(n, has)
		} else {
			c, err = p.mpls(n, has)
		}
		return c, qerr, err
	}
	return nil, qerr, p.unexpected()
}

// head parses qualifiers ([proto] [dir] [addr], or [proto] proto) and the
// id they qualify.
func (p *parser) head() (*cond, qual, error) {
	q := qual{proto: protoOf[p.peek()]}
	if q.proto != 0 {
		p.next()
	}
	switch p.peek() {
	case tSRC, tDST:
		first := p.next().kind
		q.dir = dSrc
		if first == tDST {
			q.dir = dDst
		}
		if op := p.peek(); op == tOr || op == tAnd {
			p.next()
			other := tDST
			if first == tDST {
				other = tSRC
			}
			if err := p.expect(other); err != nil {
				return nil, qerr, err
			}
			q.dir = dOr
			if op == tAnd {
				q.dir = dAnd
			}
		}
		switch p.peek() {
		case tHOST, tNET, tPORT, tPORTRANGE:
			q.addr = addrOf(p.next().kind)
		}
	case tHOST, tNET, tPORT, tPORTRANGE:
		q.addr = addrOf(p.next().kind)
	case tPROTO:
		p.next()
		q.addr = aProto
	default:
		return nil, qerr, p.unexpected()
	}
	e, err := p.elem(q, ctxHead)
	if err != nil {
		return nil, qerr, err
	}
	return e.c, q, nil
}

func addrOf(k tokKind) uint8 {
	switch k {
	case tHOST:
		return aHost
	case tNET:
		return aNet
	case tPORT:
		return aPort
	}
	return aPortrange
}

// nid parses an address: a name, an IPv4 address or network (with a
// length or a mask), an IPv6 address or network, an Ethernet address.
func (p *parser) nid(q qual) (*cond, error) {
	t := p.next()
	switch t.kind {
	case tID:
		return p.scode(t.text, q)
	case tHID:
		switch p.peek() {
		case tSlash:
			p.next()
			if p.peek() != tNUM {
				return nil, p.unexpected()
			}
			return p.mcode(t.text, "", p.next().num, q)
		case tNETMASK:
			p.next()
			if p.peek() != tHID {
				return nil, p.unexpected()
			}
			return p.mcode(t.text, p.next().text, 0, q)
		}
		switch q.addr {
		case aPort:
			return nil, exprErrorf("'port' modifier applied to ip host")
		case aPortrange:
			return nil, exprErrorf("'portrange' modifier applied to ip host")
		case aProto:
			return nil, exprErrorf("'proto' modifier applied to ip host")
		}
		return p.ncode(t.text, 0, q)
	case tHID6:
		masklen := uint32(128)
		if p.peek() == tSlash {
			p.next()
			if p.peek() != tNUM {
				return nil, p.unexpected()
			}
			masklen = p.next().num
		}
		return p.mcode6(t.text, masklen, q)
	case tEID:
		return p.ecode(t.text, q)
	}
	return nil, unsupportedf("ARCnet address $%s", t.text)
}

// pnum parses a number, possibly in parentheses.
func (p *parser) pnum() (uint32, error) {
	if p.peek() == tLParen {
		p.next()
		n, err := p.pnum()
		if err != nil {
			return 0, err
		}
		return n, p.expect(tRParen)
	}
	if p.peek() != tNUM {
		return 0, p.unexpected()
	}
	return p.next().num, nil
}

func relop(k tokKind) (code uint16, reversed, ok bool) {
	switch k {
	case tGT:
		return jmpJGT, false, true
	case tGEQ:
		return jmpJGE, false, true
	case tEQ:
		return jmpJEQ, false, true
	case tLEQ:
		return jmpJGT, true, true
	case tLT:
		return jmpJGE, true, true
	case tNEQ:
		return jmpJEQ, true, true
	}
	return 0, false, false
}

// Arithmetic operators and their precedence in libpcap's grammar; % and ^
// have none, so its parser always shifts them: they bind tighter than any
// operator on their left, and take all of what follows as their right
// operand.
func binPrec(k tokKind) int {
	switch k {
	case tPipe:
		return 1
	case tAmp:
		return 2
	case tLSH, tRSH:
		return 3
	case tPlus, tMinus:
		return 4
	case tStar, tSlash:
		return 5
	}
	return -1
}

func isArithOp(k tokKind) bool { return binPrec(k) >= 0 || k == tPercent || k == tCaret }

var aluOf = map[tokKind]uint16{
	tPlus: aluADD, tMinus: aluSUB, tStar: aluMUL, tSlash: aluDIV, tPercent: aluMOD,
	tAmp: aluAND, tPipe: aluOR, tCaret: aluXOR, tLSH: aluLSH, tRSH: aluRSH,
}

// arith parses arithmetic whose operators bind at least as tight as min.
func (p *parser) arith(min int) (arth, error) {
	left, err := p.unary()
	if err != nil {
		return left, err
	}
	return p.arithLoop(left, min)
}

func (p *parser) arithLoop(left arth, min int) (arth, error) {
	for {
		k := p.peek()
		prec := binPrec(k)
		if k == tPercent || k == tCaret {
			prec = min // always shifted
		}
		if prec < 0 || prec < min {
			return left, nil
		}
		p.next()
		next := prec + 1
		if k == tPercent || k == tCaret {
			next = 0
		}
		right, err := p.arith(next)
		if err != nil {
			return left, err
		}
		if left, err = p.arthOp(aluOf[k], left, right); err != nil {
			return left, err
		}
	}
}

func (p *parser) unary() (arth, error) {
	if p.peek() != tMinus {
		return p.primary()
	}
	p.next()
	x, err := p.unary()
	if err != nil {
		return x, err
	}
	if k := p.peek(); k == tPercent || k == tCaret {
		p.next()
		r, err := p.arith(0)
		if err != nil {
			return x, err
		}
		if x, err = p.arthOp(aluOf[k], x, r); err != nil {
			return x, err
		}
	}
	return p.arthNeg(x), nil
}

func (p *parser) primary() (arth, error) {
	k := p.peek()
	switch {
	case k == tNUM:
		return p.loadi(p.next().num), nil
	case k == tLParen:
		p.next()
		a, err := p.arith(0)
		if err != nil {
			return a, err
		}
		return a, p.expect(tRParen)
	case k == tLEN:
		p.next()
		return arth{v: p.vs.length()}, nil
	case protoOf[k] != 0 && p.peekAt(1) == tLBrack:
		proto := protoOf[p.next().kind]
		p.next()
		idx, err := p.arith(0)
		if err != nil {
			return idx, err
		}
		size := uint32(1)
		if p.peek() == tColon {
			p.next()
			if p.peek() != tNUM {
				return idx, p.unexpected()
			}
			size = p.next().num
		}
		if err := p.expect(tRBrack); err != nil {
			return idx, err
		}
		return p.load(proto, idx, size)
	}
	return arth{}, p.unexpected()
}
