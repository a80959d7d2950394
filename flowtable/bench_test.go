package flowtable

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// benchFlows returns n distinct random flows and an access sequence over
// them (uniform or Zipf s=1.1), long enough that the sequence itself does
// not stay in the cache.
func benchFlows(n int, zipf bool) (flows []Flow[key], seq []int32) {
	rng := rand.New(rand.NewPCG(uint64(n), 99))
	seen := make(map[uint32]bool, n)
	for len(flows) < n {
		id := rng.Uint32()
		if !seen[id] {
			seen[id] = true
			flows = append(flows, Flow[key]{ID: id, Key: key{sport: uint16(id), dport: uint16(id >> 16), proto: 6}})
		}
	}
	seq = make([]int32, 1<<21)
	z := rand.NewZipf(rng, 1.1, 1, uint64(n-1))
	for i := range seq {
		if zipf {
			seq[i] = int32(z.Uint64())
		} else {
			seq[i] = int32(rng.IntN(n))
		}
	}
	return flows, seq
}

var benchCases = []struct{ flows, capacity int }{
	{10_000, 16384},
	{1_000_000, 1 << 20},
}

// benchTime is the capture clock of frame i: a microsecond a frame.
func benchTime(i int) time.Time { return time.Unix(1_700_000_000, int64(i)*1000) }

// filledTable returns a table of the capacity given holding that many
// flows, the flows, and an access sequence over them (benchFlows).
func filledTable(b *testing.B, flows, capacity int, zipf bool) (*Table[key, rec], []Flow[key], []int32) {
	b.Helper()
	fl, seq := benchFlows(flows, zipf)
	tb, err := New(Config[key, rec]{Capacity: capacity, Idle: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	for i, f := range fl {
		tb.Lookup(f.ID, f.Key, benchTime(i))
	}
	return tb, fl, seq
}

// BenchmarkLookup measures a handler's per-packet cost with its state in a
// Table: Lookup of an existing flow (every flow fits) and an update of its
// value, with the flow's full key compared.
func BenchmarkLookup(b *testing.B) {
	for _, c := range benchCases {
		for _, dist := range []string{"uniform", "zipf"} {
			b.Run(fmt.Sprintf("flows=%d/cap=%d/%s", c.flows, c.capacity, dist), func(b *testing.B) {
				tb, flows, seq := filledTable(b, c.flows, c.capacity, dist == "zipf")
				mask := len(seq) - 1
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					f := &flows[seq[i&mask]]
					v, _ := tb.Lookup(f.ID, f.Key, benchTime(i))
					v.packets++
				}
			})
		}
	}
}

// BenchmarkMap is the same work with a plain map[key]*rec, the way
// handlers keep flows without this package (and without a bound): the
// baseline for BenchmarkLookup.
func BenchmarkMap(b *testing.B) {
	for _, c := range benchCases {
		for _, dist := range []string{"uniform", "zipf"} {
			b.Run(fmt.Sprintf("flows=%d/%s", c.flows, dist), func(b *testing.B) {
				flows, seq := benchFlows(c.flows, dist == "zipf")
				m := make(map[key]*rec, c.flows)
				for _, f := range flows {
					m[f.Key] = &rec{}
				}
				mask := len(seq) - 1
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					f := &flows[seq[i&mask]]
					r := m[f.Key]
					if r == nil {
						r = &rec{}
						m[f.Key] = r
					}
					r.packets++
					r.first = benchTime(i)
				}
			})
		}
	}
}

// BenchmarkFlood measures the cost of a packet that starts a new flow in a
// full table: evict the least recently seen (reported to OnEvict), insert.
func BenchmarkFlood(b *testing.B) {
	evicted := 0
	tb, err := New(Config[key, rec]{Capacity: 1 << 16, Idle: time.Hour,
		OnEvict: func(Flow[key], *rec, Reason) { evicted++ }})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 1 << 16 {
		id, kk := floodFlow(i)
		tb.Lookup(id, kk, benchTime(i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id, kk := floodFlow(i + 1<<16)
		v, _ := tb.Lookup(id, kk, benchTime(i+1<<16))
		v.packets++
	}
	if evicted < b.N {
		b.Fatalf("%d evictions for %d new flows", evicted, b.N)
	}
}

// BenchmarkExpire measures ending idle flows from a tick: per flow
// expired.
func BenchmarkExpire(b *testing.B) {
	const capacity = 1 << 16
	tb, err := New(Config[key, rec]{Capacity: capacity, Idle: time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; {
		n := min(capacity, b.N-i)
		b.StopTimer()
		for j := range n {
			id, kk := floodFlow(i + j)
			tb.Lookup(id, kk, benchTime(i))
		}
		b.StartTimer()
		if got := tb.Expire(benchTime(i).Add(time.Second)); got != n {
			b.Fatalf("expired %d of %d", got, n)
		}
		i += n
	}
}

// BenchmarkPrefetch looks up existing flows of a table larger than the
// caches as a handler with a delay line does: Prefetch each flow when its
// packet arrives, Lookup it 8 packets later. The plain Lookups of the same
// sequence take turns with it in one run: prefetched-ns/lookup against
// plain-ns/lookup, and their ratio.
func BenchmarkPrefetch(b *testing.B) {
	const d = 8
	for _, c := range benchCases {
		b.Run(fmt.Sprintf("flows=%d", c.flows), func(b *testing.B) {
			tb, flows, seq := filledTable(b, c.flows, c.capacity, false)
			mask := len(seq) - 1
			plain := func(from, n int) {
				for i := from; i < from+n; i++ {
					f := &flows[seq[i&mask]]
					v, _ := tb.Lookup(f.ID, f.Key, benchTime(i))
					v.packets++
				}
			}
			prefetched := func(from, n int) {
				for i := from; i < from+n; i++ {
					tb.Prefetch(flows[seq[(i+d)&mask]].ID)
					f := &flows[seq[i&mask]]
					v, _ := tb.Lookup(f.ID, f.Key, benchTime(i))
					v.packets++
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			var tPlain, tPre time.Duration
			for done := 0; done < b.N; {
				n := min(b.N-done, 1<<16)
				start := time.Now()
				plain(done, n)
				tPlain += time.Since(start)
				start = time.Now()
				prefetched(done, n)
				tPre += time.Since(start)
				done += n
			}
			b.ReportMetric(float64(tPre.Nanoseconds())/float64(b.N), "prefetched-ns/lookup")
			b.ReportMetric(float64(tPlain.Nanoseconds())/float64(b.N), "plain-ns/lookup")
			b.ReportMetric(float64(tPre)/float64(tPlain), "prefetched/plain")
		})
	}
}
