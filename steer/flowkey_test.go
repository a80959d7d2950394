package steer

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/rpsgo/rps/hash"
)

// padding returns where t, or a type inside it, has bytes that belong to
// no field, or a field the runtime cannot compare as plain memory (a
// blank field, a float, a string, an interface); "" when it has none. Go
// compares and hashes such a type as one block of memory only when it has
// none of these.
func padding(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Pointer, reflect.UnsafePointer, reflect.Chan:
		return ""
	case reflect.Array:
		if p := padding(t.Elem()); p != "" {
			return fmt.Sprintf("%s: element: %s", t, p)
		}
		return ""
	case reflect.Struct:
		var end uintptr
		for i := range t.NumField() {
			f := t.Field(i)
			switch {
			case f.Name == "_":
				return fmt.Sprintf("%s: blank field at offset %d (compared field by field)", t, f.Offset)
			case f.Offset != end:
				return fmt.Sprintf("%s: %d bytes of padding before %s", t, f.Offset-end, f.Name)
			}
			if p := padding(f.Type); p != "" {
				return fmt.Sprintf("%s.%s: %s", t, f.Name, p)
			}
			end = f.Offset + f.Type.Size()
		}
		if end != t.Size() {
			return fmt.Sprintf("%s: %d bytes of padding at the end", t, t.Size()-end)
		}
		return ""
	}
	return fmt.Sprintf("%s: kind %s is not compared as memory", t, t.Kind())
}

// TestFlowKeyNoPadding fails if FlowKey, or a type it holds, gets padding
// back: a map keyed by it would then hash it field by field.
func TestFlowKeyNoPadding(t *testing.T) {
	for _, v := range []any{FlowKey{}, Encap{}, netip.Addr{}} {
		if p := padding(reflect.TypeOf(v)); p != "" {
			t.Errorf("%T: %s", v, p)
		}
	}
	// The check finds padding where there is some.
	if padding(reflect.TypeOf(paddedKey{})) == "" {
		t.Error("the padding check passes the padded layout")
	}
	if padding(reflect.TypeOf(struct {
		A uint32
		_ uint32
	}{})) == "" {
		t.Error("the padding check passes a blank field")
	}
}

// TestFlowKeyPaddingZero checks that every key the classifier builds,
// from frames of every kind (a fresh Classification and one reused after
// tunnels), leaves the filler fields zero: equal keys must be equal
// memory.
func TestFlowKeyPaddingZero(t *testing.T) {
	cls, err := NewClassifier(HashConfig{Tunnels: TunnelsInner})
	if err != nil {
		t.Fatal(err)
	}
	var reused Classification
	for name, frame := range flowKeyFrames(t) {
		var fresh Classification
		cls.Classify(frame, &fresh)
		cls.Classify(frame, &reused)
		for _, k := range []*FlowKey{&fresh.Key, &reused.Key} {
			bad := k.pad0 != 0 || k.pad1 != 0 || k.pad2 != 0
			for _, e := range k.Encaps {
				bad = bad || e.pad != 0
			}
			if bad {
				t.Errorf("%s: a filler field is set: %+v", name, *k)
			}
		}
		if fresh.Key != reused.Key {
			t.Errorf("%s: keys differ between a fresh and a reused classification", name)
		}
	}
}

// flowKeyFrames returns frames whose keys fill every part of a FlowKey:
// VLAN tags, shims, tunnels.
func flowKeyFrames(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, tc := range classifyCases() {
		out[tc.name] = tc.frame
	}
	if len(out) < 10 {
		t.Fatalf("only %d frames", len(out))
	}
	return out
}

// paddedKey is FlowKey's layout before its filler fields: padding after
// NVLAN, NEncap, each Encap's HasID and at the end.
type paddedKey struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
	Proto            uint8
	Fragment         bool
	NVLAN            uint8
	VLANs            [MaxVLANDepth]uint16
	Depth            uint8
	NEncap           uint8
	Encaps           [MaxEncaps]paddedEncap
}

type paddedEncap struct {
	Kind  EncapKind
	HasID bool
	ID    uint32
}

func toPadded(k FlowKey) paddedKey {
	p := paddedKey{Src: k.Src, Dst: k.Dst, SrcPort: k.SrcPort, DstPort: k.DstPort, Proto: k.Proto,
		Fragment: k.Fragment, NVLAN: k.NVLAN, VLANs: k.VLANs, Depth: k.Depth, NEncap: k.NEncap}
	for i, e := range k.Encaps {
		p.Encaps[i] = paddedEncap{Kind: e.Kind, HasID: e.HasID, ID: e.ID}
	}
	return p
}

// mapLookups looks each of keys up in m, in order, n times in all, and
// returns the time taken.
func mapLookups[K comparable](m map[K]*uint64, keys []K, n int) time.Duration {
	start := time.Now()
	for i := range n {
		if c := m[keys[i%len(keys)]]; c != nil {
			*c++
		}
	}
	return time.Since(start)
}

// BenchmarkFlowKeyMap looks TCP/IPv4 flow keys up in a map keyed by
// FlowKey and in one keyed by FlowKey's former, padded layout, taking
// turns in one run: flat-ns/lookup against padded-ns/lookup, and their
// ratio. Maps of 4096 flows fit in cache, of 1M do not.
func BenchmarkFlowKeyMap(b *testing.B) {
	for _, flows := range []int{1 << 12, 1 << 20} {
		b.Run(fmt.Sprintf("flows=%d", flows), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			flat := make(map[FlowKey]*uint64, flows)
			padded := make(map[paddedKey]*uint64, flows)
			var keys []FlowKey
			for i := range flows {
				k := FlowKey{Src: netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}),
					Dst: netip.AddrFrom4([4]byte{192, 168, 0, byte(i)}), SrcPort: uint16(1024 + i%60000), DstPort: 80, Proto: 6}
				flat[k], padded[toPadded(k)] = new(uint64), new(uint64)
				keys = append(keys, k)
			}
			// Look up in a random order, 64K lookups a round.
			order := make([]FlowKey, 1<<16)
			for i := range order {
				order[i] = keys[rng.IntN(flows)]
			}
			porder := make([]paddedKey, len(order))
			for i, k := range order {
				porder[i] = toPadded(k)
			}
			b.ReportAllocs()
			b.ResetTimer()
			var tf, tp time.Duration
			for done := 0; done < b.N; {
				n := min(b.N-done, len(order))
				tp += mapLookups(padded, porder, n)
				tf += mapLookups(flat, order, n)
				done += n
			}
			b.StopTimer()
			b.ReportMetric(float64(tf.Nanoseconds())/float64(b.N), "flat-ns/lookup")
			b.ReportMetric(float64(tp.Nanoseconds())/float64(b.N), "padded-ns/lookup")
			b.ReportMetric(float64(tf)/float64(tp), "flat/padded")
		})
	}
}

// TestFlowKeyCanonical checks FlowKey.Canonical against hash.Canonical,
// both directions of a connection giving one key.
func TestFlowKeyCanonical(t *testing.T) {
	addrs := []netip.Addr{{}, netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"),
		netip.MustParseAddr("::ffff:10.0.0.1"), netip.MustParseAddr("::ffff:10.0.0.3"),
		netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")}
	ports := []uint16{0, 80, 443, 50000}
	for _, src := range addrs {
		for _, dst := range addrs {
			for _, sp := range ports {
				for _, dp := range ports {
					k := FlowKey{Src: src, Dst: dst, SrcPort: sp, DstPort: dp, Proto: 6, NVLAN: 1, VLANs: [MaxVLANDepth]uint16{7}}
					k.NEncap, k.Encaps[0] = 1, Encap{Kind: EncapMPLS, HasID: true, ID: 16}
					c, swapped := k.Canonical()
					a, b, ap, bp := hash.Canonical(src, dst, sp, dp)
					if c.Src != a || c.Dst != b || c.SrcPort != ap || c.DstPort != bp {
						t.Fatalf("%v:%d > %v:%d: canonical %v:%d > %v:%d, hash.Canonical %v:%d > %v:%d",
							src, sp, dst, dp, c.Src, c.SrcPort, c.Dst, c.DstPort, a, ap, b, bp)
					}
					want := k
					if swapped {
						want.Src, want.Dst, want.SrcPort, want.DstPort = dst, src, dp, sp
					}
					if c != want {
						t.Fatalf("%v:%d > %v:%d: canonical %+v, swapped %v", src, sp, dst, dp, c, swapped)
					}
					if src.Unmap() == dst.Unmap() && sp == dp {
						continue // one endpoint, perhaps written two ways: either order is canonical
					}
					r := k
					r.Src, r.Dst, r.SrcPort, r.DstPort = dst, src, dp, sp
					rc, rswapped := r.Canonical()
					if rc != c {
						t.Fatalf("%v:%d > %v:%d: the reverse direction has another canonical key", src, sp, dst, dp)
					}
					if swapped == rswapped && k != r {
						t.Fatalf("%v:%d > %v:%d: both directions swapped %v", src, sp, dst, dp, swapped)
					}
				}
			}
		}
	}
}
