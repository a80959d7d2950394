package main

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/affinity"
	"github.com/rpsgo/rps/internal/synth"
	"github.com/rpsgo/rps/steer"
)

var (
	benchOnce   sync.Once
	benchFrames *frameSet
)

// frames64 is 64-byte TCP/IPv4 frames from 1024 flows, shared by the
// benchmarks below so that every one sees the same frames.
func frames64() *frameSet {
	benchOnce.Do(func() { benchFrames = newFrameSet(synth.Spec{Flows: 1024, Size: 64, Seed: 1}, 1<<13) })
	return benchFrames
}

// benchQLimit is the queue limit of the dispatchers the suite and the Go
// benchmarks run: 0, the library's default (steer.DefaultWaitQLimit for
// the inputs here, which wait), unless go run ./bench -qlimit sets it.
var benchQLimit = 0

// frameSet is a cycle of prebuilt frames, reused by every benchmark of a run
// so that all see the same frames.
type frameSet struct {
	raw    [][]byte
	frames []steer.Frame
}

func newFrameSet(spec synth.Spec, n int) *frameSet {
	fs := &frameSet{raw: synth.Frames(spec, n)}
	fs.frames = make([]steer.Frame, n)
	for i, b := range fs.raw {
		fs.frames[i] = steer.Frame{Data: b, IfIndex: 1}
	}
	return fs
}

// spinner burns CPU for a calibrated time per call: the stand-in for a
// handler that inspects each frame.
type spinner struct{ iters int }

var spinSink atomic.Uint64

func spinWork(n int) uint64 {
	x := uint64(1)
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

// newSpinner calibrates a loop that takes about d per call.
func newSpinner(d time.Duration) spinner {
	n := 1000
	for {
		start := time.Now()
		for i := 0; i < 100; i++ {
			spinSink.Add(spinWork(n))
		}
		el := time.Since(start) / 100
		if el >= d/2 || n > 1<<28 {
			return spinner{iters: int(float64(n) * float64(d) / float64(max(el, 1)))}
		}
		n *= 4
	}
}

func (s spinner) spin() { spinSink.Add(spinWork(s.iters)) }

// runDispatch sends n frames through a dispatcher with cfg and handler h,
// in batches of 64 from one input (which waits on a full queue, so nothing
// is dropped), and returns the time from the first dispatch to the end of
// Close.
func runDispatch(tb testing.TB, fs *frameSet, cfg steer.Config, h steer.Handler, n int) (time.Duration, steer.Stats) {
	return runDispatchBatch(tb, fs, cfg, h, n, steer.BatchSize)
}

// runDispatchBatch is runDispatch with source batches of srcBatch frames
// (the frames one Input.Dispatch call hands over).
func runDispatchBatch(tb testing.TB, fs *frameSet, cfg steer.Config, h steer.Handler, n, srcBatch int) (time.Duration, steer.Stats) {
	if cfg.Hash.Key == nil {
		cfg.Hash.Key = hash.MicrosoftKey[:]
	}
	if cfg.Queue.Limit == 0 {
		cfg.Queue.Limit = benchQLimit
	}
	d, err := steer.New(cfg, h)
	if err != nil {
		tb.Fatal(err)
	}
	in := d.NewInput()
	nf := len(fs.frames)
	// Warm the batch pools before timing.
	for i := 0; i+64 <= nf && i < 64*64; i += 64 {
		in.Dispatch(fs.frames[i:i+64], nil)
	}
	start := time.Now()
	for done := 0; done < n; {
		off := done % nf
		k := min(srcBatch, n-done, nf-off)
		if err := in.Dispatch(fs.frames[off:off+k], nil); err != nil {
			tb.Fatal(err)
		}
		done += k
	}
	if err := d.Close(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return time.Since(start), d.Stats()
}

// dispatchCaseBatch is runDispatchBatch over b.N frames in source batches
// of srcBatch, reporting Mpps and ns/frame.
func dispatchCaseBatch(b *testing.B, fs *frameSet, cfg steer.Config, h steer.Handler, srcBatch int) steer.Stats {
	b.ReportAllocs()
	b.ResetTimer()
	el, st := runDispatchBatch(b, fs, cfg, h, b.N, srcBatch)
	b.StopTimer()
	reportRate(b, el, b.N)
	return st
}

func reportRate(b *testing.B, el time.Duration, n int) {
	ns := float64(el.Nanoseconds()) / float64(n)
	b.ReportMetric(ns, "ns/frame")
	b.ReportMetric(1e3/ns, "Mpps")
}

// runIdiomatic is the common Go pipeline for the same frames: gopacket's
// DecodingLayerParser, NetworkFlow and TransportFlow FastHash, and one
// channel send per frame to the chosen worker, each channel as deep as the
// library's default queue for an input that waits. It returns the time for
// n frames.
func runIdiomatic(fs *frameSet, workers int, h func([]byte), n int) time.Duration {
	return runIdiomaticW(fs, workers, func(int) func([]byte) { return h }, n)
}

// runIdiomaticW is runIdiomatic with a handler per worker, made by mk.
func runIdiomaticW(fs *frameSet, workers int, mk func(worker int) func([]byte), n int) time.Duration {
	var eth layers.Ethernet
	var ip4 layers.IPv4
	var ip6 layers.IPv6
	var tcp layers.TCP
	var udp layers.UDP
	var dot1q layers.Dot1Q
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &dot1q, &ip4, &ip6, &tcp, &udp)
	parser.IgnoreUnsupported = true
	decoded := make([]gopacket.LayerType, 0, 8)
	chans := make([]chan []byte, workers)
	var wg sync.WaitGroup
	for i := range chans {
		chans[i] = make(chan []byte, steer.DefaultWaitQLimit)
		wg.Add(1)
		go func(c chan []byte, h func([]byte)) {
			defer wg.Done()
			for f := range c {
				h(f)
			}
		}(chans[i], mk(i))
	}
	nf := len(fs.raw)
	start := time.Now()
	for i := 0; i < n; i++ {
		f := fs.raw[i%nf]
		_ = parser.DecodeLayers(f, &decoded)
		var fh uint64
		for _, lt := range decoded {
			switch lt {
			case layers.LayerTypeIPv4:
				fh = ip4.NetworkFlow().FastHash()
			case layers.LayerTypeIPv6:
				fh = ip6.NetworkFlow().FastHash()
			case layers.LayerTypeTCP:
				fh = fh*31 + tcp.TransportFlow().FastHash()
			case layers.LayerTypeUDP:
				fh = fh*31 + udp.TransportFlow().FastHash()
			}
		}
		chans[fh%uint64(workers)] <- f
	}
	for _, c := range chans {
		close(c)
	}
	wg.Wait()
	return time.Since(start)
}

// idiomaticCase is runIdiomatic over b.N frames.
func idiomaticCase(b *testing.B, fs *frameSet, workers int, h func([]byte)) {
	b.ReportAllocs()
	b.ResetTimer()
	el := runIdiomatic(fs, workers, h, b.N)
	b.StopTimer()
	reportRate(b, el, b.N)
}

// pinnedCPUs returns the CPUs to pin workers to, or nil where pinning is not
// possible.
func pinnedCPUs() []int {
	if !affinity.Supported() {
		return nil
	}
	cpus, err := affinity.Allowed()
	if err != nil || len(cpus) == 0 {
		return nil
	}
	if len(cpus) > 1 {
		// Leave the first CPU to the source goroutine: a pinned worker
		// sharing its CPU with the reader that feeds it loses most of its
		// time to switches between the two.
		return cpus[1:]
	}
	return cpus
}
