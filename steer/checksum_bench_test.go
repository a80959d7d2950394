package steer

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/gopacket/layers"
)

// BenchmarkVerifyChecksums measures the software check of one frame's
// checksums, TCP over IPv4 and UDP over IPv6, of 64, 576 and 1,500 bytes
// on the wire: what Config.VerifyChecksums adds to a worker per frame.
// Metrics: ns/frame and MB/s, the bytes checked.
func BenchmarkVerifyChecksums(b *testing.B) {
	for _, tc := range []struct {
		name  string
		v6    bool
		proto layers.IPProtocol
	}{{"tcp4", false, layers.IPProtocolTCP}, {"udp6", true, layers.IPProtocolUDP}} {
		for _, size := range []int{64, 576, 1500} {
			b.Run(fmt.Sprintf("%s/%d", tc.name, size), func(b *testing.B) {
				f := csumFrame(b, tc.v6, tc.proto, "", nil)
				f = csumFrame(b, tc.v6, tc.proto, "", make([]byte, max(size-len(f), 0)))
				if verifyChecksums(f) != ChecksumGood {
					b.Fatal("the frame is not good")
				}
				b.SetBytes(int64(len(f)))
				b.ReportAllocs()
				for b.Loop() {
					if verifyChecksums(f) != ChecksumGood {
						b.Fatal("not good")
					}
				}
			})
		}
	}
}

// BenchmarkVerifyChecksumsDispatch measures what VerifyChecksums costs a
// frame on the whole path: two dispatchers, off and on, DIRECT dispatch
// (the check runs in the goroutine that dispatches, with the no-op
// handler), fed the same 1,024 TCP/IPv4 frames of 576 bytes in alternating
// blocks. Metrics: off-ns/frame, on-ns/frame, added-ns/frame.
func BenchmarkVerifyChecksumsDispatch(b *testing.B) {
	var frames []Frame
	for i := range benchFrames {
		f := csumFrame(b, false, layers.IPProtocolTCP, "", make([]byte, 576-54))
		f[ethHeaderLen+15] = byte(i) // another flow each (the source address), checksums fixed below
		f[ethHeaderLen+14] = byte(i >> 8)
		f[ethHeaderLen+10], f[ethHeaderLen+11] = 0, 0
		h := ^naiveChecksum(f[ethHeaderLen : ethHeaderLen+20])
		f[ethHeaderLen+10], f[ethHeaderLen+11] = byte(h>>8), byte(h)
		frames = append(frames, Frame{Data: f})
	}
	noop := func(*Packet) {}
	input := func(verify bool) *Input {
		d, err := New(Config{Workers: 4, Dispatch: DispatchDirect, VerifyChecksums: verify, Queue: QueueConfig{Overflow: OverflowDrop}}, noop)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { d.Close(context.Background()) })
		return d.NewInput()
	}
	alternate(b, frames, input(false), input(true), nil)
}
