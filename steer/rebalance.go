package steer

import (
	"fmt"
	"sync"
	"time"
)

// RebalanceConfig configures the live rebalancer, which goes past both
// kernels: FreeBSD's indirection table is a static round-robin and Linux
// moves flows only toward their consumer. Every Interval it measures the
// frames each bucket received, and while the busiest worker carries more
// than Threshold times the mean load it moves a bucket from the busiest to
// the least busy worker, choosing the bucket that best evens the two. Each
// move goes through the indirection table, so the no-reorder rule applies.
// A bucket moved is left alone for Cooldown intervals (hysteresis).
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
	if c.Threshold < 1 {
		return fmt.Errorf("steer: rebalance threshold %v is below 1: %w", c.Threshold, ErrConfig)
	}
	if c.MaxMoves == 0 {
		c.MaxMoves = 8
	}
	if c.Cooldown == 0 {
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

// Rebalance runs one round of the rebalancer over the bucket loads measured
// since the dispatcher started (or since the last round of the live
// rebalancer), whatever Config.Rebalance says, and returns the buckets it
// moved. Useful to rebalance on demand, and in tests.
func (d *Dispatcher) Rebalance() []Move {
	return d.rebalanceOnce(nil)
}

// rebalanceOnce is Rebalance with the live rebalancer's memory of the last
// round (r may be nil).
func (d *Dispatcher) rebalanceOnce(r *rebalancer) []Move {
	st := d.Stats()
	load := st.BucketFrames
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
	table := st.Table
	moves := planRebalance(load, table, len(d.workers), d.cfg.Rebalance, r)
	for _, m := range moves {
		d.table.ents[m.Bucket].Store(uint32(m.To))
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
