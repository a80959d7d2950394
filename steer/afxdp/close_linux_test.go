//go:build linux

package afxdp

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rpsgo/rps/internal/livetest"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
)

// stressConfig is the UMEM of TestCloseStress: 128 chunks of 2 KiB.
var stressConfig = Config{NumFrames: 128, RingSize: 64, BatchSize: 16, PollTimeout: 5 * time.Millisecond}

// TestCloseStress opens, reads under traffic and closes a source 1000
// times (200 with -short), closing while a reader waits in poll, while it
// reads, and while handlers still hold batches (released after Close,
// their bytes still readable). Nothing may crash, race or leak: no
// descriptor, no ring or UMEM mapping, no XDP program on the link.
func TestCloseStress(t *testing.T) {
	netns.Require(t, "trafgen", "ethtool")
	// One queue takes one socket and one interface one XDP program: the
	// rounds on one pair run one after the other, and pairs side by side
	// (opening and closing wait for RCU grace periods, which they share).
	const pairs = 4
	ps := make([]*netns.Pair, pairs)
	for i := range ps {
		ps[i] = netns.New(t, netns.Options{})
	}
	leaks := goleak.IgnoreCurrent()
	fds0, rings0, umems0 := openFDs(t), socketMaps(t), mappedAreas.Load()

	// Bounded background traffic: at most 3M frames about 50us apart on
	// each pair.
	ctx, cancel := context.WithCancel(context.Background())
	var tg sync.WaitGroup
	for _, p := range ps {
		tg.Add(1)
		go func() {
			defer tg.Done()
			trafgenUDP(t, ctx, p, 3000000, "--gap", "50us")
		}()
	}
	defer func() { cancel(); tg.Wait() }()
	time.Sleep(100 * time.Millisecond)

	iterations := 1000
	if testing.Short() {
		iterations = 200
	}
	start := time.Now()
	c := livetest.Stress(t, pairs, iterations, func(w, i int) livetest.Counts { return closeIteration(t, ps[w], i) })
	t.Logf("%d iterations in %v: %d frames read, %d closes with batches held, %d with the reader in poll",
		iterations, time.Since(start).Round(time.Millisecond), c.Frames, c.HeldAtClose, c.BlockedAtClose)
	if c.Frames == 0 || c.HeldAtClose < iterations/5 || c.BlockedAtClose < iterations/5 {
		t.Errorf("the stress did not exercise reads under traffic (frames %d, held at close %d, in poll %d)", c.Frames, c.HeldAtClose, c.BlockedAtClose)
	}
	cancel()
	tg.Wait()
	for _, p := range ps {
		if xdpAttached(t, p.A) {
			t.Errorf("an XDP program is left on %s in %s", p.A.Link, p.A.Name)
		}
	}
	if fds, rings, umems := openFDs(t), socketMaps(t), mappedAreas.Load(); fds != fds0 || rings != rings0 || umems != umems0 {
		t.Errorf("leak: %d descriptors, %d ring and %d UMEM mappings, had %d, %d and %d", fds, rings, umems, fds0, rings0, umems0)
	}
	goleak.VerifyNone(t, leaks)
}

// closeIteration is one open-read-close round of TestCloseStress; it may
// run on any goroutine, so it reports failures with Errorf. It returns the
// frames read and whether batches were held, or the reader waited in poll,
// at Close.
func closeIteration(t *testing.T, p *netns.Pair, i int) (c livetest.Counts) {
	variant := i % 5
	cfg := stressConfig
	switch variant {
	case 0: // a socket no program feeds: the reader can only wait in poll
		cfg.Attach = AttachNone
		cfg.PollTimeout = -1
	case 3:
		cfg.Copy = true
	}
	var s *Source
	if err := p.A.Do(func() (err error) { s, err = Open(p.A.Link, cfg); return err }); err != nil {
		t.Errorf("iteration %d: %v", i, err)
		return c
	}
	var held []steer.Batch
	switch variant {
	case 0:
		c.Frames, held = livetest.CloseWhileReading(t, s, i, 200*time.Microsecond, ErrClosed)
		c.BlockedAtClose++
	case 1, 3:
		c.Frames, held = livetest.CloseWhileReading(t, s, i, time.Duration(1+i%3)*time.Millisecond, ErrClosed)
	case 2:
		c.Frames, held = livetest.HoldThenClose(t, s, i, ErrClosed)
	case 4: // closed at once
		if err := s.Close(); err != nil {
			t.Errorf("iteration %d: Close: %v", i, err)
		}
	}
	if len(held) > 0 {
		c.HeldAtClose++
	}
	livetest.ReleaseAfterClose(t, s, i, held, func(f *steer.Frame) error {
		if len(f.Data) != 64 || f.Data[12] != 0x08 {
			return fmt.Errorf("a held frame of %d bytes changed after Close", len(f.Data))
		}
		return nil
	})
	return c
}
