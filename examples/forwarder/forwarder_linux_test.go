//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/internal/cli/clitest"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/internal/xsk"
	"github.com/rpsgo/rps/steer"
)

// line builds client - forwarder - server namespaces for the test: C's c0
// (10.202.0.1/24) is cabled to F's f0, F's f1 to S's s0 (10.202.0.2/24);
// F has no addresses and does not route, so only the forwarder connects C
// and S. Offloads and TX checksumming are off on every veth.
func line(t *testing.T) (c, f, s *netns.NS) {
	t.Helper()
	netns.Require(t, "ethtool", "sysctl")
	base := fmt.Sprintf("rpsfwd-%d", os.Getpid())
	c = &netns.NS{Name: base + "-c", Link: "c0"}
	f = &netns.NS{Name: base + "-f", Link: "f0"}
	s = &netns.NS{Name: base + "-s", Link: "s0"}
	t.Cleanup(func() {
		for _, ns := range []*netns.NS{c, f, s} {
			if _, err := os.Stat("/run/netns/" + ns.Name); err == nil {
				if out, err := exec.Command("ip", "netns", "del", ns.Name).CombinedOutput(); err != nil {
					t.Errorf("deleting %s: %v: %s", ns.Name, err, out)
				}
			}
		}
	})
	var cmds [][]string
	for _, ns := range []*netns.NS{c, f, s} {
		cmds = append(cmds, []string{"ip", "netns", "add", ns.Name},
			[]string{"ip", "netns", "exec", ns.Name, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"},
			[]string{"ip", "netns", "exec", ns.Name, "sysctl", "-q", "-w", "net.ipv6.conf.default.disable_ipv6=1"})
	}
	cmds = append(cmds,
		[]string{"ip", "link", "add", "c0", "netns", c.Name, "type", "veth", "peer", "name", "f0", "netns", f.Name},
		[]string{"ip", "link", "add", "s0", "netns", s.Name, "type", "veth", "peer", "name", "f1", "netns", f.Name},
		[]string{"ip", "-n", c.Name, "addr", "add", "10.202.0.1/24", "dev", "c0"},
		[]string{"ip", "-n", s.Name, "addr", "add", "10.202.0.2/24", "dev", "s0"})
	for _, nl := range [][2]string{{c.Name, "c0"}, {f.Name, "f0"}, {f.Name, "f1"}, {s.Name, "s0"}} {
		cmds = append(cmds,
			[]string{"ip", "netns", "exec", nl[0], "ethtool", "-K", nl[1], "tso", "off", "gso", "off", "gro", "off", "tx", "off"},
			[]string{"ip", "-n", nl[0], "link", "set", nl[1], "up"})
	}
	for _, cmd := range cmds {
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			netns.SkipOrFatal(t, fmt.Sprintf("building the namespaces: %s: %v: %s", strings.Join(cmd, " "), err, out))
		}
	}
	return c, f, s
}

// TestForwardTCP sends a bounded TCP exchange from C to S through the
// forwarder, both directions, and checks every byte and the counters: with
// AF_PACKET sockets, and with AF_XDP sockets in and out (-xdp), where every
// frame forwarded left through its port's AF_XDP Sender and completed, and
// after which neither port carries an XDP program.
func TestForwardTCP(t *testing.T) {
	for _, xdp := range []bool{false, true} {
		name := "af_packet"
		if xdp {
			name = "af_xdp"
		}
		t.Run(name, func(t *testing.T) {
			c, f, s := line(t)
			forwardTCP(t, c, f, s, Options{In: "f0", Out: "f1", Workers: 2, Work: 2 * time.Microsecond, XDP: xdp})
			for _, link := range []string{"f0", "f1"} {
				if xdpOn(t, f, link) {
					t.Errorf("%s carries an XDP program after the forwarder closed", link)
				}
			}
		})
	}
}

// TestOneWayXDP forwards UDP datagrams from C to S with -oneway -xdp: the
// first port only receives (a Source, no Sender), the second only sends
// (a Sender of its own, OpenSender: no Source holds its queue), and every
// datagram reaches S. C has a static neighbour entry for S, whose ARP
// reply the one-way forwarder would not carry back.
func TestOneWayXDP(t *testing.T) {
	c, f, s := line(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mac, err := s.Exec(ctx, "cat", "/sys/class/net/s0/address")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := c.Exec(ctx, "ip", "neigh", "replace", "10.202.0.2", "lladdr", string(mac), "dev", "c0", "nud", "permanent"); err != nil {
		t.Fatalf("static neighbour: %v: %s", err, out)
	}
	var fw *forwarder
	if err := f.Do(func() (err error) {
		fw, err = openForwarder(Options{In: "f0", Out: "f1", Workers: 2, OneWay: true, XDP: true})
		return err
	}); err != nil {
		t.Fatalf("opening the forwarder: %v", err)
	}
	defer fw.Close()
	if p0, p1 := fw.ports[0], fw.ports[1]; p0.rx == nil || p0.xtx != nil || p1.rx != nil || p1.xtx == nil || p0.tx >= 0 || p1.tx >= 0 {
		t.Fatalf("ports: %+v, %+v; want f0 receiving through AF_XDP only, f1 sending through AF_XDP only", p0, p1)
	}
	runCtx, stop := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- fw.Run(runCtx) }()

	var server, client *net.UDPConn
	if err := s.Do(func() (err error) {
		server, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 202, 0, 2), Port: 7001})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if err := c.Do(func() (err error) {
		client, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(10, 202, 0, 2), Port: 7001})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	const n = 300
	got := make(chan int, 1)
	go func() {
		buf := make([]byte, 2048)
		k := 0
		server.SetReadDeadline(time.Now().Add(10 * time.Second))
		for k < n {
			m, err := server.Read(buf)
			if err != nil || m != 100+k%1000 || buf[0] != byte(k) {
				break
			}
			k++
		}
		got <- k
	}()
	for i := 0; i < n; i++ {
		if _, err := client.Write(bytes.Repeat([]byte{byte(i)}, 100+i%1000)); err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		if i%32 == 31 {
			time.Sleep(time.Millisecond) // within S's socket buffer
		}
	}
	if k := <-got; k != n {
		t.Errorf("S received %d of %d datagrams in order", k, n)
	}
	stop()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := fw.Stats()
	xs, err := fw.ports[1].xtx.Stats()
	if err != nil || st.InToOut < n || st.OutToIn != 0 || xs.Sent != st.InToOut || st.TxErrors != 0 {
		t.Errorf("stats %v, f1's sender %+v, %v: want the %d datagrams sent through f1's Sender", st, xs, err, n)
	}
}

// xdpOn reports whether `ip -d link show` in ns lists an XDP program on
// link.
func xdpOn(t *testing.T, ns *netns.NS, link string) bool {
	t.Helper()
	st, err := ns.LinkState(context.Background(), link)
	if err != nil {
		t.Fatal(err)
	}
	return st.XDP
}

// forwardTCP runs the TCP exchange through a forwarder opened in f with o;
// with o.XDP each port carries an XDP program while it is open.
func forwardTCP(t *testing.T, c, f, s *netns.NS, o Options) {
	t.Helper()
	var fw *forwarder
	if err := f.Do(func() (err error) {
		fw, err = openForwarder(o)
		return err
	}); err != nil {
		t.Fatalf("opening the forwarder: %v", err)
	}
	defer fw.Close()
	for _, link := range []string{"f0", "f1"} {
		if xdpOn(t, f, link) != o.XDP {
			t.Errorf("%s: an XDP program attached %v, want %v", link, !o.XDP, o.XDP)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- fw.Run(runCtx) }()

	var ln net.Listener
	if err := s.Do(func() (err error) {
		ln, err = net.Listen("tcp4", "10.202.0.2:7000")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		io.Copy(conn, conn) // echo
	}()
	var conn net.Conn
	if err := c.Do(func() (err error) {
		d := net.Dialer{Timeout: 10 * time.Second}
		conn, err = d.DialContext(ctx, "tcp4", "10.202.0.2:7000")
		return err
	}); err != nil {
		t.Fatalf("connecting through the forwarder: %v", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	const rounds = 200
	var sent int
	for i := 0; i < rounds; i++ {
		msg := bytes.Repeat([]byte{byte(i)}, 1+i*7%1400)
		if _, err := conn.Write(msg); err != nil {
			t.Fatalf("round %d: write: %v", i, err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(conn, got); err != nil {
			t.Fatalf("round %d: read: %v", i, err)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("round %d: echo differs", i)
		}
		sent += len(msg)
	}
	conn.Close()
	stop()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := fw.Stats()
	t.Logf("%d bytes each way; %v", sent, st)
	// Each round is at least one data segment each way.
	if st.InToOut < rounds || st.OutToIn < rounds {
		t.Errorf("forwarded %d frames C->S and %d S->C, want at least %d each", st.InToOut, st.OutToIn, rounds)
	}
	if st.TxErrors != 0 || st.Oversize != 0 || st.QueueDrops != 0 {
		t.Errorf("errors or drops: %v", st)
	}
	if o.XDP {
		// Port 0 sends what came from S, port 1 what came from C.
		for i, want := range []uint64{st.OutToIn, st.InToOut} {
			p := fw.ports[i]
			if p.xtx == nil || p.tx >= 0 {
				t.Errorf("%s: with -xdp the port sends through AF_PACKET", p.name)
				continue
			}
			var xs xsk.SenderStats
			for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				var err error
				if xs, err = p.xtx.Stats(); err != nil {
					t.Fatalf("%s: sender stats: %v", p.name, err)
				}
				if xs.InFlight() == 0 || time.Now().After(deadline) {
					break
				}
			}
			if xs.Sent != want || xs.Completed != xs.Sent || xs.Dropped != 0 || xs.Invalid != 0 || xs.TxInvalidDescs != 0 {
				t.Errorf("%s: AF_XDP sender %+v, want the %d frames forwarded to it sent and completed", p.name, xs, want)
			}
		}
	}
}

// TestOpenErrors checks that bad options fail with a clear error.
func TestOpenErrors(t *testing.T) {
	if _, err := openForwarder(Options{In: "x", Out: "x"}); err == nil || !strings.Contains(err.Error(), "both") {
		t.Errorf("same interface twice: %v", err)
	}
	if _, err := openForwarder(Options{In: "rps-no-such-if0", Out: "rps-no-such-if1"}); err == nil || !strings.Contains(err.Error(), "rps-no-such-if0") {
		t.Errorf("missing interface: %v", err)
	}
}

// TestLibraryRejects: a value of the options that afpacket or steer rejects
// is a usage error (status 2), as one the command rejects itself.
func TestLibraryRejects(t *testing.T) {
	// afpacket checks a ring's settings before it opens a socket: no
	// privileges needed, only an interface that exists.
	err := forward(context.Background(), Options{In: "lo", Out: "rps-no-such-if1", BlockTimeout: 500 * time.Microsecond}, false)
	if !errors.Is(err, cli.ErrUsage) || !errors.Is(err, steer.ErrConfig) {
		t.Errorf("-block-timeout 500us: %v; want a usage error wrapping steer.ErrConfig", err)
	}
	if res := clitest.Run(t, "FORWARDER_MAIN", "-in", "lo", "-out", "rps-no-such-if1", "-block-timeout", "500us"); res.Status != 2 ||
		!strings.HasPrefix(res.Stderr, "forwarder: usage error: ") {
		t.Errorf("-block-timeout 500us: status %d, standard error %q; want 2 and a usage error", res.Status, res.Stderr)
	}
	// steer refuses the worker count once both ports are open.
	_, f, _ := line(t)
	err = f.Do(func() error {
		return forward(context.Background(), Options{In: "f0", Out: "f1", Workers: 70000}, false)
	})
	if !errors.Is(err, cli.ErrUsage) || !errors.Is(err, steer.ErrConfig) {
		t.Errorf("-workers 70000: %v; want a usage error wrapping steer.ErrConfig", err)
	}
}
