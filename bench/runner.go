package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/synth"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// sampleEvery is the latency sampling period: one frame in sampleEvery
// carries a monotonic timestamp from dispatch to its handler, which adds it
// to its worker's histogram. No other frame reads the clock.
const sampleEvery = 1024

// Handler kinds: the per-frame work every implementation runs.
const (
	handlerNone     = "none"     // nothing: the cost of getting the frame there
	handlerSpin     = "spin1us"  // about 1 µs of CPU per frame (a calibrated loop)
	handlerStateful = "stateful" // a per-flow counter in a map owned by the worker
)

// work is the handler body shared by every implementation, so that all run
// the same code per frame: it counts the frame for its worker and does the
// handler kind's work.
type work struct {
	kind  int // 0 none, 1 spin, 2 stateful
	sp    spinner
	state []map[uint64]uint64 // per worker: frames per flow
	count []paddedCount       // per worker
	lat   []hist              // per worker
}

type paddedCount struct {
	n uint64
	_ [56]byte
}

func newWork(kind string, workers int, sp spinner) *work {
	w := &work{sp: sp, count: make([]paddedCount, workers), lat: make([]hist, workers)}
	switch kind {
	case handlerSpin:
		w.kind = 1
	case handlerStateful:
		w.kind = 2
		w.state = make([]map[uint64]uint64, workers)
		for i := range w.state {
			w.state[i] = make(map[uint64]uint64)
		}
	}
	return w
}

// do handles one frame in worker i.
func (w *work) do(i int, b []byte) {
	w.count[i].n++
	switch w.kind {
	case 1:
		w.sp.spin()
	case 2:
		w.state[i][flowKey(b)]++
	}
}

// flowKey reads a frame's IPv4 addresses and ports into one word (the
// stateful handler's map key).
func flowKey(b []byte) uint64 {
	if len(b) < 38 {
		return 0
	}
	return binary.LittleEndian.Uint64(b[26:34]) ^ uint64(binary.LittleEndian.Uint32(b[34:38]))*0x9e3779b97f4a7c15
}

// steerHandler wraps w as a steer.Handler: a sampled frame (non-zero
// Timestamp, set by the bench) adds its dispatch-to-handler time to the
// worker's histogram.
func (w *work) steerHandler() steer.Handler {
	return func(p *steer.Packet) {
		if !p.Timestamp.IsZero() {
			w.lat[p.Worker].Record(time.Since(p.Timestamp))
		}
		w.do(p.Worker, p.Data)
	}
}

// counts returns the per-worker frame counts and their sum.
func (w *work) counts() ([]uint64, uint64) {
	out := make([]uint64, len(w.count))
	var sum uint64
	for i := range w.count {
		out[i] = w.count[i].n
		sum += out[i]
	}
	return out, sum
}

// latency merges the per-worker histograms.
func (w *work) latency() *hist {
	h := new(hist)
	for i := range w.lat {
		h.Merge(&w.lat[i])
	}
	return h
}

// Case is one configuration of the matrix.
type Case struct {
	Experiment string
	Impl       string // rps, single, idiomatic (in memory and pcap); see live for the others
	Source     string // mem, pcap, afpacket, fanout
	Handler    string
	Size       int
	Flows      int
	Zipf       float64
	Workers    int
	Dispatch   steer.DispatchMode
	Policy     steer.Policy
	Pinned     bool
	Rebalance  bool
	Frames     int // frames to push (mem), or to send (live)
}

// Name is a short label for progress lines.
func (c Case) Name() string {
	s := fmt.Sprintf("%s %s/%s %s %dB %d flows", c.Experiment, c.Impl, c.Source, c.Handler, c.Size, c.Flows)
	if c.Zipf > 0 {
		s += fmt.Sprintf(" zipf %g", c.Zipf)
	}
	s += fmt.Sprintf(" w=%d", c.Workers)
	if c.Impl != "single" && c.Impl != "idiomatic" {
		s += " " + c.Dispatch.String() + "/" + c.Policy.String()
		if c.Pinned {
			s += " pinned"
		}
		if c.Rebalance {
			s += " rebalance"
		}
	}
	return s
}

func (c Case) result(rep int) Result {
	r := Result{Experiment: c.Experiment, Impl: c.Impl, Source: c.Source, Handler: c.Handler, FrameSize: c.Size,
		Flows: c.Flows, Zipf: c.Zipf, Workers: c.Workers, Pinned: c.Pinned, Rebalance: c.Rebalance, Rep: rep}
	if c.Impl != "single" && c.Impl != "idiomatic" && c.Impl != "kernel-fanout" {
		r.Dispatch, r.Policy = c.Dispatch.String(), c.Policy.String()
	}
	return r
}

// steerConfig is the dispatcher configuration of c. The key is the public
// Microsoft key, so that runs are reproducible.
func (c Case) steerConfig() steer.Config {
	cfg := steer.Config{Workers: c.Workers, Dispatch: c.Dispatch, Policy: c.Policy, Block: true,
		Key: hash.MicrosoftKey[:], KeyName: "microsoft", QLimit: benchQLimit}
	if c.Pinned {
		cfg.CPUs = pinnedCPUs()[:min(c.Workers, len(pinnedCPUs()))]
	}
	if c.Rebalance {
		cfg.Rebalance = steer.RebalanceConfig{Interval: 20 * time.Millisecond}
	}
	return cfg
}

// frameSets caches the in-memory frame sets by spec, so that every run of a
// configuration sees the same frames.
type frameSets struct {
	mu   sync.Mutex
	sets map[synth.Spec]*frameSet
}

// get returns the frames for spec: a cycle of up to 1<<17 frames, fewer for
// large frames (at most 64 MiB per set), at least enough to hold every flow
// of up to 16384 flows.
func (s *frameSets) get(spec synth.Spec) *frameSet {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sets == nil {
		s.sets = map[synth.Spec]*frameSet{}
	}
	if fs, ok := s.sets[spec]; ok {
		return fs
	}
	n := min(max((64<<20)/max(spec.Size, 64), 1<<14), 1<<17)
	fs := newFrameSet(spec, n)
	s.sets[spec] = fs
	return fs
}

// runMem pushes c.Frames frames of fs through c's implementation and
// measures it.
func runMem(c Case, fs *frameSet, sp spinner, rep int) (Result, error) {
	r := c.result(rep)
	wk := newWork(c.Handler, c.Workers, sp)
	n := c.Frames
	var el time.Duration
	var before, after usage
	switch c.Impl {
	case "single":
		before = snapshot()
		el = runSingle(fs, wk, n)
		after = snapshot()
	case "idiomatic":
		before = snapshot()
		el = runIdiomaticW(fs, c.Workers, func(i int) func([]byte) { return func(b []byte) { wk.do(i, b) } }, n)
		after = snapshot()
	case "rps":
		d, err := steer.New(c.steerConfig(), wk.steerHandler())
		if err != nil {
			return r, err
		}
		in := d.NewInput()
		before = snapshot()
		start := time.Now()
		nf := len(fs.frames)
		for done, batch := 0, 0; done < n; batch++ {
			off := done % nf
			k := min(steer.BatchSize, n-done, nf-off)
			stamp := batch%(sampleEvery/steer.BatchSize) == 0
			if stamp {
				fs.frames[off].Timestamp = time.Now()
			}
			err := in.Dispatch(fs.frames[off:off+k], nil)
			if stamp {
				fs.frames[off].Timestamp = time.Time{}
			}
			if err != nil {
				d.Close(context.Background())
				return r, err
			}
			done += k
		}
		if err := d.Close(context.Background()); err != nil {
			return r, err
		}
		el = time.Since(start)
		after = snapshot()
		st := d.Stats()
		r.Drops = st.Dropped()
	default:
		return r, fmt.Errorf("bench: unknown implementation %q", c.Impl)
	}
	var sum uint64
	r.PerWorker, sum = wk.counts()
	r.Frames = sum
	if sum+r.Drops != uint64(n) {
		r.Note = fmt.Sprintf("handled %d + dropped %d != %d pushed", sum, r.Drops, n)
	}
	r.finish(el, before, after, wk.latency())
	return r, nil
}

// runSingle is the single-queue baseline: one goroutine reads the frames
// and calls the handler itself, no classification, no hand-off.
func runSingle(fs *frameSet, wk *work, n int) time.Duration {
	nf := len(fs.raw)
	start := time.Now()
	for i := 0; i < n; i++ {
		if i%sampleEvery == 0 {
			t := time.Now()
			wk.do(0, fs.raw[i%nf])
			wk.lat[0].Record(time.Since(t))
			continue
		}
		wk.do(0, fs.raw[i%nf])
	}
	return time.Since(start)
}

// stampSource wraps a Source: it stamps one frame in sampleEvery with the
// monotonic clock and zeroes every other frame's Timestamp (so that the
// handler can tell the sampled ones), and records when the first and the
// last non-empty batches arrived.
type stampSource struct {
	steer.Source
	n           uint64
	first, last atomic.Int64 // unix nanoseconds
	frames      atomic.Uint64
	t0          time.Time // the monotonic origin of first and last
}

func newStampSource(src steer.Source) *stampSource {
	return &stampSource{Source: src, t0: time.Now()}
}

// ReadBatch implements steer.Source.
func (s *stampSource) ReadBatch(ctx context.Context, b *steer.Batch) error {
	err := s.Source.ReadBatch(ctx, b)
	if len(b.Frames) == 0 {
		return err
	}
	now := time.Now()
	for i := range b.Frames {
		if s.n%sampleEvery == 0 {
			b.Frames[i].Timestamp = now
		} else {
			b.Frames[i].Timestamp = time.Time{}
		}
		s.n++
	}
	ns := int64(now.Sub(s.t0)) + 1
	s.first.CompareAndSwap(0, ns)
	s.last.Store(ns)
	s.frames.Add(uint64(len(b.Frames)))
	return err
}

// span returns the time from the first to the last non-empty batch over
// several stamped sources.
func span(srcs ...*stampSource) time.Duration {
	var first, last int64
	for _, s := range srcs {
		f, l := s.first.Load(), s.last.Load()
		if f == 0 {
			continue
		}
		if first == 0 || f < first {
			first = f
		}
		last = max(last, l)
	}
	return time.Duration(last - first)
}

// readDirect is a baseline reader: it reads src and calls the handler for
// every frame itself, as worker i, then releases the batch.
func readDirect(ctx context.Context, src steer.Source, wk *work, i int) error {
	var b steer.Batch
	h := wk.steerHandler()
	var p steer.Packet
	p.Worker = i
	for {
		b.Frames, b.Release = b.Frames[:0], nil
		err := src.ReadBatch(ctx, &b)
		for j := range b.Frames {
			p.Data, p.Timestamp = b.Frames[j].Data, b.Frames[j].Timestamp
			h(&p)
		}
		if b.Release != nil {
			b.Release()
		}
		if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// runPcap replays the capture file at path through c's implementation.
func runPcap(c Case, path string, sp spinner, rep int) (Result, error) {
	r := c.result(rep)
	rd, err := pcapfile.Open(path)
	if err != nil {
		return r, err
	}
	defer rd.Close()
	src := newStampSource(rd)
	wk := newWork(c.Handler, c.Workers, sp)
	var before, after usage
	var el time.Duration
	switch c.Impl {
	case "single":
		before = snapshot()
		start := time.Now()
		err = readDirect(context.Background(), src, wk, 0)
		el = time.Since(start)
		after = snapshot()
	case "rps":
		d, derr := steer.New(c.steerConfig(), wk.steerHandler())
		if derr != nil {
			return r, derr
		}
		before = snapshot()
		start := time.Now()
		err = d.Run(context.Background(), src)
		if cerr := d.Close(context.Background()); err == nil {
			err = cerr
		}
		el = time.Since(start)
		after = snapshot()
		st := d.Stats()
		r.Drops = st.Dropped()
	default:
		return r, fmt.Errorf("bench: unknown implementation %q for pcap", c.Impl)
	}
	if err != nil {
		return r, err
	}
	r.PerWorker, r.Frames = wk.counts()
	if got := src.frames.Load(); r.Frames+r.Drops != got {
		r.Note = fmt.Sprintf("handled %d + dropped %d != %d read", r.Frames, r.Drops, got)
	}
	r.finish(el, before, after, wk.latency())
	return r, nil
}
