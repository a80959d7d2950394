package capture

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/rpsgo/rps/steer"
)

// Limit is tcpdump's -c N: the sources it wraps together pass on their
// first N frames and no more. Frames read past the limit (the rest of the
// batch that reached it, and, for a live source, what the ring still holds
// while the command stops) are released unsteered and counted by Over.
type Limit struct {
	left    atomic.Int64
	over    atomic.Uint64
	reached chan struct{}
	once    sync.Once
}

// NewLimit returns a limit of n frames, n at least 1.
func NewLimit(n int64) (*Limit, error) {
	if n < 1 {
		return nil, fmt.Errorf("capture: a limit of %d frames", n)
	}
	l := &Limit{reached: make(chan struct{})}
	l.left.Store(n)
	return l, nil
}

// Reached is closed once the limit's N frames have been passed on.
func (l *Limit) Reached() <-chan struct{} { return l.reached }

// Over returns the number of frames read past the limit.
func (l *Limit) Over() uint64 { return l.over.Load() }

// take claims up to n frames of what is left and returns how many.
func (l *Limit) take(n int) int {
	for {
		left := l.left.Load()
		if left <= 0 {
			return 0
		}
		k := min(left, int64(n))
		if l.left.CompareAndSwap(left, left-k) {
			if left == k {
				l.once.Do(func() { close(l.reached) })
			}
			return int(k)
		}
	}
}

// Source wraps src. Once the limit is reached, a source that can wait (a
// file) reports io.EOF without reading further; with drain set (a live
// ring, which must be read dry for its counters to add up) it goes on
// reading, releasing and counting what it reads.
func (l *Limit) Source(src steer.Source, drain bool) steer.Source {
	return &limited{l: l, src: src, drain: drain}
}

type limited struct {
	l     *Limit
	src   steer.Source
	drain bool
}

func (s *limited) ReadBatch(ctx context.Context, b *steer.Batch) error {
	if !s.drain && s.l.left.Load() <= 0 {
		b.Frames, b.Release = b.Frames[:0], nil
		return io.EOF
	}
	err := s.src.ReadBatch(ctx, b)
	n := len(b.Frames)
	if n == 0 {
		return err
	}
	k := s.l.take(n)
	if k == n {
		return err
	}
	s.l.over.Add(uint64(n - k))
	clear(b.Frames[k:n])
	b.Frames = b.Frames[:k]
	if k == 0 && b.Release != nil {
		b.Release()
		b.Release = nil
	}
	return err
}

func (s *limited) Close() error { return s.src.Close() }

// Live passes on the source's answer (steer.LiveSource).
func (s *limited) Live() bool {
	l, ok := s.src.(steer.LiveSource)
	return ok && l.Live()
}

// Backlog passes on the source's backlog (steer.LiveSource), or 0, 0.
func (s *limited) Backlog() (used, size int) {
	if l, ok := s.src.(steer.LiveSource); ok {
		return l.Backlog()
	}
	return 0, 0
}

// SourceStats passes on the source's counters; without any, an error, which
// the dispatcher's stats skip.
func (s *limited) SourceStats() (steer.SourceStats, error) {
	if ss, ok := s.src.(steer.SourceStatser); ok {
		return ss.SourceStats()
	}
	return steer.SourceStats{}, errNoStats
}

var errNoStats = fmt.Errorf("capture: the source keeps no counters")
