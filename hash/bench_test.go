package hash

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

var benchSink uint32

// BenchmarkSum hashes inputs of the tuple lengths on every available path
// side by side. The goals (per hash, on a CPU with GFNI): 12 bytes (IPv4
// 4-tuple) at most 2.5 ns and 36 bytes (IPv6 4-tuple) at most 8 ns with
// GFNI; 4 ns and 15 ns on the table path; no allocation.
func BenchmarkSum(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 10))
	const nInputs = 256 // cycle through distinct inputs, as a stream of flows would
	for _, p := range paths(b) {
		h := mustNew(b, MicrosoftKey[:], p)
		for _, n := range []int{IPv4Tuple2Len, IPv4Tuple4Len, IPv6Tuple2Len, IPv6Tuple4Len} {
			inputs := make([][]byte, nInputs)
			for i := range inputs {
				inputs[i] = randBytes(r, n)
			}
			b.Run(fmt.Sprintf("%s/%dB", p.name, n), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(n))
				var x uint32
				for i := 0; i < b.N; i++ {
					x ^= h.Sum(inputs[i%nInputs])
				}
				benchSink = x
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/hash")
			})
		}
	}
}

// BenchmarkLoop is the benchmark loop of BenchmarkSum without the hash
// (fetching the next input and folding a result), the baseline to subtract.
func BenchmarkLoop(b *testing.B) {
	inputs := make([][]byte, 256)
	for i := range inputs {
		inputs[i] = make([]byte, IPv4Tuple4Len)
	}
	b.ReportAllocs()
	var x uint32
	for i := 0; i < b.N; i++ {
		in := inputs[i%len(inputs)]
		x ^= uint32(len(in)) ^ uint32(in[0])
	}
	benchSink = x
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/hash")
}

// BenchmarkOracle is the bit-by-bit reference, for scale.
func BenchmarkOracle(b *testing.B) {
	data := make([]byte, IPv4Tuple4Len)
	b.ReportAllocs()
	var x uint32
	for i := 0; i < b.N; i++ {
		data[0] = byte(i)
		x ^= oracleSum(MicrosoftKey[:], data)
	}
	benchSink = x
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/hash")
}

// BenchmarkSumTuples hashes batches of 64 tuples; ns/hash is per tuple.
func BenchmarkSumTuples(b *testing.B) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, p := range paths(b) {
		h := mustNew(b, MicrosoftKey[:], p)
		for _, v6 := range []bool{false, true} {
			tps := make([]Tuple, 64)
			for i := range tps {
				tps[i] = NewTuple4(randAddr(r, v6), randAddr(r, v6), uint16(r.Uint32()), uint16(r.Uint32()))
			}
			dst := make([]uint32, len(tps))
			b.Run(fmt.Sprintf("%s/%dB", p.name, tps[0].Len()), func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					h.SumTuples(dst, tps)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(tps)), "ns/hash")
			})
		}
	}
}

// BenchmarkSumIPv4Tuples hashes batches of 64 IPv4 4-tuples with the batch
// form for 12-byte inputs; ns/hash is per tuple. Compare Sum/*/12B.
func BenchmarkSumIPv4Tuples(b *testing.B) {
	r := rand.New(rand.NewPCG(15, 16))
	in := make([][IPv4Tuple4Len]byte, 64)
	for i := range in {
		for j := range in[i] {
			in[i][j] = byte(r.Uint32())
		}
	}
	dst := make([]uint32, len(in))
	for _, p := range paths(b) {
		h := mustNew(b, MicrosoftKey[:], p)
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				h.SumIPv4Tuples(dst, in)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(in)), "ns/hash")
		})
	}
}

// BenchmarkSipHash hashes the tuple lengths with SipHash-2-4. The goal:
// an IPv4 4-tuple (12 bytes) in at most 10 ns, no allocation.
func BenchmarkSipHash(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 10))
	s, err := NewSipHash(randBytes(r, SipHashKeyLen))
	if err != nil {
		b.Fatal(err)
	}
	const nInputs = 256
	for _, n := range []int{IPv4Tuple2Len, IPv4Tuple4Len, IPv6Tuple2Len, IPv6Tuple4Len} {
		inputs := make([][]byte, nInputs)
		for i := range inputs {
			inputs[i] = randBytes(r, n)
		}
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(n))
			var x uint32
			for i := 0; i < b.N; i++ {
				x ^= s.Sum(inputs[i%nInputs])
			}
			benchSink = x
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/hash")
		})
	}
}
