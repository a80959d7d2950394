//go:build linux

package afpacket

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

// TestCloseStress opens, reads under traffic and closes a source 1000
// times (200 with -short), closing while a reader waits in poll, while it
// walks blocks, and while handlers still hold blocks (released after
// Close, their bytes still readable). Nothing may crash, race or leak.
func TestCloseStress(t *testing.T) {
	netns.Require(t, "trafgen", "ethtool")
	p := netns.New(t, netns.Options{})
	leaks := goleak.IgnoreCurrent()
	fds0, maps0 := openFDs(t), ringMaps(t)

	// Bounded background traffic: at most 3M frames about 20us apart.
	ctx, cancel := context.WithCancel(context.Background())
	var tg sync.WaitGroup
	tg.Add(1)
	go func() {
		defer tg.Done()
		trafgenUDP(t, ctx, p, 3000000, "--gap", "20us")
	}()
	defer func() { cancel(); tg.Wait() }()
	time.Sleep(100 * time.Millisecond)

	iterations := 1000
	if testing.Short() {
		iterations = 200
	}
	// Workers run side by side: opening and closing a packet socket waits
	// for RCU grace periods (synchronize_net), which concurrent sockets
	// share.
	const workers = 8
	start := time.Now()
	c := livetest.Stress(t, workers, iterations, func(_, i int) livetest.Counts { return closeIteration(t, p, i) })
	t.Logf("%d iterations in %v: %d frames read, %d closes with blocks held, %d with the reader in poll",
		iterations, time.Since(start).Round(time.Millisecond), c.Frames, c.HeldAtClose, c.BlockedAtClose)
	if c.Frames == 0 || c.HeldAtClose < iterations/5 {
		t.Errorf("the stress did not exercise reads under traffic (frames %d, held at close %d)", c.Frames, c.HeldAtClose)
	}
	cancel()
	tg.Wait()
	if fds, maps := openFDs(t), ringMaps(t); fds != fds0 || maps != maps0 {
		t.Errorf("leak: %d descriptors and %d ring mappings, had %d and %d", fds, maps, fds0, maps0)
	}
	goleak.VerifyNone(t, leaks)
}

// closeIteration is one open-read-close round of TestCloseStress; it may
// run on any goroutine, so it reports failures with Errorf. It returns the
// frames read and whether blocks were held, or the reader waited in poll,
// at Close.
func closeIteration(t *testing.T, p *netns.Pair, i int) (c livetest.Counts) {
	variant := i % 5
	cfg := Config{BlockSize: 16 << 10, NumBlocks: 4, BlockTimeout: time.Millisecond, PollTimeout: 5 * time.Millisecond, BatchSize: 16}
	switch variant {
	case 0: // a reader that can only wait in poll
		cfg.Filter = dropAll
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
	case 4:
		c.Frames, held = livetest.CloseWhileReading(t, s, i, 0, ErrClosed)
	case 2:
		c.Frames, held = livetest.HoldThenClose(t, s, i, ErrClosed)
	}
	if len(held) > 0 {
		c.HeldAtClose++
	}
	livetest.ReleaseAfterClose(t, s, i, held, func(f *steer.Frame) error {
		if len(f.Data) < 14 {
			return fmt.Errorf("frame of %d bytes", len(f.Data))
		}
		_ = f.Data[0] + f.Data[len(f.Data)-1]
		return nil
	})
	return c
}
