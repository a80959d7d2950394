package filter

import (
	"fmt"
	"math/rand"
	"strings"
)

// exprGen writes random filter expressions from pcap-filter(7)'s grammar:
// the primitives the built-in compiler covers, joined with and, or, not
// (and &&, ||, !) and parentheses, with qualifiers left for the next id
// to inherit, and byte-offset relations with arithmetic. The addresses,
// ports, tags and labels come from the frames' own, so that the
// expressions match some of them.
type exprGen struct {
	r *rand.Rand
}

func (g *exprGen) pick(s ...string) string { return s[g.r.Intn(len(s))] }
func (g *exprGen) chance(n int) bool       { return g.r.Intn(n) == 0 }

func (g *exprGen) v4() string {
	extra := []string{"192.0.2.11", "10.0.7.10", "198.51.100.20", "192.0.2.53", "10.0.0.5"}
	all := append(append([]string{}, genV4...), extra...)
	return all[g.r.Intn(len(all))]
}

func (g *exprGen) v6() string {
	all := append(append([]string{}, genV6...), "2001:db8:2::80", "2001:db8::1")
	return all[g.r.Intn(len(all))]
}

func (g *exprGen) port() string {
	if g.chance(4) {
		return fmt.Sprint(g.r.Intn(65536))
	}
	return fmt.Sprint(genPorts[g.r.Intn(len(genPorts))])
}

func (g *exprGen) mac() string {
	return g.pick("02:00:00:00:00:01", "02:00:00:00:00:02", "ff:ff:ff:ff:ff:ff", "01:00:5e:00:00:01",
		"33:33:00:00:00:01", "0200.0000.0002", "02-00-00-00-00-01", "020000000001")
}

func (g *exprGen) dir() string {
	return g.pick("", "", "src ", "dst ", "src or dst ", "src and dst ", "dst or src ")
}

func (g *exprGen) num(max int) string {
	n := g.r.Intn(max)
	switch g.r.Intn(6) {
	case 0:
		return fmt.Sprintf("0x%x", n)
	case 1:
		if n > 0 {
			return fmt.Sprintf("0%o", n)
		}
	}
	return fmt.Sprint(n)
}

// primitive returns one primitive.
func (g *exprGen) primitive() string {
	switch g.r.Intn(24) {
	case 0, 1:
		if g.chance(3) {
			return fmt.Sprintf("%s%shost %s", g.pick("", "ip6 "), g.dir(), g.v6())
		}
		return fmt.Sprintf("%s%shost %s", g.pick("", "", "ip ", "arp ", "rarp "), g.dir(), g.v4())
	case 2:
		switch g.r.Intn(6) {
		case 0:
			return fmt.Sprintf("%snet %s", g.dir(), g.pick("10", "192.168", "10.0.0", "172.16", "192.0.2", "224"))
		case 1:
			return fmt.Sprintf("net %s mask %s", g.pick("10.0.0.0", "192.168.0.0", "192.0.2.0"), g.pick("255.0.0.0", "255.255.0.0", "255.255.255.0"))
		case 2:
			return fmt.Sprintf("%snet %s/%d", g.pick("", "ip6 "), g.pick("fd00::", "2001:db8::", "fe80::", "::"), g.pick8(0, 8, 16, 32, 64, 120, 128))
		}
		return fmt.Sprintf("%s%snet %s/%d", g.pick("", "ip ", "arp "), g.dir(), g.pick("10.0.0.0", "192.168.0.0", "192.0.2.0", "0.0.0.0", "224.0.0.0"), g.pick8(0, 8, 16, 24, 30, 32))
	case 3, 4:
		if g.chance(3) {
			a, b := g.port(), g.port()
			return fmt.Sprintf("%s%sportrange %s-%s", g.pick("", "", "tcp ", "udp ", "sctp "), g.dir(), a, b)
		}
		return fmt.Sprintf("%s%sport %s", g.pick("", "", "tcp ", "udp ", "sctp "), g.dir(), g.port())
	case 5:
		switch g.r.Intn(5) {
		case 0:
			return fmt.Sprintf("ether %shost %s", g.dir(), g.mac())
		case 1:
			return fmt.Sprintf("ether %s %s", g.pick("src", "dst"), g.mac())
		case 2:
			return g.pick("ether broadcast", "broadcast", "ether multicast", "multicast", "ip multicast", "ip6 multicast")
		}
		return fmt.Sprintf("ether proto %s", g.pick("0x800", "0x86dd", "0x806", "0x8035", "0x8100", "0x88cc", "0x809b", "0x80f3",
			"0x8137", "0x6003", "0x88a8", "0x8847", "6", "0x42", "0xfe", "0xe0", "0xf0", "100", "\\ip", "\\ip6", "\\arp", "\\rarp",
			"\\atalk", "\\aarp", "\\decnet", "\\lat", "\\iso", "\\stp", "\\ipx", "\\netbeui", "\\loopback", "\\sca"))
	case 6, 7:
		return g.pick("ip", "ip6", "arp", "rarp", "tcp", "udp", "icmp", "icmp6", "sctp", "igmp", "igrp", "pim", "vrrp", "carp",
			"ah", "esp", "iso", "esis", "isis", "clnp", "stp", "ipx", "netbeui", "atalk", "aarp", "decnet", "lat", "sca",
			"mopdl", "moprc", "l1", "l2", "iih", "lsp", "snp", "csnp", "psnp", "tcp", "udp", "ip", "ip6")
	case 8:
		return fmt.Sprintf("%sproto %s", g.pick("", "ip ", "ip6 "), g.pick("6", "17", "1", "58", "132", "47", "0", "44", "\\tcp", "\\udp", "\\icmp", "\\sctp", "50"))
	case 9, 10:
		v := g.pick("vlan", "vlan", "vlan 100", "vlan 200", "vlan 0", "vlan 1", "vlan 4095", "vlan (100)")
		return v
	case 11:
		return g.pick("mpls", "mpls", "mpls 100", "mpls 16", "mpls 1000", "mpls 0", "mpls 0xfffff")
	case 12:
		return fmt.Sprintf("%s %d", g.pick("greater", "less"), g.pick8(0, 42, 60, 64, 100, 1500))
	case 13:
		return fmt.Sprintf("byte %d %s %s", g.r.Intn(40), g.pick("=", "<", ">", "=="), g.num(256))
	case 14:
		return g.pick("tcp[tcpflags] & (tcp-syn|tcp-ack) != 0", "tcp[tcpflags] & tcp-syn != 0", "tcp[13] & 2 != 0",
			"tcp[tcpflags] == tcp-syn", "tcp[tcpflags] & (tcp-fin|tcp-rst) != 0", "icmp[icmptype] = icmp-echo",
			"icmp[icmptype] != icmp-echo and icmp[icmptype] != icmp-echoreply", "icmp6[icmp6type] = icmp6-echo",
			"icmp6[icmp6type] == icmp6-neighborsolicit", "ip[6:2] & 0x1fff = 0", "ip[6:2] & 0x1fff != 0",
			"ip[0] & 0xf != 5", "ip6[6] = 44", "tcp[12] >> 4 > 5", "udp[4:2] > 20", "len > 100", "len <= 64",
			"ether[0] & 1 != 0", "ip[1] & 0xffffffff = 0", "ip[8] < 64")
	}
	return g.relation()
}

func (g *exprGen) pick8(v ...int) int { return v[g.r.Intn(len(v))] }

// relation returns "arith op arith", its loads mostly from one protocol
// (loads from two protocols most often reject everything).
func (g *exprGen) relation() string {
	proto := g.pick("ether", "ip", "ip", "ip6", "tcp", "tcp", "udp", "icmp", "icmp6", "arp", "sctp", "igmp", "pim", "vrrp", "rarp", "link")
	return fmt.Sprintf("%s %s %s", g.arith(2, proto), g.pick("=", "==", "!=", ">", "<", ">=", "<="), g.arith(1, proto))
}

// arith returns arithmetic of loads from proto (or now and then another),
// numbers and len.
func (g *exprGen) arith(depth int, proto string) string {
	if depth > 0 && g.chance(3) {
		op := g.pick("+", "-", "*", "/", "&", "|", "<<", ">>", "%", "^", "&", "+")
		rhs := g.arith(depth-1, proto)
		if op == "/" || op == "%" || op == "<<" || op == ">>" {
			rhs = fmt.Sprint(1 + g.r.Intn(8))
			if g.chance(20) {
				rhs = g.pick("0", "(1 - 1)", "32", "(16 + 16)", "ip[0]")
			}
		}
		s := fmt.Sprintf("%s %s %s", g.arith(depth-1, proto), op, rhs)
		if g.chance(2) {
			s = "(" + s + ")"
		}
		return s
	}
	if depth > 0 && g.chance(10) {
		return "-" + g.arith(depth-1, proto)
	}
	switch g.r.Intn(6) {
	case 0:
		return g.num(300)
	case 1:
		if g.chance(4) {
			return "len"
		}
	}
	if g.chance(8) {
		proto = g.pick("ether", "ip", "ip6", "tcp", "udp", "icmp", "icmp6", "arp", "link")
	}
	maxOff := map[string]int{"ether": 40, "ip": 24, "ip6": 44, "tcp": 24, "udp": 10, "icmp": 10, "icmp6": 10, "arp": 30, "rarp": 30, "link": 40}[proto]
	if maxOff == 0 {
		maxOff = 8
	}
	idx := fmt.Sprint(g.r.Intn(maxOff))
	if g.chance(8) {
		idx = g.arith(0, proto) // a computed index
	} else if g.chance(10) {
		idx = fmt.Sprint(60 + g.r.Intn(200)) // past most frames' end
	}
	size := g.pick("", "", "", ":1", ":2", ":2", ":4")
	load := fmt.Sprintf("%s[%s%s]", proto, idx, size)
	if g.chance(3) {
		load = fmt.Sprintf("%s & %s", load, g.pick("0xff", "0xf", "0x1fff", "0xf0", "1", "2", "0x10", "0xffff", "0", "0xffffffff"))
	}
	return load
}

// idTail returns a bare id for qualifier inheritance after prim, or "".
func (g *exprGen) idTail(prim string) string {
	switch {
	case strings.Contains(prim, "port ") && !strings.Contains(prim, "["):
		return g.port()
	case strings.HasSuffix(prim, "host "+lastWord(prim)) && strings.Contains(lastWord(prim), "."):
		return g.v4()
	case strings.Contains(prim, "host ") && strings.Contains(lastWord(prim), ":") && !strings.Contains(prim, "ether"):
		return g.v6()
	case strings.Contains(prim, "ether") && strings.Contains(prim, "host "):
		return g.mac()
	}
	return ""
}

func lastWord(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return f[len(f)-1]
}

// chain returns primitives that test the same few fields joined by one
// operator, where libpcap's optimizer pulls tests of one value up past
// tests of another and settles tests by those before them.
func (g *exprGen) chain() string {
	pool := []string{"ether proto 0x800", "ether proto 0x86dd", "ether proto 0x806", "ip", "ip6", "arp",
		"ip proto 6", "ip proto 17", "tcp", "udp", "icmp", "vlan", "ether[12:2] = 0x800", "ip[9] = 6",
		"not ip", "not tcp", "port 80", "port 53", "tcp[13] & 2 != 0", "ether multicast", "less 100",
		"ip[9] = 17", "ip6[6] = 6", "host 10.0.0.1", "ether src 02:00:00:00:00:01"}
	op := g.pick(" or ", " and ", " or ", " || ")
	var parts []string
	for n := 2 + g.r.Intn(5); n > 0; n-- {
		parts = append(parts, pool[g.r.Intn(len(pool))])
	}
	s := strings.Join(parts, op)
	if g.chance(3) {
		s = fmt.Sprintf("(%s)%s%s", s, g.pick(" and ", " or "), g.chain())
	}
	return s
}

// expr returns an expression of about depth levels of and/or/not.
func (g *exprGen) expr(depth int) string {
	if g.chance(8) {
		return g.chain()
	}
	if depth <= 0 || g.chance(3) {
		p := g.primitive()
		if tail := g.idTail(p); tail != "" && g.chance(2) {
			switch g.r.Intn(4) {
			case 0:
				return fmt.Sprintf("%s or %s", p, tail)
			case 1:
				return fmt.Sprintf("%s and not %s", p, tail)
			case 2:
				return fmt.Sprintf("%s || %s or %s", p, tail, g.idTail(p))
			}
			return fmt.Sprintf("%s && !%s", p, tail)
		}
		return p
	}
	switch g.r.Intn(7) {
	case 0:
		return g.pick("not ", "!", "not ") + g.expr(depth-1)
	case 1:
		return "(" + g.expr(depth-1) + ")"
	case 2, 3:
		return fmt.Sprintf("%s %s %s", g.expr(depth-1), g.pick("and", "&&"), g.expr(depth-1))
	}
	return fmt.Sprintf("%s %s %s", g.expr(depth-1), g.pick("or", "||"), g.expr(depth-1))
}
