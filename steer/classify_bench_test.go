package steer

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/rpsgo/rps/hash"
)

// benchFrames is the number of distinct flows a benchmark cycles through,
// so that the branch predictor cannot learn one frame.
const benchFrames = 1024

// benchSet returns benchFrames frames of one shape, each a different flow.
// A TCP/IPv4 frame is 64 bytes (54 bytes of headers and 10 of payload);
// a TCP/IPv6 frame is 84 bytes.
func benchSet(v6 bool, tags ...vlanTag) [][]byte {
	r := rand.New(rand.NewPCG(7, 8))
	frames := make([][]byte, benchFrames)
	for i := range frames {
		var b [32]byte
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		l4 := tcpHdr(uint16(r.Uint32()), uint16(r.Uint32()), rep(10, 'x')...)
		if v6 {
			src, dst := netip.AddrFrom16([16]byte(b[:16])), netip.AddrFrom16([16]byte(b[16:]))
			frames[i] = ethFrame(etherTypeIPv6, ipv6Packet(src, dst, protoTCP, l4), tags...)
		} else {
			src, dst := netip.AddrFrom4([4]byte(b[:4])), netip.AddrFrom4([4]byte(b[4:8]))
			frames[i] = ethFrame(etherTypeIPv4, ipv4Packet(src, dst, protoTCP, 0, l4), tags...)
		}
	}
	return frames
}

var benchShapes = []struct {
	name   string
	frames func() [][]byte
}{
	{"tcp4", func() [][]byte { return benchSet(false) }},
	{"tcp4-vlan", func() [][]byte { return benchSet(false, tag(100)) }},
	{"tcp4-qinq", func() [][]byte { return benchSet(false, stag(7), tag(100)) }},
	{"tcp6", func() [][]byte { return benchSet(true) }},
	{"tcp6-vlan", func() [][]byte { return benchSet(true, tag(100)) }},
}

// sink keeps the compiler from dropping the work.
var sink uint64

// runOurs classifies every frame once and returns a checksum of the flowids.
func runOurs(c *Classifier, frames [][]byte, out *Classification) uint64 {
	var s uint64
	for _, f := range frames {
		c.Classify(f, out)
		s += uint64(out.FlowID)
	}
	return s
}

// gopacketHasher is the common Go way to split traffic by flow: decode the
// layers with a DecodingLayerParser, then combine the network and transport
// flows' FastHash.
type gopacketHasher struct {
	parser  *gopacket.DecodingLayerParser
	eth     layers.Ethernet
	dot1q   layers.Dot1Q
	ip4     layers.IPv4
	ip6     layers.IPv6
	tcp     layers.TCP
	udp     layers.UDP
	decoded []gopacket.LayerType
}

func newGopacketHasher() *gopacketHasher {
	g := &gopacketHasher{decoded: make([]gopacket.LayerType, 0, 8)}
	g.parser = gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &g.eth, &g.dot1q, &g.ip4, &g.ip6, &g.tcp, &g.udp)
	g.parser.IgnoreUnsupported = true
	return g
}

func (g *gopacketHasher) hash(frame []byte) uint64 {
	if err := g.parser.DecodeLayers(frame, &g.decoded); err != nil {
		return 0
	}
	var nf, tf gopacket.Flow
	for _, t := range g.decoded {
		switch t {
		case layers.LayerTypeIPv4:
			nf = g.ip4.NetworkFlow()
		case layers.LayerTypeIPv6:
			nf = g.ip6.NetworkFlow()
		case layers.LayerTypeTCP:
			tf = g.tcp.TransportFlow()
		case layers.LayerTypeUDP:
			tf = g.udp.TransportFlow()
		}
	}
	return nf.FastHash()*31 + tf.FastHash()
}

func runGopacket(g *gopacketHasher, frames [][]byte) uint64 {
	var s uint64
	for _, f := range frames {
		s += g.hash(f)
	}
	return s
}

func reportPerFrame(b *testing.B, d time.Duration, n int) {
	ns := float64(d.Nanoseconds()) / float64(n)
	b.ReportMetric(ns, "ns/frame")
	b.ReportMetric(1e3/ns, "Mpps")
}

// BenchmarkClassify measures Classify plus the Toeplitz hash ("rps") and
// the gopacket DecodingLayerParser + FastHash way ("gopacket") on the same
// frames. One op is one frame.
func BenchmarkClassify(b *testing.B) {
	h, err := hash.NewToeplitz(hash.MicrosoftKey[:])
	if err != nil {
		b.Fatal(err)
	}
	c, err := NewClassifier(HashConfig{Key: h.Key()})
	if err != nil {
		b.Fatal(err)
	}
	for _, shape := range benchShapes {
		frames := shape.frames()
		b.Run(shape.name+"/rps", func(b *testing.B) {
			var out Classification
			b.ReportAllocs()
			b.SetBytes(int64(len(frames[0])))
			start := time.Now()
			for i := 0; i < b.N; i++ {
				c.Classify(frames[i%benchFrames], &out)
				sink += uint64(out.FlowID)
			}
			reportPerFrame(b, time.Since(start), b.N)
		})
		b.Run(shape.name+"/gopacket", func(b *testing.B) {
			g := newGopacketHasher()
			b.ReportAllocs()
			b.SetBytes(int64(len(frames[0])))
			start := time.Now()
			for i := 0; i < b.N; i++ {
				sink += g.hash(frames[i%benchFrames])
			}
			reportPerFrame(b, time.Since(start), b.N)
		})
	}
}

// BenchmarkClassifyVsGopacket runs both ways in alternating rounds over the
// same 1024 frames in one benchmark, so that both see the same machine load
// (the CI machine is shared), and reports the speed-up. One op is one round
// of 1024 frames each way.
func BenchmarkClassifyVsGopacket(b *testing.B) {
	h, err := hash.NewToeplitz(hash.MicrosoftKey[:])
	if err != nil {
		b.Fatal(err)
	}
	c, err := NewClassifier(HashConfig{Key: h.Key()})
	if err != nil {
		b.Fatal(err)
	}
	for _, shape := range benchShapes {
		frames := shape.frames()
		b.Run(shape.name, func(b *testing.B) {
			g := newGopacketHasher()
			var out Classification
			var ours, theirs time.Duration
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				sink += runOurs(c, frames, &out)
				t1 := time.Now()
				sink += runGopacket(g, frames)
				theirs += time.Since(t1)
				ours += t1.Sub(t0)
			}
			n := float64(b.N) * benchFrames
			b.ReportMetric(float64(ours.Nanoseconds())/n, "rps-ns/frame")
			b.ReportMetric(float64(theirs.Nanoseconds())/n, "gopacket-ns/frame")
			b.ReportMetric(float64(theirs)/float64(ours), "speedup")
		})
	}
}
