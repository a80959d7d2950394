package main

import (
	"math/bits"
	"time"
)

// hist is a log-linear histogram of durations in nanoseconds, shaped like an
// HDR histogram with 16 sub-buckets per power of two: values below 32 ns
// are exact, larger ones land in a bucket at most 1/16 (6.25%) wide. Record
// does no allocation and no clock read; quantiles walk the 976 buckets
// instead of sorting samples. A hist is written by one goroutine; merge
// them afterwards.
type hist struct {
	counts [histBuckets]uint64
	n      uint64
	max    uint64
}

const (
	histSubBits = 4
	histSub     = 1 << histSubBits // sub-buckets per power of two
	histExact   = 2 * histSub      // values below this have a bucket each
	histBuckets = histExact + (64-histSubBits-1)*histSub
)

// histIndex returns the bucket of v.
func histIndex(v uint64) int {
	if v < histExact {
		return int(v)
	}
	e := bits.Len64(v) - (histSubBits + 1) // shift that leaves 5 significant bits
	m := v >> uint(e)                      // in [16, 31]
	return histExact + (e-1)*histSub + int(m-histSub)
}

// histLower returns the smallest value of bucket i and the bucket's width.
func histLower(i int) (lo, width uint64) {
	if i < histExact {
		return uint64(i), 1
	}
	e := (i-histExact)/histSub + 1
	m := uint64((i-histExact)%histSub + histSub)
	return m << uint(e), 1 << uint(e)
}

// Record adds one value.
func (h *hist) Record(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[histIndex(v)]++
	h.n++
	h.max = max(h.max, v)
}

// Count returns the number of values recorded.
func (h *hist) Count() uint64 { return h.n }

// Merge adds o's values to h.
func (h *hist) Merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// Quantile returns the value below which a fraction q of the values lie,
// as the middle of its bucket (never above the largest value recorded).
// Zero when nothing was recorded.
func (h *hist) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := uint64(q*float64(h.n-1)) + 1 // 1-based rank of the value wanted
	var cum uint64
	for i, c := range h.counts {
		cum += c
		if cum >= rank {
			lo, w := histLower(i)
			return time.Duration(min(lo+(w-1)/2, h.max))
		}
	}
	return time.Duration(h.max)
}

// Buckets calls f for each non-empty bucket in order, with its lower bound,
// width and count (for plots).
func (h *hist) Buckets(f func(lo, width, count uint64)) {
	for i, c := range h.counts {
		if c > 0 {
			lo, w := histLower(i)
			f(lo, w, c)
		}
	}
}
