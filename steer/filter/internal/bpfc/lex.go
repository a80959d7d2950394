package bpfc

import (
	"fmt"
	"net/netip"
	"strings"
)

// tokKind is a token of pcap-filter(7), as libpcap's scanner sorts them.
type tokKind int

const (
	tEOF tokKind = iota
	tNUM
	tID
	tHID  // a dotted IPv4 address or prefix of one: 10.1, 10.0.0.1
	tHID6 // an IPv6 address
	tEID  // an Ethernet address
	tAID  // an ARCnet address, $xx

	// Punctuation and operators.
	tLParen
	tRParen
	tLBrack
	tRBrack
	tColon
	tPlus
	tMinus
	tStar
	tSlash
	tPercent
	tAmp
	tPipe
	tCaret
	tLT
	tGT
	tEQ
	tGEQ
	tLEQ
	tNEQ
	tLSH
	tRSH
	tNot
	tAnd
	tOr

	// Keywords.
	tDST
	tSRC
	tLINK
	tARP
	tRARP
	tIP
	tSCTP
	tTCP
	tUDP
	tICMP
	tIGMP
	tIGRP
	tPIM
	tVRRP
	tCARP
	tRADIO
	tIPV6
	tICMPV6
	tAH
	tESP
	tATALK
	tAARP
	tDECNET
	tLAT
	tSCA
	tMOPRC
	tMOPDL
	tISO
	tESIS
	tISIS
	tL1
	tL2
	tIIH
	tLSP
	tSNP
	tCSNP
	tPSNP
	tCLNP
	tSTP
	tIPX
	tNETBEUI
	tHOST
	tNET
	tNETMASK
	tPORT
	tPORTRANGE
	tPROTO
	tPROTOCHAIN
	tGATEWAY
	tTYPE
	tSUBTYPE
	tDIR
	tADDR1
	tADDR2
	tADDR3
	tADDR4
	tRA
	tTA
	tLESS
	tGREATER
	tCBYTE
	tBROADCAST
	tMULTICAST
	tLEN
	tINBOUND
	tOUTBOUND
	tIFINDEX
	tVLAN
	tMPLS
	tPPPOED
	tPPPOES
	tGENEVE
	tLANE
	tLLC
	tMETAC
	tBCC
	tOAM
	tOAMF4
	tOAMF4EC
	tOAMF4SC
	tSC
	tILMIC
	tVPI
	tVCI
	tCONNECTMSG
	tMETACONNECT
	tPFIFNAME
	tPFRSET
	tPFRNR
	tPFSRNR
	tPFREASON
	tPFACTION
	tFISU
	tLSSU
	tMSU
	tHFISU
	tHLSSU
	tHMSU
	tSIO
	tOPC
	tDPC
	tSLS
	tHSIO
	tHOPC
	tHDPC
	tHSLS
)

// token is one token: its kind, its text, and for tNUM its value.
type token struct {
	kind tokKind
	text string
	num  uint32
}

// keywords are the words libpcap's scanner takes as keywords, each with its
// token.
var keywords = map[string]tokKind{
	"dst": tDST, "src": tSRC,
	"link": tLINK, "ether": tLINK, "ppp": tLINK, "slip": tLINK, "fddi": tLINK, "tr": tLINK, "wlan": tLINK,
	"arp": tARP, "rarp": tRARP, "ip": tIP, "sctp": tSCTP, "tcp": tTCP, "udp": tUDP,
	"icmp": tICMP, "igmp": tIGMP, "igrp": tIGRP, "pim": tPIM, "vrrp": tVRRP, "carp": tCARP,
	"radio": tRADIO, "ip6": tIPV6, "icmp6": tICMPV6, "ah": tAH, "esp": tESP,
	"atalk": tATALK, "aarp": tAARP, "decnet": tDECNET, "lat": tLAT, "sca": tSCA,
	"moprc": tMOPRC, "mopdl": tMOPDL,
	"iso": tISO, "esis": tESIS, "es-is": tESIS, "isis": tISIS, "is-is": tISIS,
	"l1": tL1, "l2": tL2, "iih": tIIH, "lsp": tLSP, "snp": tSNP, "csnp": tCSNP, "psnp": tPSNP,
	"clnp": tCLNP, "stp": tSTP, "ipx": tIPX, "netbeui": tNETBEUI,
	"host": tHOST, "net": tNET, "mask": tNETMASK, "port": tPORT, "portrange": tPORTRANGE,
	"proto": tPROTO, "protochain": tPROTOCHAIN, "gateway": tGATEWAY,
	"type": tTYPE, "subtype": tSUBTYPE, "direction": tDIR, "dir": tDIR,
	"address1": tADDR1, "addr1": tADDR1, "address2": tADDR2, "addr2": tADDR2,
	"address3": tADDR3, "addr3": tADDR3, "address4": tADDR4, "addr4": tADDR4,
	"ra": tRA, "ta": tTA,
	"less": tLESS, "greater": tGREATER, "byte": tCBYTE,
	"broadcast": tBROADCAST, "multicast": tMULTICAST,
	"and": tAnd, "&&": tAnd, "or": tOr, "||": tOr, "not": tNot,
	"len": tLEN, "length": tLEN, "inbound": tINBOUND, "outbound": tOUTBOUND, "ifindex": tIFINDEX,
	"vlan": tVLAN, "mpls": tMPLS, "pppoed": tPPPOED, "pppoes": tPPPOES, "geneve": tGENEVE,
	"lane": tLANE, "llc": tLLC, "metac": tMETAC, "bcc": tBCC, "oam": tOAM, "oamf4": tOAMF4,
	"oamf4ec": tOAMF4EC, "oamf4sc": tOAMF4SC, "sc": tSC, "ilmic": tILMIC, "vpi": tVPI, "vci": tVCI,
	"connectmsg": tCONNECTMSG, "metaconnect": tMETACONNECT,
	"on": tPFIFNAME, "ifname": tPFIFNAME, "rset": tPFRSET, "ruleset": tPFRSET,
	"rnr": tPFRNR, "rulenum": tPFRNR, "srnr": tPFSRNR, "subrulenum": tPFSRNR,
	"reason": tPFREASON, "action": tPFACTION,
	"fisu": tFISU, "lssu": tLSSU, "lsu": tLSSU, "msu": tMSU, "hfisu": tHFISU, "hlssu": tHLSSU,
	"hmsu": tHMSU, "sio": tSIO, "opc": tOPC, "dpc": tDPC, "sls": tSLS, "hsio": tHSIO,
	"hopc": tHOPC, "hdpc": tHDPC, "hsls": tHSLS,
}

// namedNumbers are the names the scanner turns into numbers: header fields
// and values of ICMP, ICMPv6 and TCP (pcap-filter(7)).
var namedNumbers = map[string]uint32{
	"icmptype": 0, "icmpcode": 1,
	"icmp-echoreply": 0, "icmp-unreach": 3, "icmp-sourcequench": 4, "icmp-redirect": 5,
	"icmp-echo": 8, "icmp-routeradvert": 9, "icmp-routersolicit": 10, "icmp-timxceed": 11,
	"icmp-paramprob": 12, "icmp-tstamp": 13, "icmp-tstampreply": 14, "icmp-ireq": 15,
	"icmp-ireqreply": 16, "icmp-maskreq": 17, "icmp-maskreply": 18,
	"icmp6type": 0, "icmp6code": 1,
	"icmp6-destinationunreach": 1, "icmp6-packettoobig": 2, "icmp6-timeexceeded": 3,
	"icmp6-parameterproblem": 4, "icmp6-echo": 128, "icmp6-echoreply": 129,
	"icmp6-multicastlistenerquery": 130, "icmp6-multicastlistenerreportv1": 131,
	"icmp6-multicastlistenerdone": 132, "icmp6-routersolicit": 133, "icmp6-routeradvert": 134,
	"icmp6-neighborsolicit": 135, "icmp6-neighboradvert": 136, "icmp6-redirect": 137,
	"icmp6-routerrenum": 138, "icmp6-nodeinformationquery": 139,
	"icmp6-nodeinformationresponse": 140, "icmp6-ineighbordiscoverysolicit": 141,
	"icmp6-ineighbordiscoveryadvert": 142, "icmp6-multicastlistenerreportv2": 143,
	"icmp6-homeagentdiscoveryrequest": 144, "icmp6-homeagentdiscoveryreply": 145,
	"icmp6-mobileprefixsolicit": 146, "icmp6-mobileprefixadvert": 147,
	"icmp6-certpathsolicit": 148, "icmp6-certpathadvert": 149,
	"icmp6-multicastrouteradvert": 151, "icmp6-multicastroutersolicit": 152,
	"icmp6-multicastrouterterm": 153,
	"tcpflags":                  13, "tcp-fin": 0x01, "tcp-syn": 0x02, "tcp-rst": 0x04, "tcp-push": 0x08,
	"tcp-ack": 0x10, "tcp-urg": 0x20, "tcp-ece": 0x40, "tcp-cwr": 0x80,
}

// Token priorities, in the order of libpcap's scanner rules: at equal
// length the earlier rule wins.
const (
	pKeyword = iota
	pOperator
	pAID
	pMAC
	pNUM
	pHID
	pHID6
	pBogusMAC
	pNamed
	pID
	pEscaped
)

// lex splits s into tokens as libpcap's scanner does: at each place the
// longest match of any rule, the earlier rule at equal length.
func lex(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		switch s[i] {
		case ' ', '\t', '\r', '\n':
			i++
			continue
		}
		n, prio := 0, -1
		try := func(l, p int) {
			if l > n || (l == n && l > 0 && p < prio) {
				n, prio = l, p
			}
		}
		rest := s[i:]
		try(longestKey(rest, keywords), pKeyword)
		try(matchOperator(rest), pOperator)
		try(matchAID(rest), pAID)
		try(matchMAC(rest), pMAC)
		try(matchN(rest), pNUM)
		try(matchHID(rest), pHID)
		try(matchV6(rest), pHID6)
		try(matchBogusMAC(rest), pBogusMAC)
		try(longestKey(rest, namedNumbers), pNamed)
		try(matchID(rest), pID)
		try(matchEscaped(rest), pEscaped)
		if n == 0 {
			return nil, syntaxErrorf("syntax error: unexpected %q", rest[:1])
		}
		text := rest[:n]
		i += n
		var t token
		switch prio {
		case pKeyword:
			t = token{kind: keywords[text], text: text}
		case pOperator:
			t = token{kind: operators[text], text: text}
		case pAID:
			t = token{kind: tAID, text: text[1:]}
		case pMAC:
			t = token{kind: tEID, text: text}
		case pNUM:
			v, err := parseNum(text)
			if err != nil {
				return nil, err
			}
			t = token{kind: tNUM, text: text, num: v}
		case pHID:
			t = token{kind: tHID, text: text}
		case pHID6:
			if a, err := netip.ParseAddr(text); err != nil || !a.Is6() {
				return nil, exprErrorf("bogus IPv6 address %s", text)
			}
			t = token{kind: tHID6, text: text}
		case pBogusMAC:
			return nil, exprErrorf("bogus ethernet address %s", text)
		case pNamed:
			t = token{kind: tNUM, text: text, num: namedNumbers[text]}
		case pID:
			t = token{kind: tID, text: text}
		case pEscaped:
			t = token{kind: tID, text: text[1:]}
		}
		toks = append(toks, t)
	}
	return append(toks, token{kind: tEOF}), nil
}

var operators = map[string]tokKind{
	"+": tPlus, "-": tMinus, "*": tStar, "/": tSlash, "%": tPercent, ":": tColon,
	"[": tLBrack, "]": tRBrack, "!": tNot, "<": tLT, ">": tGT, "(": tLParen, ")": tRParen,
	"&": tAmp, "|": tPipe, "^": tCaret, "=": tEQ,
	">=": tGEQ, "<=": tLEQ, "!=": tNEQ, "==": tEQ, "<<": tLSH, ">>": tRSH,
}

// longestKey returns the length of the longest key of m s starts with.
func longestKey[V any](s string, m map[string]V) int {
	n := 0
	for k := range m {
		if len(k) > n && strings.HasPrefix(s, k) {
			n = len(k)
		}
	}
	return n
}

func matchOperator(s string) int {
	if len(s) >= 2 {
		if _, ok := operators[s[:2]]; ok {
			return 2
		}
	}
	if _, ok := operators[s[:1]]; ok {
		return 1
	}
	return 0
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isHex(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}
func isAlnum(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// countHex returns how many hex digits (at most max) s starts with.
func countHex(s string, max int) int {
	n := 0
	for n < len(s) && n < max && isHex(s[n]) {
		n++
	}
	return n
}

// matchN matches a number: decimal digits, or 0x and hex digits.
func matchN(s string) int {
	d := 0
	for d < len(s) && isDigit(s[d]) {
		d++
	}
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		if h := countHex(s[2:], len(s)); h > 0 && 2+h > d {
			return 2 + h
		}
	}
	return d
}

// matchHID matches two to four numbers joined by dots.
func matchHID(s string) int {
	best, pos := 0, 0
	for parts := 1; parts <= 4; parts++ {
		if parts > 1 {
			if pos >= len(s) || s[pos] != '.' {
				break
			}
			pos++
		}
		n := matchN(s[pos:])
		if n == 0 {
			break
		}
		pos += n
		if parts >= 2 {
			best = pos
		}
	}
	return best
}

// matchAID matches $ and one or two hex digits.
func matchAID(s string) int {
	if s[0] != '$' {
		return 0
	}
	if n := countHex(s[1:], 2); n > 0 {
		return 1 + n
	}
	return 0
}

// matchMAC matches the Ethernet address forms: six groups of one or two
// hex digits joined by colons, dashes or dots, three groups of four hex
// digits joined by dots, or twelve hex digits.
func matchMAC(s string) int {
	best := 0
	for _, sep := range []byte{':', '-', '.'} {
		pos, ok := 0, true
		for g := 0; g < 6 && ok; g++ {
			if g > 0 {
				if pos >= len(s) || s[pos] != sep {
					ok = false
					break
				}
				pos++
			}
			n := countHex(s[pos:], 2)
			if n == 0 {
				ok = false
			}
			pos += n
		}
		if ok && pos > best {
			best = pos
		}
	}
	pos, ok := 0, true
	for g := 0; g < 3 && ok; g++ {
		if g > 0 {
			if pos >= len(s) || s[pos] != '.' {
				ok = false
				break
			}
			pos++
		}
		if countHex(s[pos:], 4) != 4 {
			ok = false
		}
		pos += 4
	}
	if ok && pos > best {
		best = pos
	}
	if countHex(s, 12) == 12 && best < 12 {
		best = 12
	}
	return best
}

// matchBogusMAC matches what libpcap rejects as a bogus Ethernet address:
// groups of one or two hex digits each followed by colons, at least two
// groups.
func matchBogusMAC(s string) int {
	pos, groups := 0, 0
	for {
		n := countHex(s[pos:], 2)
		if n == 0 || pos+n >= len(s) || s[pos+n] != ':' {
			break
		}
		p := pos + n
		for p < len(s) && s[p] == ':' {
			p++
		}
		pos = p
		groups++
	}
	if groups >= 2 {
		return pos
	}
	return 0
}

// matchV6 matches the longest prefix of s that has the shape of one of
// libpcap's IPv6 address patterns: eight groups of one to four hex digits,
// or fewer with one "::", the last two groups possibly a dotted quad.
func matchV6(s string) int {
	end := 0
	for end < len(s) && end < 46 && (isHex(s[end]) || s[end] == ':' || s[end] == '.' || s[end] == 'x' || s[end] == 'X') {
		end++
	}
	for n := end; n >= 2; n-- {
		if v6Shape(s[:n]) {
			return n
		}
	}
	return 0
}

func v6Shape(s string) bool {
	groups := func(part string) (int, bool) {
		if part == "" {
			return 0, true
		}
		n := 0
		for _, g := range strings.Split(part, ":") {
			if l := countHex(g, 4); l == 0 || l != len(g) {
				return 0, false
			}
			n++
		}
		return n, true
	}
	// A trailing dotted quad counts as two groups.
	quad := 0
	if dot := strings.IndexByte(s, '.'); dot >= 0 {
		colon := strings.LastIndexByte(s[:dot], ':')
		if colon < 0 || matchHIDQuad(s[colon+1:]) != len(s)-colon-1 {
			return false
		}
		quad = 2
		s = s[:colon+1]
		if strings.HasSuffix(s, "::") {
			s += "" // "::1.2.3.4": the quad follows the gap
		} else {
			s = s[:len(s)-1]
		}
	}
	if i := strings.Index(s, "::"); i >= 0 {
		if strings.Contains(s[i+2:], "::") {
			return false
		}
		a, ok1 := groups(s[:i])
		b, ok2 := groups(s[i+2:])
		return ok1 && ok2 && a+b+quad <= 7
	}
	n, ok := groups(s)
	return ok && n+quad == 8
}

// matchHIDQuad matches exactly four numbers joined by dots.
func matchHIDQuad(s string) int {
	pos := 0
	for parts := 0; parts < 4; parts++ {
		if parts > 0 {
			if pos >= len(s) || s[pos] != '.' {
				return 0
			}
			pos++
		}
		n := matchN(s[pos:])
		if n == 0 {
			return 0
		}
		pos += n
	}
	return pos
}

// matchID matches a name: letters, digits, '-', '_' and '.', starting
// with a letter or digit and ending with a letter, digit or dot.
func matchID(s string) int {
	if !isAlnum(s[0]) {
		return 0
	}
	best := 1
	for i := 1; i < len(s); i++ {
		c := s[i]
		if isAlnum(c) || c == '.' {
			best = i + 1
		} else if c != '-' && c != '_' {
			break
		}
	}
	return best
}

// matchEscaped matches a backslash and the characters up to a blank, '!'
// or a parenthesis: a name that is not read as a keyword.
func matchEscaped(s string) int {
	if s[0] != '\\' {
		return 0
	}
	n := 1
	for n < len(s) && !strings.ContainsRune(" !()\n\t", rune(s[n])) {
		n++
	}
	if n == 1 {
		return 0
	}
	return n
}

// parseNum converts a number token as libpcap does: decimal, 0x hex, or
// octal when it starts with 0; more than 32 bits is an error.
func parseNum(s string) (uint32, error) {
	base := uint64(10)
	digits := s
	switch {
	case len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'):
		base, digits = 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		base, digits = 8, s[1:]
	}
	var n uint64
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		var d uint64
		switch {
		case isDigit(c):
			d = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		default:
			d = uint64(c-'A') + 10
		}
		if d >= base {
			return 0, exprErrorf("number %s contains non-octal digit", s)
		}
		n = n*base + d
		if n > 0xffffffff {
			return 0, exprErrorf("number %s overflows 32 bits", s)
		}
	}
	return uint32(n), nil
}

func (t token) String() string {
	if t.kind == tEOF {
		return "end of expression"
	}
	return fmt.Sprintf("%q", t.text)
}
