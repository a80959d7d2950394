//go:build linux

package bpfsteer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/rlimit"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/steer"
)

// requirePriv skips the test when eBPF cannot be used, or fails it when
// STEER_REQUIRE_PRIV=1.
func requirePriv(t testing.TB) {
	t.Helper()
	skip := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("STEER_REQUIRE_PRIV") == "1" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	if os.Geteuid() != 0 {
		skip("needs root to load eBPF programs (euid %d)", os.Geteuid())
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		skip("cannot raise RLIMIT_MEMLOCK for eBPF maps: %v", err)
	}
}

// load builds and loads a program, skipping when the kernel refuses eBPF.
func load(t testing.TB, opts Options) *Program {
	t.Helper()
	p, err := New(opts)
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			t.Fatalf("verifier rejected the program: %+v", ve)
		}
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// testable reports whether BPF_PROG_TEST_RUN accepts frame: it refuses
// an IPv4 or IPv6 EtherType at offset 12 without the fixed IP header after
// it (a VLAN-tagged short packet is accepted, and still tests the program).
func testable(frame []byte) bool {
	switch binary.BigEndian.Uint16(frame[12:]) {
	case 0x0800:
		return len(frame) >= 14+20
	case 0x86dd:
		return len(frame) >= 14+40
	}
	return true
}

func run(t *testing.T, p steering, frame []byte) uint32 {
	t.Helper()
	ret, err := p.ebpfProgram().Run(&ebpf.RunOptions{Data: frame})
	if err != nil {
		t.Fatalf("test run of a %d-byte frame: %v", len(frame), err)
	}
	return ret
}

// refClassify is the test's own reading of the classification rules,
// written from the rules, not from steer's code: it returns the flowid and
// whether the frame is hashed at all.
func refClassify(f []byte, h *hash.Toeplitz, symmetric, udp4 bool) (uint32, bool) {
	be16 := func(b []byte) int { return int(binary.BigEndian.Uint16(b)) }
	if len(f) < 14 {
		return 0, false
	}
	et, off := be16(f[12:]), 14
	for tags := 0; et == 0x8100 || et == 0x88a8 || et == 0x9100; tags++ {
		if tags == 4 || len(f) < off+4 {
			return 0, false
		}
		et, off = be16(f[off+2:]), off+4
	}
	p := f[off:]
	var src, dst, l4 []byte
	var proto byte
	frag := false
	switch et {
	case 0x0800:
		if len(p) < 20 || p[0]>>4 != 4 {
			return 0, false
		}
		hl := int(p[0]&15) * 4
		tl := be16(p[2:])
		if tl == 0 { // BIG TCP
			tl = len(p)
		}
		if hl < 20 || hl > len(p) || tl < hl {
			return 0, false
		}
		src, dst, proto = p[12:16], p[16:20], p[9]
		frag = be16(p[6:])&0x3fff != 0
		if tl < len(p) {
			p = p[:tl]
		}
		l4 = p[hl:]
	case 0x86dd:
		if len(p) < 40 || p[0]>>4 != 6 {
			return 0, false
		}
		src, dst = p[8:24], p[24:40]
		if pl := be16(p[4:]); pl != 0 && 40+pl < len(p) {
			p = p[:40+pl]
		}
		nh, o := p[6], 40
	walk:
		for n := 0; ; n++ {
			var l int
			switch nh {
			case 0, 43, 60:
				if o+2 > len(p) {
					return 0, false
				}
				l = (int(p[o+1]) + 1) * 8
			case 51:
				if o+2 > len(p) {
					return 0, false
				}
				l = (int(p[o+1]) + 2) * 4
			case 44:
				l = 8
			default:
				break walk
			}
			if n == 8 || o+l > len(p) {
				return 0, false
			}
			if nh == 44 && be16(p[o+2:])&0xfff9 != 0 {
				frag = true
				break walk
			}
			nh, o = p[o], o+l
		}
		proto, l4 = nh, p[o:]
	default:
		return 0, false
	}
	four := !frag && len(l4) >= 4 && (proto == 6 || (udp4 && (proto == 17 || proto == 132)))
	var sp, dp []byte
	if four {
		sp, dp = l4[0:2], l4[2:4]
	} else {
		sp, dp = []byte{0, 0}, []byte{0, 0}
	}
	if symmetric {
		c := bytes.Compare(src, dst)
		if c > 0 || (c == 0 && bytes.Compare(sp, dp) > 0) {
			src, dst, sp, dp = dst, src, dp, sp
		}
	}
	t := append(append([]byte{}, src...), dst...)
	if four {
		t = append(append(t, sp...), dp...)
	}
	return h.Sum(t), true
}

// frameGen makes random frames that stress every rule.
type frameGen struct{ r *rand.Rand }

func (g *frameGen) bytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(g.r.UintN(256))
	}
	return b
}

func (g *frameGen) pick(v ...int) int { return v[g.r.IntN(len(v))] }

// addrs returns two addresses of n bytes, often sharing a prefix or equal,
// so that the symmetric comparison walks every word.
func (g *frameGen) addrs(n int) (a, b []byte) {
	a = g.bytes(n)
	b = g.bytes(n)
	switch g.r.IntN(5) {
	case 0:
		copy(b, a) // equal: the ports decide
	case 1:
		k := g.r.IntN(n)
		copy(b[:k], a[:k]) // common prefix
	case 2:
		if n == 16 { // IPv4-mapped: hashed as 16 bytes, never unmapped
			copy(a, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff})
			copy(b, a[:12])
		}
	}
	return a, b
}

func (g *frameGen) transport(proto byte) []byte {
	var l4 []byte
	switch proto {
	case 6:
		l4 = g.bytes(20)
	case 17, 132:
		l4 = g.bytes(8 + g.r.IntN(12))
	default:
		l4 = g.bytes(g.r.IntN(24))
	}
	if len(l4) >= 4 && g.r.IntN(6) == 0 {
		copy(l4[2:4], l4[0:2]) // equal ports
	}
	return l4
}

func (g *frameGen) ipv4() []byte {
	proto := byte(g.pick(6, 6, 17, 17, 132, 1, 47, 50, int(g.r.UintN(256))))
	ihl := 5
	if g.r.IntN(3) == 0 {
		ihl = 5 + g.r.IntN(11)
	}
	h := g.bytes(ihl * 4)
	h[0] = 0x40 | byte(ihl)
	h[9] = proto
	src, dst := g.addrs(4)
	copy(h[12:], src)
	copy(h[16:], dst)
	switch g.r.IntN(6) {
	case 0: // fragment: MF, offset, or both
		binary.BigEndian.PutUint16(h[6:], uint16(g.pick(0x2000, 0x0001+g.r.IntN(0x1fff), 0x2000|g.r.IntN(0x1fff))))
	case 1: // DF only, unfragmented
		binary.BigEndian.PutUint16(h[6:], 0x4000)
	default:
		binary.BigEndian.PutUint16(h[6:], 0)
	}
	pkt := append(h, g.transport(proto)...)
	tl := len(pkt)
	switch g.r.IntN(10) {
	case 0:
		tl = g.r.IntN(len(pkt) + 1) // short total length (maybe below IHL)
	case 1:
		tl += g.r.IntN(100) // longer than the frame: a snap-length cut
	case 2:
		tl = ihl*4 + g.r.IntN(4) // ports cut off by the total length
	}
	binary.BigEndian.PutUint16(pkt[2:], uint16(tl))
	if g.r.IntN(20) == 0 {
		pkt[0] = byte(g.r.UintN(256)) // bad version or IHL
	}
	if g.r.IntN(4) == 0 {
		pkt = append(pkt, make([]byte, g.r.IntN(30))...) // Ethernet padding
	}
	return pkt
}

func (g *frameGen) ipv6() []byte {
	h := g.bytes(40)
	h[0] = 0x60 | h[0]&0x0f
	src, dst := g.addrs(16)
	copy(h[8:], src)
	copy(h[24:], dst)
	proto := byte(g.pick(6, 6, 17, 17, 132, 58, 50, int(g.r.UintN(256))))
	var ext []byte
	last := &h[6]
	nExt := 0
	if g.r.IntN(2) == 0 {
		nExt = g.r.IntN(11) // up to 10: more than 8 is a chain too long
	}
	for i := 0; i < nExt; i++ {
		typ := byte(g.pick(0, 43, 60, 44, 51))
		var e []byte
		switch typ {
		case 0, 43, 60:
			n := g.r.IntN(3)
			e = g.bytes((n + 1) * 8)
			e[1] = byte(n)
		case 51:
			n := 1 + g.r.IntN(4)
			e = g.bytes((n + 2) * 4)
			e[1] = byte(n)
		case 44:
			e = g.bytes(8)
			switch g.r.IntN(3) {
			case 0: // atomic fragment
				binary.BigEndian.PutUint16(e[2:], uint16(g.r.IntN(2)<<1|g.r.IntN(2)<<2))
			case 1: // first fragment
				binary.BigEndian.PutUint16(e[2:], 1)
			default: // later fragment
				binary.BigEndian.PutUint16(e[2:], uint16(g.r.IntN(0x1fff)+1)<<3|uint16(g.r.IntN(2)))
			}
		}
		*last = typ
		ext = append(ext, e...)
		last = &ext[len(ext)-len(e)]
	}
	*last = proto
	pkt := append(append(h, ext...), g.transport(proto)...)
	pl := len(pkt) - 40
	switch g.r.IntN(8) {
	case 0:
		pl = 0 // jumbogram style: the frame decides
	case 1:
		pl = g.r.IntN(pl + 1) // cuts the chain or the ports
	case 2:
		pl += g.r.IntN(64)
	}
	binary.BigEndian.PutUint16(pkt[4:], uint16(pl))
	if g.r.IntN(20) == 0 {
		pkt[0] = byte(g.r.UintN(256))
	}
	if g.r.IntN(4) == 0 {
		pkt = append(pkt, make([]byte, g.r.IntN(30))...)
	}
	return pkt
}

// frame returns a random Ethernet frame of at least 14 bytes (the test run
// refuses shorter input).
func (g *frameGen) frame() []byte {
	f := g.bytes(12)
	tags := 0
	if g.r.IntN(3) == 0 {
		tags = 1 + g.r.IntN(5) // up to 5: one too many
	}
	for i := 0; i < tags; i++ {
		f = binary.BigEndian.AppendUint16(f, uint16(g.pick(0x8100, 0x88a8, 0x9100)))
		f = binary.BigEndian.AppendUint16(f, uint16(g.r.UintN(1<<16)))
	}
	switch g.r.IntN(20) {
	case 0:
		f = binary.BigEndian.AppendUint16(f, 0x0806)
		f = append(f, g.bytes(28)...)
	case 1:
		f = binary.BigEndian.AppendUint16(f, uint16(g.r.UintN(1<<16)))
		f = append(f, g.bytes(g.r.IntN(60))...)
	default:
		if g.r.IntN(2) == 0 {
			f = binary.BigEndian.AppendUint16(f, 0x0800)
			f = append(f, g.ipv4()...)
		} else {
			f = binary.BigEndian.AppendUint16(f, 0x86dd)
			f = append(f, g.ipv6()...)
		}
	}
	if g.r.IntN(8) == 0 {
		f = f[:14+g.r.IntN(len(f)-13)] // cut anywhere after the MAC header
	}
	return f
}

// reversed swaps the addresses and ports of an untagged IPv4 or IPv6
// frame without extension headers, to check symmetric agreement on both
// directions. It returns nil for other frames.
func reversed(f []byte) []byte {
	if len(f) < 14 {
		return nil
	}
	r := append([]byte{}, f...)
	swap := func(a, b, n int) {
		if b+n > len(r) {
			return
		}
		t := append([]byte{}, r[a:a+n]...)
		copy(r[a:], r[b:b+n])
		copy(r[b:], t)
	}
	switch binary.BigEndian.Uint16(f[12:]) {
	case 0x0800:
		if len(f) < 14+20 {
			return nil
		}
		hl := int(f[14]&15) * 4
		swap(26, 30, 4)
		swap(14+hl, 16+hl, 2)
	case 0x86dd:
		if len(f) < 14+40 {
			return nil
		}
		swap(22, 38, 16)
		swap(54, 56, 2)
	default:
		return nil
	}
	return r
}

func steerIsReal(t *testing.T, h *hash.Toeplitz) bool {
	t.Helper()
	c, err := steer.NewClassifier(steer.HashConfig{Key: h.Key()})
	if err != nil {
		t.Fatal(err)
	}
	f := make([]byte, 14+40)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	f[14] = 0x45
	binary.BigEndian.PutUint16(f[16:], 40)
	f[23] = 6
	var out steer.Classification
	c.Classify(f, &out)
	return out.HashType == hash.RSSTCPIPv4
}

func TestAgreement(t *testing.T) {
	requirePriv(t)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	forHooks(t, func(t *testing.T, hook Hook) { agreement(t, hook, seed) })
}

// agreement is TestAgreement for one hook.
func agreement(t *testing.T, hook Hook, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 1))
	g := &frameGen{r: r}
	frames := 1500
	if testing.Short() {
		frames = 300
	}
	steerReal := false
	for _, keyLen := range []int{40, 52, 64} {
		key, err := hash.RandomKey(keyLen)
		if err != nil {
			t.Fatal(err)
		}
		h, err := hash.NewToeplitz(key)
		if err != nil {
			t.Fatal(err)
		}
		steerReal = steerIsReal(t, h)
		for _, tableLen := range []int{64, 128, 512} {
			table := make([]uint32, tableLen)
			workers := 1 + r.IntN(16)
			for i := range table {
				table[i] = uint32(r.IntN(workers))
			}
			fallback := uint32(100 + r.IntN(100)) // distinct from every worker
			mask := uint32(tableLen - 1)
			for _, sym := range []bool{false, true} {
				for _, udp4 := range []bool{false, true} {
					p := loadHook(t, Options{Key: key, Table: table, Symmetric: sym, UDP4Tuple: udp4, Fallback: fallback, Hook: hook})
					cls, err := steer.NewClassifier(steer.HashConfig{Key: h.Key(), Symmetric: sym, UDP4Tuple: udp4})
					if err != nil {
						t.Fatal(err)
					}
					var hashed, fell, symPairs int
					for i := 0; i < frames; i++ {
						f := g.frame()
						if !testable(f) {
							i--
							continue
						}
						want := fallback
						id, ok := refClassify(f, h, sym, udp4)
						if ok {
							want = table[id&mask]
							hashed++
						} else {
							fell++
						}
						got := run(t, p, f)
						if got != want {
							t.Fatalf("key %d table %d sym %v udp4 %v: frame %x: program chose %d, reference %d (hashed %v flowid %#x)",
								keyLen, tableLen, sym, udp4, f, got, want, ok, id)
						}
						if steerReal {
							var c steer.Classification
							cls.Classify(f, &c)
							sw := fallback
							if c.HashType != hash.None {
								sw = table[c.FlowID&mask]
							}
							if c.HashType != hash.None != ok || (ok && c.FlowID != id) || sw != got {
								t.Fatalf("key %d table %d sym %v udp4 %v: frame %x: steer says %v flowid %#x reason %v (worker %d); program %d, reference hashed %v flowid %#x",
									keyLen, tableLen, sym, udp4, f, c.HashType, c.FlowID, c.Reason, sw, got, ok, id)
							}
						}
						if sym && ok {
							if rf := reversed(f); rf != nil && testable(rf) {
								if rid, rok := refClassify(rf, h, sym, udp4); rok && rid == id {
									symPairs++
									if got2 := run(t, p, rf); got2 != got {
										t.Fatalf("symmetric: frame %x went to %d, its reverse %x to %d", f, got, rf, got2)
									}
								}
							}
						}
					}
					if hashed < frames/2 || fell == 0 || (sym && symPairs < frames/4) {
						t.Fatalf("generator coverage too thin: %d hashed, %d fallback, %d symmetric pairs of %d", hashed, fell, symPairs, frames)
					}
				}
			}
		}
	}
	if !steerReal {
		t.Log("steer's classifier is still a stub: compared with the test's reference only")
	}
}

// TestKnownFrames pins a few frames whose outcome is fixed by the rules,
// so that a reference and program sharing one mistake still fail.
func TestKnownFrames(t *testing.T) {
	requirePriv(t)
	forHooks(t, knownFrames)
}

// knownFrames is TestKnownFrames for one hook.
func knownFrames(t *testing.T, hook Hook) {
	key := hash.MicrosoftKey[:]
	h, _ := hash.NewToeplitz(key)
	// The identity table returns the bucket itself: flowid & 511.
	table := make([]uint32, 512)
	for i := range table {
		table[i] = uint32(i)
	}
	p := loadHook(t, Options{Key: key, Table: table, Fallback: 9999, Hook: hook})
	ipv4tcp := func(tags int) []byte {
		f := make([]byte, 12)
		for i := 0; i < tags; i++ {
			f = append(f, 0x81, 0x00, 0x00, byte(i+1))
		}
		f = append(f, 0x08, 0x00)
		ip := []byte{0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0,
			66, 9, 149, 187, 161, 142, 100, 80, // Microsoft's verification suite
			0x0a, 0xea, 0x06, 0xe6, // ports 2794 -> 1766
			0, 0, 0, 0, 0, 0, 0, 0, 0x50, 0, 0, 0, 0, 0, 0, 0}
		return append(f, ip...)
	}
	// Microsoft's suite: 66.9.149.187:2794 -> 161.142.100.80:1766 hashes to 0x51ccc178.
	const msHash = 0x51ccc178
	if got := h.Sum([]byte{66, 9, 149, 187, 161, 142, 100, 80, 0x0a, 0xea, 0x06, 0xe6}); got != msHash {
		t.Fatalf("hash package: %#x, want %#x", got, msHash)
	}
	for tags := 0; tags <= 4; tags++ {
		if got := run(t, p, ipv4tcp(tags)); got != msHash&511 {
			t.Errorf("IPv4 TCP with %d VLAN tags: %d, want %d", tags, got, msHash&511)
		}
	}
	if got := run(t, p, ipv4tcp(5)); got != 9999 {
		t.Errorf("five VLAN tags: %d, want the fallback 9999", got)
	}
	arp := append(make([]byte, 12), 0x08, 0x06)
	arp = append(arp, make([]byte, 28)...)
	if got := run(t, p, arp); got != 9999 {
		t.Errorf("ARP: %d, want the fallback 9999", got)
	}
	// The same packet as a fragment: the 2-tuple.
	frag := ipv4tcp(0)
	frag[14+6] = 0x20 // MF
	want2 := h.Sum([]byte{66, 9, 149, 187, 161, 142, 100, 80}) & 511
	if got := run(t, p, frag); got != want2 {
		t.Errorf("IPv4 fragment: %d, want 2-tuple bucket %d", got, want2)
	}
}

func TestSetTable(t *testing.T) {
	requirePriv(t)
	key, _ := hash.RandomKey(40)
	table := make([]uint32, 128)
	p := load(t, Options{Key: key, Table: table})
	g := &frameGen{r: rand.New(rand.NewPCG(1, 2))}
	h, _ := hash.NewToeplitz(key)
	var tcp []byte
	for tcp == nil {
		f := g.frame()
		if !testable(f) {
			continue
		}
		if _, ok := refClassify(f, h, false, false); ok {
			tcp = f
		}
	}
	for round := uint32(1); round <= 3; round++ {
		next := make([]uint32, len(table))
		for i := range next {
			next[i] = round*10 + uint32(i%7)
		}
		setTable(t, p, next)
		// The very next frame sees the new table.
		if w := run(t, p, tcp); w/10 != round {
			t.Fatalf("round %d: frame went to %d, from the old table", round, w)
		}
	}
	if err := p.SetTable(make([]uint32, 64)); !errors.Is(err, ErrTableLength) {
		t.Fatalf("SetTable with another length: %v, want ErrTableLength", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := p.SetTable(make([]uint32, 128)); !errors.Is(err, ErrClosed) {
		t.Fatalf("SetTable after Close: %v, want ErrClosed", err)
	}
	if p.FD() != -1 {
		t.Fatal("FD after Close is not -1")
	}
}

// setTable sets p's table and checks that Table returns it.
func setTable(t *testing.T, p interface {
	SetTable([]uint32) error
	Table() ([]uint32, error)
}, next []uint32) {
	t.Helper()
	if err := p.SetTable(next); err != nil {
		t.Fatal(err)
	}
	got, err := p.Table()
	if err != nil {
		t.Fatal(err)
	}
	if !equal(got, next) {
		t.Fatalf("Table() = %v, want %v", got, next)
	}
}

func equal(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTestRunShape checks what the program assumes about the skb that
// BPF_PROG_TEST_RUN builds for a socket filter: skb->data 14 bytes past
// the frame's start, skb->protocol the EtherType at offset 12 (VLAN tags
// left in place), pkt_type not PACKET_OUTGOING, no VLAN tag out of band.
func TestTestRunShape(t *testing.T) {
	requirePriv(t)
	probe := func(t *testing.T, field int16, frame []byte) uint32 {
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
			Type: ebpf.SocketFilter,
			Instructions: asm.Instructions{
				asm.LoadMem(asm.R0, asm.R1, field, asm.Word),
				asm.Return(),
			},
			License: "BSD",
		})
		if err != nil {
			t.Fatal(err)
		}
		defer prog.Close()
		ret, err := prog.Run(&ebpf.RunOptions{Data: frame})
		if err != nil {
			t.Fatal(err)
		}
		return ret
	}
	f := append(make([]byte, 12), 0x81, 0x00, 0x00, 0x07, 0x86, 0xdd)
	f = append(f, make([]byte, 50)...)
	if got := probe(t, skbLen, f); got != uint32(len(f)-14) {
		t.Errorf("skb->len = %d, want %d", got, len(f)-14)
	}
	if got := probe(t, skbProtocol, f); got != 0x0081 { // 0x8100 in network order
		t.Errorf("skb->protocol = %#x, want 0x8100 in network order", got)
	}
	if got := probe(t, skbPktType, f); got == packetOutgoing {
		t.Errorf("pkt_type = PACKET_OUTGOING")
	}
	if got := probe(t, skbVLANPresent, f); got != 0 {
		t.Errorf("vlan_present = %d, want 0", got)
	}
}

func TestNewRejects(t *testing.T) {
	for _, tc := range rejectCases() {
		if _, err := New(tc.opts); !errors.Is(err, tc.err) {
			t.Errorf("New(%s) = %v, want %v", tc.name, err, tc.err)
		}
	}
}

// TestProgramSize reports the program's size and the verifier's work for
// every configuration, and keeps them within the classic BPF_MAXINSNS
// (4096 instructions) and a fifth of the million instructions the
// verifier follows at most: a change that costs the verifier's pruning
// much fails here before it fails to load.
func TestProgramSize(t *testing.T) {
	requirePriv(t)
	forHooks(t, programSize)
}

// programSize is TestProgramSize for one hook.
func programSize(t *testing.T, hook Hook) {
	for _, alg := range []hash.Algorithm{hash.AlgorithmToeplitz, hash.AlgorithmSipHash} {
		n := 40
		if alg == hash.AlgorithmSipHash {
			n = hash.SipHashKeyLen
		}
		key, _ := hash.RandomKey(40)
		for _, tun := range []bool{false, true} {
			for _, sym := range []bool{false, true} {
				for _, types := range []hash.Types{hash.TypeIPv4 | hash.TypeIPv6, hash.DefaultTypes, hash.AllTypes} {
					// FollowFragments with a 4-tuple type, without one
					// only where it changes nothing else.
					follow := types == hash.AllTypes || (types == hash.DefaultTypes && !sym)
					opts := Options{Algorithm: alg, Key: key[:n], Table: make([]uint32, 128), Symmetric: sym, Types: types, Tunnels: tun,
						FollowFragments: follow, Hook: hook}
					if tun && types == hash.AllTypes {
						opts.VXLANPorts = make([]uint16, MaxVXLANPorts)
						for i := range opts.VXLANPorts {
							opts.VXLANPorts[i] = uint16(8000 + i)
						}
					}
					insns, err := Instructions(opts)
					if err != nil {
						t.Fatal(err)
					}
					p := loadReal(t, opts)
					info, err := p.ebpfProgram().Info()
					if err != nil {
						t.Fatal(err)
					}
					verified, _ := info.VerifiedInstructions()
					t.Logf("%v tunnels %v symmetric %v types %v follow %v: %d instructions, %d verified", alg, tun, sym, types, follow, len(insns), verified)
					if len(insns) > 4096 || verified > 200_000 {
						t.Errorf("program too large: %d instructions, %d verified", len(insns), verified)
					}
					p.Close()
				}
			}
		}
	}
}
