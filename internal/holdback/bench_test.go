package holdback

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpsgo/rps/steer"
)

// fakeRing stands for a socket's ring: each read hands out the same 64
// frames, as cheaply as a read can.
type fakeRing struct {
	frames []steer.Frame
	read   uint32
}

//go:noinline
func (f *fakeRing) readBatch(ctx context.Context, b *steer.Batch, wait time.Duration) error {
	b.Frames = f.frames
	b.Release = nil
	return ctx.Err()
}

// heldSource is a source read through a Reader, as afpacket's and afxdp's
// steered sockets are.
type heldSource struct {
	ring *fakeRing
	r    *Reader
}

func (s *heldSource) ReadBatch(ctx context.Context, b *steer.Batch) error {
	wait := 100 * time.Millisecond
	if s.r.BeforeRead() {
		var held bool
		if wait, held = s.r.Hold(b, wait); held {
			return nil
		}
	}
	err := s.ring.readBatch(ctx, b, wait)
	s.ring.read += uint32(len(b.Frames))
	s.r.AfterRead(b, s.ring.read)
	return err
}

// inlineSource does the checks of a Reader without a hold written inline
// in ReadBatch (one atomic store and two loads): the floor for any
// hold-back wrapper.
type inlineSource struct {
	ring  *fakeRing
	done  atomic.Uint32
	holds atomic.Pointer[holdSet]
}

func (s *inlineSource) ReadBatch(ctx context.Context, b *steer.Batch) error {
	s.done.Store(s.ring.read)
	wait := 100 * time.Millisecond
	if hs := s.holds.Load(); hs != nil {
		wait = holdPoll
	}
	err := s.ring.readBatch(ctx, b, wait)
	if n := len(b.Frames); n > 0 {
		s.ring.read += uint32(n)
		if hs := s.holds.Load(); hs != nil {
			b.Frames = nil
		}
	}
	return err
}

// BenchmarkReadBatch measures a read without a hold: through a Reader
// (holdback), with the same checks inline (inline), and the ring's read
// alone (bare).
func BenchmarkReadBatch(b *testing.B) {
	d, err := steer.New(steer.Config{Workers: 1, Dispatch: steer.DispatchDirect}, func(*steer.Packet) {})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close(context.Background())
	h, err := New(d, Options{})
	if err != nil {
		b.Fatal(err)
	}
	ring := &fakeRing{frames: make([]steer.Frame, 64)}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		src  interface {
			ReadBatch(context.Context, *steer.Batch) error
		}
	}{
		{"holdback", &heldSource{ring: ring, r: h.Reader(0)}},
		{"inline", &inlineSource{ring: ring}},
		{"bare", nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			var batch steer.Batch
			b.ReportAllocs()
			if c.src == nil {
				for b.Loop() {
					if err := ring.readBatch(ctx, &batch, time.Second); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			for b.Loop() {
				if err := c.src.ReadBatch(ctx, &batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
