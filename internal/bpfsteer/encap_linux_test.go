//go:build linux

package bpfsteer

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/steer"
)

// encGen makes random frames of every encapsulation the classifier walks,
// nested, mostly well formed, and then often cut short or with a byte
// changed, so that every check of every header is reached from both sides.
type encGen struct {
	r     *rand.Rand
	vxlan []uint16 // the VXLAN ports of the configuration, and one that is not
}

func (g *encGen) n(k int) int        { return g.r.IntN(k) }
func (g *encGen) one(k int) bool     { return g.r.IntN(k) == 0 }
func (g *encGen) pick(v ...int) int  { return v[g.r.IntN(len(v))] }
func (g *encGen) bytes(n int) []byte { return (&frameGen{r: g.r}).bytes(n) }

func be16(b []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(b, v) }
func be32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }

// frame returns an outer Ethernet frame.
func (g *encGen) frame() []byte {
	f := g.bytes(12)
	f[0] &^= 1
	tags := 0
	if g.one(4) {
		tags = 1 + g.n(5) // up to 5: one too many
	}
	for i := 0; i < tags; i++ {
		f = be16(f, uint16(g.pick(0x8100, 0x88a8, 0x9100)))
		f = be16(f, uint16(g.n(1<<16)))
	}
	et, p := g.ether(0)
	f = append(be16(f, et), p...)
	return g.mutate(f)
}

// mutate cuts the frame short or changes a byte, sometimes.
func (g *encGen) mutate(f []byte) []byte {
	switch g.n(6) {
	case 0:
		f = f[:14+g.n(len(f)-13)]
	case 1:
		f[12+g.n(len(f)-12)] ^= byte(1 + g.n(255))
	}
	return f
}

// ether returns an EtherType and the packet after it, d tunnels deep.
func (g *encGen) ether(d int) (uint16, []byte) {
	switch g.n(16) {
	case 14, 15:
		return 0x8909, g.cmdEth(d)
	case 0, 1:
		return 0x8864, g.pppoe(d)
	case 2, 3:
		return uint16(g.pick(0x8847, 0x8847, 0x8848)), g.mpls(d)
	case 4:
		return uint16(g.pick(0x0806, 0x8863, 0x6558, 0x88cc, g.n(1<<16))), g.bytes(g.n(60))
	case 5, 6, 7, 8, 9:
		return 0x0800, g.ipv4(d)
	}
	return 0x86dd, g.ipv6(d)
}

// innerEth is an Ethernet frame inside a tunnel or pseudowire.
func (g *encGen) innerEth(d int) []byte {
	f := g.bytes(12)
	tags := 0
	if g.one(3) {
		tags = 1 + g.n(5)
	}
	for i := 0; i < tags; i++ {
		f = be16(f, uint16(g.pick(0x8100, 0x88a8, 0x9100)))
		f = be16(f, uint16(g.n(1<<16)))
	}
	et, p := g.ether(d)
	return append(be16(f, et), p...)
}

// cmdEth is Cisco MetaData in its Ethernet form (after EtherType
// 0x8909), and what follows it: sometimes cut short, sometimes another CMD
// header (which is not walked).
func (g *encGen) cmdEth(d int) []byte {
	h := []byte{1, 1, 0, 1, byte(g.n(256)), byte(g.n(256))}
	if g.one(8) {
		h = g.bytes(6)
	}
	if g.one(10) {
		return h[:g.n(7)]
	}
	if g.one(8) {
		return append(be16(h, 0x8909), g.cmdEth(d)...)
	}
	et, p := g.ether(d)
	return append(be16(h, et), p...)
}

func (g *encGen) pppoe(d int) []byte {
	var ppp []byte
	var ip []byte
	switch g.n(6) {
	case 0:
		ppp, ip = []byte{0x21}, g.ipv4(d) // compressed
	case 1:
		ppp, ip = []byte{0x57}, g.ipv6(d)
	case 2:
		ppp, ip = []byte{0xc0, 0x21}, g.bytes(g.n(20)) // LCP
	case 3:
		ppp, ip = []byte{0x00, 0x57}, g.ipv6(d)
	default:
		ppp, ip = []byte{0x00, 0x21}, g.ipv4(d)
	}
	body := append(ppp, ip...)
	h := []byte{0x11, 0}
	if g.one(20) {
		h[g.n(2)] = byte(g.n(256))
	}
	h = be16(h, uint16(g.n(1<<16)))
	l := len(body)
	if g.one(8) {
		l = g.n(len(body) + 8)
	}
	h = be16(h, uint16(l))
	return append(h, body...)
}

func (g *encGen) mpls(d int) []byte {
	n := 1 + g.n(3)
	if g.one(6) {
		n = 1 + g.n(11) // past MaxEncaps
	}
	var b []byte
	for i := 0; i < n; i++ {
		e := uint32(g.n(1<<20))<<12 | uint32(g.n(8))<<9 | uint32(g.n(256))
		if i == n-1 && !g.one(15) {
			e |= 0x100
		}
		b = be32(b, e)
	}
	switch g.n(8) {
	case 0, 1:
		return append(b, g.ipv6(d)...)
	case 2, 3:
		return append(append(b, 0, 0, byte(g.n(256)), byte(g.n(256))), g.innerEth(d)...) // pseudowire
	case 4:
		return append(b, g.bytes(g.n(30))...)
	}
	return append(b, g.ipv4(d)...)
}

func (g *encGen) addr(n int) []byte {
	a := g.bytes(n)
	if g.one(4) {
		a[n-1] &= 3 // near-equal addresses, so that symmetric compares further
		for i := 0; i < n-1; i++ {
			a[i] = 0
		}
	}
	return a
}

// payload is what an IP header d tunnels deep carries: a tunnel or a
// transport header, by protocol.
func (g *encGen) payload(d int) (uint8, []byte) {
	if d < MaxTunnelDepth+2 && g.n(5) < 3 {
		switch g.n(9) {
		case 0, 1:
			return protoUDP, g.udp(uint16(g.pick(int(g.vxlan[g.n(len(g.vxlan))]), VXLANPort)), g.vxlanHdr(d))
		case 2:
			return protoUDP, g.udp(GENEVEPort, g.geneve(d))
		case 3:
			return protoUDP, g.udp(GTPUPort, g.gtpu(d))
		case 4, 5:
			return protoGRE, g.gre(d)
		case 6:
			return protoIPIP, g.ipv4(d + 1)
		case 7:
			return protoIPv6, g.ipv6(d + 1)
		case 8:
			if g.one(2) {
				return protoUDP, g.udp(MPLSUDPPort, g.mpls(d+1))
			}
			fallthrough
		default:
			return uint8(g.pick(protoIPIP, protoIPv6, protoGRE)), g.bytes(g.n(30))
		}
	}
	switch g.n(8) {
	case 0, 1, 2:
		return protoTCP, g.bytes(20 + g.n(20))
	case 3, 4:
		return protoUDP, g.udp(uint16(g.pick(53, g.n(1<<16), VXLANPort, GENEVEPort, GTPUPort, MPLSUDPPort)), g.bytes(g.n(30)))
	case 5:
		return protoSCTP, g.bytes(12 + g.n(20))
	case 6:
		return 1, g.bytes(g.n(20))
	}
	return uint8(g.n(256)), g.bytes(g.n(24))
}

func (g *encGen) udp(dport uint16, body []byte) []byte {
	h := be16(nil, uint16(g.n(1<<16)))
	h = be16(h, dport)
	l := 8 + len(body)
	switch g.n(10) {
	case 0:
		l = g.n(l + 10)
	case 1:
		l = 0 // RFC 2675, BIG TCP
	}
	h = be16(h, uint16(l))
	return append(be16(h, 0), body...)
}

// ipv4 builds an IPv4 packet with gopacket (the fixed header), then sets
// the fields gopacket would correct.
func (g *encGen) ipv4(d int) []byte {
	proto, l4 := g.payload(d)
	ip := &layers.IPv4{
		Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocol(proto),
		SrcIP: net.IP(g.addr(4)), DstIP: net.IP(g.addr(4)),
	}
	if g.one(4) {
		ip.Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 1}}
	}
	switch g.n(10) {
	case 0:
		ip.Flags = layers.IPv4MoreFragments
	case 1:
		ip.FragOffset = uint16(1 + g.n(100))
	case 2:
		ip.Flags = layers.IPv4DontFragment
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ip, gopacket.Payload(l4)); err != nil {
		panic(err)
	}
	p := append([]byte(nil), buf.Bytes()...)
	switch g.n(12) {
	case 0:
		binary.BigEndian.PutUint16(p[2:], uint16(g.n(len(p)+1)))
	case 1:
		binary.BigEndian.PutUint16(p[2:], uint16(len(p)+g.n(100)))
	case 2:
		binary.BigEndian.PutUint16(p[2:], 0) // BIG TCP
	}
	if g.one(4) {
		p = append(p, make([]byte, g.n(20))...) // padding
	}
	return p
}

// ipv6 builds an IPv6 packet, sometimes with extension headers.
func (g *encGen) ipv6(d int) []byte {
	proto, l4 := g.payload(d)
	var ext []byte
	next := proto
	n := 0
	if g.one(3) {
		n = 1 + g.n(3)
		if g.one(8) {
			n = 7 + g.n(3)
		}
	}
	for i := 0; i < n; i++ {
		typ := uint8(g.pick(0, 43, 60, 44, 51))
		var e []byte
		switch typ {
		case 44:
			e = g.bytes(8)
			off := uint16(0)
			if g.one(3) {
				off = uint16(g.pick(1, 8, 9))
			}
			binary.BigEndian.PutUint16(e[2:], off)
		case 51:
			k := 1 + g.n(3)
			e = g.bytes((k + 2) * 4)
			e[1] = byte(k)
		default:
			k := g.n(2)
			e = g.bytes((k + 1) * 8)
			e[1] = byte(k)
		}
		e[0] = next
		next = typ
		ext = append(e, ext...)
	}
	jumbo := g.one(10)
	if jumbo { // RFC 2675: a Jumbo Payload option, and a payload length of 0
		ext = append(be32([]byte{next, 0, 0xc2, 4}, uint32(8+len(ext)+len(l4))), ext...)
		next = 0
	}
	ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocol(next),
		SrcIP: net.IP(g.addr(16)), DstIP: net.IP(g.addr(16))}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, ip, gopacket.Payload(append(ext, l4...))); err != nil {
		panic(err)
	}
	p := append([]byte(nil), buf.Bytes()...)
	if jumbo {
		binary.BigEndian.PutUint16(p[4:], 0)
	}
	switch g.n(12) {
	case 0:
		binary.BigEndian.PutUint16(p[4:], 0)
	case 1:
		binary.BigEndian.PutUint16(p[4:], uint16(g.n(len(p))))
	}
	if g.one(4) {
		p = append(p, make([]byte, g.n(20))...)
	}
	return p
}

func (g *encGen) vxlanHdr(d int) []byte {
	v := &layers.VXLAN{ValidIDFlag: !g.one(12), VNI: uint32(g.n(1 << 24))}
	buf := gopacket.NewSerializeBuffer()
	if err := v.SerializeTo(buf, gopacket.SerializeOptions{}); err != nil {
		panic(err)
	}
	return append(append([]byte(nil), buf.Bytes()...), g.innerEth(d+1)...)
}

func (g *encGen) geneve(d int) []byte {
	opt := g.n(3)
	h := []byte{byte(opt), 0}
	if g.one(15) {
		h[0] |= 0x40 // version 1
	}
	var body []byte
	switch g.n(6) {
	case 0, 1, 2:
		h, body = be16(h, 0x6558), g.innerEth(d+1)
	case 3:
		h, body = be16(h, 0x0800), g.ipv4(d+1)
	case 4:
		h, body = be16(h, 0x86dd), g.ipv6(d+1)
	default:
		et, p := g.ether(d + 1)
		h, body = be16(h, et), p
	}
	h = be32(h, uint32(g.n(1<<24))<<8)
	h = append(h, g.bytes(4*opt)...)
	return append(h, body...)
}

func (g *encGen) gre(d int) []byte {
	flags := uint16(0)
	for _, f := range []uint16{greChecksum, greKey, greSeq} {
		if g.one(2) {
			flags |= f
		}
	}
	if g.one(20) {
		flags |= uint16(g.pick(greRouting, 1))
	}
	var proto uint16
	var body []byte
	switch g.n(10) {
	case 0, 1:
		proto, body = 0x6558, g.innerEth(d+1)
	case 2, 8:
		proto = 0x88be
		if flags&greSeq != 0 { // type II
			e := &layers.ERSPANII{Version: 1, SessionID: uint16(g.n(1 << 10)), VLANIdentifier: uint16(g.n(1 << 12))}
			if g.one(15) {
				e.Version = 2
			}
			buf := gopacket.NewSerializeBuffer()
			if err := e.SerializeTo(buf, gopacket.SerializeOptions{}); err != nil {
				panic(err)
			}
			body = append(append([]byte(nil), buf.Bytes()...), g.innerEth(d+1)...)
		} else {
			body = g.innerEth(d + 1) // type I
		}
	case 3, 9:
		proto = 0x22eb
		e := g.bytes(12)
		e[0] = 0x20 | e[0]&0x0f
		if g.one(15) {
			e[0] = 0x10
		}
		e[10] &^= 0x1f << 2
		if g.one(4) {
			e[10] |= byte(g.pick(1, 16, 1+g.n(31))) << 2 // a frame type other than Ethernet
		}
		if g.one(2) {
			e[11] |= 1
			e = append(e, g.bytes(8)...)
		} else {
			e[11] &^= 1
		}
		body = append(e, g.innerEth(d+1)...)
	case 4:
		proto, body = 0x0800, g.ipv4(d+1)
	case 5:
		proto, body = 0x86dd, g.ipv6(d+1)
	case 6:
		proto, body = 0x8909, g.cmdGRE(d+1)
	default:
		proto, body = g.ether(d + 1)
	}
	gr := &layers.GRE{
		ChecksumPresent: flags&greChecksum != 0, RoutingPresent: flags&greRouting != 0,
		KeyPresent: flags&greKey != 0, SeqPresent: flags&greSeq != 0,
		Version: uint8(flags & greVersion), Protocol: layers.EthernetType(proto),
		Key: uint32(g.n(1 << 30)), Seq: uint32(g.n(1 << 30)),
	}
	if gr.RoutingPresent {
		// gopacket writes a routing field of its own; take the header by hand.
		h := be16(nil, flags)
		h = be16(h, proto)
		return append(append(h, g.bytes(4*g.n(3))...), body...)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gr.SerializeTo(buf, gopacket.SerializeOptions{}); err != nil {
		panic(err)
	}
	return append(append([]byte(nil), buf.Bytes()...), body...)
}

// cmdGRE is Cisco MetaData in its GRE form (after GRE protocol 0x8909,
// the EtherType first), and what follows it: sometimes cut short, an
// Ethernet frame, or another CMD header (which is not walked).
func (g *encGen) cmdGRE(d int) []byte {
	var et uint16
	var body []byte
	switch g.n(8) {
	case 0:
		et, body = 0x6558, g.innerEth(d)
	case 1:
		et, body = 0x8909, g.cmdEth(d)
	default:
		et, body = g.ether(d)
	}
	h := append(be16(nil, et), 1, 1, 0, 1, byte(g.n(256)), byte(g.n(256)))
	if g.one(10) {
		return h[:g.n(8)]
	}
	return append(h, body...)
}

func (g *encGen) gtpu(d int) []byte {
	var body []byte
	switch g.n(5) {
	case 0, 1:
		body = g.ipv4(d + 1)
	case 2, 3:
		body = g.ipv6(d + 1)
	default:
		body = g.bytes(g.n(20))
	}
	flags := byte(0x30) // version 1, protocol type GTP
	if g.one(20) {
		flags = byte(g.n(256))
	}
	var opt []byte
	if g.one(2) {
		flags |= byte(1 + g.n(7))
	}
	if flags&7 != 0 {
		opt = []byte{byte(g.n(256)), byte(g.n(256)), byte(g.n(256)), 0}
		ext := 0
		if g.one(2) {
			ext = 1 + g.n(3)
			if g.one(10) {
				ext = 9
			}
		}
		for i := 0; i < ext; i++ {
			units := 1 + g.n(2)
			if g.one(20) {
				units = 0
			}
			opt[len(opt)-1] = byte(g.pick(0x85, 0xc0, 0x40))
			e := make([]byte, max(units, 1)*4)
			e[0] = byte(units)
			for k := 1; k < len(e)-1; k++ {
				e[k] = byte(g.n(256))
			}
			opt = append(opt, e...)
		}
	}
	mt := byte(0xff)
	if g.one(10) {
		mt = byte(g.pick(1, 2, 26, 254))
	}
	h := []byte{flags, mt}
	l := len(opt) + len(body)
	if g.one(8) {
		l = g.n(l + 10)
	}
	h = be16(h, uint16(l))
	h = be32(h, g.r.Uint32()>>1)
	return append(append(h, opt...), body...)
}

// encConfig is one configuration both sides are built with.
type encConfig struct {
	name string
	hc   steer.HashConfig
}

// encConfigs are the combinations the program claims: tunnels outer and
// inner; the default hash types, IP pairs only, UDP 4-tuples, a mixed
// set; symmetric or not; Toeplitz and SipHash; other VXLAN ports.
func encConfigs(t *testing.T) []encConfig {
	var out []encConfig
	types := []struct {
		name string
		t    hash.Types
	}{
		{"default", 0},
		{"ippair", hash.TypeIPv4 | hash.TypeIPv6},
		{"udp4", hash.AllTypes},
		{"mixed", hash.TypeIPv4 | hash.TypeIPv6 | hash.TypeTCPIPv4 | hash.TypeUDPIPv6},
	}
	for _, alg := range []hash.Algorithm{hash.AlgorithmToeplitz, hash.AlgorithmSipHash} {
		keyLen := 40
		if alg == hash.AlgorithmSipHash {
			keyLen = hash.SipHashKeyLen
		}
		for _, tun := range []steer.TunnelMode{steer.TunnelsOuter, steer.TunnelsInner} {
			for _, ty := range types {
				for _, sym := range []bool{false, true} {
					key := randKey(t, keyLen)
					out = append(out, encConfig{
						name: fmt.Sprintf("%v/%v/%s/sym=%v", alg, tun, ty.name, sym),
						hc:   steer.HashConfig{Algorithm: alg, Key: key, Types: ty.t, Symmetric: sym, Tunnels: tun},
					})
				}
			}
		}
	}
	out = append(out, encConfig{name: "toeplitz/inner/vxlan-ports",
		hc: steer.HashConfig{Key: randKey(t, 52), Tunnels: steer.TunnelsInner, UDP4Tuple: true, VXLANPorts: []uint16{8472, 4790, 4789}}})
	return out
}

func randKey(t testing.TB, n int) []byte {
	t.Helper()
	k := make([]byte, n)
	r := rand.New(rand.NewPCG(rand.Uint64(), 7))
	for i := range k {
		k[i] = byte(r.UintN(256))
	}
	return k
}

// optionsFor is the program's configuration for hc, as steer/afpacket
// builds it.
func optionsFor(hc steer.HashConfig, table []uint32, fallback uint32, hook Hook) Options {
	return Options{Algorithm: hc.Algorithm, Key: hc.Key, Table: table, Symmetric: hc.Symmetric,
		Types: hc.Types, UDP4Tuple: hc.UDP4Tuple, Tunnels: hc.Tunnels == steer.TunnelsInner,
		VXLANPorts: hc.VXLANPorts, FollowFragments: hc.Fragments == steer.FragmentsFollow, Fallback: fallback, Hook: hook}
}

// identityTable maps every bucket to itself: the program then returns
// flowid & 0xffff, the low 16 bits of its flowid, for every hashed frame.
func identityTable() []uint32 {
	t := make([]uint32, MaxTableLen)
	for i := range t {
		t[i] = uint32(i)
	}
	return t
}

// encFallback is returned for frames not hashed: no bucket of the
// identity table.
const encFallback = 1 << 20

// want is what the program must return for f: user space's bucket, or
// the fallback.
func want(c *steer.Classifier, f []byte, out *steer.Classification) uint32 {
	c.Classify(f, out)
	if out.HashType == hash.None {
		return encFallback
	}
	return out.FlowID & (MaxTableLen - 1)
}

// TestEncapAgreement runs frames of every encapsulation through the
// program with BPF_PROG_TEST_RUN for every configuration and compares the
// low 16 bits of its flowid (the identity table returns them) with steer's
// classifier: the same frames hashed, the same tuples, the same hash.
func TestEncapAgreement(t *testing.T) {
	seed, frames := agreementStart(t, 4000, 600)
	table := identityTable()
	forHooks(t, func(t *testing.T, hook Hook) { encapAgreement(t, hook, table, seed, frames) })
}

// agreementStart begins an agreement test: it needs the privilege, and
// takes a random seed, logged, and n frames, or short with -short.
func agreementStart(t *testing.T, n, short int) (seed uint64, frames int) {
	requirePriv(t)
	seed = rand.Uint64()
	t.Logf("seed %d", seed)
	if testing.Short() {
		return seed, short
	}
	return seed, n
}

// encapAgreement is TestEncapAgreement for one hook.
func encapAgreement(t *testing.T, hook Hook, table []uint32, seed uint64, frames int) {
	for _, cfg := range encConfigs(t) {
		t.Run(cfg.name, func(t *testing.T) {
			cls, err := steer.NewClassifier(cfg.hc)
			if err != nil {
				t.Fatal(err)
			}
			p := loadHook(t, optionsFor(cfg.hc, table, encFallback, hook))
			ports := cfg.hc.VXLANPorts
			if ports == nil {
				ports = []uint16{VXLANPort}
			}
			g := &encGen{r: rand.New(rand.NewPCG(seed, 2)), vxlan: append(append([]uint16(nil), ports...), 8472)}
			cov := newCoverage()
			var c steer.Classification
			for i := 0; i < frames; i++ {
				f := g.frame()
				if !testable(f) {
					i--
					continue
				}
				w := want(cls, f, &c)
				if got := run(t, p, f); got != w {
					t.Fatalf("frame %x: program returned %#x, user space %#x (%v, flowid %#x, reason %v, encaps %s, depth %d, tuple %x)",
						f, got, w, c.HashType, c.FlowID, c.Reason, c.Key.Encapsulation(), c.Key.Depth, c.Tuple())
				}
				cov.add(&c)
			}
			if testing.Short() {
				return // too few frames to reach every path
			}
			cov.check(t, cfg.hc.Tunnels == steer.TunnelsInner)
		})
	}
}

// coverage counts what the frames exercised, so that a generator that
// stopped reaching a path fails the test instead of passing it unseen.
type coverage struct {
	hashedIn map[steer.EncapKind]int // hashed frames with an encapsulation of the kind
	reasons  map[steer.Reason]int
	depth    [MaxTunnelDepth + 1]int
	hashed   int
}

func newCoverage() *coverage {
	return &coverage{hashedIn: map[steer.EncapKind]int{}, reasons: map[steer.Reason]int{}}
}

func (v *coverage) add(c *steer.Classification) {
	v.reasons[c.Reason]++
	if c.HashType == hash.None {
		return
	}
	v.hashed++
	v.depth[min(int(c.Key.Depth), MaxTunnelDepth)]++
	for _, e := range c.Key.Encaps[:c.Key.NEncap] {
		v.hashedIn[e.Kind]++
	}
}

func (v *coverage) check(t *testing.T, tunnels bool) {
	t.Helper()
	kinds := []steer.EncapKind{steer.EncapVLAN, steer.EncapMPLS, steer.EncapPseudowire, steer.EncapPPPoE, steer.EncapCMD}
	reasons := []steer.Reason{steer.ReasonOK, steer.ReasonNonIP, steer.ReasonBadPPPoE, steer.ReasonPPPNonIP,
		steer.ReasonBadMPLS, steer.ReasonMPLSNonIP, steer.ReasonTooDeep, steer.ReasonShortTransport, steer.ReasonBadExtHeader,
		steer.ReasonBadCMD}
	if tunnels {
		kinds = append(kinds, steer.EncapVXLAN, steer.EncapGENEVE, steer.EncapGRE, steer.EncapERSPAN1,
			steer.EncapERSPAN2, steer.EncapERSPAN3, steer.EncapGTPU, steer.EncapIPIP, steer.EncapMPLSUDP)
		reasons = append(reasons, steer.ReasonTunnelNonIP, steer.ReasonBadVXLAN, steer.ReasonBadGENEVE,
			steer.ReasonBadGRE, steer.ReasonBadERSPAN, steer.ReasonBadGTPU)
	}
	var missing []string
	for _, k := range kinds {
		if v.hashedIn[k] == 0 {
			missing = append(missing, "hashed inside "+k.String())
		}
	}
	for _, r := range reasons {
		if v.reasons[r] == 0 {
			missing = append(missing, "reason "+r.String())
		}
	}
	if tunnels {
		for d, n := range v.depth {
			if n == 0 {
				missing = append(missing, fmt.Sprintf("hashed at depth %d", d))
			}
		}
	}
	t.Logf("%d hashed; by depth %v; inside %v; reasons %v", v.hashed, v.depth, v.hashedIn, v.reasons)
	if len(missing) > 0 {
		t.Errorf("the frames did not exercise: %v (hashed %d, depths %v, reasons %v)", missing, v.hashed, v.depth, v.reasons)
	}
}
