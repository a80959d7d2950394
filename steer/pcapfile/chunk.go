package pcapfile

import (
	"errors"
	"io"
	"sync/atomic"
)

// The reader reads the file in chunks, large buffers that records are
// parsed in, in place: a frame is a view into its chunk, and a chunk is
// reused once no batch has a frame in it any more, as an AF_PACKET ring
// block goes back to the kernel once its frames are done with.
//
// A chunk counts its references: one held by the reader while it reads
// into the chunk, and one per batch that has a frame in it. A batch's
// Release drops its references, and the last one gives the chunk back to
// the reader's free list (which keeps a few; more go to the garbage
// collector). The reader never waits for a chunk: when the free list is
// empty it allocates one, so the chunks in use are bounded by the batches
// the consumer holds, plus the reader's.
//
// When the next record does not fit in the rest of a chunk, the bytes of
// it already read (the tail) are copied to the start of a fresh chunk and
// reading goes on there; a record larger than a chunk gets a chunk of its
// own size.

const (
	// chunkSize is the size of a chunk, and so of most reads. Smaller
	// chunks stay in the cache between the read that fills them and the
	// parse (BenchmarkReadFile: 256 KiB reads take 12-13 ns a frame, 1 MiB
	// 19-21); larger ones cost more read calls.
	chunkSize = 256 << 10
	// firstChunkSize is the size of a reader's first chunk, so that a small
	// file costs no more than it holds.
	firstChunkSize = 64 << 10
	// chunkReserve is the room left free at the start of a chunk: a
	// record's bytes always have at least this much before them in their
	// chunk, for the Ethernet header a link-type rewrite writes there.
	chunkReserve = 64
	// maxFreeChunks bounds the chunks kept for reuse.
	maxFreeChunks = 4
	// maxFreeBatches bounds the batch handles kept for reuse.
	maxFreeBatches = 1024
)

type chunk struct {
	buf  []byte
	refs atomic.Int32
}

// batchRef is a delivered batch's hold on the chunks its frames are in.
// Its release is the batch's Release.
type batchRef struct {
	r       *Reader
	chunks  []*chunk
	inUse   atomic.Bool
	release func()
}

// hold adds the current chunk to the batch, once.
func (bt *batchRef) hold(c *chunk) {
	if n := len(bt.chunks); n == 0 || bt.chunks[n-1] != c {
		c.refs.Add(1)
		bt.chunks = append(bt.chunks, c)
	}
}

func (r *Reader) getBatch() *batchRef {
	r.mu.Lock()
	bt := pop(&r.freeBatches)
	r.mu.Unlock()
	if bt == nil {
		bt = &batchRef{r: r, chunks: make([]*chunk, 0, 4)}
		bt.release = bt.put
	}
	bt.inUse.Store(true)
	return bt
}

// put drops the batch's references and keeps the handle for reuse.
// Releasing a batch twice would let two batches share a chunk, so it
// panics, as a negative sync.WaitGroup counter does.
func (bt *batchRef) put() {
	if !bt.inUse.CompareAndSwap(true, false) {
		panic("pcapfile: batch released twice")
	}
	r := bt.r
	r.mu.Lock()
	for i, c := range bt.chunks {
		if c.refs.Add(-1) == 0 {
			r.freeChunkLocked(c)
		}
		bt.chunks[i] = nil
	}
	bt.chunks = bt.chunks[:0]
	if len(r.freeBatches) < maxFreeBatches {
		r.freeBatches = append(r.freeBatches, bt)
	}
	r.mu.Unlock()
}

// freeChunkLocked keeps a chunk no one references for reuse, if it is of
// the usual size and the free list has room. r.mu is held.
func (r *Reader) freeChunkLocked(c *chunk) {
	if len(c.buf) == r.chunkSize && len(r.freeChunks) < maxFreeChunks {
		r.freeChunks = append(r.freeChunks, c)
	}
}

// getChunk returns a chunk of at least n bytes, with the reader's
// reference.
func (r *Reader) getChunk(n int) *chunk {
	var c *chunk
	if n <= r.chunkSize {
		r.mu.Lock()
		c = pop(&r.freeChunks)
		r.mu.Unlock()
	}
	if c == nil {
		c = &chunk{buf: make([]byte, max(n, r.chunkSize))}
	}
	c.refs.Store(1)
	return c
}

// pop takes the last element of a free list, or nil when it is empty.
func pop[T any](list *[]*T) *T {
	n := len(*list)
	if n == 0 {
		return nil
	}
	x := (*list)[n-1]
	(*list)[n-1] = nil
	*list = (*list)[:n-1]
	return x
}

// dropChunk drops the reader's reference to a chunk it leaves.
func (r *Reader) dropChunk(c *chunk) {
	if c.refs.Add(-1) == 0 {
		r.mu.Lock()
		r.freeChunkLocked(c)
		r.mu.Unlock()
	}
}

// avail returns the bytes read and not yet consumed.
func (r *Reader) avail() int { return r.end - r.pos }

// fill makes at least n bytes available at r.pos, contiguous in the
// current chunk, reading as needed. It returns an error only when the
// input ends (io.EOF, whatever the bytes available) or fails before
// them. A view into the chunk taken before a call to fill may no longer be
// the reader's bytes after it: callers take views after the fill that
// covers them, and hold a batch's reference before filling again.
func (r *Reader) fill(n int) error {
	if r.end-r.pos >= n {
		return nil
	}
	return r.fillSlow(n)
}

// maxEmptyReads is how many reads in a row may return no byte and no
// error before the reader gives up, as bufio does.
const maxEmptyReads = 100

func (r *Reader) fillSlow(n int) error {
	for empty := 0; r.end-r.pos < n; {
		if r.rerr != nil {
			return r.rerr
		}
		// Move to a fresh chunk when the record would not fit in this one,
		// or when so little room is left that reads would be small.
		if len(r.cur.buf)-r.pos < n || len(r.cur.buf)-r.end < len(r.cur.buf)/16 {
			r.moveTail(n)
		}
		m, err := r.src.Read(r.cur.buf[r.end:])
		r.end += m
		switch {
		case err != nil:
			r.rerr = err
		case m == 0:
			if empty++; empty == maxEmptyReads {
				r.rerr = io.ErrNoProgress
			}
		default:
			empty = 0
		}
	}
	return nil
}

// moveTail moves the bytes read and not consumed to the start of a chunk
// with room for n bytes after its reserve: the current chunk when no batch
// holds it and it is of full size, a fresh one otherwise.
func (r *Reader) moveTail(n int) {
	c := r.cur
	if c.refs.Load() != 1 || len(c.buf) < r.chunkSize || len(c.buf) < chunkReserve+n {
		c = r.getChunk(chunkReserve + n)
	}
	m := copy(c.buf[chunkReserve:], r.cur.buf[r.pos:r.end])
	if c != r.cur {
		r.dropChunk(r.cur)
		r.cur = c
	}
	r.pos, r.end = chunkReserve, chunkReserve+m
}

// take consumes the next n bytes and returns them, a view into the chunk
// valid until the next fill. At the end of the input it returns io.EOF
// (unwrapped) when no byte of them was there, and otherwise the error
// readErr makes of the short read, naming what.
func (r *Reader) take(n int, what string) ([]byte, error) {
	if err := r.fill(n); err != nil {
		if r.avail() == 0 && errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, r.readErr(err, what)
	}
	b := r.cur.buf[r.pos : r.pos+n : r.pos+n]
	r.pos += n
	return b, nil
}

// skip discards n bytes inside a record or block, reading through as many
// chunks as they span.
func (r *Reader) skip(n int, what string) error {
	for n > 0 {
		if a := r.avail(); a >= n {
			r.pos += n
			return nil
		} else {
			r.pos = r.end
			n -= a
		}
		if err := r.fill(min(n, r.chunkSize-chunkReserve)); err != nil && r.avail() == 0 {
			return r.readErr(err, what)
		}
	}
	return nil
}
