//go:build linux

package afpacket

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/livetest"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/filter"
	"github.com/rpsgo/rps/steer/kgroup"
)

// frameSpec is a trafgen packet from B to A: IPv4 TCP (an ACK) or UDP to
// dport from a random source port in 49152-49407 (never a port a filter of
// these tests names, so that "tcp port 5201" cannot match a frame to port
// 80 by its source port), 64 bytes on the wire (68 with an
// 802.1Q tag carrying tci when tci is not zero). Its destination MAC is
// not A's, so A's stack drops it without a reply (no RST, no ICMP, no ARP):
// the frames B sends are all the interface receives.
func frameSpec(p *netns.Pair, proto uint8, dport uint16, tci uint16) string {
	src, dst := p.B.Addr.Addr().As4(), p.A.Addr.Addr().As4()
	var sb strings.Builder
	sb.WriteString("{\n 0x02, 0x00, 0x00, 0x00, 0x00, 0x99,\n 0x02, 0x00, 0x00, 0x00, 0x00, 0x02,\n")
	if tci != 0 {
		fmt.Fprintf(&sb, " c16(0x8100), c16(%d),\n", tci)
	}
	sb.WriteString(" c16(0x0800),\n")
	fmt.Fprintf(&sb, " 0x45, 0x00, c16(50), drnd(2), c16(0x4000), 64, %d, csumip(14, 33),\n", proto)
	fmt.Fprintf(&sb, " %d, %d, %d, %d,\n %d, %d, %d, %d,\n", src[0], src[1], src[2], src[3], dst[0], dst[1], dst[2], dst[3])
	if proto == 6 {
		fmt.Fprintf(&sb, " 0xc0, drnd(), c16(%d), drnd(4), c32(0), 0x50, 0x10, c16(512), c16(0), c16(0),\n fill(0x00, 10)\n}\n", dport)
	} else {
		fmt.Fprintf(&sb, " 0xc0, drnd(), c16(%d), c16(30), c16(0),\n fill(0x00, 22)\n}\n", dport)
	}
	return sb.String()
}

// trafgenSend sends count copies of spec from B and waits.
func trafgenSend(t *testing.T, p *netns.Pair, count int, spec string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "frame.cfg")
	if err := os.WriteFile(file, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := p.B.Exec(ctx, "trafgen", "--dev", p.B.Link, "--conf", file, "--num", strconv.Itoa(count),
		"--cpus", "1", "--no-sock-mem", "--notouch-irq", "--no-cpu-stats"); err != nil {
		t.Fatalf("trafgen: %v: %s", err, out)
	}
}

// compileIn compiles expr for a live capture on A's link, inside A.
func compileIn(t *testing.T, p *netns.Pair, expr string) []SockFilter {
	t.Helper()
	var f []SockFilter
	err := p.A.Do(func() (err error) {
		f, err = CompileFilter(p.A.Link, expr)
		return err
	})
	if err != nil {
		t.Fatalf("CompileFilter(%q): %v", expr, err)
	}
	return f
}

// waitFor polls cond every 50 ms for up to 10 s, and fails the test with
// what describe says when it does not hold twice in a row.
func waitFor(t *testing.T, cond func() bool, describe func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for ok := 0; ok < 2; {
		if cond() {
			ok++
		} else {
			ok = 0
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled after 10 s: %s", describe())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFilterLive sends three kinds of frames (TCP to port 5201, UDP to
// port 5201, TCP to port 80) and captures with the kernel filter "tcp port
// 5201": on one socket, in a HASH group (the filter replaces the
// drop-everything filter once the group is complete) and in an EBPF group
// steered by a dispatcher (the group's program picks the socket, the
// socket's filter decides). Exactly the TCP frames to 5201 must reach the
// sockets (tp_packets) and the handlers, while the interface counts all.
func TestFilterLive(t *testing.T) {
	netns.Require(t, "trafgen", "tcpdump", "ethtool")
	p := netns.New(t, netns.Options{})
	prog := compileIn(t, p, "tcp port 5201")
	const want, udp, other = 3000, 2000, 2000
	send := func(t *testing.T) uint64 {
		r0 := rx(t, p.A)
		trafgenSend(t, p, want, frameSpec(p, 6, 5201, 0))
		trafgenSend(t, p, udp, frameSpec(p, 17, 5201, 0))
		trafgenSend(t, p, other, frameSpec(p, 6, 80, 0))
		return r0
	}
	// bad counts frames that are not TCP to or from port 5201.
	check := func(bad *atomic.Int64) func(f *steer.Frame) {
		return func(f *steer.Frame) {
			if k, ok := parseFlow(f.Data); !ok || k.proto != 6 || (k.dport != 5201 && k.sport != 5201) {
				bad.Add(1)
			}
		}
	}
	cfg := Config{Filter: prog, IgnoreOutgoing: true, BlockTimeout: 2 * time.Millisecond}

	t.Run("single", func(t *testing.T) {
		var bad atomic.Int64
		src := openIn(t, p.A, p.A.Link, cfg)
		c := collect(src, check(&bad))
		r0 := send(t)
		var st Stats
		waitFor(t, func() bool {
			st, _ = src.Stats()
			return rx(t, p.A)-r0 == want+udp+other && st.Packets == want && st.Delivered == want && c.Frames() == want
		}, func() string {
			return fmt.Sprintf("rx delta %d (want %d), socket %+v, read %d (want %d)", rx(t, p.A)-r0, want+udp+other, st, c.Frames(), want)
		})
		c.Stop(t)
		if bad.Load() != 0 || st.Drops != 0 {
			t.Errorf("%d frames the filter should have rejected; %d ring drops", bad.Load(), st.Drops)
		}
	})

	t.Run("hash", func(t *testing.T) {
		var bad atomic.Int64
		g := openGroupIn(t, p.A, 2, cfg, FanoutHash, 0)
		var cs []*collector
		for _, s := range g.Sources() {
			cs = append(cs, collect(s, check(&bad)))
		}
		read := func() uint64 { return livetest.Total(cs) }
		r0 := send(t)
		var st Stats
		waitFor(t, func() bool {
			st, _ = g.Stats()
			return rx(t, p.A)-r0 == want+udp+other && st.Packets == want && read() == want
		}, func() string {
			return fmt.Sprintf("rx delta %d, group %+v, read %d (want %d)", rx(t, p.A)-r0, st, read(), want)
		})
		for i, c := range cs {
			c.Stop(t)
			if c.Frames() == 0 {
				t.Errorf("socket %d got no frame: the flows were not spread", i)
			}
		}
		if bad.Load() != 0 {
			t.Errorf("%d frames the filter should have rejected", bad.Load())
		}
	})

	t.Run("ebpf", func(t *testing.T) {
		var bad atomic.Int64
		badFrame := check(&bad)
		// The TCP frames to 5201 differ in the low byte of their source
		// port only: a random key sends them all to one worker once in
		// 256 keys, and then worker 1 handles nothing. This key splits
		// the 256 ports 128 to 128.
		d, err := steer.New(steer.Config{Workers: 2, Dispatch: steer.DispatchDirect, Hash: steer.HashConfig{Key: hash.MicrosoftKey[:]}}, func(pk *steer.Packet) {
			badFrame(&steer.Frame{Data: pk.Data})
		})
		if err != nil {
			t.Fatal(err)
		}
		g := openGroupIn(t, p.A, 2, cfg, FanoutEBPF, 0)
		st, err := NewSteering(d, g, kgroup.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ctx, cancel := context.WithCancel(context.Background())
		runErr := make(chan error, 1)
		go func() { runErr <- st.Run(ctx) }()
		r0 := send(t)
		var s steer.Stats
		waitFor(t, func() bool {
			s = d.Stats()
			recv, drop := sourceSums(&s)
			return rx(t, p.A)-r0 == want+udp+other && recv == want && drop == 0 && s.Handled() == want
		}, func() string {
			recv, drop := sourceSums(&s)
			return fmt.Sprintf("rx delta %d, kernel received %d, dropped %d, handled %d (want %d)", rx(t, p.A)-r0, recv, drop, s.Handled(), want)
		})
		cancel()
		if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
		if err := d.Close(context.Background()); err != nil {
			t.Error(err)
		}
		s = d.Stats()
		for _, w := range s.Workstreams {
			if w.Handled == 0 {
				t.Errorf("worker %d handled nothing: the program did not spread the flows", w.Worker)
			}
		}
		if bad.Load() != 0 || s.Frames != want {
			t.Errorf("%d frames the filter should have rejected; %d steered, want %d", bad.Load(), s.Frames, want)
		}
	})
}

// TestFilterVLANLive: the kernel takes the 802.1Q tag out of the frame
// before the socket filter runs, so "vlan 100" as compiled for a file
// (the tag in the bytes) matches nothing on a live socket, while the live
// form CompileFilter gives matches exactly the tagged frames, and
// "vlan 100 and tcp port 5201" reads the ports at their untagged offsets.
func TestFilterVLANLive(t *testing.T) {
	netns.Require(t, "trafgen", "tcpdump", "ethtool")
	p := netns.New(t, netns.Options{})
	fileForm, err := filter.Compile(filter.Options{}, "vlan 100")
	if err != nil {
		t.Fatal(err)
	}
	const tagged, untagged, otherTag = 500, 400, 300
	for _, tc := range []struct {
		name string
		prog []SockFilter
		want uint64
	}{
		{"file-form", SockFilters(fileForm), 0},
		{"live-form", compileIn(t, p, "vlan 100"), tagged},
		{"live-form-ports", compileIn(t, p, "vlan 100 and tcp port 5201"), tagged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := openIn(t, p.A, p.A.Link, Config{Filter: tc.prog, IgnoreOutgoing: true, BlockTimeout: 2 * time.Millisecond})
			var wrong atomic.Int64
			c := collect(src, func(f *steer.Frame) {
				if !f.HasVLAN || f.VLAN != 100 {
					wrong.Add(1)
				}
			})
			r0 := rx(t, p.A)
			trafgenSend(t, p, tagged, frameSpec(p, 6, 5201, 100))
			trafgenSend(t, p, untagged, frameSpec(p, 6, 5201, 0))
			trafgenSend(t, p, otherTag, frameSpec(p, 6, 5201, 200))
			var st Stats
			waitFor(t, func() bool {
				st, _ = src.Stats()
				return rx(t, p.A)-r0 == tagged+untagged+otherTag && st.Packets == tc.want && c.Frames() == tc.want
			}, func() string {
				return fmt.Sprintf("rx delta %d, socket %+v, read %d (want %d)", rx(t, p.A)-r0, st, c.Frames(), tc.want)
			})
			c.Stop(t)
			if wrong.Load() != 0 {
				t.Errorf("%d frames without tag 100", wrong.Load())
			}
		})
	}
}

// TestCompileFilterErrors: a bad expression is steer/filter's
// ErrExpression, a missing interface another error.
func TestCompileFilterErrors(t *testing.T) {
	netns.Require(t, "tcpdump")
	if _, err := CompileFilter("lo", "tcp", "port"); err == nil || !strings.Contains(err.Error(), "syntax error") {
		t.Errorf("bad expression: %v", err)
	}
	if _, err := CompileFilter("rps-no-such-if0", "tcp"); err == nil || !strings.Contains(err.Error(), "rps-no-such-if0") {
		t.Errorf("missing interface: %v", err)
	}
	// A program text needs neither tcpdump nor the interface.
	f, err := CompileFilter("rps-no-such-if0", "{ 0x6, 0, 0, 0x00040000 },")
	if err != nil || len(f) != 1 || f[0].Code != 6 || f[0].K != 0x40000 {
		t.Errorf("program text: %v, %v", f, err)
	}
}
