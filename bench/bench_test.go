package main

import (
	"fmt"
	"testing"

	"github.com/rpsgo/rps/steer"
)

// BenchmarkDispatch is the dispatcher's cost per frame (classify, hash,
// select, batched hand-off) to 1, 2 and 4 workers with a handler that does
// nothing, unpinned and, where each worker gets a CPU of its own, pinned,
// with the sources' usual 64 frames per Dispatch call; and unpinned with
// 256, where each of 4 workers still gets full 64-frame hand-offs.
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
						if cfg.CPUs = pinCPUs(w); cfg.CPUs == nil {
							b.Skip("no CPU of its own for each worker (or no pinning on this system)")
						}
					}
					dispatchCaseBatch(b, frames64(), cfg, func(*steer.Packet) {}, src)
				})
			}
		}
	}
}

// BenchmarkSingleQueue is the single-queue baseline with a handler that
// does nothing: one goroutine classifying each frame with the library's
// classifier and calling the handler. It reports beside its own time a
// frame the classifier's alone on the same frames (classify-ns/frame),
// which it cannot undercut.
func BenchmarkSingleQueue(b *testing.B) {
	b.ReportAllocs()
	el := runSingleN(frames64(), func([]byte, uint32) {}, b.N)
	reportRate(b, el, b.N)
	b.StopTimer()
	b.ReportMetric(classifyCost(frames64()), "classify-ns/frame")
}

// BenchmarkIdiomatic is the common Go pipeline over the same frames, for the
// ratio against BenchmarkDispatch.
func BenchmarkIdiomatic(b *testing.B) {
	for _, w := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			idiomaticCase(b, frames64(), w, func([]byte, uint32) {})
		})
	}
}

// BenchmarkRatioIdiomatic runs ours and the idiomatic pipeline back to back
// on the same b.N frames, one worker each, and reports how many times
// faster ours is.
func BenchmarkRatioIdiomatic(b *testing.B) {
	fs := frames64()
	ours, _ := runDispatch(b, fs, steer.Config{Workers: 1}, func(*steer.Packet) {}, b.N)
	idio := runIdiomatic(fs, 1, func([]byte, uint32) {}, b.N)
	b.ReportMetric(float64(ours.Nanoseconds())/float64(b.N), "ours-ns/frame")
	b.ReportMetric(float64(idio.Nanoseconds())/float64(b.N), "idiomatic-ns/frame")
	b.ReportMetric(float64(idio)/float64(ours), "x-faster")
}

// BenchmarkSteeredVsSingleQueue compares, on the same frames with the
// spin1us handler (the machine's calibration, as go run ./bench keeps it),
// the library with 2 workers against the single-queue baseline (one
// goroutine that classifies each frame and runs the handler itself), and
// reports beside the ratio the measured ceiling (2 single-queue loops at
// once over halves of the frames) and the library with 1 worker, all run
// in turn within each iteration. Run it with -count 6 or more for benchstat.
func BenchmarkSteeredVsSingleQueue(b *testing.B) {
	fs := frames64()
	cal, err := loadCalibration(defaultCalibrationFile(), 0, machine().CPU, false)
	if err != nil {
		b.Fatal(err)
	}
	sp := spinner{iters: cal.Iters}
	h := func([]byte, uint32) { sp.spin() }
	ph := func(*steer.Packet) { sp.spin() }
	workers := min(2, steer.DefaultWorkers())
	n := max(b.N, 20000)
	b.ResetTimer()
	single := runSingleN(fs, h, n)
	steered, _ := runDispatch(b, fs, steer.Config{Workers: workers}, ph, n)
	ceiling := runCeilingN(fs, workers, h, n)
	one, _ := runDispatch(b, fs, steer.Config{Workers: 1}, ph, n)
	b.StopTimer()
	mpps := func(el interface{ Nanoseconds() int64 }) float64 { return 1e3 * float64(n) / float64(el.Nanoseconds()) }
	b.ReportMetric(mpps(single), "single-Mpps")
	b.ReportMetric(mpps(steered), "steered-Mpps")
	b.ReportMetric(mpps(one), "1worker-Mpps")
	b.ReportMetric(float64(single)/float64(steered), "x-single")
	b.ReportMetric(float64(single)/float64(ceiling), "ceiling-x-single")
	b.ReportMetric(float64(cal.Iters), "spin-iters")
}
