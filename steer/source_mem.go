package steer

import (
	"context"
	"io"
)

// SliceSource is a Source over frames in memory, BatchLen (BatchSize) a batch.
type SliceSource struct {
	Frames   []Frame
	BatchLen int
	Loops    int // extra passes over Frames; -1 loops until ctx ends

	pos, pass int
}

// ReadBatch implements Source; its batches have no release.
func (s *SliceSource) ReadBatch(ctx context.Context, b *Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	n := s.BatchLen
	if n <= 0 {
		n = BatchSize
	}
	if s.pos >= len(s.Frames) {
		if s.Loops >= 0 && s.pass >= s.Loops || len(s.Frames) == 0 {
			return io.EOF
		}
		s.pass++
		s.pos = 0
	}
	end := min(s.pos+n, len(s.Frames))
	b.Frames = s.Frames[s.pos:end]
	b.Release = nil
	s.pos = end
	return nil
}

// Close implements Source.
func (s *SliceSource) Close() error { return nil }
