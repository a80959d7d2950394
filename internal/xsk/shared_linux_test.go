//go:build linux

package xsk_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rpsgo/rps/internal/livetest"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/internal/xsk"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/afxdp"
)

// TestSharedSender sends through a Sender sharing a receiving socket's
// UMEM and queue (SharedSender) while the socket receives: the frames
// arrive intact and counted, the socket's counters still add up to its
// link's, and the two never write each other's chunks (the frames read
// are the ones sent to the socket, whole). The Sender outlives the
// socket, and closing both leaves nothing behind. A second Sender, one on
// a socket that set no chunks aside, and OpenSender on the queue the
// socket holds are refused.
func TestSharedSender(t *testing.T) {
	netns.Require(t, "ethtool", "trafgen")
	before := livetest.OpenFDs(t)
	mapsBefore, areasBefore := livetest.SocketMaps(t), xsk.MappedAreas()
	p := netns.New(t, netns.Options{})
	const rxFrames, sendFrames = 256, 64
	var src *afxdp.Source
	if err := p.A.Do(func() (err error) {
		src, err = afxdp.Open(p.A.Link, afxdp.Config{NumFrames: rxFrames, SendFrames: sendFrames, Attach: afxdp.AttachGeneric, Host: afxdp.HostTake})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if err := p.A.Do(func() error {
		s, err := xsk.OpenSender(p.A.Link, xsk.SenderConfig{})
		if err == nil {
			s.Close()
		}
		return err
	}); !errors.Is(err, unix.EBUSY) {
		t.Errorf("OpenSender on the queue a receiving socket holds: %v, want EBUSY", err)
	}
	var s *xsk.Sender
	if err := p.A.Do(func() (err error) {
		s, err = xsk.SharedSender(src, xsk.SenderConfig{RingSize: 32, Wait: 2 * time.Second})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if info, sinfo := s.Info(), src.Info(); info.Ifindex != sinfo.Ifindex || info.Queue != sinfo.Queue || info.ZeroCopy != sinfo.ZeroCopy {
		t.Errorf("Sender %+v on another queue than the socket %+v", info, sinfo)
	}
	if s.Config().NumFrames != sendFrames {
		t.Errorf("Sender config %+v: want the %d chunks set aside", s.Config(), sendFrames)
	}
	if err := p.A.Do(func() error { _, err := xsk.SharedSender(src, xsk.SenderConfig{}); return err }); !errors.Is(err, steer.ErrConfig) {
		t.Errorf("a second Sender on the socket: %v, want steer.ErrConfig", err)
	}

	r0 := livetest.LinkRx(t, p.A)
	var bad atomic.Int64
	var read atomic.Uint64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- livetest.Drain(ctx, src, &read, func(b *steer.Batch) {
			for _, f := range b.Frames {
				if len(f.Data) != 64 || f.Data[12] != 0x08 || f.Data[23] != 17 {
					bad.Add(1)
				}
			}
		})
	}()
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		livetest.TrafgenUDP(t, context.Background(), p, 5000, 0)
	}()
	xsk.SendChecked(t, s, p, 5000, sendFrames)
	<-sent
	livetest.WaitStable(t, func() (string, bool) {
		st, err := src.Stats()
		if err != nil {
			t.Fatal(err)
		}
		rx := livetest.LinkRx(t, p.A) - r0
		return "", rx == st.Received() && read.Load() == st.Delivered
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := bad.Load(); n > 0 {
		t.Errorf("%d frames read were not the 64-byte UDP frames sent to the socket", n)
	}

	// The Sender outlives the socket.
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	xsk.SendChecked(t, s, p, 500, sendFrames)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.A.Do(func() error { _, err := xsk.SharedSender(src, xsk.SenderConfig{}); return err }); err == nil {
		t.Error("SharedSender on a closed socket succeeded")
	}
	var src2 *afxdp.Source
	if err := p.A.Do(func() (err error) {
		src2, err = afxdp.Open(p.A.Link, afxdp.Config{Attach: afxdp.AttachNone})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := p.A.Do(func() error { _, err := xsk.SharedSender(src2, xsk.SenderConfig{}); return err }); !errors.Is(err, steer.ErrConfig) {
		t.Errorf("SharedSender without Config.SendFrames: %v, want steer.ErrConfig", err)
	}
	src2.Close()
	if fds, maps, areas := livetest.OpenFDs(t), livetest.SocketMaps(t), xsk.MappedAreas(); fds > before || maps != mapsBefore || areas != areasBefore {
		t.Errorf("leak: %d descriptors, %d ring and %d UMEM mappings, had %d, %d and %d", fds, maps, areas, before, mapsBefore, areasBefore)
	}
}
