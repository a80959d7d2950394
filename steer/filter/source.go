package filter

import (
	"context"
	"sync/atomic"

	"github.com/rpsgo/rps/steer"
)

// Source is a steer.Source that runs a program over every frame of another
// source, in user space, and passes on only the frames it accepts, each cut
// to the length the program returns. The frames it rejects are counted
// (Filtered, and SourceStats.Filtered in the dispatcher's stats) and never
// reach the dispatcher, so they are neither handled nor dropped.
//
// ReadBatch is for one goroutine at a time, as the source under it is;
// Filtered, Passed and SourceStats may be called from any goroutine.
type Source struct {
	src  steer.Source
	prog *Program

	filtered, passed atomic.Uint64
}

// NewSource returns src filtered by p. It fails with an error wrapping
// ErrUserSpace for a program the user-space virtual machine cannot run.
func NewSource(src steer.Source, p *Program) (*Source, error) {
	if err := p.UserSpace(); err != nil {
		return nil, err
	}
	return &Source{src: src, prog: p}, nil
}

// Program returns the filter program.
func (s *Source) Program() *Program { return s.prog }

// ReadBatch reads the next batch from the source under it and keeps the
// frames the program accepts, in order. A batch whose frames were all
// rejected is released at once and the next one read, so an empty batch is
// returned only when the source under it returned one.
func (s *Source) ReadBatch(ctx context.Context, b *steer.Batch) error {
	for {
		err := s.src.ReadBatch(ctx, b)
		n := len(b.Frames)
		if n == 0 {
			return err
		}
		keep := b.Frames[:0]
		for i := range b.Frames {
			f := b.Frames[i]
			k, ok := s.prog.Match(f.Data)
			if !ok {
				continue
			}
			if f.WireLen == 0 {
				f.WireLen = len(f.Data) // the wire length, before the cut
			}
			f.Data = f.Data[:k:k]
			keep = append(keep, f)
		}
		clear(b.Frames[len(keep):n]) // no views into the buffer left behind
		b.Frames = keep
		s.filtered.Add(uint64(n - len(keep)))
		s.passed.Add(uint64(len(keep)))
		if len(keep) > 0 || err != nil {
			if len(keep) == 0 && b.Release != nil {
				b.Release()
				b.Release = nil
			}
			return err
		}
		if b.Release != nil {
			b.Release()
			b.Release = nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// Close closes the source under it.
func (s *Source) Close() error { return s.src.Close() }

// Live reports whether the source under it is live (steer.LiveSource), so
// that a dispatcher treats the filtered source as it would the source.
func (s *Source) Live() bool {
	l, ok := s.src.(steer.LiveSource)
	return ok && l.Live()
}

// Backlog passes on the backlog of the source under it
// (steer.LiveSource), or 0, 0.
func (s *Source) Backlog() (used, size int) {
	if l, ok := s.src.(steer.LiveSource); ok {
		return l.Backlog()
	}
	return 0, 0
}

// Filtered returns the number of frames the program rejected so far.
func (s *Source) Filtered() uint64 { return s.filtered.Load() }

// Passed returns the number of frames the program accepted so far.
func (s *Source) Passed() uint64 { return s.passed.Load() }

// SourceStats returns the counters of the source under it, when it keeps
// any (steer.SourceStatser), with Filtered added; otherwise counters named
// "filter" with Filtered alone.
func (s *Source) SourceStats() (steer.SourceStats, error) {
	if ss, ok := s.src.(steer.SourceStatser); ok {
		st, err := ss.SourceStats()
		st.Filtered += s.filtered.Load()
		return st, err
	}
	return steer.SourceStats{Name: "filter", Filtered: s.filtered.Load()}, nil
}

var (
	_ steer.LiveSource    = (*Source)(nil)
	_ steer.SourceStatser = (*Source)(nil)
)
