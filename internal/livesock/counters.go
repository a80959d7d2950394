package livesock

import (
	"sync"
	"time"
)

// Counters are a socket's kernel counters as last read: read again at
// every Get until Freeze, which reads them one last time (at Close) and
// keeps them so, for a final report. Its methods are safe for concurrent
// use.
type Counters[T any] struct {
	mu     sync.Mutex
	v      T
	frozen bool
}

// Get has read update the counters (unless they are frozen) and returns
// them, with read's error.
func (c *Counters[T]) Get(read func(*T) error) (T, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	if !c.frozen {
		err = read(&c.v)
	}
	return c.v, err
}

// Freeze has read update the counters one last time and keeps them so.
func (c *Counters[T]) Freeze(read func(*T) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := read(&c.v)
	c.frozen = true
	return err
}

// Deadline bounds one read's wait for frames, however many polls it
// takes: the first Left starts it.
type Deadline struct{ at time.Time }

// Left returns what is left of timeout (a negative timeout, no limit, as
// it is), and false once nothing is.
func (d *Deadline) Left(timeout time.Duration) (time.Duration, bool) {
	if timeout <= 0 {
		return timeout, true
	}
	now := time.Now()
	if d.at.IsZero() {
		d.at = now.Add(timeout)
	}
	left := d.at.Sub(now)
	return left, left > 0
}

// Cap returns wait, or limit when limit is positive and wait is longer
// (a negative wait being no limit at all).
func Cap(wait, limit time.Duration) time.Duration {
	if limit > 0 && (wait < 0 || wait > limit) {
		return limit
	}
	return wait
}
