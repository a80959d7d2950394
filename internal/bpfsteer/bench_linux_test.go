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
// functions, for both hooks; the frame's skb or xdp_buff setup is outside
// the measured loop. The XDP program is the real one with its slot
// empty: the run includes bpf_redirect_map's lookup and a counter, not
// the redirect itself.
func BenchmarkProgram(b *testing.B) {
	requirePriv(b)
	plain := tEth(etIPv4, tIPv4(1, protoTCP, tTCP(1)), 0)
	vxlan := tEth(etIPv4, tIPv4(2, protoUDP, tVXLAN(plain)), 0)
	for _, hook := range hooks {
		for _, alg := range []hash.Algorithm{hash.AlgorithmToeplitz, hash.AlgorithmSipHash} {
			for _, tun := range []steer.TunnelMode{steer.TunnelsOuter, steer.TunnelsInner} {
				n := 40
				if alg == hash.AlgorithmSipHash {
					n = hash.SipHashKeyLen
				}
				hc := steer.HashConfig{Algorithm: alg, Key: randKey(b, n), Tunnels: tun}
				opts := optionsFor(hc, make([]uint32, 128), 0, hook)
				benchFrames(b, loadReal(b, opts), hook.String()+"/"+alg.String()+"/"+tun.String(), plain, vxlan)
			}
		}
	}
}

// benchFrames runs one benchmark per frame, plain and VXLAN.
func benchFrames(b *testing.B, p steering, name string, plain, vxlan []byte) {
	for _, f := range []struct {
		name  string
		frame []byte
	}{{"tcp4", plain}, {"vxlan", vxlan}} {
		b.Run(name+"/"+f.name, func(b *testing.B) {
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
