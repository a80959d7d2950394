//go:build linux

package afxdp

import (
	"context"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rpsgo/rps/internal/livetest"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
)

// frameSender sends raw Ethernet frames out of B's link (an AF_PACKET
// socket). veth hands a frame to its peer's XDP program in the sender's
// softirq, so when send returns the frame is in A's RX ring.
type frameSender struct {
	fd    int
	sa    unix.SockaddrLinklayer
	frame []byte
}

func newFrameSender(t *testing.T, p *netns.Pair) *frameSender {
	t.Helper()
	fs := &frameSender{fd: -1}
	err := p.B.Do(func() error {
		ifi, err := net.InterfaceByName(p.B.Link)
		if err != nil {
			return err
		}
		fs.sa = unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6, Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
		fs.fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		return err
	})
	if err != nil {
		t.Fatalf("AF_PACKET socket in %s: %v", p.B.Name, err)
	}
	t.Cleanup(func() { unix.Close(fs.fd) })
	// Broadcast, from a local address, of the local experimental EtherType:
	// Open's program redirects every frame, and the stack ignores it.
	fs.frame = make([]byte, 60)
	copy(fs.frame, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 0x02, 0x88, 0xb5})
	return fs
}

func (fs *frameSender) send(t *testing.T) {
	t.Helper()
	if err := unix.Sendto(fs.fd, fs.frame, 0, &fs.sa); err != nil {
		t.Fatalf("sending a frame: %v", err)
	}
}

// readFrames reads s until it has handed out n frames or 5s passed, and
// returns the sizes of the non-empty batches.
func readFrames(t *testing.T, s *Source, n int) []int {
	t.Helper()
	var sizes []int
	var b steer.Batch
	got := 0
	for deadline := time.Now().Add(5 * time.Second); got < n && time.Now().Before(deadline); {
		if err := s.ReadBatch(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		if len(b.Frames) > 0 {
			got += len(b.Frames)
			sizes = append(sizes, len(b.Frames))
			b.Release()
		}
	}
	if got != n {
		t.Fatalf("read %d frames in 5s, want %d", got, n)
	}
	return sizes
}

// TestBatchTimeoutFullBatch: the reader waits while the RX ring holds
// fewer frames than a quarter of it, and hands them all over, in batches
// of BatchSize, as soon as it holds that many, long before BatchTimeout.
func TestBatchTimeoutFullBatch(t *testing.T) {
	netns.Require(t, "ethtool")
	p := netns.New(t, netns.Options{})
	// A ring of 64: the reader hands over at 16 frames.
	s := openIn(t, p.A, Config{NumFrames: 128, RingSize: 64, BatchSize: 8, BatchTimeout: MaxBatchTimeout})
	fs := newFrameSender(t, p)
	const pause = 100 * time.Millisecond
	go func() {
		for range 12 {
			fs.send(t)
		}
		time.Sleep(pause)
		for range 20 {
			fs.send(t)
		}
	}()
	start := time.Now()
	first := readFrames(t, s, 8) // 12 frames in the ring, more than a batch
	took := time.Since(start)
	sizes := append(first, readFrames(t, s, 24)...)
	if !slices.Equal(sizes, []int{8, 8, 8, 8}) {
		t.Errorf("batch sizes %v, want four of 8", sizes)
	}
	if took < pause || took >= MaxBatchTimeout {
		t.Errorf("the first batch took %v: want the time of the 16th frame, after %v (12 frames are not a quarter of the ring) and well before BatchTimeout %v", took, pause, MaxBatchTimeout)
	}
}

// TestBatchTimeoutLatency: at a low rate a lone frame, sent to an idle
// reader (the gather after the last frame's has ended empty), is handed
// over BatchTimeout after the reader saw it, not earlier and not much
// later; with a negative BatchTimeout at once.
func TestBatchTimeoutLatency(t *testing.T) {
	netns.Require(t, "ethtool")
	p := netns.New(t, netns.Options{})
	fs := newFrameSender(t, p)
	const timeout = 20 * time.Millisecond
	latencies := func(bt time.Duration) []time.Duration {
		s := openIn(t, p.A, Config{NumFrames: 64, RingSize: 64, BatchTimeout: bt})
		var lat []time.Duration
		for range 7 {
			time.Sleep(2 * max(bt, 0)) // the gather that follows the last ends empty
			sent := time.Now()
			fs.send(t)
			if sizes := readFrames(t, s, 1); len(sizes) != 1 {
				t.Fatalf("batch sizes %v for a lone frame", sizes)
			}
			lat = append(lat, time.Since(sent))
		}
		s.Close()
		slices.Sort(lat)
		return lat
	}
	lat := latencies(timeout)
	if lat[0] < timeout {
		t.Errorf("BatchTimeout %v: a lone frame was handed over after %v (latencies %v)", timeout, lat[0], lat)
	}
	// A loaded machine may run the reader late; the median is generous.
	if med := lat[len(lat)/2]; med > timeout+10*time.Millisecond {
		t.Errorf("BatchTimeout %v: median latency %v (latencies %v)", timeout, med, lat)
	}
	off := latencies(-1)
	if med := off[len(off)/2]; med >= timeout/2 {
		t.Errorf("BatchTimeout off: median latency %v, want well under %v (latencies %v)", med, timeout, off)
	}
}

// TestBatchTimeoutStream: under a steady trafgen stream that the reader
// keeps up with, frames per read rise with the batch timeout, against a
// read as soon as the ring has a frame.
func TestBatchTimeoutStream(t *testing.T) {
	netns.Require(t, "trafgen", "ethtool")
	p := netns.New(t, netns.Options{})
	perRead := func(bt time.Duration) float64 {
		s := openIn(t, p.A, Config{BatchTimeout: bt})
		var batches atomic.Uint64
		r := livetest.Read(s, func(b *steer.Batch) {
			if len(b.Frames) > 0 {
				batches.Add(1)
			}
		})
		r0 := rxPackets(t, p.A)
		trafgenUDP(t, context.Background(), p, 3000, "--gap", "50us")
		_, st := settle(t, p.A, r0, s, r.Frames)
		r.Stop(t)
		s.Close()
		if st.RxRingFull+st.RxDropped > 0 {
			t.Errorf("BatchTimeout %v: the kernel dropped: %+v", bt, st)
		}
		n := float64(r.Frames()) / float64(max(batches.Load(), 1))
		t.Logf("BatchTimeout %v: %d frames in %d reads, %.1f a read", bt, r.Frames(), batches.Load(), n)
		return n
	}
	off, on := perRead(-1), perRead(5*time.Millisecond)
	if on < 4*off || on < 8 {
		t.Errorf("frames a read: %.1f with a 5ms batch timeout, %.1f without: want at least 8 and 4 times as many", on, off)
	}
}
