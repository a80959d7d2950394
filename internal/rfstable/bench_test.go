package rfstable

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

const batch = 64 // frames per lock hold, as the dispatcher batches

// benchFlows returns n distinct random flowids and an access sequence over
// them (uniform or Zipf s=1.1), long enough to defeat caching of the
// sequence pattern itself.
func benchFlows(n int, zipf bool) (flows, seq []uint32) {
	rng := rand.New(rand.NewPCG(uint64(n), 99))
	seen := make(map[uint32]bool, n)
	for len(flows) < n {
		f := rng.Uint32()
		if !seen[f] {
			seen[f] = true
			flows = append(flows, f)
		}
	}
	seq = make([]uint32, 1<<21)
	z := rand.NewZipf(rng, 1.1, 1, uint64(n-1))
	for i := range seq {
		if zipf {
			seq[i] = flows[z.Uint64()]
		} else {
			seq[i] = flows[rng.IntN(n)]
		}
	}
	return flows, seq
}

var benchCases = []struct {
	flows, capacity int
}{
	{10_000, 16384},
	{1_000_000, 2 << 20},
}

// BenchmarkLookup measures the per-frame cost of Lookup plus the in-place
// update the dispatcher does (Packets, Bytes, LastSeen, LastTail), with the
// lock taken once per batch of 64 frames.
func BenchmarkLookup(b *testing.B) {
	for _, c := range benchCases {
		for _, dist := range []string{"uniform", "zipf"} {
			b.Run(fmt.Sprintf("flows=%d/cap=%d/%s", c.flows, c.capacity, dist), func(b *testing.B) {
				flows, seq := benchFlows(c.flows, dist == "zipf")
				// One shared head, caught up after each batch: only
				// flows touched in the current batch are busy.
				var head atomic.Uint64
				tb := mustNew(b, c.capacity, func(e *Entry) bool {
					return e.Current >= 0 && head.Load() < e.LastTail
				})
				tb.Lock()
				for i, f := range flows {
					if e, _ := tb.Lookup(f, 0); e != nil {
						e.Current = int32(i & 7)
					}
				}
				tb.Unlock()
				warm := tb.Stats()
				b.ReportAllocs()
				b.ResetTimer()
				mask := len(seq) - 1
				for i := 0; i < b.N; {
					tb.Lock()
					for end := min(i+batch, b.N); i < end; i++ {
						now := int64(i)
						if e, _ := tb.Lookup(seq[i&mask], now); e != nil {
							e.Packets++
							e.Bytes += 64
							e.LastSeen = now
							e.LastTail = uint64(now)
						}
					}
					tb.Unlock()
					head.Store(uint64(i))
				}
				b.StopTimer()
				st := tb.Stats()
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/frame")
				hits := st.Hits - warm.Hits
				b.ReportMetric(100*float64(hits)/float64(hits+st.Inserts-warm.Inserts+st.Full-warm.Full), "hit%")
			})
		}
	}
}

// BenchmarkDirectMapped is the baseline for BenchmarkLookup: the same
// per-frame update into a plain array indexed by flowid & mask, without tag
// compare, sets or eviction (Linux's rps_dev_flow_table is laid out so,
// with 8-byte entries). The difference is the cost of the table's logic
// rather than of the memory it touches.
func BenchmarkDirectMapped(b *testing.B) {
	for _, c := range benchCases {
		for _, dist := range []string{"uniform", "zipf"} {
			b.Run(fmt.Sprintf("flows=%d/cap=%d/%s", c.flows, c.capacity, dist), func(b *testing.B) {
				_, seq := benchFlows(c.flows, dist == "zipf")
				ents := make([]Entry, c.capacity)
				m := uint32(c.capacity - 1)
				b.ReportAllocs()
				b.ResetTimer()
				mask := len(seq) - 1
				for i := 0; i < b.N; i++ {
					now := int64(i)
					e := &ents[seq[i&mask]&m]
					e.Packets++
					e.Bytes += 64
					e.LastSeen = now
					e.LastTail = uint64(now)
				}
				b.StopTimer()
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/frame")
			})
		}
	}
}

// BenchmarkDesiredGet measures the hot-path read of the desired table.
func BenchmarkDesiredGet(b *testing.B) {
	for _, c := range []struct{ flows, capacity int }{{10_000, 32768}, {1_000_000, 2 << 20}} {
		b.Run(fmt.Sprintf("flows=%d/cap=%d", c.flows, c.capacity), func(b *testing.B) {
			flows, seq := benchFlows(c.flows, false)
			d, err := NewDesired(c.capacity)
			if err != nil {
				b.Fatal(err)
			}
			for i, f := range flows {
				_ = d.Set(f, i&7)
			}
			b.ReportAllocs()
			mask := len(seq) - 1
			sum := 0
			i := 0
			for b.Loop() {
				w, _ := d.Get(seq[i&mask])
				sum += w
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/frame")
			if sum < 0 {
				b.Fatal("impossible")
			}
		})
	}
}

// BenchmarkRFSFrame approximates the whole per-frame RFS work the
// dispatcher adds: read the desired worker, look up the flow, apply the
// last_qtail rule (moving when allowed), update the entry. Worker heads are
// advanced by the benchmark itself so that moves happen.
func BenchmarkRFSFrame(b *testing.B) {
	for _, dist := range []string{"uniform", "zipf"} {
		b.Run("flows=10000/cap=16384/"+dist, func(b *testing.B) {
			const workers = 4
			flows, seq := benchFlows(10_000, dist == "zipf")
			d, _ := NewDesired(32768)
			var head, tail [workers]atomic.Uint64
			tb := mustNew(b, 16384, func(e *Entry) bool {
				return e.Current >= 0 && head[e.Current].Load() < e.LastTail
			})
			for i, f := range flows {
				_ = d.Set(f, i%workers)
			}
			b.ReportAllocs()
			b.ResetTimer()
			mask := len(seq) - 1
			moves := 0
			for i := 0; i < b.N; {
				tb.Lock()
				for end := min(i+batch, b.N); i < end; i++ {
					f := seq[i&mask]
					now := int64(i)
					e, _ := tb.Lookup(f, now)
					if e == nil {
						continue // stateless steering
					}
					if e.Current < 0 {
						e.Current = int32(f % workers) // the stateless worker
						e.LastTail = tail[e.Current].Load()
					}
					if dw, ok := d.Get(f); ok {
						e.Desired = int32(dw)
						if int32(dw) != e.Current && head[e.Current].Load() >= e.LastTail {
							e.Current = int32(dw)
							moves++
						}
					}
					e.LastTail = tail[e.Current].Add(1)
					e.Packets++
					e.Bytes += 64
				}
				tb.Unlock()
				// Workers catch up between batches; every 7th batch they
				// move a flow's desired worker.
				for w := range workers {
					head[w].Store(tail[w].Load())
				}
				if i%(7*batch) == 0 {
					f := seq[(i*31)&mask]
					_ = d.Set(f, int(f+uint32(i))%workers)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/frame")
			b.ReportMetric(float64(moves), "moves")
		})
	}
}
