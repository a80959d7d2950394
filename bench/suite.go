package main

import (
	"context"
	"sync"
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

// qlimit is the queue limit in force for an input that waits.
func qlimit() int {
	if benchQLimit > 0 {
		return benchQLimit
	}
	return steer.DefaultWaitQLimit
}

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

// benchKey is the Toeplitz key of every run: the public Microsoft key, so
// that runs repeat.
var benchKey = hash.MicrosoftKey[:]

// newClassifier is the library's classifier configured as the dispatchers
// of the runs are, for the single-queue baseline to call inline.
func newClassifier(udp4 bool) *steer.Classifier {
	c, err := steer.NewClassifier(steer.HashConfig{Key: benchKey, UDP4Tuple: udp4})
	if err != nil {
		panic("bench: the classifier's configuration: " + err.Error()) // a fixed, valid configuration
	}
	return c
}

// singleQueue is the single-queue baseline's loop body: one goroutine
// reads a frame, classifies it with the library's classifier (the handler
// needs the flowid, as it gets it from the dispatcher) and runs the handler
// itself. No hand-off, no second goroutine.
type singleQueue struct {
	cls *steer.Classifier
	c   steer.Classification
}

// handle classifies b and calls h with its flowid.
func (s *singleQueue) handle(b []byte, h func(b []byte, flow uint32)) {
	s.cls.Classify(b, &s.c)
	h(b, s.c.FlowID)
}

// runSingleN is the single-queue baseline over n frames of fs, in 64-frame
// reads as the other implementations take them.
func runSingleN(fs *frameSet, h func([]byte, uint32), n int) time.Duration {
	sq := singleQueue{cls: newClassifier(false)}
	nf := len(fs.raw)
	start := time.Now()
	for done := 0; done < n; {
		off := done % nf
		k := min(steer.BatchSize, n-done, nf-off)
		for _, b := range fs.raw[off : off+k] {
			sq.handle(b, h)
		}
		done += k
	}
	return time.Since(start)
}

// runCeilingN runs workers independent single-queue loops at once, each
// over its own share of n frames of fs: what workers CPUs do with no
// steering at all, the measured ceiling of a steered run.
func runCeilingN(fs *frameSet, workers int, h func([]byte, uint32), n int) time.Duration {
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < workers; w++ {
		share := &frameSet{raw: fs.raw[w*len(fs.raw)/workers : (w+1)*len(fs.raw)/workers]}
		wg.Add(1)
		go func() {
			defer wg.Done()
			runSingleN(share, h, n/workers)
		}()
	}
	wg.Wait()
	return time.Since(start)
}

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
		cfg.Hash.Key = benchKey
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

// idiomatic is the common Go pipeline for the same frames: gopacket's
// DecodingLayerParser, NetworkFlow and TransportFlow FastHash, and one
// channel send per frame to the chosen worker, each channel as deep as the
// library's queue for an input that waits.
type idiomatic struct {
	parser  *gopacket.DecodingLayerParser
	decoded []gopacket.LayerType
	eth     layers.Ethernet
	ip4     layers.IPv4
	ip6     layers.IPv6
	tcp     layers.TCP
	udp     layers.UDP
	dot1q   layers.Dot1Q
	chans   []chan idiomaticFrame
	wg      sync.WaitGroup
}

// idiomaticFrame is what the pipeline sends a worker: the frame and its
// hash, which the handler uses as its flow.
type idiomaticFrame struct {
	b []byte
	h uint32
}

// newIdiomatic starts workers goroutines, worker i running mk(i) on each
// frame sent to it.
func newIdiomatic(workers int, mk func(worker int) func([]byte, uint32)) *idiomatic {
	p := &idiomatic{decoded: make([]gopacket.LayerType, 0, 8), chans: make([]chan idiomaticFrame, workers)}
	p.parser = gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &p.eth, &p.dot1q, &p.ip4, &p.ip6, &p.tcp, &p.udp)
	p.parser.IgnoreUnsupported = true
	for i := range p.chans {
		p.chans[i] = make(chan idiomaticFrame, qlimit())
		p.wg.Add(1)
		go func(c chan idiomaticFrame, h func([]byte, uint32)) {
			defer p.wg.Done()
			for f := range c {
				h(f.b, f.h)
			}
		}(p.chans[i], mk(i))
	}
	return p
}

// send decodes f, hashes its flow and sends it to its worker.
func (p *idiomatic) send(f []byte) {
	_ = p.parser.DecodeLayers(f, &p.decoded)
	var fh uint64
	for _, lt := range p.decoded {
		switch lt {
		case layers.LayerTypeIPv4:
			fh = p.ip4.NetworkFlow().FastHash()
		case layers.LayerTypeIPv6:
			fh = p.ip6.NetworkFlow().FastHash()
		case layers.LayerTypeTCP:
			fh = fh*31 + p.tcp.TransportFlow().FastHash()
		case layers.LayerTypeUDP:
			fh = fh*31 + p.udp.TransportFlow().FastHash()
		}
	}
	p.chans[fh%uint64(len(p.chans))] <- idiomaticFrame{f, uint32(fh)}
}

// close waits for the workers to finish every frame sent.
func (p *idiomatic) close() {
	for _, c := range p.chans {
		close(c)
	}
	p.wg.Wait()
}

// runIdiomatic runs the pipeline over n frames of fs with handler h in
// every worker and returns the time until every frame was handled.
func runIdiomatic(fs *frameSet, workers int, h func([]byte, uint32), n int) time.Duration {
	p := newIdiomatic(workers, func(int) func([]byte, uint32) { return h })
	nf := len(fs.raw)
	start := time.Now()
	for i := 0; i < n; i++ {
		p.send(fs.raw[i%nf])
	}
	p.close()
	return time.Since(start)
}

// idiomaticCase is runIdiomatic over b.N frames.
func idiomaticCase(b *testing.B, fs *frameSet, workers int, h func([]byte, uint32)) {
	b.ReportAllocs()
	b.ResetTimer()
	el := runIdiomatic(fs, workers, h, b.N)
	b.StopTimer()
	reportRate(b, el, b.N)
}

// pinCPUs returns the CPUs to pin workers to, one each, or nil where
// pinning is not possible or would put two workers on one CPU. With a CPU
// to spare, the first allowed CPU is left to the source goroutine, which a
// pinned worker sharing its CPU would keep waiting.
func pinCPUs(workers int) []int {
	if !affinity.Supported() || workers < 1 {
		return nil
	}
	cpus, err := affinity.Allowed()
	if err != nil || len(cpus) < workers {
		return nil
	}
	if len(cpus) > workers {
		return cpus[1 : 1+workers]
	}
	return cpus[:workers]
}
