package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// countingReader counts the bytes read through it. The reading goroutine
// adds; the progress bar's goroutine loads.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// isTerminal reports whether w is a terminal (a character device), the only
// place a progress bar belongs.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progress redraws one status line on a terminal from a ticker: the reading
// loop never touches it, so it costs nothing per frame.
type progress struct {
	done    chan struct{}
	stopped chan struct{}
}

// startProgress draws in's progress on out every interval, starting after
// delay (so that small inputs stay quiet), until stop is called.
func startProgress(out io.Writer, in *input, interval, delay time.Duration) *progress {
	p := &progress{done: make(chan struct{}), stopped: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(p.stopped)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		drawn := false
		for {
			select {
			case <-p.done:
				if drawn {
					fmt.Fprint(out, "\r\033[K") // erase the bar
				}
				return
			case now := <-tick.C:
				if now.Sub(start) < delay {
					continue
				}
				drawn = true
				frames := in.reader.Stats().Records
				fmt.Fprint(out, "\r"+progressLine(in.count.n.Load(), in.size, frames, now.Sub(start))+"\033[K")
			}
		}
	}()
	return p
}

// stop erases the bar and waits for its goroutine. A nil progress is a no-op.
func (p *progress) stop() {
	if p == nil {
		return
	}
	close(p.done)
	<-p.stopped
}

// progressLine renders the bar: a gauge and a percentage when the size is
// known (a file), the bytes and frames so far in any case.
func progressLine(read, size int64, frames uint64, elapsed time.Duration) string {
	const width = 30
	rate := ""
	if s := elapsed.Seconds(); s > 0 {
		rate = fmt.Sprintf(", %.0f frames/s", float64(frames)/s)
	}
	stats := fmt.Sprintf("%s, %d frames%s", megabytes(read), frames, rate)
	if size <= 0 {
		return "reading: " + stats
	}
	frac := min(max(float64(read)/float64(size), 0), 1)
	n := int(frac * width)
	return fmt.Sprintf("[%s%s] %3.0f%% %s of %s", strings.Repeat("=", n), strings.Repeat(" ", width-n),
		100*frac, stats, megabytes(size))
}

func megabytes(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
