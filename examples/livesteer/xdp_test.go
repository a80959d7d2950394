//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/afxdp"
)

// TestXDP runs livesteer -xdp -key microsoft on a veth in a test
// namespace while trafgen sends 3000 TCP frames of random source ports, in
// each mode and with each attach mode: every frame the link received reached the sockets and was
// steered or counted as the kernel's drop, the final report reconciles and
// names the attach mode and copy mode (veth has no zero copy) in the
// status line, the final report's per-socket lines and the JSON report
// (the mode the sockets received in, though the sockets are closed by
// then), with -fanout ebpf the XDP program redirected the frames over both
// workers' sockets and the line says so with every other count zero, and
// afterwards the interface carries no XDP program.
func TestXDP(t *testing.T) {
	p, _ := trafficPair(t)
	conf := tcpConf(t, p, 443)
	redirected := regexp.MustCompile(`Kernel steering \(XDP program\): table changes \d+, held frames \d+; redirected_0 (\d+), redirected_1 (\d+), unhashed_passed (\d+), host_passed (\d+), unhashed_fallback (\d+), no_socket (\d+), other_queue (\d+)`)
	status := regexp.MustCompile(`capturing on \S+ \(AF_XDP queue 0, (native|generic) attach, (copy|zerocopy) mode\)`)
	for _, tc := range []struct {
		fanout, attach string
	}{
		{"none", "auto"}, {"none", "generic"}, {"ebpf", "auto"}, {"ebpf", "generic"},
	} {
		t.Run(tc.fanout+"-"+tc.attach, func(t *testing.T) {
			// The TCP flows differ in the low byte of their source port:
			// a random key sends them all to one socket once in 256 keys,
			// leaving redirected_1 (or _0) at zero; the public key splits
			// them.
			o, err := parseFlags([]string{"-i", p.A.Link, "-xdp", "-xdp-host", "take", "-xdp-attach", tc.attach, "-fanout", tc.fanout, "-workers", "2",
				"-key", "microsoft", "-q", "-interval", "1h", "-json"}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			r0, _ := p.A.LinkCounter(context.Background(), p.A.Link, "rx_packets")
			r, errOut := runJSON(t, p, o, conf, 3000) // the text report is on standard error
			textOut := errOut
			r1, _ := p.A.LinkCounter(context.Background(), p.A.Link, "rx_packets")
			received, steered, dropped, _ := reconcile(t, textOut)
			// A burst can fill the RX ring before the reader runs (a busy
			// machine): those frames are the kernel's drops, counted.
			if received != 3000 || r1-r0 != received || steered == 0 || received != steered+dropped {
				t.Errorf("the link received %d frames, the sockets %d, steered %d, kernel dropped %d; want the 3000 sent, all reaching the sockets",
					r1-r0, received, steered, dropped)
			}
			m := status.FindStringSubmatch(errOut)
			if m == nil {
				t.Fatalf("status line without the AF_XDP modes:\n%s", errOut)
			}
			attach := m[1]
			if tc.attach != "auto" && attach != tc.attach {
				t.Errorf("-xdp-attach %s: attached %s", tc.attach, attach)
			}
			if m[2] != "copy" {
				t.Errorf("veth bound in %s mode; it has copy mode only", m[2])
			}
			i := strings.LastIndex(textOut, "--- final report")
			if i < 0 {
				t.Fatalf("no final report:\n%s", textOut)
			}
			final := textOut[i:]
			if n := strings.Count(final, "; "+attach+", copy; rx_dropped "); n != len(r.Sources) || n == 0 {
				t.Errorf("%d of the final report's %d socket lines give the XDP counters and the %s attach they received in:\n%s", n, len(r.Sources), attach, final)
			}
			tot := r.Totals
			if r.Live == nil || r.Live.Socket != "af_xdp" || r.Live.XDP == nil || r.Live.XDP.Attach != attach ||
				r.Live.XDP.ZeroCopy || r.Live.Fanout != tc.fanout || !r.Live.KeepsFlows || !r.Live.Promiscuous {
				t.Errorf("live report %+v", r.Live)
			} else if !tot.Balanced || tot.KernelReceived != received || tot.Steered != steered || tot.Read != steered {
				t.Errorf("totals %+v; want balanced, as the text report", tot)
			}
			if m := redirected.FindStringSubmatch(textOut); tc.fanout == "ebpf" {
				var r0, r1, passed, host, fallback, noSocket, otherQueue uint64
				if m != nil {
					fmt.Sscan(strings.Join(m[1:], " "), &r0, &r1, &passed, &host, &fallback, &noSocket, &otherQueue)
				}
				if m == nil || r0 == 0 || r1 == 0 || r0+r1 != received || passed+host+fallback+noSocket+otherQueue != 0 {
					t.Errorf("XDP steering line %q; want every received frame redirected, to both sockets, and the other counts zero", m)
				}
				if js := r.Live.Steering; js == nil || js["redirected_0"] != r0 || js["redirected_1"] != r1 || js["host_passed"] != host {
					t.Errorf("the JSON report's steering counters %v, want the text's", js)
				}
			} else if m != nil {
				t.Errorf("-fanout none reports kernel steering: %s", m[0])
			} else if r.Live.Steering != nil {
				t.Errorf("-fanout none: the JSON report gives steering counters %v", r.Live.Steering)
			}
			for _, s := range r.Sources {
				if _, ok := s.Kernel["rx_ring_full"]; !ok || s.Mode != attach+", copy" {
					t.Errorf("source %s: mode %q, counters %v: no XDP counters, zero copy on veth, or not the %s attach it received in", s.Name, s.Mode, s.Kernel, attach)
				}
			}
			if xdpAttached(t, p.A) {
				t.Error("the interface still carries an XDP program after the run")
			}
			t.Logf("%s attach: received %d, steered %d, dropped %d", attach, received, steered, dropped)
		})
	}
}

// TestXDPUsage: -xdp with a fanout mode AF_XDP has no group for, or a bad
// mode or queue, is a usage error that says what works.
func TestXDPUsage(t *testing.T) {
	for _, args := range [][]string{{"-fanout", "hash"}, {"-fanout", "lb"}, {"-xdp-attach", "offload"},
		{"-xdp-attach", "none"}, {"-xdp-bind", "zc"}, {"-xdp-queue", "-1"}, {"-xdp-queue", "65536"}, {"-xdp-host", "keep"}} {
		_, err := parseFlags(append([]string{"-i", "eth0", "-xdp"}, args...), io.Discard)
		if !errors.Is(err, cli.ErrUsage) {
			t.Errorf("-xdp %q: %v, want a usage error", args, err)
		}
	}
	_, err := parseFlags([]string{"-i", "eth0", "-xdp", "-fanout", "hash"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-fanout none") || !strings.Contains(err.Error(), "-fanout ebpf") {
		t.Errorf("-xdp -fanout hash: %v; want it to name the modes that work", err)
	}
	o, err := parseFlags([]string{"-i", "eth0", "-xdp", "-xdp-queue", "3", "-xdp-attach", "Native", "-xdp-bind", "copy", "-xdp-pass-unhashed", "-xdp-host", "Pass"}, io.Discard)
	if err != nil || !o.xdp || o.xdpQueue != 3 || o.xdpAttach != afxdp.AttachNative || o.xdpBind != afxdp.BindCopy || o.fanout != "none" || !o.xdpPass ||
		o.xdpHost != afxdp.HostPass {
		t.Errorf("parsed %+v, %v", o, err)
	}
}

// waitCapturing waits, for at most 5 s, for the status line that says the
// sockets are open.
func waitCapturing(t *testing.T, errOut *syncBuffer) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if strings.Contains(errOut.String(), "capturing on") {
			return
		}
	}
	t.Fatalf("the command did not start capturing:\n%s", errOut.String())
}

// xdpAttached reports whether `ip -d link show` in ns lists an XDP program
// on its link.
func xdpAttached(t *testing.T, ns *netns.NS) bool {
	t.Helper()
	return linkState(t, ns).XDP
}

// linkState reads ns's link's state, failing t if it cannot.
func linkState(t *testing.T, ns *netns.NS) netns.LinkState {
	t.Helper()
	st, err := ns.LinkState(context.Background(), ns.Link)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestXDPStopIntake opens the -xdp intake in both modes and stops it while
// trafgen sends: the XDP program leaves the link, the rings are read dry
// at once, and the sockets' counters stay still from then on while the
// link keeps receiving (the frames go to the kernel stack), so the final
// counts are those of the drain.
func TestXDPStopIntake(t *testing.T) {
	p, conf := trafficPair(t)
	for _, fanout := range []string{"none", "ebpf"} {
		t.Run(fanout, func(t *testing.T) {
			o, err := parseFlags([]string{"-i", p.A.Link, "-xdp", "-xdp-host", "take", "-fanout", fanout, "-workers", "2"}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			o.enter = p.A.Do
			cfg, _ := o.config()
			d, err := steer.New(cfg, func(*steer.Packet) {})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close(context.Background())
			sc, err := o.sockConfig()
			if err != nil {
				t.Fatal(err)
			}
			in, err := openIntake(o, d, sc)
			if err != nil {
				t.Fatal(err)
			}
			defer in.close()
			ctx, cancel := context.WithCancel(context.Background())
			runErr := make(chan error, 1)
			if fanout == "none" {
				go func() { runErr <- d.Run(ctx, in.srcs[0]) }()
			} else {
				go func() { runErr <- d.RunOnWorkers(ctx, in.srcs) }()
			}
			defer func() { cancel(); <-runErr }()
			tctx, tcancel := context.WithCancel(context.Background())
			gen := p.B.Command(tctx, "trafgen", "--dev", p.B.Link, "--conf", conf, "--num", "400000", "--gap", "20us",
				"--cpus", "1", "--no-sock-mem", "--notouch-irq", "--no-cpu-stats")
			if err := gen.Start(); err != nil {
				t.Fatalf("trafgen: %v", err)
			}
			defer func() { tcancel(); gen.Wait() }()
			for deadline := time.Now().Add(5 * time.Second); in.socks.totals().received < 1000; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the sockets received %d frames in 5s", in.socks.totals().received)
				}
			}
			if err := in.socks.stop(); err != nil {
				t.Fatal(err)
			}
			if xdpAttached(t, p.A) {
				t.Error("the XDP program is still on the link after the stop")
			}
			start := time.Now()
			if err := drain(in.socks, 2*time.Second); err != nil {
				t.Fatal(err)
			}
			drained := time.Since(start)
			k0 := in.socks.totals()
			rx0, _ := p.A.LinkCounter(context.Background(), p.A.Link, "rx_packets")
			time.Sleep(200 * time.Millisecond)
			k1 := in.socks.totals()
			rx1, _ := p.A.LinkCounter(context.Background(), p.A.Link, "rx_packets")
			if k0.err != nil || k1 != k0 {
				t.Errorf("the sockets' counters moved after the stop and drain: %+v, then %+v", k0, k1)
			}
			if rx1 == rx0 {
				t.Error("the link received nothing in the 200ms after the drain: trafgen stopped too early for the test")
			}
			t.Logf("drained in %v: %+v; the link received %d frames in the 200ms after", drained.Round(time.Millisecond), k0, rx1-rx0)
		})
	}
}

// TestXDPPromisc: livesteer -xdp puts the interface in promiscuous mode
// while it runs, as with AF_PACKET (the link's promiscuity count is one
// up), and gives it back when it stops; with -p the count does not move.
func TestXDPPromisc(t *testing.T) {
	netns.Require(t)
	p := netns.New(t, netns.Options{})
	base := promiscuity(t, p.A)
	for _, tc := range []struct {
		fanout    string
		noPromisc bool
	}{{"none", false}, {"ebpf", false}, {"ebpf", true}} {
		name := tc.fanout
		args := []string{"-i", p.A.Link, "-xdp", "-xdp-host", "take", "-fanout", tc.fanout, "-workers", "2", "-q", "-interval", "1h"}
		want := base + 1
		if tc.noPromisc {
			name, args, want = name+"-p", append(args, "-p"), base
		}
		t.Run(name, func(t *testing.T) {
			bg := startArgs(t, p, args)
			waitCapturing(t, &bg.errOut)
			during := promiscuity(t, p.A)
			if err := bg.stop(t); err != nil {
				t.Fatalf("run: %v", err)
			}
			if during != want {
				t.Errorf("promiscuity %d while running, want %d", during, want)
			}
			if after := promiscuity(t, p.A); after != base {
				t.Errorf("promiscuity %d after the run, want %d", after, base)
			}
		})
	}
}

// promiscuity reads the promiscuity count `ip -d link show` gives for
// ns's link: how many holders keep it in promiscuous mode (the PROMISC
// flag shows only the one `ip link set promisc` sets).
func promiscuity(t *testing.T, ns *netns.NS) int {
	t.Helper()
	return linkState(t, ns).Promiscuity
}

// TestXDPHost: livesteer -xdp on an interface that has an address does
// not start by default, with a usage error that names the address and
// -xdp-host; with -xdp-host pass, in both modes, a TCP connection from B
// to A's address (nothing listening) is refused during the capture, A's
// stack having answered the ARP request and the SYN, and with -fanout
// ebpf the steering line counts them as host_passed.
func TestXDPHost(t *testing.T) {
	netns.Require(t)
	p := netns.New(t, netns.Options{})
	o, err := parseFlags([]string{"-i", p.A.Link, "-xdp", "-q"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o.enter = p.A.Do
	var out, errOut syncBuffer
	err = run(context.Background(), o, &out, &errOut)
	if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), p.A.Addr.String()) || !strings.Contains(err.Error(), "-xdp-host pass") {
		t.Errorf("-xdp on an interface with an address: %v; want a usage error naming %v and -xdp-host", err, p.A.Addr)
	}
	if xdpAttached(t, p.A) {
		t.Error("a refused run left a program on the link")
	}
	hostLine := regexp.MustCompile(`host_passed (\d+)`)
	for _, fanout := range []string{"none", "ebpf"} {
		t.Run(fanout, func(t *testing.T) {
			if out, err := p.B.Exec(context.Background(), "ip", "neigh", "flush", "dev", p.B.Link); err != nil {
				t.Fatalf("ip neigh flush: %v: %s", err, out)
			}
			bg := startArgs(t, p, []string{"-i", p.A.Link, "-xdp", "-xdp-host", "pass", "-fanout", fanout, "-workers", "2", "-q", "-interval", "1h"})
			waitCapturing(t, &bg.errOut)
			var dialErr error
			if err := p.B.Do(func() error {
				c, err := net.DialTimeout("tcp4", net.JoinHostPort(p.A.Addr.Addr().String(), "9"), time.Second)
				if err == nil {
					c.Close()
				}
				dialErr = err
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if err := bg.stop(t); err != nil {
				t.Fatalf("run: %v", err)
			}
			if !errors.Is(dialErr, syscall.ECONNREFUSED) {
				t.Errorf("a connection to A during the capture: %v, want refused", dialErr)
			}
			m := hostLine.FindStringSubmatch(bg.out.String())
			if fanout == "ebpf" && (m == nil || m[1] == "0") {
				t.Errorf("the steering line does not count the host's frames: %q in\n%s", m, bg.out.String())
			}
		})
	}
}
