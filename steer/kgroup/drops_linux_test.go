//go:build linux

package kgroup_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/livetest"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/internal/pace"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/kgroup"
)

// liveCapture is a dispatcher reading a family's sockets in A with the
// defaults a user gets: one socket read by Dispatcher.Run, or a group of
// one socket per worker steered by the family's program (DIRECT dispatch,
// as livesteer's default for a group).
type liveCapture struct {
	d       *steer.Dispatcher
	sources func() []steer.SourceStats
	stop    func()
}

// startCapture opens a capture of family f in p.A, a group when asGroup
// is set (else one socket, copying batches out of the ring with copying),
// with the dispatcher configuration cfg and handler h, and runs it.
func startCapture(t testing.TB, f family, p *netns.Pair, asGroup, copying bool, cfg steer.Config, h func(*steer.Packet)) *liveCapture {
	t.Helper()
	if asGroup {
		cfg.Dispatch = steer.DispatchDirect
	}
	d, err := steer.New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	c := &liveCapture{d: d}
	var closers []func() error
	if !asGroup {
		var s liveSocket
		if err := p.A.Do(func() (err error) { s, err = f.live(p.A, copying); return err }); err != nil {
			t.Fatal(err)
		}
		closers = append(closers, s.Close)
		c.sources = func() []steer.SourceStats { return sourceStats([]liveSocket{s}) }
		go func() { done <- d.Run(ctx, s) }()
	} else {
		var g *group
		if err := p.A.Do(func() (err error) {
			g, err = f.group(p.A, d, d.Workers(), kgroup.Options{}, groupOpts{defaults: true})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		closers = append(closers, g.close, g.st.Close)
		c.sources = g.stats
		go func() { done <- g.st.Run(ctx) }()
	}
	stopped := false
	c.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("run: %v", err)
		}
		for i := len(closers) - 1; i >= 0; i-- {
			if err := closers[i](); err != nil {
				t.Errorf("close: %v", err)
			}
		}
		d.Close(context.Background())
	}
	t.Cleanup(c.stop)
	return c
}

// latencies keeps a sample of the frames' latencies from the paced
// sender's stamp to the handler: one frame in every.
type latencies struct {
	n     atomic.Uint64
	every uint64
	mu    sync.Mutex
	d     []time.Duration
}

func (l *latencies) observe(p *steer.Packet) {
	if l.n.Add(1)%l.every != 0 {
		return
	}
	if sent, ok := pace.Stamped(p.Data); ok {
		l.mu.Lock()
		l.d = append(l.d, time.Since(sent))
		l.mu.Unlock()
	}
}

// quantiles returns the 50th and 99th percentiles of the sample, and its
// largest.
func (l *latencies) quantiles() (p50, p99, most time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(l.d)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)*99/100], s[len(s)-1]
}

// offer is a paced traffic pattern: Frames frames at Rate, Burst at a time.
type offer struct {
	name                string
	frames, rate, burst int
}

// liveOffers are the patterns of TestLiveDrops: bursts of 300 frames a
// millisecond (what lost half the frames with the defaults before the
// dispatcher held live sources back), and steady 10, 50 and 100 kpps,
// each for about a third of a second.
var liveOffers = []offer{
	{"bursts of 300 a ms", 20000, 300_000, 300},
	{"10 kpps", 3000, 10_000, 0},
	{"50 kpps", 15000, 50_000, 0},
	{"100 kpps", 30000, 100_000, 0},
}

// sendOffer sends o's frames from B to A's address with stamps, and
// returns how many were sent.
func sendOffer(t testing.TB, p *netns.Pair, o offer) int {
	t.Helper()
	spec := pace.Spec{Dev: p.B.Link, Frames: o.frames, Rate: o.rate, Burst: o.burst, Size: 64,
		Src: p.B.Addr.Addr(), Dst: p.A.Addr.Addr(), Stamp: true}
	var sent int
	if err := p.B.Do(func() (err error) { sent, _, err = pace.Send(spec); return err }); err != nil || sent != o.frames {
		t.Fatalf("%s: sent %d of %d: %v", o.name, sent, o.frames, err)
	}
	return sent
}

// accounted waits until every frame A's link received since rx0 is
// handled or dropped, in user space or by the kernel, since the stats ds0,
// and returns the link's count and the frames handled, dropped in user
// space and dropped by the kernel since then.
func accounted(t testing.TB, p *netns.Pair, c *liveCapture, rx0 uint64, ds0 steer.Stats) (rx, handled, dropped, kernel uint64) {
	t.Helper()
	k0 := kernelDrops(ds0.Sources)
	livetest.WaitStable(t, func() (string, bool) {
		rx = livetest.LinkRx(t, p.A) - rx0
		ds := c.d.Stats()
		handled, dropped = ds.Handled()-ds0.Handled(), ds.Dropped()-ds0.Dropped()
		kernel = kernelDrops(c.sources()) - k0
		return fmt.Sprintf("rx %d, handled %d, dropped %d, kernel dropped %d", rx, handled, dropped, kernel),
			handled+dropped+kernel == rx
	})
	return rx, handled, dropped, kernel
}

// kernelDrops sums the sources' kernel drops.
func kernelDrops(ss []steer.SourceStats) uint64 {
	var n uint64
	for _, s := range ss {
		n += s.Dropped
	}
	return n
}

// TestLiveDrops checks the live drop policy with the library's defaults
// (steer.Config{}, each family's socket defaults; DIRECT dispatch for the
// groups) and a handler that does nothing but note a sample of latencies:
// for one AF_PACKET socket, an AF_PACKET fanout group steered by the
// library's program, one AF_XDP socket and an XDP-steered AF_XDP group,
// under bursts of 300 frames a millisecond and at a steady 10, 50 and
// 100 kpps from the paced sender, the kernel drops no frame, user space
// drops at most 1%, and handled + dropped is the interface's rx count,
// every frame sent. The latencies (the sender's stamp to the handler)
// are logged. An offer the kernel dropped from (the reader starved of CPU)
// is offered again, 3 times at most.
//
// The control: with plain tail drop (Queue.Overflow OverflowDrop), what
// the defaults were before live sources were held back, one AF_PACKET
// socket under the same bursts drops frames in user space, so the test's
// traffic reaches the case the policy is for.
func TestLiveDrops(t *testing.T) {
	netns.Require(t)
	forEach(t, func(t *testing.T, f family) {
		p := netns.New(t, netns.Options{})
		for _, asGroup := range []bool{false, true} {
			name := "socket"
			if asGroup {
				name = "group"
			}
			t.Run(name, func(t *testing.T) {
				lat := &latencies{every: 8}
				c := startCapture(t, f, p, asGroup, false, steer.Config{}, lat.observe)
				for _, o := range liveOffers {
					// An offer the kernel dropped from had its reader starved
					// by the machine (it shares 2 CPUs with the sender and
					// other tests), which no policy in user space can help:
					// it is offered again, up to 3 times in all.
					for attempt := 1; ; attempt++ {
						lat.mu.Lock()
						lat.d = lat.d[:0]
						lat.mu.Unlock()
						rx0, ds0 := livetest.LinkRx(t, p.A), c.d.Stats()
						sent := sendOffer(t, p, o)
						rx, handled, dropped, kernel := accounted(t, p, c, rx0, ds0)
						p50, p99, most := lat.quantiles()
						t.Logf("%s (attempt %d): sent %d, rx %d, handled %d, dropped in user space %d, by the kernel %d; latency p50 %v p99 %v max %v; ring peak %v",
							o.name, attempt, sent, rx, handled, dropped, kernel, p50.Round(time.Microsecond), p99.Round(time.Microsecond), most.Round(time.Microsecond), ringPeaks(c))
						if rx != uint64(sent) || handled+dropped+kernel != rx {
							t.Errorf("%s: sent %d, the link received %d, handled %d + dropped %d + kernel %d", o.name, sent, rx, handled, dropped, kernel)
						}
						if kernel != 0 && attempt < 3 {
							continue
						}
						if kernel != 0 || dropped*100 > rx {
							t.Errorf("%s: the kernel dropped %d, user space %d of %d: want none and at most 1%%", o.name, kernel, dropped, rx)
						}
						break
					}
				}
			})
		}
		if f.name != "afpacket" {
			return
		}
		t.Run("control: plain tail drop", func(t *testing.T) {
			c := startCapture(t, f, p, false, false, steer.Config{Queue: steer.QueueConfig{Overflow: steer.OverflowDrop}}, func(*steer.Packet) {})
			rx0, ds0 := livetest.LinkRx(t, p.A), c.d.Stats()
			sent := sendOffer(t, p, liveOffers[0])
			rx, handled, dropped, kernel := accounted(t, p, c, rx0, ds0)
			t.Logf("%s with OverflowDrop: sent %d, rx %d, handled %d, dropped in user space %d, by the kernel %d", liveOffers[0].name, sent, rx, handled, dropped, kernel)
			if dropped*100 <= rx {
				t.Errorf("plain tail drop lost %d of %d frames in user space: the bursts do not reach the case the policy is for", dropped, rx)
			}
		})
	})
}

// ringPeaks returns each source's fullest ring, as a share of it.
func ringPeaks(c *liveCapture) []string {
	var out []string
	for _, s := range c.sources() {
		if s.RingSize > 0 {
			out = append(out, fmt.Sprintf("%.0f%%", 100*float64(s.RingPeak)/float64(s.RingSize)))
		}
	}
	return out
}

// BenchmarkLiveLatency measures what holding a live source back costs in
// latency: each family's socket and group with the library's defaults,
// with the default overflow policy (auto: a live source is held back
// while its ring has room) and with plain tail drop (drop: what the
// defaults did before), at a steady 10 kpps and in bursts of 300 frames a
// millisecond. Each iteration sends the offer once; the latency runs from
// the paced sender's stamp to the handler, one frame in four sampled.
// Run it with -benchtime 5x.
func BenchmarkLiveLatency(b *testing.B) {
	netns.Require(b)
	for _, f := range families {
		p := netns.New(b, netns.Options{})
		for _, asGroup := range []bool{false, true} {
			for _, ov := range []steer.Overflow{steer.OverflowAuto, steer.OverflowDrop} {
				for _, o := range []offer{liveOffers[1], liveOffers[0]} {
					kind := "socket"
					if asGroup {
						kind = "group"
					}
					b.Run(fmt.Sprintf("%s/%s/%v/%s", f.name, kind, ov, o.name), func(b *testing.B) {
						benchLatency(b, f, p, asGroup, ov, o)
					})
				}
			}
		}
	}
}

// benchLatency is one case of BenchmarkLiveLatency.
func benchLatency(b *testing.B, f family, p *netns.Pair, asGroup bool, ov steer.Overflow, o offer) {
	lat := &latencies{every: 4}
	c := startCapture(b, f, p, asGroup, false, steer.Config{Queue: steer.QueueConfig{Overflow: ov}}, lat.observe)
	defer c.stop()
	var sent, dropped, kernel uint64
	for b.Loop() {
		rx0, ds0 := livetest.LinkRx(b, p.A), c.d.Stats()
		sent += uint64(sendOffer(b, p, o))
		_, _, d, k := accounted(b, p, c, rx0, ds0)
		dropped, kernel = dropped+d, kernel+k
	}
	p50, p99, most := lat.quantiles()
	b.ReportMetric(float64(p50.Microseconds()), "p50-us")
	b.ReportMetric(float64(p99.Microseconds()), "p99-us")
	b.ReportMetric(float64(most.Microseconds()), "max-us")
	b.ReportMetric(100*float64(dropped)/float64(max(sent, 1)), "userdrop-%")
	b.ReportMetric(100*float64(kernel)/float64(max(sent, 1)), "kerneldrop-%")
}

// stallBound is how long TestLiveStall lets the other worker wait while
// one is stuck: the stall timeout, and as much again and 100 ms for the
// machine (the reader's wake-up, a loaded CPU).
const stallBound = 2*steer.DefaultStallTimeout + 100*time.Millisecond

// TestLiveStall: with the defaults but a fixed key (stallKey), one socket
// of each family read by Dispatcher.Run, a handler stuck on worker 0
// holds the reader back for the stall timeout at most
// (Config.Queue.StallTimeout, 50 ms): the other
// worker goes on handling its frames, none of them dropped, with no gap
// longer than stallBound between two of them while worker 0 is stuck, and
// the frames for the stuck worker beyond its queue end as counted stall
// drops. Every frame the link received is handled or dropped, none by the
// kernel.
//
// That holds for AF_XDP, whose chunks go back to the kernel one by one,
// and for an AF_PACKET socket that copies its batches out of the ring
// (Config.Copy). An AF_PACKET socket in zero copy cannot give a ring
// block back while the stuck handler holds a frame of it, and the kernel
// fills the blocks in turn: once it comes round to that block (a lap of
// the ring: 16 blocks, at a low rate each retired after 10 ms, so within
// 160 ms) it drops every frame until the handler returns, and the reader
// waits for the block. There every frame is still accounted for, the
// ring's as the kernel's drops, and the other worker drops nothing in
// user space; the wait is logged, not bounded (docs/performance.md).
func TestLiveStall(t *testing.T) {
	netns.Require(t)
	forEach(t, func(t *testing.T, f family) {
		p := netns.New(t, netns.Options{})
		for _, copying := range []bool{false, true} {
			bounded := f.name != "afpacket" || copying
			t.Run(map[bool]string{false: "zero copy", true: "copy"}[copying], func(t *testing.T) {
				liveStall(t, f, p, copying, bounded)
			})
		}
	})
}

// stallKey is TestLiveStall's key. The paced frames' flows differ in the
// last byte of their source address only (UDP hashes by the 2-tuple), and
// the default table gives bucket b to worker b % 2: a frame's worker is
// its flowid's low bit, which Toeplitz makes a fixed bit XOR each of that
// byte's bits ANDed with one key bit (bits 55 to 62). A random key, the
// default, has those 8 bits all zero once in 256: then every frame goes to
// one worker, and worker 1 has none to handle while worker 0 is stuck (it
// "waited" the whole second). Under this key the flows split evenly;
// stallSplit checks that they reach both workers.
var stallKey = hash.MicrosoftKey[:]

// stallSplit fails the test unless the paced frames from B to A reach
// both of d's workers: it classifies one frame for each source address
// byte as d does.
func stallSplit(t *testing.T, d *steer.Dispatcher, p *netns.Pair) {
	t.Helper()
	var frames [][]byte
	for b := range 256 {
		frame := pace.Frame(pace.Spec{Size: 64, Src: p.B.Addr.Addr(), Dst: p.A.Addr.Addr()})
		frame[14+15] = byte(b) // the byte pace.Randomize draws
		frames = append(frames, frame)
	}
	if per := perWorker(t, d, d.Table(), frames); slices.Contains(per, 0) {
		t.Fatalf("the paced frames' 256 flows reach the workers %v: the test needs frames for both", per)
	}
}

// perWorker returns how many of frames d's classifier and table give
// each worker.
func perWorker(t *testing.T, d *steer.Dispatcher, table []int, frames [][]byte) []int {
	t.Helper()
	cls, err := steer.NewClassifier(d.Config().Hash)
	if err != nil {
		t.Fatal(err)
	}
	per := make([]int, d.Workers())
	var c steer.Classification
	for _, f := range frames {
		cls.Classify(f, &c)
		per[table[c.FlowID&uint32(len(table)-1)]]++
	}
	return per
}

// liveStall is one case of TestLiveStall; with bounded, the wait is
// bounded and the kernel drops nothing.
func liveStall(t *testing.T, f family, p *netns.Pair, copying, bounded bool) {
	var (
		stuck    atomic.Bool
		release  = make(chan struct{})
		mu       sync.Mutex
		last     time.Time // worker 1's last frame, or when worker 0 got stuck
		maxGap   time.Duration
		stuckFor atomic.Bool
	)
	c := startCapture(t, f, p, false, copying, steer.Config{Hash: steer.HashConfig{Key: stallKey}}, func(pk *steer.Packet) {
		if pk.Worker == 0 && stuck.Load() {
			if stuckFor.CompareAndSwap(false, true) {
				mu.Lock()
				last = time.Now()
				mu.Unlock()
			}
			<-release
			return
		}
		if pk.Worker == 1 && stuckFor.Load() {
			mu.Lock()
			now := time.Now()
			maxGap = max(maxGap, now.Sub(last))
			last = now
			mu.Unlock()
		}
	})
	defer c.stop()
	stallSplit(t, c.d, p)
	rx0, ds0 := livetest.LinkRx(t, p.A), c.d.Stats()
	stuck.Store(true)
	sent := sendOffer(t, p, offer{"20 kpps for a second", 20000, 20_000, 0})
	mu.Lock()
	gap := max(maxGap, time.Since(last)) // up to now, still stuck
	mu.Unlock()
	stuck.Store(false)
	close(release)
	rx, handled, dropped, kernel := accounted(t, p, c, rx0, ds0)
	ds := c.d.Stats()
	w0, w1 := ds.Workstreams[0], ds.Workstreams[1]
	t.Logf("sent %d, rx %d: handled %d, dropped %d, kernel %d; worker 0 stall drops %d, queue drops %d; worker 1 drops %d; the longest wait of worker 1 while worker 0 was stuck %v",
		sent, rx, handled, dropped, kernel, w0.StallDrops-ds0.Workstreams[0].StallDrops, w0.QueueDrops-ds0.Workstreams[0].QueueDrops, w1.Drops()-ds0.Workstreams[1].Drops(), gap)
	if !stuckFor.Load() {
		t.Fatal("worker 0 never got a frame: the test did not stall it")
	}
	if rx != uint64(sent) || handled+dropped+kernel != rx {
		t.Errorf("sent %d, the link received %d, handled %d + dropped %d + kernel %d", sent, rx, handled, dropped, kernel)
	}
	if w1.Drops() != ds0.Workstreams[1].Drops() {
		t.Errorf("the worker that was not stuck dropped %d frames", w1.Drops()-ds0.Workstreams[1].Drops())
	}
	if !bounded {
		return
	}
	if kernel != 0 || w0.StallDrops == ds0.Workstreams[0].StallDrops {
		t.Errorf("the kernel dropped %d, the stuck worker's stall drops %d: want none, and some", kernel, w0.StallDrops-ds0.Workstreams[0].StallDrops)
	}
	if gap > stallBound {
		t.Errorf("worker 1 waited %v while worker 0 was stuck, more than %v", gap, stallBound)
	}
}
