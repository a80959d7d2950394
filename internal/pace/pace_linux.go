//go:build linux

package pace

import (
	"fmt"
	"math/rand/v2"
	"net"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Send sends s's frames through an AF_PACKET socket on s.Dev in the
// caller's network namespace (a goroutine that changed namespace keeps
// its OS thread locked), past the qdisc, paced as the package
// documentation says: between due times it sleeps while the next group
// is more than 20 µs away, else it spins. It returns the frames sent and
// the time from the first call to the last; a full device queue (ENOBUFS,
// EAGAIN) is tried again, any other error ends the sending.
func Send(s Spec) (sent int, elapsed time.Duration, err error) {
	if err := s.Check(); err != nil {
		return 0, 0, err
	}
	ifi, err := net.InterfaceByName(s.Dev)
	if err != nil {
		return 0, 0, fmt.Errorf("pace: %w", err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, 0, fmt.Errorf("pace: socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifi.Index}); err != nil {
		return 0, 0, fmt.Errorf("pace: bind: %w", err)
	}
	// Straight to the driver: no qdisc in the way.
	_ = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1)
	bufs := make([][]byte, Batch)
	iovs := make([]unix.Iovec, Batch)
	msgs := make([]unix.Mmsghdr, Batch)
	for i := range bufs {
		bufs[i] = Frame(s)
		iovs[i].Base = &bufs[i][0]
		iovs[i].SetLen(len(bufs[i]))
		msgs[i].Hdr.Iov = &iovs[i]
		msgs[i].Hdr.SetIovlen(1)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	start := time.Now()
	for sent < s.Frames {
		due := s.due(time.Since(start))
		if due <= sent {
			if wait := s.next(sent) - time.Since(start); wait > 20*time.Microsecond {
				time.Sleep(wait)
			}
			continue
		}
		k := min(due-sent, Batch)
		for i := 0; i < k; i++ {
			Randomize(bufs[i], rng)
		}
		if s.Stamp {
			now := time.Now()
			for i := 0; i < k; i++ {
				stamp(bufs[i], now)
			}
		}
		m, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), uintptr(k), 0, 0, 0)
		switch {
		case errno == unix.EAGAIN || errno == unix.ENOBUFS || errno == unix.EINTR:
			continue
		case errno != 0:
			return sent, time.Since(start), fmt.Errorf("pace: sendmmsg: %w", errno)
		}
		sent += int(m)
	}
	return sent, time.Since(start), nil
}
