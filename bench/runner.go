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
// the same code per frame: each worker counts its frames and does the
// handler kind's work in a workerWork of its own. The library's workers get
// theirs from steer.NewPerWorker (see dispatcher); the baselines make one
// per goroutine they start (see baseline).
type work struct {
	kind    int // 0 none, 1 spin, 2 stateful
	sp      spinner
	workers []*workerWork // workers[i] is worker i's; read after the run
}

// workerWork is one worker's counters, flow map and latency histogram,
// written only by that worker.
type workerWork struct {
	kind  int
	sp    spinner
	n     uint64
	state map[uint64]uint64 // stateful: frames per flow
	lat   hist
	_     [64]byte // keep neighbouring workers off each other's cache lines
}

func newWork(kind string, sp spinner) *work {
	w := &work{sp: sp}
	switch kind {
	case handlerSpin:
		w.kind = 1
	case handlerStateful:
		w.kind = 2
	}
	return w
}

// newWorker makes one worker's share.
func (w *work) newWorker() *workerWork {
	ww := &workerWork{kind: w.kind, sp: w.sp}
	if w.kind == 2 {
		ww.state = make(map[uint64]uint64)
	}
	return ww
}

// baseline makes n workers' shares for an implementation that starts its own
// goroutines, and returns them.
func (w *work) baseline(n int) []*workerWork {
	w.workers = make([]*workerWork, n)
	for i := range w.workers {
		w.workers[i] = w.newWorker()
	}
	return w.workers
}

// dispatcher starts a dispatcher with cfg whose workers each get their
// share from steer.NewPerWorker.
func (w *work) dispatcher(cfg steer.Config) (*steer.Dispatcher, error) {
	d, states, err := steer.NewPerWorker(cfg, func(*steer.Worker) *workerWork { return w.newWorker() }, (*workerWork).handle)
	w.workers = states
	return d, err
}

// do handles one frame.
func (ww *workerWork) do(b []byte) {
	ww.n++
	switch ww.kind {
	case 1:
		ww.sp.spin()
	case 2:
		ww.state[flowKey(b)]++
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

// handle is the library's handler: a sampled frame (non-zero Timestamp, set
// by the bench) adds its dispatch-to-handler time to the worker's histogram.
func (ww *workerWork) handle(p *steer.Packet) {
	if !p.Timestamp.IsZero() {
		ww.lat.Record(time.Since(p.Timestamp))
	}
	ww.do(p.Data)
}

// counts returns the per-worker frame counts and their sum.
func (w *work) counts() ([]uint64, uint64) {
	out := make([]uint64, len(w.workers))
	var sum uint64
	for i, ww := range w.workers {
		out[i] = ww.n
		sum += out[i]
	}
	return out, sum
}

// latency merges the per-worker histograms.
func (w *work) latency() *hist {
	h := new(hist)
	for _, ww := range w.workers {
		h.Merge(&ww.lat)
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
	Rate       int // live: frames a second trafgen offers; 0 as fast as it goes
}

// library reports whether impl runs the library's dispatcher (and so has a
// dispatch mode and a policy).
func library(impl string) bool {
	return impl != "single" && impl != "idiomatic" && impl != "kernel-fanout" && impl != "tcpdump"
}

// Name is a short label for progress lines.
func (c Case) Name() string {
	s := fmt.Sprintf("%s %s/%s %s %dB %d flows", c.Experiment, c.Impl, c.Source, c.Handler, c.Size, c.Flows)
	if c.Zipf > 0 {
		s += fmt.Sprintf(" zipf %g", c.Zipf)
	}
	s += fmt.Sprintf(" w=%d", c.Workers)
	if c.Experiment == "live" {
		s += " " + offered(c.Rate)
	}
	if library(c.Impl) {
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
		Flows: c.Flows, Zipf: c.Zipf, Workers: c.Workers, Pinned: c.Pinned, Rebalance: c.Rebalance, Rate: c.Rate, Rep: rep}
	if library(c.Impl) {
		r.Dispatch, r.Policy = c.Dispatch.String(), c.Policy.String()
	}
	return r
}

// offered names a live run's offered rate: "max" for as fast as trafgen
// goes, else kpps.
func offered(rate int) string {
	if rate == 0 {
		return "max"
	}
	return fmt.Sprintf("%dkpps", rate/1000)
}

// steerConfig is the dispatcher configuration of c. The key is the public
// Microsoft key, so that runs are reproducible; the queues are the library's
// defaults (or -qlimit), and a full queue holds back the in-memory and file
// inputs, which can wait.
func (c Case) steerConfig() steer.Config {
	cfg := steer.Config{Workers: c.Workers, Dispatch: c.Dispatch, Policy: c.Policy,
		Hash: steer.HashConfig{Key: hash.MicrosoftKey[:]}, Queue: steer.QueueConfig{Limit: benchQLimit}}
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
	wk := newWork(c.Handler, sp)
	n := c.Frames
	var el time.Duration
	var before, after usage
	switch c.Impl {
	case "single":
		ww := wk.baseline(1)[0]
		before = snapshot()
		el = runSingle(fs, ww, n)
		after = snapshot()
	case "idiomatic":
		wws := wk.baseline(c.Workers)
		before = snapshot()
		el = runIdiomaticW(fs, c.Workers, func(i int) func([]byte) { return wws[i].do }, n)
		after = snapshot()
	case "rps":
		d, err := wk.dispatcher(c.steerConfig())
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
		return r, fmt.Errorf("unknown implementation %q", c.Impl)
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
func runSingle(fs *frameSet, ww *workerWork, n int) time.Duration {
	nf := len(fs.raw)
	start := time.Now()
	for i := 0; i < n; i++ {
		if i%sampleEvery == 0 {
			t := time.Now()
			ww.do(fs.raw[i%nf])
			ww.lat.Record(time.Since(t))
			continue
		}
		ww.do(fs.raw[i%nf])
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
	batches     atomic.Uint64 // non-empty ones
	t0          time.Time     // the monotonic origin of first and last
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
	s.batches.Add(1)
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

// benchXDPBatch is -xdp-batch-timeout: the live AF_XDP sockets'
// Config.BatchTimeout (0: afxdp's default, negative: none).
var benchXDPBatch time.Duration

// benchXDPUnbatched is -xdp-unbatched: the capture comparison also runs one
// AF_XDP socket with no batch timeout, which hands frames over as soon as
// its ring has any.
var benchXDPUnbatched bool

// readDirect is a baseline reader: it reads src and calls the handler for
// every frame itself, as the worker ww belongs to, then releases the batch.
func readDirect(ctx context.Context, src steer.Source, ww *workerWork) error {
	var b steer.Batch
	var p steer.Packet
	for {
		b.Frames, b.Release = b.Frames[:0], nil
		err := src.ReadBatch(ctx, &b)
		for j := range b.Frames {
			p.Data, p.Timestamp = b.Frames[j].Data, b.Frames[j].Timestamp
			ww.handle(&p)
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
	wk := newWork(c.Handler, sp)
	var before, after usage
	var el time.Duration
	switch c.Impl {
	case "single":
		ww := wk.baseline(1)[0]
		before = snapshot()
		start := time.Now()
		err = readDirect(context.Background(), src, ww)
		el = time.Since(start)
		after = snapshot()
	case "rps":
		d, derr := wk.dispatcher(c.steerConfig())
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
		return r, fmt.Errorf("unknown implementation %q for pcap", c.Impl)
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
