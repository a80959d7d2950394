// This file builds the plain frames of many flows, fast (Spec, Generator).

package synth

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
)

// Spec describes the frames to build.
type Spec struct {
	Flows int     // distinct 4-tuples (at least 1)
	Size  int     // frame length in bytes, at least 64 (54 for the headers)
	UDP   bool    // UDP instead of TCP
	Zipf  float64 // when > 0, flow sizes follow Zipf with this exponent s; otherwise uniform
	// Cycle takes the flows in turn, 0, 1, ..., Flows-1, then 0 again,
	// instead of drawing them: every flow appears once in each Flows
	// frames. Zipf is then ignored.
	Cycle bool
	Seed  uint64
}

// Frames returns n frames drawn from spec's flows. Each frame carries, in its
// TCP sequence number (or the first 4 UDP payload bytes), its index within
// its flow, starting at 1, so a handler can check order.
func Frames(spec Spec, n int) [][]byte {
	g := NewGenerator(spec)
	buf := make([]byte, n*g.size) // one backing array, no per-frame allocation
	out := make([][]byte, n)
	for i := range out {
		b := buf[i*g.size : (i+1)*g.size : (i+1)*g.size]
		g.Next(b)
		out[i] = b
	}
	return out
}

// Generator builds spec's frames one at a time, the same sequence Frames
// returns, without holding them: for captures larger than memory.
type Generator struct {
	spec Spec
	size int
	pick func() int
	seq  []uint32 // the last sequence number of each flow
}

// NewGenerator returns a generator of spec's frames.
func NewGenerator(spec Spec) *Generator {
	flows := max(spec.Flows, 1)
	rng := rand.New(rand.NewPCG(spec.Seed, 0x5eed))
	g := &Generator{spec: spec, size: max(spec.Size, 64), pick: uniform(rng, flows), seq: make([]uint32, flows)}
	switch {
	case spec.Cycle:
		next := 0
		g.pick = func() int {
			f := next
			next = (next + 1) % flows
			return f
		}
	case spec.Zipf > 0:
		g.pick = zipf(rng, flows, spec.Zipf)
	}
	return g
}

// Size returns the length of the frames: Spec.Size, at least 64.
func (g *Generator) Size() int { return g.size }

// Next writes the next frame into b, which must hold Size bytes, and
// returns its flow.
func (g *Generator) Next(b []byte) (flow int) {
	f := g.pick()
	g.seq[f]++
	Build(b[:g.size], f, g.seq[f], g.spec.UDP)
	return f
}

// Build writes into b (at least 64 bytes) the frame of flow f with sequence
// number seq.
func Build(b []byte, f int, seq uint32, udp bool) {
	clear(b[:54])
	b[0], b[6] = 0x02, 0x02 // locally administered MACs
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(min(len(b)-14, 65535)))
	ip[8] = 64
	proto := byte(6)
	if udp {
		proto = 17
	}
	ip[9] = proto
	u := uint32(f)
	binary.BigEndian.PutUint32(ip[12:], 0x0a000000|(u*2654435761)>>8) // 10.x.y.z, spread
	binary.BigEndian.PutUint32(ip[16:], 0xc0a80000|(u&0xff))          // 192.168.0.z
	binary.BigEndian.PutUint16(ip[10:], checksum(ip[:20]))
	l4 := ip[20:]
	binary.BigEndian.PutUint16(l4[0:], uint16(1024+u%60000))
	binary.BigEndian.PutUint16(l4[2:], uint16(80+u%7))
	if udp {
		binary.BigEndian.PutUint16(l4[4:], uint16(len(b)-34))
		binary.BigEndian.PutUint32(l4[8:], seq)
		return
	}
	binary.BigEndian.PutUint32(l4[4:], seq)
	l4[12] = 5 << 4
	l4[13] = 0x18 // PSH, ACK
	binary.BigEndian.PutUint16(l4[14:], 65535)
}

// Seq returns the sequence number Build wrote into a frame, and whether the
// frame is long enough to hold one.
func Seq(frame []byte, udp bool) (uint32, bool) {
	off := 14 + 20 + 4
	if udp {
		off = 14 + 20 + 8
	}
	if len(frame) < off+4 {
		return 0, false
	}
	return binary.BigEndian.Uint32(frame[off:]), true
}

func uniform(rng *rand.Rand, n int) func() int {
	return func() int { return rng.IntN(n) }
}

// zipf draws flow f with probability proportional to 1/(f+1)^s, by binary
// search over the cumulative weights (math/rand's Zipf needs s > 1).
func zipf(rng *rand.Rand, n int, s float64) func() int {
	cum := make([]float64, n)
	var t float64
	for i := range cum {
		t += 1 / math.Pow(float64(i+1), s)
		cum[i] = t
	}
	return func() int {
		x := rng.Float64() * t
		lo, hi := 0, n-1
		for lo < hi {
			m := (lo + hi) / 2
			if cum[m] < x {
				lo = m + 1
			} else {
				hi = m
			}
		}
		return lo
	}
}
