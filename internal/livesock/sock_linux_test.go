//go:build linux

package livesock

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var (
	errClosed       = errors.New("test: closed")
	errNotSupported = errors.New("test: not supported")
)

// newSock returns a Sock over one end of a datagram socket pair, and the
// other end, which the test may write to.
func newSock(t *testing.T) (*Sock, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[1]) })
	k := new(Sock)
	k.Init("test", errClosed, errNotSupported)
	k.fd = fds[0]
	if err := k.Arm(unix.POLLIN); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Teardown(nil, false) })
	return k, fds[1]
}

func TestPollReadable(t *testing.T) {
	k, peer := newSock(t)
	rev, err := k.Poll(context.Background(), 10*time.Millisecond)
	if rev != 0 || err != nil {
		t.Fatalf("idle socket: revents %#x, %v; want 0, nil", rev, err)
	}
	if _, err := unix.Write(peer, []byte("x")); err != nil {
		t.Fatal(err)
	}
	rev, err = k.Poll(context.Background(), -1)
	if rev&unix.POLLIN == 0 || err != nil {
		t.Fatalf("readable socket: revents %#x, %v; want POLLIN, nil", rev, err)
	}
}

// TestStopWakesPoll: a Poll returns errClosed as soon as Stop is called
// from another goroutine, and so do Pause and Poll at once afterwards.
func TestStopWakesPoll(t *testing.T) {
	k, _ := newSock(t)
	stopped := make(chan bool)
	time.AfterFunc(20*time.Millisecond, func() { stopped <- k.Stop() })
	start := time.Now()
	if _, err := k.Poll(context.Background(), 5*time.Second); err != errClosed || time.Since(start) > 2*time.Second {
		t.Fatalf("Poll across Stop: %v after %v, want errClosed at once", err, time.Since(start))
	}
	if !<-stopped {
		t.Fatal("the first Stop reported not stopping")
	}
	if !k.Closed() || k.Stop() {
		t.Fatal("Closed false, or a second Stop reported stopping")
	}
	start = time.Now()
	k.Pause(time.Second)
	if _, err := k.Poll(context.Background(), time.Second); err != errClosed || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("Pause and Poll after Stop: %v after %v, want errClosed at once", err, time.Since(start))
	}
	if _, err := k.SyscallConn(); err != errClosed {
		t.Fatalf("SyscallConn after Stop: %v", err)
	}
}

// TestContextWakesPoll: a Poll returns the context's error as soon as it
// ends, and the next Poll with a live context is not woken by it.
func TestContextWakesPoll(t *testing.T) {
	k, _ := newSock(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	if _, err := k.Poll(ctx, 5*time.Second); !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
		t.Fatalf("Poll across cancel: %v after %v, want context.Canceled at once", err, time.Since(start))
	}
	start = time.Now()
	rev, err := k.Poll(context.Background(), 30*time.Millisecond)
	if rev != 0 || err != nil || time.Since(start) < 25*time.Millisecond {
		t.Fatalf("next Poll: revents %#x, %v after %v; want a timeout", rev, err, time.Since(start))
	}
}

// TestStaleContextWake: a context that ended after its Poll returned
// still writes its wake-up; the next Poll, with another context, waits
// out its time all the same.
func TestStaleContextWake(t *testing.T) {
	k, _ := newSock(t)
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := k.Poll(ctx, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	cancel()
	pfd := []unix.PollFd{{Fd: int32(k.ctxFD), Events: unix.POLLIN}}
	if n, err := unix.Poll(pfd, 2000); n != 1 || err != nil {
		t.Fatalf("the ended context's wake-up was not written: %d, %v", n, err)
	}
	start := time.Now()
	rev, err := k.Poll(context.Background(), 30*time.Millisecond)
	if rev != 0 || err != nil || time.Since(start) < 25*time.Millisecond {
		t.Fatalf("Poll after a stale wake-up: revents %#x, %v after %v; want a timeout", rev, err, time.Since(start))
	}
}

// TestSignalDoesNotEndPoll: a signal that interrupts poll(2) (Go's
// runtime sends SIGURG to preempt) does not end Poll's wait.
func TestSignalDoesNotEndPoll(t *testing.T) {
	k, _ := newSock(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pid, tid := unix.Getpid(), unix.Gettid()
	timer := time.AfterFunc(5*time.Millisecond, func() { _ = unix.Tgkill(pid, tid, unix.SIGURG) })
	defer timer.Stop()
	start := time.Now()
	rev, err := k.Poll(context.Background(), 50*time.Millisecond)
	if rev != 0 || err != nil || time.Since(start) < 45*time.Millisecond {
		t.Fatalf("Poll across a signal: revents %#x, %v after %v; want a timeout", rev, err, time.Since(start))
	}
}

// TestTeardownGate: Do, the raw connection's Control and a late context
// callback leave the descriptors alone after Teardown.
func TestTeardownGate(t *testing.T) {
	k, _ := newSock(t)
	rc, err := k.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var seen uintptr
	if err := rc.Control(func(fd uintptr) { seen = fd }); err != nil || int(seen) != k.FD() {
		t.Fatalf("Control: fd %d, %v; want %d", seen, err, k.FD())
	}
	if err := rc.Read(func(uintptr) bool { return true }); !errors.Is(err, errNotSupported) {
		t.Fatalf("Read: %v", err)
	}
	if err := rc.Write(func(uintptr) bool { return true }); !errors.Is(err, errNotSupported) {
		t.Fatalf("Write: %v", err)
	}
	fd := k.FD()
	unmapped := false
	k.Stop()
	k.Teardown(func() { unmapped = true }, false)
	if !unmapped {
		t.Error("Teardown did not run unmap")
	}
	if err := unix.Close(fd); err != unix.EBADF {
		t.Errorf("the socket's descriptor is still open after Teardown (close: %v)", err)
	}
	ran := false
	if err := k.Do(func(int) error { ran = true; return nil }); err != errClosed || ran {
		t.Errorf("Do after Teardown: %v, ran %v", err, ran)
	}
	if err := rc.Control(func(uintptr) { ran = true }); err != errClosed || ran {
		t.Errorf("Control after Teardown: %v, ran %v", err, ran)
	}
	k.wakeCtx() // a context's callback running late: no write to a closed descriptor
}

// TestTeardownKeepFD: with keepFD the socket's descriptor stays open for
// its other owner, and Do still refuses it.
func TestTeardownKeepFD(t *testing.T) {
	k := new(Sock)
	k.Init("test", errClosed, errNotSupported)
	fd, err := k.Socket(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Arm(unix.POLLIN); err != nil {
		t.Fatal(err)
	}
	k.Teardown(nil, true)
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
		t.Fatalf("kept descriptor: %v", err)
	}
	unix.Close(fd)
	if err := k.Do(func(int) error { return nil }); err != errClosed {
		t.Errorf("Do after Teardown: %v", err)
	}
}

// TestSocketError: a UDP socket connected to a loopback port nobody
// listens on gets ECONNREFUSED from the ICMP answer to its datagram; Poll
// reports POLLERR and SocketError the error, once.
func TestSocketError(t *testing.T) {
	k := new(Sock)
	k.Init("test", errClosed, errNotSupported)
	t.Cleanup(func() { k.Teardown(nil, false) })
	fd, err := k.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Arm(unix.POLLIN | unix.POLLERR); err != nil {
		t.Fatal(err)
	}
	if err := k.SocketError(); err != nil {
		t.Fatalf("a fresh socket: %v", err)
	}
	// A port that was free a moment ago: bound, read back, closed.
	tmp, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	lo := [4]byte{127, 0, 0, 1}
	if err := unix.Bind(tmp, &unix.SockaddrInet4{Addr: lo}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(tmp)
	unix.Close(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: lo, Port: sa.(*unix.SockaddrInet4).Port}); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(fd, []byte("x")); err != nil {
		t.Fatal(err)
	}
	rev, err := k.Poll(context.Background(), time.Second)
	if err != nil || rev&unix.POLLERR == 0 {
		t.Fatalf("Poll: revents %#x, %v; want POLLERR", rev, err)
	}
	err = k.SocketError()
	if !errors.Is(err, unix.ECONNREFUSED) || !strings.HasPrefix(err.Error(), "test: socket error: ") {
		t.Fatalf("SocketError: %v; want test: socket error: ECONNREFUSED", err)
	}
	if err := k.SocketError(); err != nil {
		t.Fatalf("SocketError read twice: %v", err)
	}
}

// TestPollAllocs: a reader that polls again and again with the same
// cancellable context allocates nothing: the context's registration is
// made once and kept, not made and stopped on every Poll (which cost an
// allocation a poll, so a few a frame for an AF_XDP reader woken for every
// few frames). A context of its own (a new Done channel) replaces it, and
// a value context derived from it reuses it.
func TestPollAllocs(t *testing.T) {
	k, peer := newSock(t)
	if _, err := unix.Write(peer, []byte("x")); err != nil { // readable: Poll returns at once
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type key struct{}
	vctx := context.WithValue(ctx, key{}, 1)
	poll := func(c context.Context) {
		if rev, err := k.Poll(c, time.Second); rev == 0 || err != nil {
			t.Fatal(rev, err)
		}
		if err := k.Nap(c, 0); err != nil {
			t.Fatal(err)
		}
	}
	poll(ctx)
	first := k.watchDone
	if allocs := testing.AllocsPerRun(1000, func() { poll(ctx); poll(vctx) }); allocs != 0 && !raceEnabled {
		t.Errorf("Poll and Nap with the same context: %v allocations a round, want 0", allocs)
	}
	if k.watchDone != first || first != ctx.Done() {
		t.Fatal("the registration changed while the same context was passed")
	}
	ctx2, cancel2 := context.WithCancel(ctx)
	defer cancel2()
	poll(ctx2)
	if k.watchDone != ctx2.Done() {
		t.Fatal("a new context did not replace the registration")
	}
	// The first context's end no longer concerns this reader...
	cancel()
	// ...but it ends ctx2 as well, whose registration wakes a Nap at once.
	start := time.Now()
	if err := k.Nap(ctx2, 5*time.Second); !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
		t.Fatalf("Nap across the end of its context: %v after %v", err, time.Since(start))
	}
	k.Stop()
	k.Teardown(nil, false)
	if k.watchStop != nil || k.watchDone != nil {
		t.Error("Teardown left the context registration")
	}
}

// TestNapWakes: a Nap lasts its time, to well under a millisecond, and
// ends at once on Stop or the end of its context, the context registered
// by an earlier Poll included; it ignores a readable socket.
func TestNapWakes(t *testing.T) {
	k, peer := newSock(t)
	if _, err := unix.Write(peer, []byte("x")); err != nil {
		t.Fatal(err)
	}
	const d = 300 * time.Microsecond
	best := time.Hour
	for range 20 {
		start := time.Now()
		if err := k.Nap(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		best = min(best, time.Since(start))
	}
	// The timer slack (50 µs for a normal thread) and a loaded machine's
	// scheduling make it late, never early; poll(2)'s millisecond would
	// make it a millisecond at least.
	if best < d || best >= time.Millisecond {
		t.Errorf("Nap(%v) with a readable socket: the quickest of 20 took %v", d, best)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := k.Poll(ctx, time.Millisecond); err != nil { // registers ctx
		t.Fatal(err)
	}
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	if err := k.Nap(ctx, 5*time.Second); !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
		t.Fatalf("Nap across cancel: %v after %v, want context.Canceled at once", err, time.Since(start))
	}
	if err := k.Nap(ctx, time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Nap with an ended context: %v", err)
	}
	stopped := make(chan bool)
	time.AfterFunc(20*time.Millisecond, func() { stopped <- k.Stop() })
	start = time.Now()
	if err := k.Nap(context.Background(), 5*time.Second); err != errClosed || time.Since(start) > 2*time.Second {
		t.Fatalf("Nap across Stop: %v after %v, want errClosed at once", err, time.Since(start))
	}
	<-stopped
}
