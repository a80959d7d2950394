//go:build linux

package livetest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/internal/pace"
)

// seqMagic marks the sequence-numbered UDP frames of SeqFrame.
const seqMagic = 0x52505358 // "RPSX"

// SeqFrame returns a 60-byte UDP/IPv4 frame from B to A of flow (its UDP
// source port is 10000+flow) carrying seq: magic, flow and seq after the
// UDP header.
func SeqFrame(p *netns.Pair, src net.HardwareAddr, flow, seq uint32) []byte {
	b := make([]byte, 60)
	copy(b[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(b[6:12], src)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], 20+8+12)
	binary.BigEndian.PutUint16(ip[6:], 0x4000)
	s, d := p.B.Addr.Addr().As4(), p.A.Addr.Addr().As4()
	copy(ip[12:16], s[:])
	copy(ip[16:20], d[:])
	pace.SetIPChecksum(ip)
	udp := ip[20:]
	binary.BigEndian.PutUint16(udp[0:], uint16(10000+flow))
	binary.BigEndian.PutUint16(udp[2:], 9)
	binary.BigEndian.PutUint16(udp[4:], 8+12)
	binary.BigEndian.PutUint32(udp[8:], seqMagic)
	binary.BigEndian.PutUint32(udp[12:], flow)
	binary.BigEndian.PutUint32(udp[16:], seq)
	return b
}

// ParseSeq returns the flow and sequence number of a SeqFrame.
func ParseSeq(b []byte) (flow, seq uint32, ok bool) {
	if len(b) < 54 || binary.BigEndian.Uint16(b[12:]) != 0x0800 || b[14] != 0x45 || b[23] != 17 ||
		binary.BigEndian.Uint32(b[42:]) != seqMagic {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(b[46:]), binary.BigEndian.Uint32(b[50:]), true
}

// ARPFrame returns an ARP request from B asking for A's address.
func ARPFrame(p *netns.Pair, src net.HardwareAddr) []byte {
	b := make([]byte, 60)
	copy(b[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(b[6:12], src)
	binary.BigEndian.PutUint16(b[12:], 0x0806)
	a := b[14:]
	binary.BigEndian.PutUint16(a[0:], 1)      // Ethernet
	binary.BigEndian.PutUint16(a[2:], 0x0800) // IPv4
	a[4], a[5] = 6, 4
	binary.BigEndian.PutUint16(a[6:], 1) // request
	copy(a[8:14], src)
	s, d := p.B.Addr.Addr().As4(), p.A.Addr.Addr().As4()
	copy(a[14:18], s[:])
	copy(a[24:28], d[:])
	return b
}

// IsARP reports whether b is an ARP frame.
func IsARP(b []byte) bool { return len(b) >= 14 && binary.BigEndian.Uint16(b[12:]) == 0x0806 }

// SendFrom writes frames out of B's link in order through an AF_PACKET
// socket, from one OS thread pinned to one CPU (so that the kernel
// receives them in send order: frames sent from two CPUs may be received
// in either order), pausing a millisecond after every burst frames. The
// frames come from next until it returns nil. It reports failures with
// Errorf.
func SendFrom(t testing.TB, p *netns.Pair, burst int, next func(src net.HardwareAddr) []byte) {
	t.Helper()
	err := p.B.Do(func() error {
		ifi, err := net.InterfaceByName(p.B.Link)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifi.Index}); err != nil {
			return err
		}
		var old, one unix.CPUSet
		if err := unix.SchedGetaffinity(0, &old); err != nil {
			return err
		}
		for c := 0; c < 1024; c++ {
			if old.IsSet(c) {
				one.Set(c)
				break
			}
		}
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			return err
		}
		defer unix.SchedSetaffinity(0, &old)
		for n := 1; ; n++ {
			f := next(ifi.HardwareAddr)
			if f == nil {
				return nil
			}
			for {
				_, err := unix.Write(fd, f)
				if err == nil {
					break
				}
				if !errors.Is(err, unix.ENOBUFS) && !errors.Is(err, unix.EAGAIN) {
					return fmt.Errorf("writing frame %d: %w", n, err)
				}
				time.Sleep(time.Millisecond)
			}
			if n%burst == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	})
	if err != nil {
		t.Errorf("sending from %s: %v", p.B.Name, err)
	}
}

// SeqTraffic returns a frame source for SendFrom: rounds rounds over flows
// flows from first on, the sequence numbers of each flow counting from 1,
// then arps ARP requests, one after every so many frames.
func SeqTraffic(p *netns.Pair, first, flows, rounds, arps int) func(net.HardwareAddr) []byte {
	total := flows * rounds
	every := total + 1
	if arps > 0 {
		every = max(1, total/arps)
	}
	i, sentARP := 0, 0
	arpNext := false
	return func(src net.HardwareAddr) []byte {
		if arpNext || (i == total && sentARP < arps) {
			arpNext = false
			sentARP++
			return ARPFrame(p, src)
		}
		if i == total {
			return nil
		}
		f := SeqFrame(p, src, uint32(first+i%flows), uint32(1+i/flows))
		i++
		if i%every == 0 && sentARP < arps {
			arpNext = true
		}
		return f
	}
}

// IPInReceives reads the IPv4 stack's InReceives counter inside ns
// (/proc/net/snmp): the frames the kernel stack took in.
func IPInReceives(t testing.TB, ns *netns.NS) uint64 {
	t.Helper()
	out, err := ns.Exec(context.Background(), "cat", "/proc/net/snmp")
	if err != nil {
		t.Fatalf("reading /proc/net/snmp: %v: %s", err, out)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "Ip:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == "InReceives" && i < len(f) {
				v, err := strconv.ParseUint(f[i], 10, 64)
				if err != nil {
					t.Fatalf("Ip InReceives %q: %v", f[i], err)
				}
				return v
			}
		}
	}
	t.Fatalf("no Ip InReceives in /proc/net/snmp:\n%s", out)
	return 0
}

// Neighbour reports whether A's kernel has learnt B's address (from an ARP
// request that reached it).
func Neighbour(t testing.TB, p *netns.Pair) bool {
	t.Helper()
	out, err := p.A.Exec(context.Background(), "ip", "neigh", "show", p.B.Addr.Addr().String(), "dev", p.A.Link)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(out), "lladdr")
}

// Background sends UDP frames from B to A, about 20us apart, until the
// test ends (or 400000 frames are sent).
func Background(t *testing.T, p *netns.Pair) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		TrafgenUDP(t, ctx, p, 400000, 0, "--gap", "20us")
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// WaitFor polls cond every 10ms for up to 5s and fails the test with
// what if it does not hold.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 5s: %s", what)
		}
	}
}

// XDPAttached reports whether an XDP program is attached to ns's link.
func XDPAttached(t testing.TB, ns *netns.NS) bool {
	t.Helper()
	st, err := ns.LinkState(context.Background(), ns.Link)
	if err != nil {
		t.Fatal(err)
	}
	return st.XDP
}
