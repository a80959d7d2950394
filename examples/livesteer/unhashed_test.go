//go:build linux

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/netns"
)

// arpConf writes a trafgen configuration for ARP requests from B (its own
// MAC address) asking for A's address: A's kernel, when it sees one,
// answers and learns B's address.
func arpConf(t *testing.T, p *netns.Pair) string {
	t.Helper()
	var mac net.HardwareAddr
	if err := p.B.Do(func() error {
		ifi, err := net.InterfaceByName(p.B.Link)
		if err == nil {
			mac = ifi.HardwareAddr
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var m []string
	for _, b := range mac {
		m = append(m, fmt.Sprintf("0x%02x", b))
	}
	hw := strings.Join(m, ", ")
	src, dst := p.B.Addr.Addr().As4(), p.A.Addr.Addr().As4()
	cfg := "{ fill(0xff, 6), " + hw + ", c16(0x0806),\n" +
		" c16(1), c16(0x0800), 6, 4, c16(1), " + hw + ", " + ip(src) + ",\n" +
		" fill(0x00, 6), " + ip(dst) + ", fill(0x00, 18) }\n"
	conf := filepath.Join(t.TempDir(), "arp.cfg")
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return conf
}

// TestXDPPassUnhashed runs livesteer -xdp in both modes, with and without
// -xdp-pass-unhashed, while B sends 20 ARP requests for A's address and
// 300 TCP frames. By default the sockets take every frame (with -fanout
// ebpf the ARP requests go to the fallback socket, counted): they receive
// all 320, and A's kernel never learns B's address. With the flag the ARP
// requests go to the kernel stack, which learns it, the sockets receive
// the 300 TCP frames, and with -fanout ebpf the steering line counts the
// 20 passed.
func TestXDPPassUnhashed(t *testing.T) {
	p, _ := trafficPair(t)
	tcp, arp := tcpConf(t, p, 443), arpConf(t, p)
	const arps, frames = 20, 300
	line := regexp.MustCompile(`Kernel steering \(XDP program\): .*; redirected_0 \d+, redirected_1 \d+, unhashed_passed (\d+), host_passed \d+, unhashed_fallback (\d+),`)
	for _, fanout := range []string{"none", "ebpf"} {
		for _, pass := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s-pass=%v", fanout, pass), func(t *testing.T) {
				if _, err := p.A.Exec(context.Background(), "ip", "neigh", "flush", "dev", p.A.Link); err != nil {
					t.Fatal(err)
				}
				args := []string{"-i", p.A.Link, "-xdp", "-xdp-host", "take", "-fanout", fanout, "-workers", "2", "-q", "-interval", "1h"}
				if pass {
					args = append(args, "-xdp-pass-unhashed")
				}
				bg := startArgs(t, p, args)
				waitCapturing(t, &bg.errOut)
				send(t, p, arp, arps)
				send(t, p, tcp, frames)
				time.Sleep(200 * time.Millisecond)
				learnt := neighbour(t, p)
				if err := bg.stop(t); err != nil {
					t.Fatalf("run: %v", err)
				}
				out := bg.out.String()
				received, _, _, _ := reconcile(t, out)
				want := uint64(frames + arps)
				if pass {
					want = frames
				}
				if received != want {
					t.Errorf("the sockets received %d frames, want %d", received, want)
				}
				if learnt != pass {
					t.Errorf("A's kernel learnt B's address: %v, want %v (the ARP requests reach the kernel only with -xdp-pass-unhashed)", learnt, pass)
				}
				m := line.FindStringSubmatch(out)
				switch {
				case fanout == "none" && m != nil:
					t.Errorf("-fanout none reports kernel steering: %s", m[0])
				case fanout == "ebpf" && m == nil:
					t.Errorf("no kernel steering line:\n%s", out)
				case fanout == "ebpf":
					passed, fallback := m[1], m[2]
					if pass && (passed != "20" || fallback != "0") || !pass && (passed != "0" || fallback != "20") {
						t.Errorf("%s: want the %d ARP requests %s", m[0], arps, map[bool]string{true: "passed", false: "at the fallback socket"}[pass])
					}
				}
			})
		}
	}
}

// neighbour reports whether A's kernel has learnt B's address (from an ARP
// request that reached it).
func neighbour(t *testing.T, p *netns.Pair) bool {
	t.Helper()
	out, err := p.A.Exec(context.Background(), "ip", "neigh", "show", p.B.Addr.Addr().String(), "dev", p.A.Link)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(out), "lladdr")
}
