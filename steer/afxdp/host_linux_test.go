//go:build linux

package afxdp

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/livetest"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/internal/pace"
	"github.com/rpsgo/rps/steer"
)

// connectFromB dials TCP port 9 of A's address from B, where nothing
// listens: "refused" when A's stack answered (a reset), "timeout" when
// nothing did within limit, else the error's text.
func connectFromB(t *testing.T, p *netns.Pair, limit time.Duration) string {
	t.Helper()
	var got string
	err := p.B.Do(func() error {
		c, err := net.DialTimeout("tcp4", netip.AddrPortFrom(p.A.Addr.Addr(), 9).String(), limit)
		switch {
		case err == nil:
			c.Close()
			got = "connected"
		case errors.Is(err, syscall.ECONNREFUSED):
			got = "refused"
		case errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "timeout"):
			got = "timeout"
		default:
			got = err.Error()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// forgetA makes B forget A's link-layer address, so that the next
// connection resolves it again with ARP.
func forgetA(t *testing.T, p *netns.Pair) {
	t.Helper()
	if out, err := p.B.Exec(context.Background(), "ip", "neigh", "flush", "dev", p.B.Link); err != nil {
		t.Fatalf("ip neigh flush: %v: %s", err, out)
	}
}

// TestHostRefused: on an interface that has an address, Open and
// OpenGroup refuse by default, with an error wrapping ErrHostAddrs and
// steer.ErrConfig that names the address and what to set, and leave no
// descriptor or program behind; a socket fed by no program of the package
// (AttachNone) and an interface without addresses open as before.
func TestHostRefused(t *testing.T) {
	p := netns.New(t, netns.Options{})
	fds := openFDs(t)
	for _, open := range []func() error{
		func() error {
			s, err := Open(p.A.Link, Config{NumFrames: 64, RingSize: 64})
			closeIf(s, err)
			return err
		},
		func() error {
			g, err := OpenGroup(p.A.Link, 2, Config{NumFrames: 64, RingSize: 64})
			if err == nil {
				g.Close()
			}
			return err
		},
	} {
		err := p.A.Do(open)
		if !errors.Is(err, ErrHostAddrs) || !errors.Is(err, steer.ErrConfig) || !strings.Contains(err.Error(), p.A.Addr.String()) ||
			!strings.Contains(err.Error(), "HostPass") || !strings.Contains(err.Error(), "HostTake") {
			t.Errorf("an interface with an address: %v; want ErrHostAddrs naming %v, HostPass and HostTake", err, p.A.Addr)
		}
		t.Log(err)
	}
	if livetest.XDPAttached(t, p.A) || openFDs(t) != fds {
		t.Errorf("a refused open left a program on the link (%v) or descriptors (%d, had %d)", livetest.XDPAttached(t, p.A), openFDs(t), fds)
	}
	s := openIn(t, p.A, Config{NumFrames: 64, RingSize: 64, Attach: AttachNone, Host: HostRefuse})
	s.Close()
	if out, err := p.A.Exec(context.Background(), "ip", "addr", "flush", "dev", p.A.Link); err != nil {
		t.Fatalf("ip addr flush: %v: %s", err, out)
	}
	if err := p.A.Do(func() error {
		s, err := Open(p.A.Link, Config{NumFrames: 64, RingSize: 64})
		closeIf(s, err)
		return err
	}); err != nil {
		t.Errorf("an interface without addresses: %v", err)
	}
}

// closeIf closes s when err is nil.
func closeIf(s *Source, err error) {
	if err == nil {
		s.Close()
	}
}

// TestHostPass captures A's link with AF_XDP while B connects to A's
// address (TCP, nothing listening, B having to resolve A's address with
// ARP first): with HostPass the connection is refused, A's stack having
// answered the ARP request and the SYN, both passed and counted, while
// paced UDP frames to another address all reach the sockets; with
// HostTake the sockets take the ARP request too and the connection times
// out. It runs Open's socket, and a group steered by its Steering, whose
// program counts the host's frames as host_passed.
func TestHostPass(t *testing.T) {
	const frames = 2000
	p := netns.New(t, netns.Options{})
	if got := connectFromB(t, p, 2*time.Second); got != "refused" {
		t.Fatalf("before any capture, a connection to A: %s, want refused", got)
	}
	spec := pace.Spec{Dev: p.B.Link, Frames: frames, Rate: 50000, Size: 64, Src: p.B.Addr.Addr(), Dst: netip.MustParseAddr("192.0.2.1")}
	for _, group := range []bool{false, true} {
		for _, mode := range []HostMode{HostPass, HostTake} {
			name := "open-" + mode.String()
			if group {
				name = "group-" + mode.String()
			}
			t.Run(name, func(t *testing.T) {
				forgetA(t, p)
				var passed func() uint64
				var received func() uint64
				cfg := Config{Host: mode, NumFrames: 1024, RingSize: 512}
				if !group {
					s := openIn(t, p.A, cfg)
					r := livetest.Read(s, nil)
					defer r.Stop(t)
					passed = func() uint64 {
						st, _ := s.Stats()
						// What the report and the metrics print carries it too.
						if ss, _ := s.SourceStats(); kernelCounter(ss, "passed_to_kernel") != st.PassedToKernel {
							t.Errorf("SourceStats gives passed_to_kernel %d, Stats %d", kernelCounter(ss, "passed_to_kernel"), st.PassedToKernel)
						}
						return st.PassedToKernel
					}
					received = func() uint64 { st, _ := s.Stats(); return st.Received() }
				} else {
					g, st := openSteered(t, p.A, cfg)
					ctx, cancel := context.WithCancel(context.Background())
					done := make(chan error, 1)
					go func() { done <- st.Run(ctx) }()
					defer func() { cancel(); <-done }()
					passed = func() uint64 { return st.Stats().Counter(counterHostPassed) }
					received = func() uint64 { gs, _ := g.Stats(); return gs.Received() }
				}
				got := connectFromB(t, p, time.Second)
				want := map[HostMode]string{HostPass: "refused", HostTake: "timeout"}[mode]
				if got != want {
					t.Errorf("a connection to A during the capture: %s, want %s", got, want)
				}
				var sent int
				if err := p.B.Do(func() (err error) { sent, _, err = pace.Send(spec); return err }); err != nil || sent != frames {
					t.Fatalf("sent %d of %d: %v", sent, frames, err)
				}
				livetest.WaitFor(t, "the paced frames did not all reach the sockets", func() bool { return received() >= frames })
				if n := passed(); mode == HostPass && n < 2 || mode == HostTake && n != 0 {
					t.Errorf("%d frames passed to the host's stack, want the ARP request and the SYN with HostPass, none with HostTake", n)
				}
				t.Logf("connect: %s; passed %d; the sockets received %d", got, passed(), received())
			})
		}
	}
	if livetest.XDPAttached(t, p.A) {
		t.Error("a program is left on the link")
	}
	if got := connectFromB(t, p, 2*time.Second); got != "refused" {
		t.Errorf("after the captures, a connection to A: %s, want refused", got)
	}
}
