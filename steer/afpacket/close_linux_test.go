//go:build linux

package afpacket

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

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
	var mu sync.Mutex
	var frames, heldAtClose, blockedAtClose int
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < iterations && !t.Failed(); i += workers {
				f, h, b := closeIteration(t, p, i)
				mu.Lock()
				frames += f
				heldAtClose += h
				blockedAtClose += b
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	t.Logf("%d iterations in %v: %d frames read, %d closes with blocks held, %d with the reader in poll",
		iterations, time.Since(start).Round(time.Millisecond), frames, heldAtClose, blockedAtClose)
	if frames == 0 || heldAtClose < iterations/5 {
		t.Errorf("the stress did not exercise reads under traffic (frames %d, held at close %d)", frames, heldAtClose)
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
func closeIteration(t *testing.T, p *netns.Pair, i int) (frames, heldAtClose, blockedAtClose int) {
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
		return 0, 0, 0
	}
	var held []steer.Batch
	switch variant {
	case 0, 1, 3, 4:
		type result struct {
			err   error
			held  []steer.Batch
			count int
		}
		resc := make(chan result, 1)
		go func() {
			var r result
			for {
				var b steer.Batch
				if r.err = s.ReadBatch(context.Background(), &b); r.err != nil {
					resc <- r
					return
				}
				r.count += len(b.Frames)
				for _, f := range b.Frames {
					_ = f.Data[len(f.Data)-1]
				}
				if len(b.Frames) > 0 && len(r.held) < 3 {
					r.held = append(r.held, b)
				} else if b.Release != nil {
					b.Release()
				}
			}
		}()
		switch variant {
		case 0:
			time.Sleep(200 * time.Microsecond)
			blockedAtClose++
		case 1, 3:
			time.Sleep(time.Duration(1+i%3) * time.Millisecond)
		}
		if err := s.Close(); err != nil {
			t.Errorf("iteration %d: Close: %v", i, err)
		}
		r := <-resc
		if !errors.Is(r.err, ErrClosed) {
			t.Errorf("iteration %d: reader ended with %v", i, r.err)
		}
		frames += r.count
		held = r.held
	case 2:
		for len(held) < 2 {
			var b steer.Batch
			rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
			err := s.ReadBatch(rctx, &b)
			rcancel()
			if err != nil {
				t.Errorf("iteration %d: %v", i, err)
				break
			}
			if len(b.Frames) > 0 {
				frames += len(b.Frames)
				held = append(held, b)
			}
		}
		if err := s.Close(); err != nil {
			t.Errorf("iteration %d: Close: %v", i, err)
		}
		var b steer.Batch
		if err := s.ReadBatch(context.Background(), &b); !errors.Is(err, ErrClosed) {
			t.Errorf("iteration %d: ReadBatch after Close: %v", i, err)
		}
	}
	if len(held) > 0 {
		heldAtClose++
	}
	// Release after Close, newest first; the bytes must still be there.
	for j := len(held) - 1; j >= 0; j-- {
		for _, f := range held[j].Frames {
			if len(f.Data) < 14 {
				t.Errorf("iteration %d: frame of %d bytes", i, len(f.Data))
			}
			_ = f.Data[0] + f.Data[len(f.Data)-1]
		}
		held[j].Release()
	}
	if err := s.Close(); err != nil {
		t.Errorf("iteration %d: second Close: %v", i, err)
	}
	return frames, heldAtClose, blockedAtClose
}
