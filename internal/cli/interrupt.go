package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// ErrInterrupted is wrapped by the error of a command stopped by a signal
// before its input ended (exit status 1): what it printed covers the input
// read until then.
var ErrInterrupted = errors.New("interrupted")

// NotifyContext returns a copy of parent that ends at the first SIGINT
// (Ctrl-C) or SIGTERM, and a function that ends it and stops listening. By
// the time the context has ended on a signal, the signals' default handling
// is back, so that a second one ends the program at once, as it would a
// command stuck in its final report.
func NotifyContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-sig:
		case <-ctx.Done():
		}
		signal.Stop(sig)
		cancel()
	}()
	return ctx, cancel
}

// Open opens the file a command reads, as its command line names it: "-"
// is standard input. A regular file is read as it is. Reads of anything
// else (a pipe, a FIFO, a terminal) end with ctx's error once ctx has
// ended, even while nothing arrives, so that the first Ctrl-C stops a
// command reading a stalled pipe; what was read before is still returned
// first. A goroutine of its own reads ahead into two buffers of its own,
// and once ctx has ended it stays blocked in its read until the read
// returns or Close closes the file (a command about to exit loses nothing
// by it). Close never closes standard input.
func Open(ctx context.Context, name string) (io.ReadCloser, error) {
	f, closeFile := os.Stdin, func() error { return nil }
	if name != "-" {
		var err error
		if f, err = os.Open(name); err != nil {
			return nil, err // names the file already
		}
		closeFile = f.Close
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		return readCloser{f, closeFile}, nil
	}
	return newCtxReader(ctx, f, closeFile), nil
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

// ctxReaderChunk is the size of each of a ctxReader's two buffers.
const ctxReaderChunk = 64 << 10

// ctxReader reads r in a goroutine of its own, so that a Read can give up
// when ctx ends. Two buffers go round between the goroutine (free: to fill)
// and Read (full: to copy out), so neither ever waits on the other's
// channel for room.
type ctxReader struct {
	ctx   context.Context
	free  chan []byte
	full  chan ctxChunk
	buf   []byte // the buffer rest is from, returned once empty
	rest  []byte // what is left of the last chunk
	err   error  // the error after rest, sticky
	close func() error
}

type ctxChunk struct {
	b   []byte
	err error
}

func newCtxReader(ctx context.Context, r io.Reader, closeFile func() error) *ctxReader {
	c := &ctxReader{ctx: ctx, free: make(chan []byte, 2), full: make(chan ctxChunk, 2), close: closeFile}
	c.free <- make([]byte, ctxReaderChunk)
	c.free <- make([]byte, ctxReaderChunk)
	go func() {
		for b := range c.free {
			n, err := r.Read(b[:cap(b)])
			c.full <- ctxChunk{b[:n], err}
			if err != nil {
				return
			}
		}
	}()
	return c
}

// Read implements io.Reader. Once ctx has ended, it still returns what was
// read ahead before, then ctx's error where it would wait.
func (c *ctxReader) Read(p []byte) (int, error) {
	for len(c.rest) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		if c.buf != nil {
			c.free <- c.buf // room for it: only two buffers exist
			c.buf = nil
		}
		var ch ctxChunk
		select {
		case ch = <-c.full:
		default:
			select {
			case <-c.ctx.Done():
				return 0, c.ctx.Err()
			case ch = <-c.full:
			}
		}
		c.buf, c.rest, c.err = ch.b, ch.b, ch.err
	}
	n := copy(p, c.rest)
	c.rest = c.rest[n:]
	return n, nil
}

// Close closes the file (a read blocked in it then returns, for a pipe or
// a FIFO Open opened; never for standard input).
func (c *ctxReader) Close() error { return c.close() }
