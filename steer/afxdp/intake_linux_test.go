//go:build linux

package afxdp

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/livetest"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/kgroup"
)

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
			rd := livetest.Read(s, nil)
			livetest.Background(t, p)
			livetest.WaitFor(t, "no frame read", func() bool { return rd.Frames() > 1000 })
			in0 := livetest.IPInReceives(t, p.A)
			time.Sleep(50 * time.Millisecond)
			if in := livetest.IPInReceives(t, p.A); in != in0 {
				t.Errorf("the kernel stack took %d frames while the socket was attached", in-in0)
			}
			if err := s.StopIntake(); err != nil {
				t.Fatal(err)
			}
			if livetest.XDPAttached(t, p.A) {
				t.Error("the program is still on the link after StopIntake")
			}
			if a := s.Info().Attach; a != AttachNone {
				t.Errorf("Info().Attach %v after StopIntake, want none", a)
			}
			prod, _ := s.rxProduced()
			livetest.WaitFor(t, "the ring is not read dry", func() bool {
				st, _ := s.Stats()
				return s.rxConsumed() == prod && st.Delivered == rd.Frames()
			})
			st0, err := s.Stats()
			if err != nil {
				t.Fatal(err)
			}
			rx0, in1 := rxPackets(t, p.A), livetest.IPInReceives(t, p.A)
			time.Sleep(200 * time.Millisecond)
			st1, _ := s.Stats()
			prod1, _ := s.rxProduced()
			rx1, in2 := rxPackets(t, p.A), livetest.IPInReceives(t, p.A)
			if prod1 != prod {
				t.Errorf("%d frames reached the RX ring after StopIntake returned", prod1-prod)
			}
			if st1 != st0 || st1.Delivered != rd.Frames() {
				t.Errorf("the socket's counters moved after StopIntake: %+v, then %+v (read %d)", st0, st1, rd.Frames())
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
			if err != nil || ss.Mode != mode.String()+", copy" || ss.Received != st0.Received() {
				t.Errorf("SourceStats after StopIntake: %+v, %v; want attach %v and the counters", ss, err, mode)
			}
			rd.Stop(t)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := s.StopIntake(); err != nil {
				t.Errorf("StopIntake after Close: %v", err)
			}
			if ss, _ := s.SourceStats(); ss.Mode != mode.String()+", copy" {
				t.Errorf("SourceStats after Close: mode %q; want attach %v", ss.Mode, mode)
			}
			t.Logf("%v: read %d, %+v; after the stop the stack took %d of %d frames", mode, rd.Frames(), st0, in2-in1, rx1-rx0)
		})
	}
}

// rxConsumed returns the RX ring's consumer index as the reader last
// published it, for tests; the source must be open.
func (s *Source) rxConsumed() uint32 { return atomic.LoadUint32(s.rx.Cons) }

// TestStopIntakeRefused: StopIntake on a group's socket, or on a socket
// opened with AttachNone (the caller's program feeds it), is an steer.ErrConfig
// that says what to do; neither socket is disturbed.
func TestStopIntakeRefused(t *testing.T) {
	netns.Require(t)
	p := netns.New(t, netns.Options{})
	s := openIn(t, p.A, Config{Attach: AttachNone})
	if err := s.StopIntake(); !errors.Is(err, steer.ErrConfig) || !strings.Contains(err.Error(), "XSKMAP") {
		t.Errorf("AttachNone: %v, want steer.ErrConfig", err)
	}
	if ss, _ := s.SourceStats(); ss.Mode != "none, copy" {
		t.Errorf("a socket no program of the package fed: SourceStats mode %q", ss.Mode)
	}
	s.Close()
	var g *Group
	if err := p.A.Do(func() (err error) { g, err = OpenGroup(p.A.Link, 2, Config{}); return err }); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Source(1).StopIntake(); !errors.Is(err, steer.ErrConfig) || !strings.Contains(err.Error(), "Steering's StopIntake") {
		t.Errorf("a group's socket: %v, want steer.ErrConfig naming the Steering's StopIntake", err)
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
	if ss, _ := s.SourceStats(); ss.Mode != "generic, copy" || s.Info().Attach != AttachNone {
		t.Errorf("after Close: SourceStats mode %q, Info %v; want generic and none", ss.Mode, s.Info().Attach)
	}
	d, err := steer.New(steer.Config{Workers: 2, Dispatch: steer.Direct}, func(*steer.Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	var g *Group
	var st *kgroup.Steering
	err = p.A.Do(func() (err error) {
		if g, err = OpenGroup(p.A.Link, 2, Config{}); err != nil {
			return err
		}
		st, err = NewSteering(d, g, kgroup.Options{})
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
		if ss, _ := s.SourceStats(); ss.Mode != mode.String()+", copy" || s.Info().Attach != AttachNone {
			t.Errorf("socket %d after the Steering's Close: SourceStats mode %q, Info %v; want %v and none", i, ss.Mode, s.Info().Attach, mode)
		}
	}
}
