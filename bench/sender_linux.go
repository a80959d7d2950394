//go:build linux

package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// senderEnv, set in the environment, makes the bench binary the live
// experiment's sender instead (see senderMain): a process of its own that
// the harness starts in the sending namespace, pinned to a CPU.
const senderEnv = "RPSBENCH_SENDER"

// sendSpec is what the sender is asked to send: frames UDP/IPv4 frames of
// size bytes from src (its last byte and the source port random per frame,
// up to 2^24 4-tuples) to dst port 9 on dev, at rate frames a second (0:
// as fast as it goes).
type sendSpec struct {
	dev      string
	frames   int
	rate     int
	size     int
	src, dst netip.Addr
}

func (s sendSpec) args() []string {
	return []string{s.dev, strconv.Itoa(s.frames), strconv.Itoa(s.rate), strconv.Itoa(s.size), s.src.String(), s.dst.String()}
}

func parseSendSpec(args []string) (sendSpec, error) {
	var s sendSpec
	if len(args) != 6 {
		return s, fmt.Errorf("want 6 arguments (dev frames rate size src dst), have %d", len(args))
	}
	s.dev = args[0]
	var errs []error
	atoi := func(v string) int {
		n, err := strconv.Atoi(v)
		errs = append(errs, err)
		return n
	}
	s.frames, s.rate, s.size = atoi(args[1]), atoi(args[2]), atoi(args[3])
	var err error
	s.src, err = netip.ParseAddr(args[4])
	errs = append(errs, err)
	s.dst, err = netip.ParseAddr(args[5])
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return s, err
	}
	if s.frames < 1 || s.rate < 0 || s.size < 60 || s.size > 1514 || !s.src.Is4() || !s.dst.Is4() {
		return s, fmt.Errorf("bad send spec %q", args)
	}
	return s, nil
}

// senderReport is the sender's last line: frames sent, nanoseconds from
// the first to the last, CPU nanoseconds.
const senderReport = "sender: sent %d frames in %d ns, cpu %d ns"

// parseSenderReport reads the sender's last line from its output.
func parseSenderReport(out []byte) (frames int, el, cpu time.Duration, err error) {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var ns, cpuNs int64
	_, err = fmt.Sscanf(lines[len(lines)-1], senderReport, &frames, &ns, &cpuNs)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("the sender's report %q: %w", lines[len(lines)-1], err)
	}
	return frames, time.Duration(ns), time.Duration(cpuNs), nil
}

// senderBatch is the most frames one sendmmsg call hands the kernel.
const senderBatch = 64

// senderMain is the sender: it sends spec's frames through an AF_PACKET
// socket on dev, in sendmmsg batches of up to 64, open loop: frame i is due
// at i/rate from the first, and each batch carries every frame due
// (sleeping while the next is more than 20 µs away), so the offered rate
// holds on average however the batches fall. It prints what it sent and
// over how long, and the CPU time the sending took (its process's start
// left out), to out as senderReport reads them, and returns the exit
// status.
func senderMain(args []string, out io.Writer) int {
	spec, err := parseSendSpec(args)
	if err != nil {
		fmt.Fprintln(out, "sender:", err)
		return 2
	}
	u0, s0 := cpuTimes()
	n, el, err := send(spec)
	u1, s1 := cpuTimes()
	fmt.Fprintf(out, senderReport+"\n", n, el.Nanoseconds(), (u1 - u0 + s1 - s0).Nanoseconds())
	if err != nil {
		fmt.Fprintln(out, "sender:", err)
		return 1
	}
	return 0
}

func send(spec sendSpec) (int, time.Duration, error) {
	ifi, err := net.InterfaceByName(spec.dev)
	if err != nil {
		return 0, 0, err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err != nil {
		return 0, 0, fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifi.Index}); err != nil {
		return 0, 0, fmt.Errorf("bind: %w", err)
	}
	// Straight to the driver: no qdisc in the way.
	_ = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1)
	bufs := make([][]byte, senderBatch)
	iovs := make([]unix.Iovec, senderBatch)
	msgs := make([]unix.Mmsghdr, senderBatch)
	for i := range bufs {
		bufs[i] = udpFrame(spec)
		iovs[i].Base = &bufs[i][0]
		iovs[i].SetLen(len(bufs[i]))
		msgs[i].Hdr.Iov = &iovs[i]
		msgs[i].Hdr.SetIovlen(1)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	var perFrame time.Duration
	if spec.rate > 0 {
		perFrame = time.Second / time.Duration(spec.rate)
	}
	start := time.Now()
	sent := 0
	for sent < spec.frames {
		k := min(spec.frames-sent, senderBatch)
		if perFrame > 0 {
			el := time.Since(start)
			due := min(int(el/perFrame)+1, spec.frames)
			if due <= sent {
				if wait := time.Duration(sent)*perFrame - el; wait > 20*time.Microsecond {
					time.Sleep(wait)
				}
				continue
			}
			k = min(due-sent, senderBatch)
		}
		for i := 0; i < k; i++ {
			randomize(bufs[i], rng)
		}
		m, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), uintptr(k), 0, 0, 0)
		switch {
		case errno == unix.EAGAIN || errno == unix.ENOBUFS || errno == unix.EINTR:
			continue
		case errno != 0:
			return sent, time.Since(start), fmt.Errorf("sendmmsg: %w", errno)
		}
		sent += int(m)
	}
	return sent, time.Since(start), nil
}

// udpFrame builds a UDP/IPv4 frame of spec.size bytes from spec.src to
// spec.dst port 9, broadcast at the Ethernet layer, its UDP checksum zero.
func udpFrame(spec sendSpec) []byte {
	b := make([]byte, spec.size)
	copy(b[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(b[6:12], []byte{0x02, 0, 0, 0, 0, 0x02})
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:34]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(spec.size-14))
	binary.BigEndian.PutUint16(ip[6:], 0x4000)
	src, dst := spec.src.As4(), spec.dst.As4()
	copy(ip[12:16], src[:])
	copy(ip[16:20], dst[:])
	binary.BigEndian.PutUint16(b[36:], 9)
	binary.BigEndian.PutUint16(b[38:], uint16(spec.size-34))
	return b
}

// randomize gives frame b a random source address byte, IP id and source
// port, and its IP header checksum again.
func randomize(b []byte, rng *rand.Rand) {
	v := rng.Uint64()
	ip := b[14:34]
	ip[15] = byte(v)
	binary.BigEndian.PutUint16(ip[4:], uint16(v>>8))
	binary.BigEndian.PutUint16(b[34:], uint16(v>>24))
	ip[10], ip[11] = 0, 0
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
}
