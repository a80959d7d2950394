package steer

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// RebalanceConfig configures the rebalancer: every Interval, while the
// busiest worker carries over Threshold times the mean, it moves the bucket
// that best evens it with the least busy, under the no-reorder rule.
type RebalanceConfig struct {
	Interval  time.Duration // zero: off
	Threshold float64       // busiest/mean ratio that triggers moves; default 1.1
	MaxMoves  int           // bucket moves per interval; default 8
	Cooldown  int           // intervals a moved bucket stays put; default 2
}

func (c *RebalanceConfig) normalize() error {
	if c.Interval < 0 {
		return fmt.Errorf("steer: rebalance interval %v is negative: %w", c.Interval, ErrConfig)
	}
	if c.Threshold == 0 {
		c.Threshold = 1.1
	}
	if !(c.Threshold >= 1) || math.IsInf(c.Threshold, 1) { // NaN fails >= too
		return fmt.Errorf("steer: rebalance threshold %v: want a ratio of at least 1 (busiest over mean), or zero for 1.1: %w", c.Threshold, ErrConfig)
	}
	switch {
	case c.MaxMoves < 0:
		return fmt.Errorf("steer: rebalance max moves %d is negative: want a count of bucket moves per interval, or zero for 8: %w", c.MaxMoves, ErrConfig)
	case c.MaxMoves == 0:
		c.MaxMoves = 8
	}
	switch {
	case c.Cooldown < 0:
		return fmt.Errorf("steer: rebalance cooldown %d is negative: want a count of intervals, or zero for 2: %w", c.Cooldown, ErrConfig)
	case c.Cooldown == 0:
		c.Cooldown = 2
	}
	return nil
}

type rebalancer struct {
	d        *Dispatcher
	last     []uint64
	cooldown []int
	quit     chan struct{}
	done     chan struct{}
	once     sync.Once
}

func (d *Dispatcher) startRebalancer() {
	r := &rebalancer{d: d, quit: make(chan struct{}), done: make(chan struct{}),
		cooldown: make([]int, d.cfg.Buckets)}
	d.reb = r
	go r.loop()
}

func (r *rebalancer) stop() {
	r.once.Do(func() { close(r.quit) })
	<-r.done
}

func (r *rebalancer) loop() {
	defer close(r.done)
	t := time.NewTicker(r.d.cfg.Rebalance.Interval)
	defer t.Stop()
	for {
		select {
		case <-r.quit:
			return
		case <-t.C:
			r.d.rebalanceOnce(r)
		}
	}
}

// rebalance runs one round of the rebalancer over the bucket loads
// measured since the dispatcher started (or since the last round of the
// live rebalancer), whatever Config.Rebalance says, and returns the buckets
// it moved.
func (d *Dispatcher) rebalance() []Move {
	return d.rebalanceOnce(nil)
}

// rebalanceOnce is Rebalance with the live rebalancer's memory of the last
// round (r may be nil).
func (d *Dispatcher) rebalanceOnce(r *rebalancer) []Move {
	// Only the bucket counters and the table: Stats would also walk every
	// flow table for TopFlows, holding each input's table lock meanwhile.
	load := d.bucketLoad()
	if r != nil {
		cur := load
		if r.last != nil {
			load = make([]uint64, len(cur))
			for b := range cur {
				load[b] = cur[b] - r.last[b]
			}
		}
		r.last = cur
	}
	table := d.table.snapshot()
	moves := planRebalance(load, table, len(d.workers), d.cfg.Rebalance, r)
	for _, m := range moves {
		d.table.set(m.Bucket, m.To)
	}
	if len(moves) > 0 {
		d.table.gen.Add(1)
	}
	return moves
}

// planRebalance computes the bucket moves for one round, updating table.
func planRebalance(load []uint64, table []int, workers int, cfg RebalanceConfig, r *rebalancer) []Move {
	if cfg.Threshold == 0 {
		cfg.normalize()
	}
	wl := make([]uint64, workers)
	var total uint64
	for b, n := range load {
		wl[table[b]] += n
		total += n
	}
	if total == 0 || workers < 2 {
		return nil
	}
	mean := float64(total) / float64(workers)
	var moves []Move
	for len(moves) < cfg.MaxMoves {
		hi, lo := 0, 0
		for w := range wl {
			if wl[w] > wl[hi] {
				hi = w
			}
			if wl[w] < wl[lo] {
				lo = w
			}
		}
		if float64(wl[hi]) <= cfg.Threshold*mean {
			break
		}
		// The bucket whose move leaves the pair most even: its load closest
		// to half the gap, and strictly below the gap so the move helps.
		gap := wl[hi] - wl[lo]
		best, bestDist := -1, uint64(0)
		for b, n := range load {
			if table[b] != hi || n == 0 || n >= gap {
				continue
			}
			if r != nil && r.cooldown[b] > 0 {
				continue
			}
			dist := absDiff(2*n, gap)
			if best < 0 || dist < bestDist {
				best, bestDist = b, dist
			}
		}
		if best < 0 {
			break // the busiest worker's load is one indivisible elephant
		}
		table[best] = lo
		wl[hi] -= load[best]
		wl[lo] += load[best]
		moves = append(moves, Move{Bucket: best, Mask: uint32(len(table) - 1), From: hi, To: lo})
		if r != nil {
			r.cooldown[best] = cfg.Cooldown + 1
		}
	}
	if r != nil {
		for b := range r.cooldown {
			if r.cooldown[b] > 0 {
				r.cooldown[b]--
			}
		}
	}
	return moves
}

func absDiff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}

// bucketLoad sums the hashed frames each bucket received, over every input.
func (d *Dispatcher) bucketLoad() []uint64 {
	sum, _ := d.sumCounts(false)
	return sum.bucketFrames
}

// workerLoad returns the hashed frames each worker carries under the current
// indirection table: the sum of BucketFrames over the buckets the table gives
// it. It is the load the rebalancer evens out. Flows that RFS steers to
// their consumers are counted with their bucket's worker.
func (s *Stats) workerLoad() []uint64 {
	wl := make([]uint64, s.Config.Workers)
	for b, n := range s.BucketFrames {
		if b < len(s.Table) && s.Table[b] >= 0 && s.Table[b] < len(wl) {
			wl[s.Table[b]] += n
		}
	}
	return wl
}

// elephant is a bucket or a flow whose load alone exceeds what one worker
// should carry: moving buckets cannot balance it, since a bucket (and a
// flow) is handled by one worker at a time.
type elephant struct {
	Bucket int    // the bucket, or -1 for a single flow
	FlowID uint32 // the flow, when Bucket is -1
	Worker int    // the worker carrying it now
	Frames uint64 // its hashed frames (a flow: counted by its input's flow table)
	Share  float64
}

// elephants lists, largest first, the buckets and the flows (from TopFlows,
// so RFS on) whose frames exceed threshold times the mean load per worker,
// that is threshold/Workers of all hashed frames: no table can bring the
// busiest worker within threshold of the mean while one of them exists.
// The rebalancer stops moving buckets off a worker whose load is such an
// elephant; this is how to find out why. A threshold below 1 means 1.25.
func (s *Stats) elephants(threshold float64) []elephant {
	if threshold < 1 {
		threshold = 1.25
	}
	var total uint64
	for _, n := range s.BucketFrames {
		total += n
	}
	if total == 0 || s.Config.Workers == 0 {
		return nil
	}
	limit := threshold * float64(total) / float64(s.Config.Workers)
	var out []elephant
	for b, n := range s.BucketFrames {
		if float64(n) > limit {
			w := -1
			if b < len(s.Table) {
				w = s.Table[b]
			}
			out = append(out, elephant{Bucket: b, Worker: w, Frames: n, Share: float64(n) / float64(total)})
		}
	}
	for _, f := range s.TopFlows {
		if float64(f.Packets) > limit {
			out = append(out, elephant{Bucket: -1, FlowID: f.FlowID, Worker: f.Worker, Frames: f.Packets,
				Share: float64(f.Packets) / float64(total)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Frames > out[j].Frames })
	return out
}

// writeLoad prints the load picture the rebalancer works from: each
// worker's hashed frames under the current table against the mean, the
// busiest buckets, and the elephants over threshold (see elephants).
func (s *Stats) writeLoad(out io.Writer, threshold float64) error {
	if threshold < 1 {
		threshold = 1.25
	}
	var b strings.Builder
	wl := s.workerLoad()
	var total uint64
	for _, n := range wl {
		total += n
	}
	mean := float64(total) / float64(max(len(wl), 1))
	fmt.Fprintf(&b, "Load by worker (hashed frames under the current table, mean %.0f):\n", mean)
	tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "WSID\t Frames\t xMean\t Buckets\t\n")
	nb := make([]int, len(wl))
	for _, w := range s.Table {
		if w >= 0 && w < len(nb) {
			nb[w]++
		}
	}
	for w, n := range wl {
		ratio := 0.0
		if mean > 0 {
			ratio = float64(n) / mean
		}
		fmt.Fprintf(tw, "%d\t %d\t %.2f\t %d\t\n", w, n, ratio, nb[w])
	}
	tw.Flush()
	idx := make([]int, len(s.BucketFrames))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return s.BucketFrames[idx[i]] > s.BucketFrames[idx[j]] })
	fmt.Fprintf(&b, "Busiest buckets:")
	for _, bk := range idx[:min(8, len(idx))] {
		if s.BucketFrames[bk] == 0 {
			break
		}
		w := -1
		if bk < len(s.Table) {
			w = s.Table[bk]
		}
		fmt.Fprintf(&b, " %d(w%d)=%d", bk, w, s.BucketFrames[bk])
	}
	fmt.Fprintln(&b)
	els := s.elephants(threshold)
	if len(els) == 0 {
		fmt.Fprintf(&b, "Elephants over %.2fx the mean: none\n", threshold)
	} else {
		fmt.Fprintf(&b, "Elephants over %.2fx the mean (no bucket move can balance these):\n", threshold)
		for _, e := range els {
			if e.Bucket >= 0 {
				fmt.Fprintf(&b, "  bucket %d on worker %d: %d frames, %.1f%% of all\n", e.Bucket, e.Worker, e.Frames, 100*e.Share)
			} else {
				fmt.Fprintf(&b, "  flowid 0x%08x on worker %d: %d frames, %.1f%% of all\n", e.FlowID, e.Worker, e.Frames, 100*e.Share)
			}
		}
	}
	_, err := io.WriteString(out, b.String())
	return err
}
