//go:build linux

package afxdp

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rpsgo/rps/internal/livetest"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/filter"
)

// TestCounters sends a known number of frames through the veth pair and
// checks that every frame the interface counted reached the socket, in
// each attach and bind mode, and that the socket's program goes away with
// Close.
func TestCounters(t *testing.T) {
	netns.Require(t, "trafgen", "ethtool")
	cases := []struct {
		name string
		cfg  Config
		want AttachMode
	}{
		{"auto", Config{}, AttachNative},
		{"generic", Config{Attach: AttachGeneric}, AttachGeneric},
		{"copy-bind", Config{Bind: BindCopy, Attach: AttachNative}, AttachNative},
		{"copy-batches", Config{Copy: true, BatchSize: 16}, AttachNative},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := netns.New(t, netns.Options{})
			s := openIn(t, p.A, c.cfg)
			info := s.Info()
			if info.Attach != c.want || info.ZeroCopy || info.Ifname != p.A.Link || info.Queue != 0 {
				t.Fatalf("info %+v: want attach %v, copy mode (veth has no zero copy)", info, c.want)
			}
			if !livetest.XDPAttached(t, p.A) {
				t.Fatal("no XDP program on the link while the socket is open")
			}
			t.Logf("%s: attach %v, %s", c.name, info.Attach, info.Mode())
			r0 := rxPackets(t, p.A)
			var bad int
			rd := livetest.Read(s, func(b *steer.Batch) {
				for _, f := range b.Frames {
					if len(f.Data) != 64 || f.WireLen != 64 || f.Data[12] != 0x08 || f.Data[23] != 17 {
						bad++
					}
				}
			})
			const n = 20000
			trafgenUDP(t, context.Background(), p, n)
			rx, st := settle(t, p.A, r0, s, rd.Frames)
			rd.Stop(t)
			if rx < n {
				t.Errorf("the interface counted %d frames, %d were sent", rx, n)
			}
			if bad > 0 {
				t.Errorf("%d frames are not the 64-byte UDP frames sent", bad)
			}
			if st.RxInvalidDescs != 0 {
				t.Errorf("invalid descriptors: %+v", st)
			}
			ss, err := s.SourceStats()
			if err != nil || ss.Received != st.Received() || ss.Dropped != st.RxDropped+st.RxRingFull ||
				kernelCounter(ss, "rx_ring_full") != st.RxRingFull || ss.Mode != c.want.String()+", copy" {
				t.Errorf("SourceStats %+v, %v against %+v", ss, err, st)
			}
			t.Logf("rx %d: %+v", rx, st)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if livetest.XDPAttached(t, p.A) {
				t.Error("an XDP program is still on the link after Close")
			}
			if st2, err := s.Stats(); err != nil || st2.Delivered != st.Delivered {
				t.Errorf("Stats after Close: %+v, %v", st2, err)
			}
		})
	}
}

// TestDropsAddUp floods a small ring whose reader is slow: the kernel
// drops frames (no FILL buffer, or a full RX ring) and counts them, and
// the counts still add up to the interface's.
func TestDropsAddUp(t *testing.T) {
	netns.Require(t, "trafgen", "ethtool")
	p := netns.New(t, netns.Options{})
	s := openIn(t, p.A, Config{NumFrames: 64, RingSize: 32, BatchSize: 8})
	r0 := rxPackets(t, p.A)
	rd := livetest.Read(s, func(b *steer.Batch) { time.Sleep(50 * time.Microsecond) })
	trafgenUDP(t, context.Background(), p, 50000)
	rx, st := settle(t, p.A, r0, s, rd.Frames)
	rd.Stop(t)
	t.Logf("rx %d: %+v", rx, st)
	if st.RxDropped+st.RxRingFull == 0 {
		t.Errorf("no drops counted under a flood of a 32-entry ring: %+v", st)
	}
	if st.Delivered == 0 {
		t.Errorf("nothing delivered: %+v", st)
	}
}

// TestHeldFramesStarveTheRing holds every batch: once the UMEM's chunks
// are all held, the kernel has no buffer and drops (rx_dropped in copy
// mode); releasing them refills the FILL ring and frames flow again.
func TestHeldFramesStarveTheRing(t *testing.T) {
	netns.Require(t, "trafgen", "ethtool")
	p := netns.New(t, netns.Options{})
	const frames = 64
	s := openIn(t, p.A, Config{NumFrames: frames, RingSize: 64, BatchSize: 16, PollTimeout: 20 * time.Millisecond})
	go trafgenUDP(t, context.Background(), p, 2000, "--gap", "100us")
	var held []steer.Batch
	got := 0
	deadline := time.Now().Add(5 * time.Second)
	for got < frames && time.Now().Before(deadline) {
		var b steer.Batch
		if err := s.ReadBatch(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		if len(b.Frames) > 0 {
			got += len(b.Frames)
			held = append(held, b)
		}
	}
	if got != frames {
		t.Fatalf("read %d frames holding them all, want the UMEM's %d", got, frames)
	}
	// Every chunk is held: nothing more can arrive.
	var b steer.Batch
	if err := s.ReadBatch(context.Background(), &b); err != nil || len(b.Frames) != 0 {
		t.Fatalf("read %d frames with every chunk held (%v)", len(b.Frames), err)
	}
	time.Sleep(50 * time.Millisecond)
	st, _ := s.Stats()
	if st.RxDropped == 0 || st.RxFillRingEmptyDescs == 0 {
		t.Errorf("no drop counted with every chunk held: %+v", st)
	}
	for _, h := range held {
		h.Release()
	}
	deadline = time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if err := s.ReadBatch(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		if len(b.Frames) > 0 {
			b.Release()
			return
		}
	}
	t.Fatal("no frame after the held batches were released")
}

// TestReadBatchContext checks that ReadBatch returns ctx's error when ctx
// ends while it waits in poll, and an empty batch at the poll timeout.
func TestReadBatchContext(t *testing.T) {
	netns.Require(t, "ethtool")
	p := netns.New(t, netns.Options{})
	s := openIn(t, p.A, Config{NumFrames: 64, RingSize: 64, PollTimeout: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var b steer.Batch
	start := time.Now()
	if err := s.ReadBatch(ctx, &b); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReadBatch: %v, want the context's deadline", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("ReadBatch returned %v after the context ended", d)
	}
	s2 := openIn(t, p.B, Config{NumFrames: 64, RingSize: 64, PollTimeout: 20 * time.Millisecond})
	if err := s2.ReadBatch(context.Background(), &b); err != nil || len(b.Frames) != 0 {
		t.Fatalf("ReadBatch at the poll timeout: %d frames, %v", len(b.Frames), err)
	}
}

// TestOpenErrors checks the errors of an open that cannot work.
func TestOpenErrors(t *testing.T) {
	netns.Require(t, "ethtool")
	p := netns.New(t, netns.Options{})
	openIn(t, p.A, Config{NumFrames: 64, RingSize: 64})
	err := p.A.Do(func() error {
		s, err := Open(p.A.Link, Config{NumFrames: 64, RingSize: 64, Attach: AttachNone})
		if err == nil {
			s.Close()
		}
		return err
	})
	if err == nil {
		t.Error("a second socket bound to a held queue")
	}
	err = p.B.Do(func() error {
		_, err := Open(p.B.Link, Config{NumFrames: 64, RingSize: 64, Bind: BindZeroCopy, Host: HostTake})
		return err
	})
	if !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("zero copy on veth: %v, want EOPNOTSUPP", err)
	}
	// A queue the device does not have: the error says what to check.
	err = p.B.Do(func() error {
		_, err := Open(p.B.Link, Config{NumFrames: 64, RingSize: 64, Queue: 5, Host: HostTake})
		return err
	})
	if !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "receive queue 5") {
		t.Errorf("queue 5 of a one-queue veth: %v, want EINVAL naming the queue", err)
	}
	err = p.A.Do(func() error {
		_, err := Open("nonexistent0", Config{})
		return err
	})
	if err == nil {
		t.Error("opened a missing interface")
	}
	if _, err := Open("lo", Config{NumFrames: 3}); !errors.Is(err, steer.ErrConfig) {
		t.Errorf("3 frames: %v, want steer.ErrConfig", err)
	}
}

// TestFilter runs user-space filters: one that keeps UDP frames cut to 42
// bytes (a filter's snap length) and one that rejects everything, whose
// frames are counted as Filtered and still add up with the interface's.
func TestFilter(t *testing.T) {
	netns.Require(t, "trafgen", "ethtool")
	udp42, err := filter.Parse("{ 0x30, 0, 0, 0x00000017 },\n{ 0x15, 0, 1, 0x00000011 },\n{ 0x6, 0, 0, 0x0000002a },\n{ 0x6, 0, 0, 0x00000000 },")
	if err != nil {
		t.Fatal(err)
	}
	none, err := filter.Parse("{ 0x6, 0, 0, 0x00000000 },")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		prog *filter.Program
		keep bool
	}{{"udp-42", udp42, true}, {"none", none, false}} {
		t.Run(c.name, func(t *testing.T) {
			p := netns.New(t, netns.Options{})
			s := openIn(t, p.A, Config{Filter: c.prog})
			r0 := rxPackets(t, p.A)
			var bad int
			rd := livetest.Read(s, func(b *steer.Batch) {
				for _, f := range b.Frames {
					if len(f.Data) != 42 || f.WireLen != 64 {
						bad++
					}
				}
			})
			const n = 5000
			trafgenUDP(t, context.Background(), p, n, "--gap", "20us")
			_, st := settle(t, p.A, r0, s, rd.Frames)
			rd.Stop(t)
			t.Logf("%+v", st)
			if bad > 0 {
				t.Errorf("%d frames not cut to the filter's 42 bytes", bad)
			}
			switch {
			case c.keep && (st.Delivered < n || st.Filtered != 0):
				t.Errorf("the UDP filter let %d of %d frames through, filtered %d", st.Delivered, n, st.Filtered)
			case !c.keep && (st.Delivered != 0 || st.Filtered < n):
				t.Errorf("the reject-all filter let %d frames through, filtered %d of %d", st.Delivered, st.Filtered, n)
			}
			if ss, _ := s.SourceStats(); ss.Filtered != st.Filtered {
				t.Errorf("SourceStats.Filtered %d, Stats.Filtered %d", ss.Filtered, st.Filtered)
			}
		})
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
	if err := p.A.Do(func() (err error) { g, err = OpenGroup(p.A.Link, 2, Config{Host: HostTake}); return err }); err != nil {
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
	g, st := openSteered(t, p.A, Config{Host: HostTake})
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
