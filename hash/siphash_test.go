package hash

import (
	"errors"
	"net/netip"
	"testing"
)

// sipVectors are SipHash-2-4 outputs from the algorithm's published test
// vectors: key 00 01 .. 0f, message 00 01 .. n-1 for n = 0 to 15 (the
// 15-byte one is the worked example of the SipHash paper's appendix).
var sipVectors = [...]uint64{
	0x726fdb47dd0e0e31, 0x74f839c593dc67fd, 0x0d6c8009d9a94f5a, 0x85676696d7fb7e2d,
	0xcf2794e0277187b7, 0x18765564cd99a68d, 0xcbc9466e58fee3ce, 0xab0200f58b01d137,
	0x93f5f5799a932462, 0x9e0082df0ba9e4b0, 0x7a5dbbc594ddb9f3, 0xf4b32f46226bada7,
	0x751e8fbc860ee5fb, 0x14ea5627c0843d90, 0xf723ca908e7af2ee, 0xa129ca6149be45e5,
}

func sipTestKey(t testing.TB) *SipHash {
	t.Helper()
	k := make([]byte, SipHashKeyLen)
	for i := range k {
		k[i] = byte(i)
	}
	s, err := NewSipHash(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSipHashVectors(t *testing.T) {
	s := sipTestKey(t)
	m := make([]byte, len(sipVectors))
	for i := range m {
		m[i] = byte(i)
	}
	for n, want := range sipVectors {
		if got := s.Sum64(m[:n]); got != want {
			t.Errorf("SipHash-2-4 of %d bytes: %#016x, want %#016x", n, got, want)
		}
		if got := s.Sum(m[:n]); got != uint32(want) {
			t.Errorf("Sum of %d bytes: %#08x, want the low half %#08x", n, got, uint32(want))
		}
	}
}

// TestSipHashLongInput checks inputs of several blocks against the
// definition: hashing is a function of the bytes and their length only,
// so a message split over blocks at any length must differ from its
// prefixes and be stable.
func TestSipHashLongInput(t *testing.T) {
	s := sipTestKey(t)
	m := make([]byte, 64)
	for i := range m {
		m[i] = byte(i)
	}
	seen := make(map[uint64]int)
	for n := 0; n <= len(m); n++ {
		h := s.Sum64(m[:n])
		if h != s.Sum64(append([]byte(nil), m[:n]...)) {
			t.Fatalf("%d bytes: not a function of the bytes", n)
		}
		if prev, ok := seen[h]; ok {
			t.Fatalf("prefixes of %d and %d bytes collide", prev, n)
		}
		seen[h] = n
	}
}

func TestSipHashKey(t *testing.T) {
	for _, n := range []int{0, 8, 15, 17, 40} {
		if _, err := NewSipHash(make([]byte, n)); !errors.Is(err, ErrSipHashKeyLength) {
			t.Errorf("NewSipHash(%d bytes): error %v, want ErrSipHashKeyLength", n, err)
		}
	}
	a, _ := NewSipHash(make([]byte, 16))
	k := make([]byte, 16)
	k[15] = 1
	b, _ := NewSipHash(k)
	in := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	if a.Sum64(in) == b.Sum64(in) {
		t.Error("keys differing in one bit hash alike")
	}
	tp := NewTuple4(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), 1, 2)
	if a.SumTuple(&tp) != a.Sum(tp.Bytes()) {
		t.Error("SumTuple differs from Sum of the tuple's bytes")
	}
}

func TestSipHashAllocs(t *testing.T) {
	s := sipTestKey(t)
	in := make([]byte, IPv6Tuple4Len)
	if n := testing.AllocsPerRun(100, func() { benchSink ^= s.Sum(in) }); n != 0 {
		t.Errorf("Sum allocates %v times", n)
	}
}
