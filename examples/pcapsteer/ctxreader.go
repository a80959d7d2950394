package main

import (
	"context"
	"io"
	"sync"
)

// ctxReader makes reads end when a context ends, even while the reader
// under it is blocked: a read from a pipe or a terminal that delivers
// nothing cannot be interrupted otherwise (os.Stdin has no deadlines unless
// it was opened non-blocking). A goroutine of its own does the reads into a
// buffer of its own, so a read abandoned when ctx ends never writes into the
// caller's buffer later; that goroutine stays blocked until the reader under
// it delivers or is closed, which for a command about to exit costs nothing.
type ctxReader struct {
	ctx   context.Context
	want  chan int   // a read of up to n bytes, for the goroutine
	got   chan chunk // what that read returned
	busy  bool       // a read was asked for and its chunk not yet taken
	left  []byte     // the rest of the last chunk, not yet returned
	err   error      // the error that came with the last chunk
	close sync.Once
}

type chunk struct {
	b   []byte
	err error
}

func newCtxReader(ctx context.Context, r io.Reader) *ctxReader {
	c := &ctxReader{ctx: ctx, want: make(chan int), got: make(chan chunk, 1)}
	go func() {
		var buf []byte
		for n := range c.want {
			if cap(buf) < n {
				buf = make([]byte, n)
			}
			// buf is reused only after Read has copied out the previous
			// chunk: the next request comes once c.left is empty.
			k, err := r.Read(buf[:n])
			c.got <- chunk{buf[:k], err}
			if err != nil {
				return
			}
		}
	}()
	return c
}

// Read implements io.Reader. It returns ctx's error once ctx has ended.
func (c *ctxReader) Read(p []byte) (int, error) {
	if len(c.left) > 0 {
		n := copy(p, c.left)
		c.left = c.left[n:]
		return n, nil
	}
	if c.err != nil {
		return 0, c.err
	}
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !c.busy {
		c.want <- len(p)
		c.busy = true
	}
	select {
	case ch := <-c.got:
		c.busy = false
		n := copy(p, ch.b)
		c.left, c.err = ch.b[n:], ch.err
		if len(c.left) == 0 && c.err != nil {
			return n, c.err
		}
		return n, nil
	case <-c.ctx.Done():
		return 0, c.ctx.Err()
	}
}

// Close lets the goroutine exit once its current read, if any, returns. It
// does not close the reader under it.
func (c *ctxReader) Close() {
	c.close.Do(func() {
		if !c.busy {
			close(c.want)
		} else {
			// The goroutine is in a read: close want after it delivers,
			// without waiting here.
			go func() {
				<-c.got
				close(c.want)
			}()
		}
	})
}
