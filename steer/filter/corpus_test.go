package filter

import (
	"bufio"
	"encoding/binary"
	"net/netip"
	"os"
	"strings"
	"testing"
)

// pkt is a synthetic frame and what was put in it, for predicates that say
// with libpcap's semantics whether an expression matches.
type pkt struct {
	data   []byte
	vlans  []uint16 // in-packet 802.1Q/802.1ad tags, outermost first
	etype  uint16   // the EtherType after the tags
	arp    bool     // an ARP frame; src and dst are its sender and target
	src    netip.Addr
	dst    netip.Addr
	proto  uint8 // IPv4 protocol or IPv6 next header after the fixed header
	l4     bool  // ports readable: not a fragment, and (IPv6) no extension header before them
	sport  uint16
	dport  uint16
	nextIP uint8 // IPv6: the protocol after a hop-by-hop header, when proto is 0
	runt   bool  // cut short: every expression here reads past its end, which rejects it
}

func (p *pkt) untagged() bool { return len(p.vlans) == 0 }
func (p *pkt) ip4() bool      { return p.etype == 0x0800 && p.src.Is4() }
func (p *pkt) ip6() bool      { return p.etype == 0x86dd }
func (p *pkt) port(n uint16) bool {
	return p.l4 && (p.proto == 6 || p.proto == 17 || p.proto == 132) && (p.sport == n || p.dport == n)
}
func (p *pkt) portIn(lo, hi uint16) bool {
	in := func(v uint16) bool { return v >= lo && v <= hi }
	return p.l4 && (p.proto == 6 || p.proto == 17 || p.proto == 132) && (in(p.sport) || in(p.dport))
}
func (p *pkt) host(a netip.Addr) bool {
	return (p.ip4() || p.arp || p.ip6()) && (p.src == a || p.dst == a)
}
func (p *pkt) inNet(n netip.Prefix) bool {
	return (p.ip4() || p.arp) && (n.Contains(p.src) || n.Contains(p.dst))
}

// isTCP is libpcap's "tcp": IPv4 protocol 6, or IPv6 next header 6 right
// after the fixed header (libpcap also follows one fragment header; the
// corpus has none).
func (p *pkt) isTCP() bool { return (p.ip4() || p.ip6()) && p.proto == 6 }
func (p *pkt) isUDP() bool { return (p.ip4() || p.ip6()) && p.proto == 17 }

// tagged returns p as seen after its outermost tag: the view libpcap's
// "vlan" gives the rest of the expression.
func (p *pkt) inner() *pkt {
	q := *p
	q.vlans = p.vlans[1:]
	return &q
}

// predicates say what each expression of testdata/tcpdump.txt matches.
var predicates = map[string]func(p *pkt) bool{
	"tcp port 80":   func(p *pkt) bool { return p.untagged() && p.isTCP() && p.port(80) },
	"tcp port 5201": func(p *pkt) bool { return p.untagged() && p.isTCP() && p.port(5201) },
	"host 10.0.0.1": func(p *pkt) bool {
		return p.untagged() && !p.ip6() && p.host(netip.MustParseAddr("10.0.0.1"))
	},
	"udp and not port 53": func(p *pkt) bool { return p.untagged() && p.isUDP() && !p.port(53) },
	"vlan":                func(p *pkt) bool { return !p.untagged() },
	"vlan 100":            func(p *pkt) bool { return !p.untagged() && p.vlans[0] == 100 },
	"vlan and tcp port 80": func(p *pkt) bool {
		if p.untagged() {
			return false
		}
		q := p.inner()
		return q.untagged() && q.isTCP() && q.port(80)
	},
	"ip6":                 func(p *pkt) bool { return p.untagged() && p.ip6() },
	"icmp":                func(p *pkt) bool { return p.untagged() && p.ip4() && p.proto == 1 },
	"portrange 8000-8080": func(p *pkt) bool { return p.untagged() && (p.ip4() || p.ip6()) && p.portIn(8000, 8080) },
	"net 192.168.0.0/16": func(p *pkt) bool {
		return p.untagged() && p.inNet(netip.MustParsePrefix("192.168.0.0/16"))
	},
	"net 192.168.1.0 mask 255.255.255.0": func(p *pkt) bool {
		return p.untagged() && p.inNet(netip.MustParsePrefix("192.168.1.0/24"))
	},
	"ether proto 0x88cc": func(p *pkt) bool { return p.untagged() && p.etype == 0x88cc },
	"not tcp":            func(p *pkt) bool { return !(p.untagged() && p.isTCP()) },
	"ip6 and tcp port 80 or udp": func(p *pkt) bool {
		return p.untagged() && ((p.ip6() && p.isTCP() && p.port(80)) || p.isUDP())
	},
}

// The frame builders.

func eth(dst, src [6]byte, typ uint16, payload []byte) []byte {
	b := append(append(append([]byte{}, dst[:]...), src[:]...), byte(typ>>8), byte(typ))
	return append(b, payload...)
}

func tag(tci, inner uint16, payload []byte) []byte {
	return append([]byte{byte(tci >> 8), byte(tci), byte(inner >> 8), byte(inner)}, payload...)
}

func ipv4(src, dst netip.Addr, proto byte, frag uint16, payload []byte) []byte {
	b := make([]byte, 20, 20+len(payload))
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(20+len(payload)))
	binary.BigEndian.PutUint16(b[6:], frag)
	b[8], b[9] = 64, proto
	s, d := src.As4(), dst.As4()
	copy(b[12:], s[:])
	copy(b[16:], d[:])
	return append(b, payload...)
}

func ipv6(src, dst netip.Addr, nh byte, payload []byte) []byte {
	b := make([]byte, 40, 40+len(payload))
	b[0] = 0x60
	binary.BigEndian.PutUint16(b[4:], uint16(len(payload)))
	b[6], b[7] = nh, 64
	s, d := src.As16(), dst.As16()
	copy(b[8:], s[:])
	copy(b[24:], d[:])
	return append(b, payload...)
}

func ports(sp, dp uint16, n int) []byte {
	b := make([]byte, n)
	binary.BigEndian.PutUint16(b, sp)
	binary.BigEndian.PutUint16(b[2:], dp)
	return b
}

// corpus builds frames of every kind the predicates tell apart: IPv4 and
// IPv6 TCP, UDP and ICMP between a few addresses and ports, fragments,
// one and two VLAN tags, an IPv6 hop-by-hop header, ARP, LLDP, runts.
func corpus() []*pkt {
	m1, m2 := [6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2}
	var out []*pkt
	add := func(p *pkt) { out = append(out, p) }
	v4 := []string{"10.0.0.1", "10.0.0.2", "192.168.1.7", "192.168.2.7", "172.16.0.1"}
	v6 := []string{"fd00::1", "fd00::2", "2001:db8::9"}
	pl := []uint16{80, 443, 53, 5201, 8000, 8050, 8080, 8081, 22, 40000}
	for _, s := range v4 {
		for _, d := range v4 {
			src, dst := netip.MustParseAddr(s), netip.MustParseAddr(d)
			for _, sp := range pl {
				for _, dp := range []uint16{80, 53, 5201, 33000} {
					for _, proto := range []uint8{6, 17} {
						n := 20
						if proto == 17 {
							n = 8
						}
						l4 := ports(sp, dp, n)
						p := &pkt{etype: 0x0800, src: src, dst: dst, proto: proto, l4: true, sport: sp, dport: dp}
						p.data = eth(m2, m1, 0x0800, ipv4(src, dst, proto, 0x4000, l4))
						add(p)
						t := *p
						t.vlans = []uint16{100}
						t.data = eth(m2, m1, 0x8100, tag(100, 0x0800, ipv4(src, dst, proto, 0, l4)))
						add(&t)
					}
				}
				// A later fragment: no ports in it.
				add(&pkt{etype: 0x0800, src: src, dst: dst, proto: 17,
					data: eth(m2, m1, 0x0800, ipv4(src, dst, 17, 0x0010, ports(sp, 53, 8)))})
				// Two tags (802.1ad outside, 802.1Q inside).
				q := &pkt{vlans: []uint16{200, 300}, etype: 0x0800, src: src, dst: dst, proto: 6, l4: true, sport: 40000, dport: sp}
				q.data = eth(m2, m1, 0x88a8, tag(200, 0x8100, tag(300, 0x0800, ipv4(src, dst, 6, 0, ports(40000, sp, 20)))))
				add(q)
			}
			add(&pkt{etype: 0x0800, src: src, dst: dst, proto: 1, data: eth(m2, m1, 0x0800, ipv4(src, dst, 1, 0, []byte{8, 0, 0, 0, 0, 0, 0, 0}))})
			add(&pkt{etype: 0x0800, src: src, dst: dst, proto: 47, data: eth(m2, m1, 0x0800, ipv4(src, dst, 47, 0, make([]byte, 100)))})
		}
	}
	for _, s := range v6 {
		for _, d := range v6 {
			src, dst := netip.MustParseAddr(s), netip.MustParseAddr(d)
			for _, dp := range pl {
				for _, proto := range []uint8{6, 17} {
					p := &pkt{etype: 0x86dd, src: src, dst: dst, proto: proto, l4: true, sport: 40000, dport: dp}
					p.data = eth(m2, m1, 0x86dd, ipv6(src, dst, proto, ports(40000, dp, 20)))
					add(p)
				}
				hbh := append([]byte{6, 0, 1, 4, 0, 0, 0, 0}, ports(40000, dp, 20)...)
				add(&pkt{etype: 0x86dd, src: src, dst: dst, proto: 0, nextIP: 6, data: eth(m2, m1, 0x86dd, ipv6(src, dst, 0, hbh))})
				t := &pkt{vlans: []uint16{100}, etype: 0x86dd, src: src, dst: dst, proto: 6, l4: true, sport: 40000, dport: dp}
				t.data = eth(m2, m1, 0x8100, tag(100, 0x86dd, ipv6(src, dst, 6, ports(40000, dp, 20))))
				add(t)
			}
			add(&pkt{etype: 0x86dd, src: src, dst: dst, proto: 58, data: eth(m2, m1, 0x86dd, ipv6(src, dst, 58, []byte{128, 0, 0, 0, 0, 0, 0, 0}))})
		}
	}
	arp := make([]byte, 28)
	binary.BigEndian.PutUint16(arp, 1)
	binary.BigEndian.PutUint16(arp[2:], 0x0800)
	arp[4], arp[5], arp[7] = 6, 4, 1
	for _, pair := range [][2]string{{"10.0.0.1", "10.0.0.2"}, {"192.168.1.1", "192.168.1.2"}} {
		a := append([]byte(nil), arp...)
		s, d := netip.MustParseAddr(pair[0]), netip.MustParseAddr(pair[1])
		s4, d4 := s.As4(), d.As4()
		copy(a[14:], s4[:])
		copy(a[24:], d4[:])
		add(&pkt{etype: 0x0806, arp: true, src: s, dst: d, data: eth([6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, m1, 0x0806, a)})
	}
	add(&pkt{etype: 0x88cc, data: eth(m2, m1, 0x88cc, make([]byte, 40))})
	add(&pkt{etype: 0x88cc, vlans: []uint16{7}, data: eth(m2, m1, 0x8100, tag(7, 0x88cc, make([]byte, 40)))})
	add(&pkt{runt: true, data: []byte{1, 2, 3}})
	add(&pkt{runt: true, data: nil})
	add(&pkt{runt: true, etype: 0x0800, data: eth(m2, m1, 0x0800, []byte{0x45})})
	return out
}

// want says whether the expression matches p.
func want(expr string, p *pkt) bool {
	return !p.runt && predicates[expr](p)
}

// testdata reads testdata/tcpdump.txt: expression -> program text.
func testdata(t testing.TB) (exprs []string, progs map[string]string) {
	t.Helper()
	f, err := os.Open("testdata/tcpdump.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	progs = map[string]string{}
	var cur string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "= "):
			cur = strings.TrimPrefix(line, "= ")
			exprs = append(exprs, cur)
		case cur != "":
			progs[cur] += line + "\n"
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return exprs, progs
}
