package clitest

import (
	"runtime"
	"runtime/metrics"
	"time"
)

// HeapGrowth runs fn and returns by how much the live heap grew at its
// peak while fn ran, over what it was before: the heap each garbage
// collection found live (runtime/metrics' /gc/heap/live:bytes), sampled
// every few milliseconds, so that garbage already collected does not count
// (what fn allocates while a collection runs does, so a bound should be
// generous). A test of a command's memory bound runs the command's work in
// fn.
func HeapGrowth(fn func()) int64 {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	live := func() int64 {
		metrics.Read(sample)
		return int64(sample[0].Value.Uint64())
	}
	runtime.GC()
	base := live()
	peak := base
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			peak = max(peak, live())
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	fn()
	close(stop)
	<-done
	runtime.GC() // what fn left live counts too
	return max(peak, live()) - base
}
