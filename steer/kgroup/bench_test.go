package kgroup_test

import (
	"context"
	"testing"
	"time"

	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/kgroup"
)

// ringSocket stands for a socket: each read hands out the same 64 frames,
// as cheaply as a read can.
type ringSocket struct {
	fakeSocket
	frames []steer.Frame
	pos    uint32
}

//go:noinline
func (s *ringSocket) Read(ctx context.Context, b *steer.Batch, limit time.Duration) (uint32, error) {
	b.Frames, b.Release = s.frames, nil
	s.pos += uint32(len(s.frames))
	return s.pos, ctx.Err()
}

// BenchmarkReadBatch measures a worker's read without a table change in
// progress: through the Steering's source (steering: the hold-back checks
// and one more interface call), and the socket's read alone (socket). The
// difference is what the group costs a batch of 64 frames.
func BenchmarkReadBatch(b *testing.B) {
	var handled []steer.Frame
	d := newDispatcher(b, 1, steer.DispatchDirect, &handled)
	k := newFakeKernel(b, 0)
	ring := &ringSocket{frames: make([]steer.Frame, 64)}
	socks := []kgroup.Socket{ring}
	st, err := kgroup.New(d, kernelOf{k, socks}, kgroup.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	src := st.Sources()[0]
	for _, c := range []struct {
		name string
		read func(*steer.Batch) error
	}{
		{"steering", func(bt *steer.Batch) error { return src.ReadBatch(ctx, bt) }},
		{"socket", func(bt *steer.Batch) error { _, err := ring.Read(ctx, bt, 0); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			var batch steer.Batch
			b.ReportAllocs()
			for b.Loop() {
				if err := c.read(&batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/64, "ns/frame")
		})
	}
}

// kernelOf is a fake kernel with other sockets.
type kernelOf struct {
	*fakeKernel
	socks []kgroup.Socket
}

func (k kernelOf) Sockets() []kgroup.Socket { return k.socks }
