package livesock

import (
	"bytes"
	"testing"

	"github.com/rpsgo/rps/steer"
)

// TestCopyBuf: each frame's Data is its own copy, with no room to grow
// into the next, after the buffer grew while frames were added; a
// released buffer comes back empty, and one batch allocates nothing once
// the pool holds a buffer.
func TestCopyBuf(t *testing.T) {
	var p CopyPool
	p.Init()
	cb := p.Get()
	src := [][]byte{bytes.Repeat([]byte{1}, 3), {}, bytes.Repeat([]byte{2}, 5000), {3}}
	frames := make([]steer.Frame, len(src))
	for _, b := range src {
		cb.Add(b)
	}
	cb.Finish(frames)
	for i := range src {
		src[i] = append([]byte(nil), src[i]...)
	}
	for i, f := range frames {
		if !bytes.Equal(f.Data, src[i]) || cap(f.Data) != len(f.Data) {
			t.Errorf("frame %d: %d bytes (cap %d), want %d", i, len(f.Data), cap(f.Data), len(src[i]))
		}
	}
	cb.Release()
	again := p.Get()
	again.Add([]byte{9})
	one := make([]steer.Frame, 1)
	again.Finish(one)
	if !bytes.Equal(one[0].Data, []byte{9}) {
		t.Errorf("a reused buffer holds %v", one[0].Data)
	}
	p.Put(again)
	if raceEnabled {
		return // the race detector makes sync.Pool drop buffers at random
	}
	if n := testing.AllocsPerRun(100, func() {
		b := p.Get()
		b.Add(src[0])
		b.Finish(frames[:1])
		b.Release()
	}); n != 0 {
		t.Errorf("%v allocations per batch in steady state", n)
	}
}
