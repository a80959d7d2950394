//go:build linux

package livesock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Sock is a source's socket descriptor, gated against Close, with the poll
// set its reader waits in. It is used in place (a field of the source);
// Init must be called before anything else.
type Sock struct {
	closed atomic.Bool // Stop was called

	mu      sync.RWMutex // read: a descriptor in use; write: Teardown
	gone    bool         // Teardown ran
	fd      int          // the socket
	closeFD int          // eventfd written by Stop
	ctxFD   int          // eventfd written when a Poll's context ends
	pfds    [3]unix.PollFd

	// The context whose end writes ctxFD, by its Done channel, and the
	// stop function of that registration (context.AfterFunc). The reader
	// registers once and keeps the registration while it passes contexts
	// with the same Done channel (the same context, or values derived from
	// it without a cancel of their own), so that a Poll allocates nothing;
	// Teardown stops it. Reader-only, then Teardown's.
	watchDone <-chan struct{}
	watchStop func() bool

	pkg             string // the user's package, for error messages
	errClosed       error
	errNotSupported error
}

// Init prepares k: pkg prefixes its error messages, errClosed is what it
// returns once stopped or torn down, and errNotSupported what the raw
// connection's Read and Write wrap.
func (k *Sock) Init(pkg string, errClosed, errNotSupported error) {
	k.fd, k.closeFD, k.ctxFD = -1, -1, -1
	k.pkg, k.errClosed, k.errNotSupported = pkg, errClosed, errNotSupported
}

// Socket creates the socket (socket(2), close-on-exec) and keeps its
// descriptor, which Teardown closes.
func (k *Sock) Socket(domain, typ, proto int) (int, error) {
	fd, err := unix.Socket(domain, typ|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return -1, err
	}
	k.fd = fd
	return fd, nil
}

// FD returns the socket's descriptor, for the code that sets the socket up
// and for the reader, whom Teardown never runs under; any other goroutine
// uses Do.
func (k *Sock) FD() int { return k.fd }

// Arm creates the two eventfds and the poll set: the socket with events,
// then the eventfds of Stop and of a context's end.
func (k *Sock) Arm(events int16) error {
	var err error
	if k.closeFD, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	if k.ctxFD, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	k.pfds = [3]unix.PollFd{
		{Fd: int32(k.fd), Events: events},
		{Fd: int32(k.closeFD), Events: unix.POLLIN},
		{Fd: int32(k.ctxFD), Events: unix.POLLIN},
	}
	return nil
}

// Closed reports whether Stop was called.
func (k *Sock) Closed() bool { return k.closed.Load() }

// Stop marks the socket closed and wakes a reader waiting in Poll or
// Pause. It reports whether this call stopped it (false from the second
// call on). The descriptors stay open until Teardown.
func (k *Sock) Stop() bool {
	if !k.closed.CompareAndSwap(false, true) {
		return false
	}
	if k.closeFD >= 0 {
		one := [8]byte{1}
		_, _ = unix.Write(k.closeFD, one[:])
	}
	return true
}

// Poll waits until the socket has one of the events Arm named, Stop is
// called or ctx ends, or wait passes (zero or negative: no limit). It
// returns the socket's revents (zero when the wait passed), errClosed once
// stopped, ctx's error once it ended, and an error only when poll(2)
// itself fails. A signal that interrupts poll(2), or the late wake-up of a
// context that ended earlier (see unwatch), does not end the wait: Poll
// waits out the rest. It is for the reader alone.
func (k *Sock) Poll(ctx context.Context, wait time.Duration) (int16, error) {
	if err := k.watch(ctx); err != nil {
		return 0, err
	}
	timeout := -1
	var deadline time.Time
	if wait > 0 {
		timeout = pollMillis(wait)
		deadline = time.Now().Add(wait)
	}
	for {
		k.pfds[0].Revents, k.pfds[1].Revents, k.pfds[2].Revents = 0, 0, 0
		n, err := unix.Poll(k.pfds[:], timeout)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return 0, fmt.Errorf("%s: poll: %w", k.pkg, err)
		}
		if err := k.woken(ctx, k.pfds[2].Revents); err != nil {
			return 0, err
		}
		if rev := k.pfds[0].Revents; rev != 0 {
			return rev, nil
		}
		if err == nil && n == 0 {
			return 0, nil // the wait passed
		}
		if wait > 0 {
			left := time.Until(deadline)
			if left <= 0 {
				return 0, nil
			}
			timeout = pollMillis(left)
		}
	}
}

// pollMillis is d in poll(2)'s milliseconds, rounded up so that a wait is
// never cut short.
func pollMillis(d time.Duration) int {
	return int((d + time.Millisecond - 1) / time.Millisecond)
}

// Nap waits d, to the nanosecond as the kernel's timer slack allows
// (ppoll(2)), or until Stop is called or ctx ends, without watching the
// socket: a reader's wait for more frames in a ring that already has some.
// A signal, or a late context wake-up (see unwatch), may end it early. It
// returns errClosed once stopped and ctx's error once it ended, else
// nil. It is for the reader alone.
func (k *Sock) Nap(ctx context.Context, d time.Duration) error {
	if err := k.watch(ctx); err != nil {
		return err
	}
	ts := unix.NsecToTimespec(max(int64(d), 0))
	k.pfds[1].Revents, k.pfds[2].Revents = 0, 0
	if _, err := unix.Ppoll(k.pfds[1:3], &ts, nil); err != nil && !errors.Is(err, unix.EINTR) {
		return fmt.Errorf("%s: ppoll: %w", k.pkg, err)
	}
	return k.woken(ctx, k.pfds[2].Revents)
}

// watch makes sure that ctx's end wakes the poll set (writes ctxFD), and
// returns errClosed once stopped and ctx's error once it ended. A
// registration is made once per context and kept while the reader passes
// the same one (see watchDone), so that the steady state allocates
// nothing; a context that cannot end needs none.
func (k *Sock) watch(ctx context.Context) error {
	if k.closed.Load() {
		return k.errClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	done := ctx.Done()
	if done == nil || done == k.watchDone {
		return nil
	}
	k.unwatch()
	k.watchDone = done
	k.watchStop = context.AfterFunc(ctx, k.wakeCtx)
	return nil
}

// unwatch drops the context registration, if any. A callback that already
// ran (or runs now) may leave one count in ctxFD: one spurious wake-up,
// which woken consumes.
func (k *Sock) unwatch() {
	if k.watchStop != nil {
		k.watchStop()
	}
	k.watchDone, k.watchStop = nil, nil
}

// woken is the end of a wait in the poll set: it consumes a context's
// wake-up (ctxRevents: the ctxFD entry's revents) and returns errClosed
// once stopped and ctx's error once it ended.
func (k *Sock) woken(ctx context.Context, ctxRevents int16) error {
	if k.closed.Load() {
		return k.errClosed
	}
	if ctxRevents != 0 {
		var buf [8]byte
		_, _ = unix.Read(k.ctxFD, buf[:])
	}
	return ctx.Err()
}

// wakeCtx interrupts Poll when its context ends. It may run late, from
// the context's goroutine, so it checks the descriptor is still ours.
func (k *Sock) wakeCtx() {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if !k.gone && k.ctxFD >= 0 {
		one := [8]byte{1}
		_, _ = unix.Write(k.ctxFD, one[:])
	}
}

// Pause waits d (rounded up to a millisecond) or until Stop, whichever
// comes first: a reader's back-off when the socket says readable and its
// ring has nothing. It is for the reader alone.
func (k *Sock) Pause(d time.Duration) {
	k.pfds[1].Revents = 0
	_, _ = unix.Poll(k.pfds[1:2], pollMillis(d))
}

// SocketError returns the socket's pending error (SO_ERROR, which the read
// clears) wrapped with the package's name, or nil when there is none or it
// cannot be read. It is for the reader alone.
func (k *Sock) SocketError() error {
	serr, err := unix.GetsockoptInt(k.fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err != nil || serr == 0 {
		return nil
	}
	return fmt.Errorf("%s: socket error: %w", k.pkg, unix.Errno(serr))
}

// Do runs f with the socket's descriptor, under the read lock, unless
// Teardown ran (then it returns errClosed). f must not call Teardown.
func (k *Sock) Do(f func(fd int) error) error {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.gone || k.fd < 0 {
		return k.errClosed
	}
	return f(k.fd)
}

// Teardown waits for every Do to end, runs unmap (when not nil) and
// closes the descriptors: the socket's unless keepFD (another owner closes
// it), and the eventfds; it drops the reader's context registration.
// Afterwards Do returns errClosed. The caller runs it once, when the
// reader has left.
func (k *Sock) Teardown(unmap func(), keepFD bool) {
	k.unwatch()
	k.mu.Lock()
	defer k.mu.Unlock()
	if unmap != nil {
		unmap()
	}
	if keepFD {
		k.fd = -1
	}
	for _, fd := range []*int{&k.fd, &k.closeFD, &k.ctxFD} {
		if *fd >= 0 {
			_ = unix.Close(*fd)
			*fd = -1
		}
	}
	k.gone = true
}

// SyscallConn returns a raw connection to the socket whose Control runs
// under Do, and whose Read and Write are not supported; errClosed once
// stopped.
func (k *Sock) SyscallConn() (syscall.RawConn, error) {
	if k.closed.Load() {
		return nil, k.errClosed
	}
	return rawConn{k}, nil
}

type rawConn struct{ k *Sock }

func (c rawConn) Control(f func(fd uintptr)) error {
	return c.k.Do(func(fd int) error { f(uintptr(fd)); return nil })
}

func (c rawConn) Read(func(fd uintptr) bool) error {
	return fmt.Errorf("%s: raw read: %w", c.k.pkg, c.k.errNotSupported)
}

func (c rawConn) Write(func(fd uintptr) bool) error {
	return fmt.Errorf("%s: raw write: %w", c.k.pkg, c.k.errNotSupported)
}
