package livesock

import (
	"sync"

	"github.com/rpsgo/rps/steer"
)

// CopyPool is a pool of CopyBufs. It is used in place (the buffers'
// Release functions point at it), after Init.
type CopyPool struct{ pool sync.Pool }

// CopyBuf holds the copied frames of one batch.
type CopyBuf struct {
	buf  []byte
	offs []int
	// Release puts the buffer back in its pool: a batch's Release, bound
	// once when the buffer is made.
	Release func()
}

// Init readies the pool.
func (p *CopyPool) Init() {
	p.pool.New = func() any {
		cb := &CopyBuf{}
		cb.Release = func() { p.pool.Put(cb) }
		return cb
	}
}

// Get returns an empty buffer. It is small enough to be inlined into a
// source's read path.
func (p *CopyPool) Get() *CopyBuf {
	cb := p.pool.Get().(*CopyBuf)
	cb.buf = cb.buf[:0]
	cb.offs = cb.offs[:0]
	return cb
}

// Put returns a buffer that was not handed out with a batch.
func (p *CopyPool) Put(cb *CopyBuf) { p.pool.Put(cb) }

// Add copies the bytes of the next frame.
func (cb *CopyBuf) Add(p []byte) {
	cb.offs = append(cb.offs, len(cb.buf))
	cb.buf = append(cb.buf, p...)
}

// Finish points the frames' Data at the copies, frame i at the bytes of
// the i-th Add (after the last Add, so growing the buffer cannot leave
// stale views).
func (cb *CopyBuf) Finish(frames []steer.Frame) {
	for i := range frames {
		lo := cb.offs[i]
		hi := len(cb.buf)
		if i+1 < len(cb.offs) {
			hi = cb.offs[i+1]
		}
		frames[i].Data = cb.buf[lo:hi:hi]
	}
}
