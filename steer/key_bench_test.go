package steer

import (
	"context"
	"testing"
	"unsafe"

	"github.com/rpsgo/rps/internal/synth"
)

var sinkPort uint16

// BenchmarkPacketKey is Packet.Key as a worker's handler calls it: once a
// packet, over 64-byte TCP/IPv4 frames of 256 flows, in the caches.
func BenchmarkPacketKey(b *testing.B) {
	d, err := New(Config{Workers: 1}, func(*Packet) {})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close(context.Background())
	const n = 256
	pkts := make([]Packet, n)
	for i, fr := range synth.Frames(synth.Spec{Flows: n, Seed: 1}, n) {
		pkts[i] = Packet{Data: fr, frame: unsafe.SliceData(fr), frameLen: int32(len(fr)), prod: d.workers[0].prod}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		p := &pkts[i%n]
		p.keyed = false
		k := p.Key()
		sinkPort += k.SrcPort
	}
}
