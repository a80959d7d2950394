//go:build linux

package kgroup_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/internal/pace"
	"github.com/rpsgo/rps/steer"
)

// BenchmarkLiveRead measures a family's socket read, no dispatcher: the
// paced sender sends b.N 64-byte UDP frames of many flows from B at each
// rate, and one goroutine, on an OS thread of its own, reads A's socket
// (the family's defaults), classifies each frame (as a dispatcher's reader
// does, which brings the frame's headers into the cache) and releases each
// batch at once. It reports the
// reader thread's CPU time a frame and its voluntary context switches (its
// wake-ups from poll and naps) a thousand frames (getrusage RUSAGE_THREAD),
// the frames a non-empty read, and the frames lost (the kernel's drops). Run it with
// -benchtime 500000x or more; the sender shares the machine's CPUs.
func BenchmarkLiveRead(b *testing.B) {
	netns.Require(b, "ethtool")
	p := netns.New(b, netns.Options{})
	for _, f := range families {
		for _, rate := range []int{250_000, 500_000} {
			b.Run(fmt.Sprintf("%s/rate=%dk", f.name, rate/1000), func(b *testing.B) {
				var s liveSocket
				if err := p.A.Do(func() (err error) { s, err = f.live(p.A, false); return err }); err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				spec := pace.Spec{Dev: p.B.Link, Frames: b.N, Rate: rate, Size: 64, Src: p.B.Addr.Addr(), Dst: p.A.Addr.Addr()}
				st0, _ := s.SourceStats()
				var wg sync.WaitGroup
				var sent int
				var serr error
				b.ResetTimer()
				wg.Go(func() { serr = p.B.Do(func() (err error) { sent, _, err = pace.Send(spec); return err }) })
				frames, reads, cpu, wakes := readFor(b, s, b.N, st0.Dropped)
				wg.Wait()
				b.StopTimer()
				if serr != nil || sent != b.N {
					b.Fatalf("sent %d of %d: %v", sent, b.N, serr)
				}
				st, _ := s.SourceStats()
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(max(frames, 1)), "reader-ns/frame")
				b.ReportMetric(float64(frames)/float64(max(reads, 1)), "frames/read")
				b.ReportMetric(float64(wakes)*1000/float64(max(frames, 1)), "wakeups/kframe")
				b.ReportMetric(float64(st.Dropped-st0.Dropped), "lost")
			})
		}
	}
}

// readFor reads s on a locked OS thread, classifying each frame and
// releasing each batch at once,
// until it has read n frames less those the kernel dropped beyond drops0,
// or nothing came for a second. It returns the frames read, the non-empty
// reads, and the thread's CPU time and voluntary context switches over
// them.
func readFor(b *testing.B, s liveSocket, n int, drops0 uint64) (frames, reads int, cpu time.Duration, wakes int64) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cls, err := steer.NewClassifier(steer.HashConfig{UDP4Tuple: true})
	if err != nil {
		b.Fatal(err)
	}
	var c steer.Classification
	t0, w0 := threadUsage()
	var batch steer.Batch
	last := time.Now()
	ctx := context.Background()
	for frames < n {
		if err := s.ReadBatch(ctx, &batch); err != nil {
			b.Fatal(err)
		}
		if len(batch.Frames) == 0 {
			st, _ := s.SourceStats()
			if frames+int(st.Dropped-drops0) >= n || time.Since(last) > time.Second {
				break
			}
			continue
		}
		for i := range batch.Frames {
			cls.Classify(batch.Frames[i].Data, &c)
		}
		frames += len(batch.Frames)
		reads++
		last = time.Now()
		batch.Release()
	}
	t1, w1 := threadUsage()
	return frames, reads, t1 - t0, w1 - w0
}

// threadUsage returns the calling thread's user and system time and its
// voluntary context switches.
func threadUsage() (time.Duration, int64) {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), int64(ru.Nvcsw) // int32 on 32-bit Linux
}
