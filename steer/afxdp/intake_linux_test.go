//go:build linux

package afxdp

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
)

// ipInReceives reads the IPv4 stack's InReceives counter inside ns
// (/proc/net/snmp): the frames the kernel stack took in.
func ipInReceives(t testing.TB, ns *netns.NS) uint64 {
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

// background sends UDP frames from B to A, about 20us apart, until the
// test ends (or 400000 frames are sent).
func background(t *testing.T, p *netns.Pair) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { trafgenUDP(t, ctx, p, 400000, "--gap", "20us") })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// waitFor polls cond every 10ms for up to 5s and fails the test with
// what if it does not hold.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 5s: %s", what)
		}
	}
}

// TestStopIntake stops Open's socket while traffic flows, in both attach
// modes: the program leaves the link, the ring is read dry and then stays
// empty (its producer index does not move again) while the interface keeps
// receiving, the queue's frames reach the kernel stack (IPv4 InReceives
// grows, which it does not while the socket takes them), the counters add
// up (Received == Delivered + drops, Delivered the frames read), and
// SourceStats keeps the mode the socket received in, after Close too.
func TestStopIntake(t *testing.T) {
	netns.Require(t, "trafgen", "ethtool")
	for _, mode := range []AttachMode{AttachNative, AttachGeneric} {
		t.Run(mode.String(), func(t *testing.T) {
			p := netns.New(t, netns.Options{})
			s := openIn(t, p.A, Config{Attach: mode})
			rd := read(s, nil)
			background(t, p)
			waitFor(t, "no frame read", func() bool { return rd.frames.Load() > 1000 })
			in0 := ipInReceives(t, p.A)
			time.Sleep(50 * time.Millisecond)
			if in := ipInReceives(t, p.A); in != in0 {
				t.Errorf("the kernel stack took %d frames while the socket was attached", in-in0)
			}
			if err := s.StopIntake(); err != nil {
				t.Fatal(err)
			}
			if xdpAttached(t, p.A) {
				t.Error("the program is still on the link after StopIntake")
			}
			if a := s.Info().Attach; a != AttachNone {
				t.Errorf("Info().Attach %v after StopIntake, want none", a)
			}
			prod, _ := s.rxProduced()
			waitFor(t, "the ring is not read dry", func() bool {
				st, _ := s.Stats()
				return s.rxConsumed() == prod && st.Delivered == rd.frames.Load()
			})
			st0, err := s.Stats()
			if err != nil {
				t.Fatal(err)
			}
			rx0, in1 := rxPackets(t, p.A), ipInReceives(t, p.A)
			time.Sleep(200 * time.Millisecond)
			st1, _ := s.Stats()
			prod1, _ := s.rxProduced()
			rx1, in2 := rxPackets(t, p.A), ipInReceives(t, p.A)
			if prod1 != prod {
				t.Errorf("%d frames reached the RX ring after StopIntake returned", prod1-prod)
			}
			if st1 != st0 || st1.Delivered != rd.frames.Load() {
				t.Errorf("the socket's counters moved after StopIntake: %+v, then %+v (read %d)", st0, st1, rd.frames.Load())
			}
			if rx1 == rx0 || in2 == in1 {
				t.Errorf("in 200ms after StopIntake the link received %d frames and the kernel stack took %d; want traffic reaching the stack", rx1-rx0, in2-in1)
			}
			if st0.Received() != st0.Delivered+st0.RxDropped+st0.RxRingFull {
				t.Errorf("counters %+v do not add up", st0)
			}
			if err := s.StopIntake(); err != nil {
				t.Errorf("a second StopIntake: %v", err)
			}
			ss, err := s.SourceStats()
			if err != nil || ss.XDP == nil || ss.XDP.Attach != mode.String() || ss.Received != st0.Received() {
				t.Errorf("SourceStats after StopIntake: %+v, %v; want attach %v and the counters", ss, err, mode)
			}
			rd.stop(t)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := s.StopIntake(); err != nil {
				t.Errorf("StopIntake after Close: %v", err)
			}
			if ss, _ := s.SourceStats(); ss.XDP == nil || ss.XDP.Attach != mode.String() {
				t.Errorf("SourceStats after Close: %+v; want attach %v", ss.XDP, mode)
			}
			t.Logf("%v: read %d, %+v; after the stop the stack took %d of %d frames", mode, rd.frames.Load(), st0, in2-in1, rx1-rx0)
		})
	}
}

// rxConsumed returns the RX ring's consumer index as the reader last
// published it, for tests; the source must be open.
func (s *Source) rxConsumed() uint32 { return atomic.LoadUint32(s.rx.cons) }

// TestSteeringStopIntake stops a Steering's group of two while traffic
// flows: the program leaves the link, its counters stop, each socket's
// ring is read dry with Received equal to its Redirected count and
// nothing more arrives while the interface keeps receiving, the frames
// reach the kernel stack, and the sockets' SourceStats keep the attach
// mode (after the Steering's and the group's Close too).
func TestSteeringStopIntake(t *testing.T) {
	netns.Require(t, "trafgen", "ethtool")
	p := netns.New(t, netns.Options{})
	l := startSteer(t, p, 2, Config{Attach: AttachGeneric}, SteeringOptions{})
	background(t, p)
	waitFor(t, "no frame handled on both workers", func() bool {
		ds := l.d.Stats()
		return len(ds.Workstreams) == 2 && ds.Workstreams[0].Handled > 500 && ds.Workstreams[1].Handled > 500
	})
	if err := l.st.StopIntake(); err != nil {
		t.Fatal(err)
	}
	if xdpAttached(t, p.A) {
		t.Error("the program is still on the link after StopIntake")
	}
	if a := l.g.Info().Attach; a != AttachNone {
		t.Errorf("Info().Attach %v after StopIntake, want none", a)
	}
	ss0 := l.st.Stats()
	var prods []uint32
	for _, s := range l.g.Sources() {
		v, _ := s.rxProduced()
		prods = append(prods, v)
	}
	state := func() string {
		ds := l.d.Stats()
		var b strings.Builder
		for i, s := range l.g.Sources() {
			st, _ := s.Stats()
			fmt.Fprintf(&b, "socket %d: %+v, consumed %d; ", i, st, s.rxConsumed())
		}
		fmt.Fprintf(&b, "dispatcher frames %d handled %d dropped %d", ds.Frames, ds.Handled(), ds.Dropped())
		return b.String()
	}
	waitFor(t, "the rings are not read dry", func() bool {
		for i, s := range l.g.Sources() {
			st, _ := s.Stats()
			if st.Received() != ss0.Redirected[i] || s.rxConsumed() != prods[i] {
				return false
			}
		}
		ds := l.d.Stats()
		return ds.Frames == ds.Handled()+ds.Dropped()
	})
	before := state()
	rx0, in0 := rxPackets(t, p.A), ipInReceives(t, p.A)
	time.Sleep(200 * time.Millisecond)
	ss1 := l.st.Stats()
	rx1, in1 := rxPackets(t, p.A), ipInReceives(t, p.A)
	if after := state(); after != before {
		t.Errorf("the sockets moved after StopIntake:\n%s\nthen\n%s", before, after)
	}
	for i, s := range l.g.Sources() {
		if v, _ := s.rxProduced(); v != prods[i] {
			t.Errorf("socket %d: %d frames reached its RX ring after StopIntake returned", i, v-prods[i])
		}
	}
	if ss1.Frames() != ss0.Frames() {
		t.Errorf("the program saw %d frames after StopIntake", ss1.Frames()-ss0.Frames())
	}
	if rx1 == rx0 || in1 == in0 {
		t.Errorf("in 200ms after StopIntake the link received %d frames and the kernel stack took %d; want traffic reaching the stack", rx1-rx0, in1-in0)
	}
	if err := l.st.StopIntake(); err != nil {
		t.Errorf("a second StopIntake: %v", err)
	}
	checkAttach := func(when string) {
		t.Helper()
		for i, s := range l.g.Sources() {
			if ss, err := s.SourceStats(); err != nil || ss.XDP == nil || ss.XDP.Attach != "generic" {
				t.Errorf("%s: socket %d: SourceStats %+v, %v; want attach generic", when, i, ss, err)
			}
		}
	}
	checkAttach("after StopIntake")
	l.stop()
	checkAttach("after the Steering's Close")
	if err := l.st.StopIntake(); err != nil {
		t.Errorf("StopIntake after Close: %v", err)
	}
	if err := l.g.Close(); err != nil {
		t.Fatal(err)
	}
	checkAttach("after the group's Close")
	t.Logf("redirected %v; after the stop the stack took %d of %d frames", ss0.Redirected, in1-in0, rx1-rx0)
}

// TestStopIntakeRefused: StopIntake on a group's socket, or on a socket
// opened with AttachNone (the caller's program feeds it), is an ErrConfig
// that says what to do; neither socket is disturbed.
func TestStopIntakeRefused(t *testing.T) {
	netns.Require(t)
	p := netns.New(t, netns.Options{})
	s := openIn(t, p.A, Config{Attach: AttachNone})
	if err := s.StopIntake(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "XSKMAP") {
		t.Errorf("AttachNone: %v, want ErrConfig", err)
	}
	if ss, _ := s.SourceStats(); ss.XDP == nil || ss.XDP.Attach != "none" {
		t.Errorf("a socket no program of the package fed: SourceStats %+v", ss.XDP)
	}
	s.Close()
	var g *Group
	if err := p.A.Do(func() (err error) { g, err = OpenGroup(p.A.Link, 2, Config{}); return err }); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Source(1).StopIntake(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "Steering.StopIntake") {
		t.Errorf("a group's socket: %v, want ErrConfig naming Steering.StopIntake", err)
	}
	var b steer.Batch
	if err := g.Source(1).ReadBatch(context.Background(), &b); err != nil {
		t.Errorf("the group's socket after the refusal: %v", err)
	}
}

// TestSourceStatsAttach: a socket's SourceStats keep the mode of the
// program that fed it once that program is gone: after Close of Open's
// socket, and after a Steering's Close, while Info().Attach says none.
func TestSourceStatsAttach(t *testing.T) {
	netns.Require(t)
	p := netns.New(t, netns.Options{})
	s := openIn(t, p.A, Config{Attach: AttachGeneric})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if ss, _ := s.SourceStats(); ss.XDP == nil || ss.XDP.Attach != "generic" || s.Info().Attach != AttachNone {
		t.Errorf("after Close: SourceStats %+v, Info %v; want generic and none", ss.XDP, s.Info().Attach)
	}
	d, err := steer.New(steer.Config{Workers: 2, Dispatch: steer.Direct}, func(*steer.Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	var g *Group
	var st *Steering
	err = p.A.Do(func() (err error) {
		if g, err = OpenGroup(p.A.Link, 2, Config{}); err != nil {
			return err
		}
		st, err = NewSteering(d, g, SteeringOptions{})
		return err
	})
	if g != nil {
		defer g.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	mode := g.Info().Attach
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for i, s := range g.Sources() {
		if ss, _ := s.SourceStats(); ss.XDP == nil || ss.XDP.Attach != mode.String() || s.Info().Attach != AttachNone {
			t.Errorf("socket %d after the Steering's Close: SourceStats %+v, Info %v; want %v and none", i, ss.XDP, s.Info().Attach, mode)
		}
	}
}
