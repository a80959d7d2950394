//go:build linux

package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
)

// vxlanConf writes a trafgen configuration for VXLAN frames from B to A
// (VNI 42, outer UDP from port 50000 to 4789), each carrying a TCP ACK
// between two inner hosts from a random source port, to a MAC address
// that is not A's, so that A sends nothing back. 114 bytes: outer Ethernet
// 0-13, IPv4 14-33, UDP 34-41, VXLAN 42-49, inner Ethernet 50-63, IPv4
// 64-83, TCP 84-103, 10 bytes of payload.
func vxlanConf(t *testing.T, p *netns.Pair) string {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "vxlan.cfg")
	src, dst := p.B.Addr.Addr().As4(), p.A.Addr.Addr().As4()
	cfg := "{ 0x02, 0x00, 0x00, 0x00, 0x00, 0x99, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, c16(0x0800),\n" +
		" 0x45, 0x00, c16(100), drnd(2), c16(0x4000), 64, 17, csumip(14, 33),\n" +
		" " + ip(src) + ", " + ip(dst) + ",\n" +
		" c16(50000), c16(4789), c16(80), c16(0),\n" +
		" 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, 0x00,\n" +
		" 0x02, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, c16(0x0800),\n" +
		" 0x45, 0x00, c16(50), c16(0), c16(0x4000), 64, 6, csumip(64, 83),\n" +
		" 10, 0, 0, 1, 10, 0, 0, 2,\n" +
		" drnd(2), c16(80), drnd(4), c32(0), 0x50, 0x10, c16(512), c16(0), c16(0), fill(0x00, 10) }\n"
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return conf
}

// TestTunnels: the hash flags reach the dispatcher of a live capture.
// VXLAN between two endpoints crosses the link: with -tunnels outer every
// VXLAN frame lands on one worker of four and the final report says, in
// one line, that -tunnels inner would spread them; with -tunnels inner
// they spread over all four, counted as decapsulated; with -vxlan-ports
// moved away from 4789 they are plain UDP again. UDP between two hosts
// from random ports lands on one worker by default and spreads with
// -udp4tuple or a -hashtypes set with udp_ipv4.
func TestTunnels(t *testing.T) {
	netns.Require(t, "trafgen", "ethtool")
	p := netns.New(t, netns.Options{})
	vxlan, udp := vxlanConf(t, p), udpConf(t, p)
	const workers, frames = 4, 2000
	for _, tc := range []struct {
		name string
		conf string
		args []string
	}{
		{"outer", vxlan, nil},
		{"inner", vxlan, []string{"-tunnels", "inner"}},
		{"inner-other-port", vxlan, []string{"-tunnels", "inner", "-vxlan-ports", "8472"}},
		{"udp", udp, nil},
		{"udp4tuple", udp, []string{"-udp4tuple"}},
		{"hashtypes", udp, []string{"-hashtypes", "ipv4,udp_ipv4,ipv6"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-i", p.A.Link, "-workers", "4", "-key", "microsoft", "-q", "-interval", "1h", "-json",
				"-qlimit", "10240"}, tc.args...)
			o, err := parseFlags(append(args, "udp"), io.Discard) // the link's own chatter left out
			if err != nil {
				t.Fatal(err)
			}
			r, text := runJSON(t, p, o, tc.conf, frames)
			// The frames handled: a burst may still overflow a queue.
			e, steered := r.Encapsulations, r.Totals.Handled
			busy := 0
			for _, w := range r.Workers {
				if w.Handled > 0 {
					busy++
				}
			}
			t.Logf("%s: %d steered, workers %d busy, encapsulations %+v", tc.name, steered, busy, e)
			if r.Totals.Steered < frames || !r.Totals.Balanced || steered < frames/2 {
				t.Fatalf("totals %+v", r.Totals)
			}
			hint := strings.Contains(text, "Hint: ") && strings.Contains(text, "-tunnels inner would spread them")
			switch tc.name {
			case "outer":
				if busy != 1 || e.NotDecapsulated != steered || e.NotDecapsulatedKinds[steer.EncapVXLAN] != steered || !hint ||
					r.Config.Tunnels != steer.TunnelsOuter {
					t.Errorf("-tunnels outer: %d busy workers, %+v, hint %v; want one worker, every frame not decapsulated, a hint", busy, e, hint)
				}
			case "inner":
				if busy != workers || e.Decapsulated != steered || e.Kinds[steer.EncapVXLAN] != steered || e.Stacks["vxlan"] != steered || hint ||
					r.Config.Tunnels != steer.TunnelsInner {
					t.Errorf("-tunnels inner: %d busy workers, %+v, hint %v; want all %d, every frame decapsulated, no hint", busy, e, hint, workers)
				}
			case "inner-other-port":
				if busy != 1 || e.Decapsulated != 0 || e.Plain != steered || len(r.Config.VXLANPorts) != 1 || r.Config.VXLANPorts[0] != 8472 {
					t.Errorf("-vxlan-ports 8472: %d busy workers, %+v, config %+v; want one worker, nothing decapsulated", busy, e, r.Config)
				}
			case "udp":
				if busy != 1 || r.Config.UDP4Tuple {
					t.Errorf("UDP between two hosts: %d busy workers, want one (hashed by the addresses)", busy)
				}
			default: // UDP over its 4-tuple: random ports spread
				if busy != workers || !r.Config.HashTypes.Has(hash.TypeUDPIPv4) {
					t.Errorf("%s: %d busy workers, hash types %v; want all %d", tc.name, busy, r.Config.HashTypes, workers)
				}
			}
		})
	}
}
