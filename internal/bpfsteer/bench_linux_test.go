//go:build linux

package bpfsteer

import (
	"testing"
	"time"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/steer"
)

// BenchmarkProgram measures the program's run in the kernel per frame
// (BPF_PROG_TEST_RUN repeats it and reports the mean) for a plain TCP/IPv4
// frame and a VXLAN one, with tunnels outer and inner and both hash
// functions; the frame's skb setup is outside the measured loop.
func BenchmarkProgram(b *testing.B) {
	requirePriv(b)
	plain := tEth(etIPv4, tIPv4(1, protoTCP, tTCP(1)), 0)
	vxlan := tEth(etIPv4, tIPv4(2, protoUDP, tVXLAN(plain)), 0)
	for _, alg := range []hash.Algorithm{hash.AlgorithmToeplitz, hash.AlgorithmSipHash} {
		for _, tun := range []steer.TunnelMode{steer.TunnelsOuter, steer.TunnelsInner} {
			n := 40
			if alg == hash.AlgorithmSipHash {
				n = hash.SipHashKeyLen
			}
			hc := steer.HashConfig{Algorithm: alg, Key: randKey(b, n), Tunnels: tun}
			p := load(b, optionsFor(hc, make([]uint32, 128), 0))
			for _, f := range []struct {
				name  string
				frame []byte
			}{{"tcp4", plain}, {"vxlan", vxlan}} {
				b.Run(alg.String()+"/"+tun.String()+"/"+f.name, func(b *testing.B) {
					const repeat = 100000
					var total time.Duration
					for i := 0; i < b.N; i++ {
						_, d, err := p.ebpfProgram().Benchmark(f.frame, repeat, nil)
						if err != nil {
							b.Fatal(err)
						}
						total += d
					}
					b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/frame")
				})
			}
		}
	}
}
