package steer

import (
	"context"
	"net/netip"
	"testing"

	"github.com/rpsgo/rps/hash"
)

// BenchmarkFragmentsFollowCost measures what FragmentsFollow costs a frame
// on the dispatch path: two dispatchers, FragmentsTuple and
// FragmentsFollow, UDP's 4-tuple in use, DIRECT dispatch to a no-op
// handler (no queue blurs the difference), fed the same frames in
// alternating blocks within one run. "plain" is traffic without a
// fragment: TCP/IPv4 (the fast path), TCP/IPv6, and UDP/IPv4 behind a
// VLAN tag (the general path, where the fragment rule is looked for),
// 1,024 flows of each. "frag1in8" puts a fragmented datagram, a first and
// a later fragment, in every eight frames, over 4,096 datagrams in turn:
// with FragmentsFollow each first fragment is written to the input's
// table and each later one found there. Metrics: off-ns/frame,
// on-ns/frame and added-ns/frame (FragmentsFollow's less
// FragmentsTuple's); an op is one frame through each dispatcher.
func BenchmarkFragmentsFollowCost(b *testing.B) {
	var plain []Frame
	for _, set := range [][][]byte{benchSet(false), benchSet(true), udpBenchSet(tag(100))} {
		for _, f := range set {
			plain = append(plain, Frame{Data: f})
		}
	}
	frags := append([]Frame(nil), plain...)
	for i := 0; i+8 <= len(frags); i += 8 {
		id := uint16(i / 8)
		src := netip.AddrFrom4([4]byte{10, 1, byte(id >> 8), byte(id)})
		frags[i] = Frame{Data: ethFrame(etherTypeIPv4, frag4(ipv4Packet(src, b4, protoUDP, 0, udpHdr(1, 2, rep(16, 0)...)), id, 0, true))}
		frags[i+4] = Frame{Data: ethFrame(etherTypeIPv4, frag4(ipv4Packet(src, b4, protoUDP, 0, rep(24, 0)), id, 3, false))}
	}
	for _, bc := range []struct {
		name   string
		frames []Frame
	}{{"plain", plain}, {"frag1in8", frags}} {
		b.Run(bc.name, func(b *testing.B) {
			frames := bc.frames
			noop := func(*Packet) {}
			dispatcher := func(m FragmentMode) *Input {
				d, err := New(Config{Workers: 4, Dispatch: DispatchDirect, Queue: QueueConfig{Overflow: OverflowDrop},
					Hash: HashConfig{Key: hash.MicrosoftKey[:], UDP4Tuple: true, Fragments: m}}, noop)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { d.Close(context.Background()) })
				return d.NewInput()
			}
			alternate(b, frames, dispatcher(FragmentsTuple), dispatcher(FragmentsFollow), nil)
		})
	}
}

// udpBenchSet returns benchFrames UDP/IPv4 frames, each a different flow.
func udpBenchSet(tags ...vlanTag) [][]byte {
	frames := make([][]byte, benchFrames)
	for i := range frames {
		src := netip.AddrFrom4([4]byte{10, 2, byte(i >> 8), byte(i)})
		frames[i] = ethFrame(etherTypeIPv4, ipv4Packet(src, b4, protoUDP, 0, udpHdr(uint16(1024+i), 53, rep(10, 'x')...)), tags...)
	}
	return frames
}
