package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpsgo/rps/internal/synth"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// sampleEvery is the latency sampling period: one frame in sampleEvery
// carries a monotonic timestamp to its handler, which adds its latency to
// its worker's histogram. No other frame reads the clock.
const sampleEvery = 1024

// Handler kinds: the per-frame work every implementation runs.
const (
	handlerNone     = "none"     // nothing: the cost of getting the frame there
	handlerSpin     = "spin1us"  // a fixed loop calibrated once to about 1 µs of CPU
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
// written only by that worker; pub is its count as others may read it.
type workerWork struct {
	kind  int
	sp    spinner
	n     uint64
	pub   atomic.Uint64     // n, published every 64 frames
	state map[uint32]uint64 // stateful: frames per flow
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
		ww.state = make(map[uint32]uint64)
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

// do handles one frame of flow flow (its flowid).
func (ww *workerWork) do(_ []byte, flow uint32) {
	ww.n++
	switch ww.kind {
	case 1:
		ww.sp.spin()
	case 2:
		ww.state[flow]++
	}
	if ww.n%64 == 0 {
		ww.pub.Store(ww.n)
	}
}

// doTimed is do for a frame that may carry a latency stamp: a non-zero ts
// adds the time from it to the end of the handler to the histogram.
func (ww *workerWork) doTimed(b []byte, flow uint32, ts time.Time) {
	ww.do(b, flow)
	if !ts.IsZero() {
		ww.lat.Record(time.Since(ts))
	}
}

// handle is the library's handler.
func (ww *workerWork) handle(p *steer.Packet) { ww.doTimed(p.Data, p.FlowID, p.Timestamp) }

// published returns each worker's published count.
func (w *work) published() []uint64 {
	out := make([]uint64, len(w.workers))
	for i, ww := range w.workers {
		out[i] = ww.pub.Load()
	}
	return out
}

// counts returns the per-worker frame counts and their sum; read after
// the run.
func (w *work) counts() ([]uint64, uint64) {
	out := make([]uint64, len(w.workers))
	var sum uint64
	for i, ww := range w.workers {
		out[i] = ww.n
		sum += out[i]
	}
	return out, sum
}

// total returns the frames every worker handled; read after the run.
func (w *work) total() uint64 {
	var sum uint64
	for _, ww := range w.workers {
		sum += ww.n
	}
	return sum
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
	Impl       string // rps, single, ceiling, idiomatic (in memory and pcap); see live for the others
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
	Warm, Dur  time.Duration // in memory and pcap: the warm-up, then the measured time
	Frames     int           // live: frames to send
	Rate       int           // live and latency: frames a second offered; 0 as fast as it goes
}

// library reports whether impl runs the library's dispatcher (and so has a
// dispatch mode and a policy).
func library(impl string) bool {
	return impl != "single" && impl != "ceiling" && impl != "idiomatic" && impl != "kernel-fanout" && impl != "tcpdump"
}

// Name is a short label for progress lines.
func (c Case) Name() string {
	s := fmt.Sprintf("%s %s/%s %s %dB %d flows", c.Experiment, c.Impl, c.Source, c.Handler, c.Size, c.Flows)
	if c.Zipf > 0 {
		s += fmt.Sprintf(" zipf %g", c.Zipf)
	}
	s += fmt.Sprintf(" w=%d", c.Workers)
	if c.Experiment == "live" || c.Rate > 0 {
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
		Flows: c.Flows, Zipf: c.Zipf, Workers: c.Workers, Pinned: c.Pinned, Rebalance: c.Rebalance, Rate: c.Rate, Rep: rep,
		WarmSec: c.Warm.Seconds()}
	if library(c.Impl) {
		r.Dispatch, r.Policy = c.Dispatch.String(), c.Policy.String()
		r.QLimit = qlimit()
	}
	if c.Pinned {
		r.CPUs = pinCPUs(c.Workers)
	}
	return r
}

// offered names an offered rate: "max" for as fast as the sender goes,
// else kpps.
func offered(rate int) string {
	if rate == 0 {
		return "max"
	}
	return fmt.Sprintf("%dkpps", rate/1000)
}

// rebalancePeriod is the rebalancer's period in the skew experiment; a
// run's warm-up holds several.
const rebalancePeriod = 20 * time.Millisecond

// steerConfig is the dispatcher configuration of c. The key is the public
// Microsoft key, so that runs are reproducible; the queues are the library's
// defaults (or -qlimit), and a full queue holds back the in-memory and file
// inputs, which can wait.
func (c Case) steerConfig() steer.Config {
	cfg := steer.Config{Workers: c.Workers, Dispatch: c.Dispatch, Policy: c.Policy,
		Hash: steer.HashConfig{Key: benchKey}, Queue: steer.QueueConfig{Limit: benchQLimit}}
	if c.Pinned {
		cfg.CPUs = pinCPUs(c.Workers)
	}
	if c.Rebalance {
		cfg.Rebalance = steer.RebalanceConfig{Interval: rebalancePeriod}
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

// meter times a run from outside the goroutines that do it: it waits out
// the warm-up, reads the workers' published counts and the process's usage
// (t0), waits the measured time, reads them again (t1) and tells the source
// loops to stop. Only the frames handled between t0 and t1 count, so the
// figures are those of the steady state: queues already filled, pools warm,
// the rebalancer already acting.
type meter struct {
	stop      atomic.Bool
	measuring atomic.Bool // set at the first reading
	h0, h1    []uint64
	u0, u1    usage
}

// run waits c.Warm, takes the first reading, waits c.Dur, takes the second
// and sets stop. It returns early, stopped, when ctx ends or failed is
// closed.
func (m *meter) run(ctx context.Context, c Case, wk *work, failed <-chan struct{}) error {
	defer m.stop.Store(true)
	wait := func(d time.Duration) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-failed:
			return errors.New("the run failed")
		}
	}
	if err := wait(c.Warm); err != nil {
		return err
	}
	m.h0, m.u0 = wk.published(), snapshot()
	m.measuring.Store(true)
	if err := wait(c.Dur); err != nil {
		return err
	}
	m.h1, m.u1 = wk.published(), snapshot()
	return nil
}

// fill sets r's measured figures from the two readings.
func (m *meter) fill(r *Result) {
	r.PerWorker = make([]uint64, len(m.h1))
	var sum uint64
	for i := range m.h1 {
		r.PerWorker[i] = m.h1[i] - m.h0[i]
		sum += r.PerWorker[i]
	}
	r.Frames = sum
	r.finish(m.u1.wall.Sub(m.u0.wall), m.u0, m.u1, nil)
}

// runMem runs c's implementation over the in-memory frames fs: a source
// loop that takes them in batches of 64 until the meter stops it.
func runMem(ctx context.Context, c Case, fs *frameSet, sp spinner, rep int) (Result, error) {
	r := c.result(rep)
	wk := newWork(c.Handler, sp)
	var m meter
	nf := len(fs.frames)
	failed := make(chan struct{})
	var loopErr error
	var pushed uint64 // frames the source loop handed over (rps, idiomatic)
	var wg sync.WaitGroup
	wg.Add(1)
	switch c.Impl {
	case "single":
		ww := wk.baseline(1)[0]
		go func() {
			defer wg.Done()
			singleLoop(&m.stop, fs.raw, ww)
		}()
	case "ceiling":
		wws := wk.baseline(c.Workers)
		go func() {
			defer wg.Done()
			var inner sync.WaitGroup
			for i, ww := range wws {
				share := fs.raw[i*nf/c.Workers : (i+1)*nf/c.Workers]
				inner.Add(1)
				go func() {
					defer inner.Done()
					singleLoop(&m.stop, share, ww)
				}()
			}
			inner.Wait()
		}()
	case "idiomatic":
		wws := wk.baseline(c.Workers)
		p := newIdiomatic(c.Workers, func(i int) func([]byte, uint32) { return wws[i].do })
		go func() {
			defer wg.Done()
			for off := 0; !m.stop.Load(); off = (off + steer.BatchSize) % nf {
				batch := fs.raw[off:min(off+steer.BatchSize, nf)]
				for _, b := range batch {
					p.send(b)
				}
				pushed += uint64(len(batch))
			}
			p.close()
		}()
	case "rps":
		d, err := wk.dispatcher(c.steerConfig())
		if err != nil {
			wg.Done()
			return r, err
		}
		go func() {
			defer wg.Done()
			in := d.NewInput()
			for off := 0; !m.stop.Load(); off = (off + steer.BatchSize) % nf {
				batch := fs.frames[off:min(off+steer.BatchSize, nf)]
				if err := in.Dispatch(batch, nil); err != nil {
					loopErr = err
					close(failed)
					break
				}
				pushed += uint64(len(batch))
			}
			in.Close()
			if err := d.Close(context.Background()); err != nil && loopErr == nil {
				loopErr = err
			}
			st := d.Stats()
			r.Drops = st.Dropped()
		}()
	default:
		wg.Done()
		return r, fmt.Errorf("unknown implementation %q", c.Impl)
	}
	merr := m.run(ctx, c, wk, failed)
	wg.Wait()
	if loopErr != nil {
		return r, loopErr
	}
	if merr != nil {
		return r, merr
	}
	if pushed > 0 && wk.total()+r.Drops != pushed {
		r.Note = fmt.Sprintf("handled %d + dropped %d != %d pushed", wk.total(), r.Drops, pushed)
	}
	m.fill(&r)
	return r, nil
}

// singleLoop is the single-queue baseline over in-memory frames: one
// goroutine takes them 64 at a time, classifies each with the library's
// classifier and runs the handler, until stop is set.
func singleLoop(stop *atomic.Bool, raw [][]byte, ww *workerWork) {
	sq := singleQueue{cls: newClassifier(false)}
	nf := len(raw)
	for off := 0; !stop.Load(); off = (off + steer.BatchSize) % nf {
		for _, b := range raw[off:min(off+steer.BatchSize, nf)] {
			sq.handle(b, ww.do)
		}
	}
}

// stampSource wraps a Source: it marks one frame in sampleEvery for the
// latency histogram and zeroes every other frame's Timestamp (so that the
// handler can tell the sampled ones), and counts the frames and batches
// read. A sampled frame carries the time the frame was read, or with
// kernelTime the time the source gave it (the kernel's receive time in a
// ring), so that its latency runs from the kernel's receive; the first
// skip frames are not sampled.
type stampSource struct {
	steer.Source
	kernelTime bool
	skip       uint64
	every      uint64
	n          uint64
	frames     atomic.Uint64
	batches    atomic.Uint64 // non-empty ones
}

func newStampSource(src steer.Source) *stampSource {
	return &stampSource{Source: src, every: sampleEvery}
}

// ReadBatch implements steer.Source.
func (s *stampSource) ReadBatch(ctx context.Context, b *steer.Batch) error {
	err := s.Source.ReadBatch(ctx, b)
	if len(b.Frames) == 0 {
		return err
	}
	now := time.Now()
	for i := range b.Frames {
		switch {
		case s.n < s.skip || s.n%s.every != 0:
			b.Frames[i].Timestamp = time.Time{}
		case !s.kernelTime:
			b.Frames[i].Timestamp = now
		}
		s.n++
	}
	s.frames.Add(uint64(len(b.Frames)))
	s.batches.Add(1)
	return err
}

// benchXDPBatch is -xdp-batch-timeout: the live AF_XDP sockets'
// Config.BatchTimeout (0: afxdp's default, negative: none).
var benchXDPBatch time.Duration

// benchXDPUnbatched is -xdp-unbatched: the capture comparison also runs one
// AF_XDP socket with no batch timeout, which hands frames over as soon as
// its ring has any.
var benchXDPUnbatched bool

// readDirect is the single-queue baseline over a source: it reads src and,
// for every frame, classifies it with sq's classifier and runs the handler
// itself, as the worker ww belongs to, then releases the batch.
func readDirect(ctx context.Context, src steer.Source, ww *workerWork, sq *singleQueue) error {
	var b steer.Batch
	for {
		b.Frames, b.Release = b.Frames[:0], nil
		err := src.ReadBatch(ctx, &b)
		for j := range b.Frames {
			f := &b.Frames[j]
			sq.cls.Classify(f.Data, &sq.c)
			ww.doTimed(f.Data, sq.c.FlowID, f.Timestamp)
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

// loopSource reads a capture file over and over, opening it again at its
// end, until stop is set: a file source for as long as the meter needs.
type loopSource struct {
	path string
	rd   *pcapfile.Reader
	stop *atomic.Bool
	read atomic.Uint64
}

// ReadBatch implements steer.Source.
func (s *loopSource) ReadBatch(ctx context.Context, b *steer.Batch) error {
	for {
		if s.stop.Load() {
			return io.EOF
		}
		if s.rd == nil {
			rd, err := pcapfile.Open(s.path)
			if err != nil {
				return err
			}
			s.rd = rd
		}
		err := s.rd.ReadBatch(ctx, b)
		s.read.Add(uint64(len(b.Frames)))
		if errors.Is(err, io.EOF) {
			// Frames already read stay valid: a closed reader keeps
			// the chunks its batches hold.
			s.rd.Close()
			s.rd = nil
			if len(b.Frames) > 0 {
				return nil
			}
			continue
		}
		return err
	}
}

// Close implements steer.Source.
func (s *loopSource) Close() error {
	if s.rd != nil {
		return s.rd.Close()
	}
	return nil
}

// runPcap replays the capture file at path through c's implementation,
// over and over until the meter stops it.
func runPcap(ctx context.Context, c Case, path string, sp spinner, rep int) (Result, error) {
	r := c.result(rep)
	wk := newWork(c.Handler, sp)
	var m meter
	src := &loopSource{path: path, stop: &m.stop}
	defer src.Close()
	failed := make(chan struct{})
	var runErr error
	done := make(chan struct{})
	switch c.Impl {
	case "single":
		ww := wk.baseline(1)[0]
		go func() {
			defer close(done)
			runErr = readDirect(context.Background(), src, ww, &singleQueue{cls: newClassifier(false)})
			if runErr != nil {
				close(failed)
			}
		}()
	case "rps":
		d, err := wk.dispatcher(c.steerConfig())
		if err != nil {
			return r, err
		}
		go func() {
			defer close(done)
			runErr = d.Run(context.Background(), src)
			if runErr != nil {
				close(failed)
			}
			if err := d.Close(context.Background()); runErr == nil {
				runErr = err
			}
			st := d.Stats()
			r.Drops = st.Dropped()
		}()
	default:
		return r, fmt.Errorf("unknown implementation %q for pcap", c.Impl)
	}
	merr := m.run(ctx, c, wk, failed)
	<-done
	if runErr != nil {
		return r, runErr
	}
	if merr != nil {
		return r, merr
	}
	if got := src.read.Load(); wk.total()+r.Drops != got {
		r.Note = fmt.Sprintf("handled %d + dropped %d != %d read", wk.total(), r.Drops, got)
	}
	m.fill(&r)
	return r, nil
}

// latencyEvery is the sampling period of the latency experiment: one frame
// in latencyEvery carries its arrival time.
const latencyEvery = 16

// runLatency offers c's implementation the in-memory frames fs at a fixed
// rate, c.Rate frames a second, open loop: frame i is due at start + i/rate
// whether or not the frames before it were handled, and a source loop
// hands over, in batches of up to 64, every frame due. One frame in
// latencyEvery carries its due time, and its latency is the time from then
// to the end of its handler: the queueing, the hand-off and the handler
// alike for the single-queue baseline, which handles it in the source loop,
// and for the library. Only frames due after the warm-up are sampled.
func runLatency(ctx context.Context, c Case, fs *frameSet, sp spinner, rep int) (Result, error) {
	r := c.result(rep)
	wk := newWork(c.Handler, sp)
	var m meter
	nf := len(fs.frames)
	var (
		d       *steer.Dispatcher
		in      *steer.Input
		sq      singleQueue
		ww      *workerWork
		loopErr error
		err     error
	)
	switch c.Impl {
	case "single":
		ww, sq.cls = wk.baseline(1)[0], newClassifier(false)
	case "rps":
		if d, err = wk.dispatcher(c.steerConfig()); err != nil {
			return r, err
		}
		in = d.NewInput()
	default:
		return r, fmt.Errorf("unknown implementation %q for the latency experiment", c.Impl)
	}
	failed := make(chan struct{})
	done := make(chan struct{})
	perFrame := time.Second / time.Duration(c.Rate)
	go func() {
		defer close(done)
		start := time.Now()
		var sent, off int
		for !m.stop.Load() {
			el := time.Since(start)
			due := int(el/perFrame) + 1 // frame i is due at i*perFrame
			if due <= sent {
				time.Sleep(time.Duration(sent)*perFrame - el)
				continue
			}
			k := min(due-sent, steer.BatchSize, nf-off)
			batch := fs.frames[off : off+k]
			stamp := m.measuring.Load()
			for i := range batch {
				if stamp && (sent+i)%latencyEvery == 0 {
					batch[i].Timestamp = start.Add(time.Duration(sent+i) * perFrame)
				}
			}
			if in != nil {
				err := in.Dispatch(batch, nil)
				if err != nil {
					loopErr = err
					close(failed)
					break
				}
			} else {
				for i := range batch {
					sq.cls.Classify(batch[i].Data, &sq.c)
					ww.doTimed(batch[i].Data, sq.c.FlowID, batch[i].Timestamp)
				}
			}
			if stamp {
				for i := range batch {
					batch[i].Timestamp = time.Time{}
				}
			}
			sent += k
			off = (off + k) % nf
		}
		if d != nil {
			in.Close()
			if err := d.Close(context.Background()); err != nil && loopErr == nil {
				loopErr = err
			}
			st := d.Stats()
			r.Drops = st.Dropped()
		}
	}()
	merr := m.run(ctx, c, wk, failed)
	<-done
	if loopErr != nil {
		return r, loopErr
	}
	if merr != nil {
		return r, merr
	}
	m.fill(&r)
	r.setLatency(wk.latency())
	if got := r.Mpps * 1e6; got < 0.98*float64(c.Rate) {
		r.Note = fmt.Sprintf("saturated: handled %.0f of the %d frames a second offered", got, c.Rate)
	}
	return r, nil
}
