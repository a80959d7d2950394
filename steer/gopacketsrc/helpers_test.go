package gopacketsrc_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/gopacket"

	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/gopacketsrc"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// pkt is one read a scripted packet source answers: a packet, or an error.
type pkt struct {
	data []byte
	ci   gopacket.CaptureInfo
	err  error
	// before runs in the read, before it answers (to cancel a context or
	// close the source while a batch is being read).
	before func()
}

// script is a zero-copy packet source that answers its reads from a list,
// then io.EOF. Like a real one, it reuses one buffer, and it overwrites
// that buffer at every read, so that a frame still pointing into it after
// the next read is caught.
type script struct {
	pkts  []pkt
	pos   int
	buf   []byte
	reads int
}

func (s *script) ZeroCopyReadPacketData() ([]byte, gopacket.CaptureInfo, error) {
	s.reads++
	for i := range s.buf {
		s.buf[i] = 0xee
	}
	if s.pos >= len(s.pkts) {
		return nil, gopacket.CaptureInfo{}, io.EOF
	}
	p := s.pkts[s.pos]
	s.pos++
	if p.before != nil {
		p.before()
	}
	if p.err != nil {
		return nil, gopacket.CaptureInfo{}, p.err
	}
	s.buf = append(s.buf[:0], p.data...)
	return s.buf[:len(p.data):len(p.data)], p.ci, nil
}

// plain is a PacketDataSource without the zero-copy read: each packet is a
// fresh slice.
type plain struct{ s *script }

func (p plain) ReadPacketData() ([]byte, gopacket.CaptureInfo, error) {
	d, ci, err := p.s.ZeroCopyReadPacketData()
	return append([]byte(nil), d...), ci, err
}

// numbered returns a packet of n bytes (n >= 8) that carries its number i
// and a pattern derived from it, which check verifies.
func numbered(i, n int) []byte {
	b := make([]byte, n)
	binary.BigEndian.PutUint64(b, uint64(i))
	for j := 8; j < n; j++ {
		b[j] = byte(i*7 + j)
	}
	return b
}

// checkNumbered reports what is wrong with a frame that should be
// numbered(i, len).
func checkNumbered(data []byte, i int) error {
	if len(data) < 8 {
		return fmt.Errorf("frame %d: %d bytes", i, len(data))
	}
	if got := int(binary.BigEndian.Uint64(data)); got != i {
		return fmt.Errorf("frame %d: carries number %d", i, got)
	}
	for j := 8; j < len(data); j++ {
		if data[j] != byte(i*7+j) {
			return fmt.Errorf("frame %d: byte %d is %#x, want %#x", i, j, data[j], byte(i*7+j))
		}
	}
	return nil
}

// newSource makes a Source over s, failing the test on error.
func newSource(t testing.TB, s *script, opt ...gopacketsrc.Option) *gopacketsrc.Source {
	t.Helper()
	src, err := gopacketsrc.NewZeroCopy(s, pcapfile.LinkTypeEthernet, opt...)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// readAll reads src to its end (or its first error), releasing each batch
// at once, and returns copies of the frames and the batch sizes.
func readAll(t testing.TB, src steer.Source) (frames []steer.Frame, sizes []int, err error) {
	t.Helper()
	var b steer.Batch
	for range 1 << 20 {
		err = src.ReadBatch(context.Background(), &b)
		if err != nil {
			if len(b.Frames) != 0 || b.Release != nil {
				t.Errorf("ReadBatch returned %v with %d frames and a release %v", err, len(b.Frames), b.Release != nil)
			}
			return frames, sizes, err
		}
		if (len(b.Frames) > 0) != (b.Release != nil) {
			t.Fatalf("a batch of %d frames with release %v", len(b.Frames), b.Release != nil)
		}
		for _, f := range b.Frames {
			f.Data = append([]byte(nil), f.Data...)
			frames = append(frames, f)
		}
		sizes = append(sizes, len(b.Frames))
		if b.Release != nil {
			b.Release()
		}
	}
	t.Fatal("the source never ended")
	return
}

// releaseCounter wraps a source and checks that each batch is released
// exactly once.
type releaseCounter struct {
	steer.Source
	batches, released, twice atomic.Int64
}

func (r *releaseCounter) ReadBatch(ctx context.Context, b *steer.Batch) error {
	err := r.Source.ReadBatch(ctx, b)
	if rel := b.Release; rel != nil {
		r.batches.Add(1)
		var done atomic.Bool
		b.Release = func() {
			if done.Swap(true) {
				r.twice.Add(1)
				return
			}
			r.released.Add(1)
			rel()
		}
	}
	return err
}

// ci is a CaptureInfo for a packet of n captured bytes at second sec.
func ci(sec int64, n int) gopacket.CaptureInfo {
	return gopacket.CaptureInfo{Timestamp: time.Unix(sec, 0), CaptureLength: n, Length: n}
}
