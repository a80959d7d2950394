package hash

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"
	"unsafe"
)

// oracleSum is the plain bit-by-bit Toeplitz hash, the reference the table
// and GFNI paths are checked against. It slides a 32-bit window along the
// key one bit per input bit and XORs it in for every set input bit; input
// past len(key)-4 bytes is ignored, as Sum documents.
func oracleSum(key, data []byte) uint32 {
	if n := len(key) - 4; len(data) > n {
		data = data[:n]
	}
	var window uint32
	for i := 0; i < 4; i++ {
		window = window<<8 | uint32(key[i])
	}
	next := 32 // index of the key bit that enters the window next
	var h uint32
	for _, b := range data {
		for bit := 7; bit >= 0; bit-- {
			if b>>bit&1 == 1 {
				h ^= window
			}
			var in uint32
			if next < 8*len(key) {
				in = uint32(key[next/8]>>(7-next%8)) & 1
			}
			window = window<<1 | in
			next++
		}
	}
	return h
}

// path is one way of computing Sum.
type path struct {
	name  string
	accel bool
}

// paths returns the paths this machine can run: always the tables, and
// GFNI where the CPU has it.
func paths(t testing.TB) []path {
	ps := []path{{"table", false}}
	if haveAccel {
		ps = append(ps, path{"gfni", true})
	} else {
		t.Logf("CPU without GFNI/AVX-512: testing the table path only")
	}
	return ps
}

func mustNew(t testing.TB, key []byte, p path) *Toeplitz {
	t.Helper()
	h, err := newToeplitz(key, p.accel)
	if err != nil {
		t.Fatal(err)
	}
	if h.Accelerated() != p.accel {
		t.Fatalf("%s path: Accelerated() = %v", p.name, h.Accelerated())
	}
	return h
}

// The verification table of Microsoft's RSS documentation. It lists the
// destination first; the hash input is source first.
var msVectors = []struct {
	dst, src     string
	ipOnly, tcp4 uint32
}{
	{"161.142.100.80:1766", "66.9.149.187:2794", 0x323e8fc2, 0x51ccc178},
	{"65.69.140.83:4739", "199.92.111.2:14230", 0xd718262a, 0xc626b0ea},
	{"12.22.207.184:38024", "24.19.198.95:12898", 0xd2d0a5de, 0x5c2b394a},
	{"209.142.163.6:2217", "38.27.205.30:48228", 0x82989176, 0xafc7327f},
	{"202.188.127.2:1303", "153.39.163.191:44251", 0x5d1809c5, 0x10e828a2},
	{"[3ffe:2501:200:3::1]:1766", "[3ffe:2501:200:1fff::7]:2794", 0x2cc18cd5, 0x40207d3d},
	{"[ff02::1]:4739", "[3ffe:501:8::260:97ff:fe40:efab]:14230", 0x0f0c461c, 0xdde51bbf},
	{"[fe80::200:f8ff:fe21:67cf]:38024", "[3ffe:1900:4545:3:200:f8ff:fe21:67cf]:44251", 0x4b61e985, 0x02d1feef},
}

func TestMicrosoftVectors(t *testing.T) {
	for _, p := range paths(t) {
		h := mustNew(t, MicrosoftKey[:], p)
		for _, v := range msVectors {
			dst := netip.MustParseAddrPort(v.dst)
			src := netip.MustParseAddrPort(v.src)
			t2 := NewTuple2(src.Addr(), dst.Addr())
			t4 := NewTuple4(src.Addr(), dst.Addr(), src.Port(), dst.Port())
			wantLen2, wantLen4 := IPv4Tuple2Len, IPv4Tuple4Len
			if src.Addr().Is6() {
				wantLen2, wantLen4 = IPv6Tuple2Len, IPv6Tuple4Len
			}
			if t2.Len() != wantLen2 || t4.Len() != wantLen4 {
				t.Fatalf("%s -> %s: tuple lengths %d, %d", v.src, v.dst, t2.Len(), t4.Len())
			}
			if got := h.SumTuple(&t2); got != v.ipOnly {
				t.Errorf("%s: %s -> %s IP only: got %#08x, want %#08x", p.name, v.src, v.dst, got, v.ipOnly)
			}
			if got := h.Sum(t4.Bytes()); got != v.tcp4 {
				t.Errorf("%s: %s -> %s with ports: got %#08x, want %#08x", p.name, v.src, v.dst, got, v.tcp4)
			}
			if got := oracleSum(MicrosoftKey[:], t4.Bytes()); got != v.tcp4 {
				t.Errorf("oracle: %s -> %s with ports: got %#08x, want %#08x", v.src, v.dst, got, v.tcp4)
			}
		}
	}
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestSumMatchesOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	trials := 20
	if testing.Short() {
		trials = 4
	}
	keyLens := []int{MinKeyLen, 9, 16, 40, 52, 63, MaxKeyLen}
	for _, p := range paths(t) {
		for _, kl := range keyLens {
			for k := 0; k < 3; k++ {
				key := randBytes(r, kl)
				if k == 0 {
					// All ones: every key bit matters.
					for i := range key {
						key[i] = 0xff
					}
				}
				h := mustNew(t, key, p)
				if h.MaxInput() != kl-4 {
					t.Fatalf("MaxInput() = %d for a %d-byte key", h.MaxInput(), kl)
				}
				for n := 0; n <= kl+4; n++ {
					for i := 0; i < trials; i++ {
						data := randBytes(r, n)
						if i == 0 {
							for j := range data {
								data[j] = 0xff
							}
						}
						want := oracleSum(key, data)
						if got := h.Sum(data); got != want {
							t.Fatalf("%s: key %x, data %x: got %#08x, want %#08x", p.name, key, data, got, want)
						}
						if n > h.MaxInput() {
							if got := h.Sum(data[:h.MaxInput()]); got != want {
								t.Fatalf("%s: key %x: long input %x does not hash like its prefix", p.name, key, data)
							}
						}
					}
				}
			}
		}
	}
}

// TestSumUnaligned checks inputs at every alignment and inputs that end
// right before, at and after a page boundary: the GFNI path loads them
// differently (a masked load must not cross into the next page).
func TestSumUnaligned(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	key := randBytes(r, MaxKeyLen)
	buf := randBytes(r, 3*4096)
	page := int(-uintptr(unsafe.Pointer(&buf[0]))&4095) + 4096 // a page boundary in buf
	for _, p := range paths(t) {
		h := mustNew(t, key, p)
		for _, start := range []int{0, 64, page - 128} {
			for off := start; off < start+128; off++ {
				for n := 0; n <= h.MaxInput(); n++ {
					data := buf[off : off+n : off+n]
					if got, want := h.Sum(data), oracleSum(key, data); got != want {
						t.Fatalf("%s: %d bytes at %d from a page boundary: got %#08x, want %#08x",
							p.name, n, off-page, got, want)
					}
				}
			}
		}
	}
}

func randAddr(r *rand.Rand, v6 bool) netip.Addr {
	if v6 {
		return netip.AddrFrom16([16]byte(randBytes(r, 16)))
	}
	return netip.AddrFrom4([4]byte(randBytes(r, 4)))
}

func TestSymmetricKey(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, p := range paths(t) {
		h := mustNew(t, SymmetricKey[:], p)
		for i := 0; i < 2000; i++ {
			v6 := i%2 == 1
			a, b := randAddr(r, v6), randAddr(r, v6)
			pa, pb := uint16(r.Uint32()), uint16(r.Uint32())
			fwd, rev := NewTuple4(a, b, pa, pb), NewTuple4(b, a, pb, pa)
			hf, hr := h.SumTuple(&fwd), h.SumTuple(&rev)
			if hf != hr {
				t.Fatalf("%s: %v:%d -> %v:%d: %#08x, reverse %#08x", p.name, a, pa, b, pb, hf, hr)
			}
			if hf>>16 != hf&0xffff {
				t.Fatalf("%s: hash %#08x: upper and lower 16 bits differ", p.name, hf)
			}
			f2, r2 := NewTuple2(a, b), NewTuple2(b, a)
			if x, y := h.SumTuple(&f2), h.SumTuple(&r2); x != y || x>>16 != x&0xffff {
				t.Fatalf("%s: 2-tuple %v, %v: %#08x, reverse %#08x", p.name, a, b, x, y)
			}
		}
	}
}

func TestCanonicalSymmetric(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	key, err := RandomKey(DefaultKeyLen)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths(t) {
		h := mustNew(t, key, p)
		asymmetric := 0
		for i := 0; i < 2000; i++ {
			v6 := i%2 == 1
			a, b := randAddr(r, v6), randAddr(r, v6)
			pa, pb := uint16(r.Uint32()), uint16(r.Uint32())
			if i%7 == 0 {
				b = a // same address: the ports decide the order
			}
			fwd, rev := NewTuple4Sym(a, b, pa, pb), NewTuple4Sym(b, a, pb, pa)
			if fwd != rev {
				t.Fatalf("NewTuple4Sym(%v:%d, %v:%d) differs from the reverse", a, pa, b, pb)
			}
			if hf, hr := h.SumTuple(&fwd), h.SumTuple(&rev); hf != hr {
				t.Fatalf("%s: %v:%d <-> %v:%d: %#08x, reverse %#08x", p.name, a, pa, b, pb, hf, hr)
			}
			f2, r2 := NewTuple2Sym(a, b), NewTuple2Sym(b, a)
			if hf, hr := h.SumTuple(&f2), h.SumTuple(&r2); hf != hr {
				t.Fatalf("%s: 2-tuple %v <-> %v: %#08x, reverse %#08x", p.name, a, b, hf, hr)
			}
			// Without canonical order a random key is not symmetric.
			pf, pr := NewTuple4(a, b, pa, pb), NewTuple4(b, a, pb, pa)
			if h.SumTuple(&pf) != h.SumTuple(&pr) {
				asymmetric++
			}
		}
		if asymmetric < 1000 {
			t.Errorf("%s: only %d of 2000 plain tuples hash asymmetrically with a random key", p.name, asymmetric)
		}
	}
}

func TestCanonicalMapped(t *testing.T) {
	a := netip.MustParseAddr("10.0.0.2")
	b := netip.MustParseAddr("10.0.0.1")
	bm := netip.AddrFrom16(b.As16()) // ::ffff:10.0.0.1
	x := NewTuple4Sym(a, bm, 1, 2)
	y := NewTuple4Sym(b, a, 2, 1)
	if x != y || x.Len() != IPv4Tuple4Len {
		t.Errorf("IPv4-mapped address: canonical tuples %x and %x differ", x.Bytes(), y.Bytes())
	}
}

func TestTupleEncoding(t *testing.T) {
	src, dst := netip.MustParseAddr("1.2.3.4"), netip.MustParseAddr("5.6.7.8")
	tp := NewTuple4(src, dst, 0x0102, 0x0304)
	want := []byte{1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4}
	if string(tp.Bytes()) != string(want) {
		t.Errorf("NewTuple4 = %x, want %x", tp.Bytes(), want)
	}
	mixed := NewTuple4(src, netip.MustParseAddr("::1"), 1, 2)
	if mixed.Len() != 0 {
		t.Errorf("mixed families: length %d, want 0", mixed.Len())
	}
	if z := NewTuple2(netip.Addr{}, netip.Addr{}); z.Len() != 0 {
		t.Errorf("invalid addresses: length %d, want 0", z.Len())
	}
	h, err := NewToeplitz(MicrosoftKey[:])
	if err != nil {
		t.Fatal(err)
	}
	if got := h.SumTuple(&mixed); got != 0 {
		t.Errorf("zero Tuple hashes to %#x, want 0", got)
	}
}

func TestHashTypeValues(t *testing.T) {
	// The values of FreeBSD's sys/sys/mbuf.h.
	for _, c := range []struct {
		h    HashType
		v    uint8
		name string
		is4  bool
	}{
		{None, 0, "NONE", false},
		{RSSIPv4, 0x81, "RSS_IPV4", false},
		{RSSTCPIPv4, 0x82, "RSS_TCP_IPV4", true},
		{RSSIPv6, 0x83, "RSS_IPV6", false},
		{RSSTCPIPv6, 0x84, "RSS_TCP_IPV6", true},
		{RSSIPv6Ex, 0x85, "RSS_IPV6_EX", false},
		{RSSTCPIPv6Ex, 0x86, "RSS_TCP_IPV6_EX", true},
		{RSSUDPIPv4, 0x87, "RSS_UDP_IPV4", true},
		{RSSUDPIPv6, 0x89, "RSS_UDP_IPV6", true},
		{RSSUDPIPv6Ex, 0x8a, "RSS_UDP_IPV6_EX", true},
		{Opaque, 63, "OPAQUE", false},
		{OpaqueHash, 0xbf, "OPAQUE_HASH", false},
	} {
		if uint8(c.h) != c.v {
			t.Errorf("%s = %#x, FreeBSD has %#x", c.name, uint8(c.h), c.v)
		}
		if c.h.String() != c.name {
			t.Errorf("HashType(%#x).String() = %q, want %q", c.v, c.h.String(), c.name)
		}
		if c.h.IsHash() != (c.v&0x80 != 0) {
			t.Errorf("%s.IsHash() = %v", c.name, c.h.IsHash())
		}
		if c.h.Is4Tuple() != c.is4 {
			t.Errorf("%s.Is4Tuple() = %v", c.name, c.h.Is4Tuple())
		}
	}
	if HashPropBit != 0x80 {
		t.Errorf("HashPropBit = %#x, want 0x80", uint8(HashPropBit))
	}
	if got := HashType(0x88).String(); got != "HashType(0x88)" {
		t.Errorf("unknown type: String() = %q", got)
	}
}

func TestKeyLength(t *testing.T) {
	for _, n := range []int{0, 1, 7, 65, 128} {
		if _, err := NewToeplitz(make([]byte, n)); !errors.Is(err, ErrKeyLength) {
			t.Errorf("NewToeplitz(%d bytes): error %v, want ErrKeyLength", n, err)
		}
		if _, err := RandomKey(n); !errors.Is(err, ErrKeyLength) {
			t.Errorf("RandomKey(%d): error %v, want ErrKeyLength", n, err)
		}
	}
	if _, err := NewToeplitz(nil); !errors.Is(err, ErrKeyLength) {
		t.Errorf("NewToeplitz(nil): error %v, want ErrKeyLength", err)
	}
	for n := MinKeyLen; n <= MaxKeyLen; n++ {
		key, err := RandomKey(n)
		if err != nil || len(key) != n {
			t.Fatalf("RandomKey(%d) = %d bytes, %v", n, len(key), err)
		}
		h, err := NewToeplitz(key)
		if err != nil {
			t.Fatalf("NewToeplitz(%d bytes): %v", n, err)
		}
		if got := h.Key(); string(got) != string(key) {
			t.Fatalf("Key() = %x, want %x", got, key)
		}
		key[0] ^= 0xff // the hasher holds a copy
		if h.Key()[0] == key[0] {
			t.Fatalf("Key() follows the caller's slice")
		}
		if h.Accelerated() != haveAccel {
			t.Fatalf("Accelerated() = %v, CPU support %v", h.Accelerated(), haveAccel)
		}
	}
}

func TestSumAllocs(t *testing.T) {
	for _, p := range paths(t) {
		h := mustNew(t, MicrosoftKey[:], p)
		tp := NewTuple4(netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2"), 1, 2)
		data := make([]byte, 100)
		var sink uint32
		allocs := testing.AllocsPerRun(100, func() {
			sink ^= h.Sum(data[:12]) ^ h.Sum(data) ^ h.SumTuple(&tp)
		})
		if allocs != 0 {
			t.Errorf("%s: Sum allocates %v times per run", p.name, allocs)
		}
		_ = sink
	}
}

// TestConcurrentSum runs Sum from several goroutines (meaningful with -race).
func TestConcurrentSum(t *testing.T) {
	for _, p := range paths(t) {
		h := mustNew(t, MicrosoftKey[:], p)
		want := oracleSum(MicrosoftKey[:], []byte("0123456789abcdef0123456789abcdef0123"))
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				data := []byte("0123456789abcdef0123456789abcdef0123")
				for i := 0; i < 1000; i++ {
					if got := h.Sum(data); got != want {
						errs <- fmt.Errorf("%s: got %#x, want %#x", p.name, got, want)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
}

func FuzzSum(f *testing.F) {
	f.Add(MicrosoftKey[:], []byte{66, 9, 149, 187, 161, 142, 100, 80, 0x0a, 0xea, 0x06, 0xe6})
	f.Fuzz(func(t *testing.T, key, data []byte) {
		for _, p := range paths(t) {
			h, err := newToeplitz(key, p.accel)
			if len(key) < MinKeyLen || len(key) > MaxKeyLen {
				if !errors.Is(err, ErrKeyLength) {
					t.Fatalf("key of %d bytes: error %v, want ErrKeyLength", len(key), err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, want := h.Sum(data), oracleSum(key, data); got != want {
				t.Fatalf("%s: key %x, data %x: got %#08x, want %#08x", p.name, key, data, got, want)
			}
		}
	})
}

func TestSumTuples(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	tps := make([]Tuple, 200)
	for i := range tps {
		v6 := r.IntN(2) == 1
		a, b := randAddr(r, v6), randAddr(r, v6)
		switch r.IntN(3) {
		case 0:
			tps[i] = NewTuple2(a, b)
		case 1:
			tps[i] = NewTuple4(a, b, uint16(r.Uint32()), uint16(r.Uint32()))
		}
		// case 2: the zero Tuple
	}
	for _, kl := range []int{MinKeyLen, 36, DefaultKeyLen, 52} {
		key := randBytes(r, kl)
		for _, p := range paths(t) {
			h := mustNew(t, key, p)
			dst := make([]uint32, len(tps)+3)
			if n := h.SumTuples(dst, tps); n != len(tps) {
				t.Fatalf("SumTuples = %d, want %d", n, len(tps))
			}
			for i := range tps {
				if want := oracleSum(key, tps[i].Bytes()); dst[i] != want {
					t.Fatalf("%s, %d-byte key: tuple %x: got %#08x, want %#08x", p.name, kl, tps[i].Bytes(), dst[i], want)
				}
			}
			if n := h.SumTuples(dst[:5], tps); n != 5 {
				t.Fatalf("SumTuples with a short dst = %d, want 5", n)
			}
			if n := h.SumTuples(dst, nil); n != 0 {
				t.Fatalf("SumTuples(nil) = %d", n)
			}
			if a := testing.AllocsPerRun(10, func() { h.SumTuples(dst, tps) }); a != 0 {
				t.Errorf("%s: SumTuples allocates %v times", p.name, a)
			}
		}
	}
}

// TestSumIPv4Tuples checks the batch form for 12-byte inputs against the
// oracle on both paths: batch sizes around the 16-way groups, keys too
// short to cover 12 bytes, 2-tuples with zero ports (Microsoft's IP-only
// vectors), and a short dst.
func TestSumIPv4Tuples(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	in := make([][IPv4Tuple4Len]byte, 70)
	for i := range in {
		copy(in[i][:], randBytes(r, IPv4Tuple4Len))
	}
	for _, kl := range []int{MinKeyLen, 12, 16, DefaultKeyLen, MaxKeyLen} {
		key := randBytes(r, kl)
		for _, p := range paths(t) {
			h := mustNew(t, key, p)
			for _, n := range []int{0, 1, 15, 16, 17, 32, 47, 70} {
				dst := make([]uint32, n+2)
				dst[n], dst[n+1] = 0xdead, 0xbeef
				if got := h.SumIPv4Tuples(dst, in[:n]); got != n {
					t.Fatalf("%s, %d-byte key: SumIPv4Tuples of %d = %d", p.name, kl, n, got)
				}
				for i := 0; i < n; i++ {
					if want := oracleSum(key, in[i][:]); dst[i] != want {
						t.Fatalf("%s, %d-byte key, batch of %d: input %d %x: got %#08x, want %#08x",
							p.name, kl, n, i, in[i], dst[i], want)
					}
				}
				if dst[n] != 0xdead || dst[n+1] != 0xbeef {
					t.Fatalf("%s: batch of %d wrote past its end: %#x %#x", p.name, n, dst[n], dst[n+1])
				}
			}
			if got := h.SumIPv4Tuples(make([]uint32, 5), in); got != 5 {
				t.Fatalf("SumIPv4Tuples with a short dst = %d, want 5", got)
			}
			dst := make([]uint32, len(in))
			if a := testing.AllocsPerRun(10, func() { h.SumIPv4Tuples(dst, in) }); a != 0 {
				t.Errorf("%s: SumIPv4Tuples allocates %v times", p.name, a)
			}
		}
	}
	for _, p := range paths(t) {
		h := mustNew(t, MicrosoftKey[:], p)
		var tps [][IPv4Tuple4Len]byte
		var want []uint32
		for _, v := range msVectors {
			src, dst := netip.MustParseAddrPort(v.src), netip.MustParseAddrPort(v.dst)
			if !src.Addr().Is4() {
				continue
			}
			tp := NewTuple2(src.Addr(), dst.Addr())
			var b [IPv4Tuple4Len]byte
			copy(b[:], tp.Bytes())
			tps, want = append(tps, b), append(want, v.ipOnly)
		}
		if len(tps) == 0 {
			t.Fatal("no IPv4 vectors")
		}
		out := make([]uint32, len(tps))
		h.SumIPv4Tuples(out, tps)
		for i := range tps {
			if out[i] != want[i] {
				t.Errorf("%s: %x with zero ports: got %#08x, want the IP-only hash %#08x", p.name, tps[i], out[i], want[i])
			}
		}
	}
}
