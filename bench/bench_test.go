package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/rpsgo/rps/steer"
)

// BenchmarkDispatch is the dispatcher's cost per frame (classify, hash,
// select, batched hand-off) to 1, 2 and 4 workers with a handler that does
// nothing, unpinned and pinned, with the sources' usual 64 frames per
// Dispatch call; and unpinned with 256, where each of 4 workers still gets
// full 64-frame hand-offs.
func BenchmarkDispatch(b *testing.B) {
	for _, src := range []int{steer.BatchSize, 4 * steer.BatchSize} {
		for _, pinned := range []bool{false, true} {
			if pinned && src != steer.BatchSize {
				continue
			}
			for _, w := range []int{1, 2, 4} {
				name := fmt.Sprintf("src=%d/workers=%d/pinned=%v", src, w, pinned)
				b.Run(name, func(b *testing.B) {
					cfg := steer.Config{Workers: w}
					if pinned {
						if cfg.CPUs = pinnedCPUs(); cfg.CPUs == nil {
							b.Skip("pinning needs Linux")
						}
					}
					dispatchCaseBatch(b, frames64(), cfg, func(*steer.Packet) {}, src)
				})
			}
		}
	}
}

// BenchmarkIdiomatic is the common Go pipeline over the same frames, for the
// ratio against BenchmarkDispatch.
func BenchmarkIdiomatic(b *testing.B) {
	for _, w := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			idiomaticCase(b, frames64(), w, func([]byte) {})
		})
	}
}

// BenchmarkRatioIdiomatic runs ours and the idiomatic pipeline back to back
// on the same b.N frames, one worker each, and reports how many times
// faster ours is.
func BenchmarkRatioIdiomatic(b *testing.B) {
	fs := frames64()
	ours, _ := runDispatch(b, fs, steer.Config{Workers: 1}, func(*steer.Packet) {}, b.N)
	idio := runIdiomatic(fs, 1, func([]byte) {}, b.N)
	b.ReportMetric(float64(ours.Nanoseconds())/float64(b.N), "ours-ns/frame")
	b.ReportMetric(float64(idio.Nanoseconds())/float64(b.N), "idiomatic-ns/frame")
	b.ReportMetric(float64(idio)/float64(ours), "x-faster")
}

// BenchmarkSteeredVsSingleQueue compares 2 workers with the single-queue
// baseline (1 worker) under a handler that spends about a microsecond of
// CPU per frame, on the same b.N frames, and reports the ratio beside its
// ceiling 2T/(T+d), for handler time T and dispatch cost d.
func BenchmarkSteeredVsSingleQueue(b *testing.B) {
	fs := frames64()
	sp := newSpinner(time.Microsecond)
	h := func(*steer.Packet) { sp.spin() }
	workers := min(2, steer.DefaultWorkers())
	n := max(b.N, 20000)
	single, _ := runDispatch(b, fs, steer.Config{Workers: 1}, h, n)
	steered, _ := runDispatch(b, fs, steer.Config{Workers: workers}, h, n)
	noop, _ := runDispatch(b, fs, steer.Config{Workers: 1}, func(*steer.Packet) {}, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		sp.spin()
	}
	T := float64(time.Since(start).Nanoseconds()) / float64(n)
	d := float64(noop.Nanoseconds()) / float64(n)
	ratio := float64(single) / float64(steered)
	b.ReportMetric(T, "handler-ns")
	b.ReportMetric(d, "dispatch-ns")
	b.ReportMetric(1e3*float64(n)/float64(single.Nanoseconds()), "single-Mpps")
	b.ReportMetric(1e3*float64(n)/float64(steered.Nanoseconds()), "steered-Mpps")
	b.ReportMetric(ratio, "speedup")
	b.ReportMetric(float64(workers)*T/(T+d), "ceiling")
}
