package gopacketsrc_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/rpsgo/rps/internal/sample"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/gopacketsrc"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// TestSameAsPcapfile reads the sample capture through a pcapgo reader and
// the adapter, and through pcapfile, and compares every frame.
func TestSameAsPcapfile(t *testing.T) {
	for _, zeroCopy := range []bool{true, false} {
		r, err := pcapgo.NewReader(sample.Reader())
		if err != nil {
			t.Fatal(err)
		}
		var pds gopacket.PacketDataSource = r
		if !zeroCopy {
			pds = copyOnly{r}
		}
		src, err := gopacketsrc.New(pds, pcapfile.LinkType(r.LinkType()))
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := readAll(t, src)
		if err != io.EOF {
			t.Fatal(err)
		}
		ref, err := pcapfile.NewReader(sample.Reader())
		if err != nil {
			t.Fatal(err)
		}
		want, _, err := readAll(t, ref)
		if err != io.EOF {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("zero-copy %v: %d frames, pcapfile reads %d", zeroCopy, len(got), len(want))
		}
		for i := range got {
			g, w := got[i], want[i]
			if !bytes.Equal(g.Data, w.Data) || !g.Timestamp.Equal(w.Timestamp) || g.Timestamp.Location() != w.Timestamp.Location() ||
				g.WireLen != w.WireLen || g.IfIndex != w.IfIndex || g.HasVLAN != w.HasVLAN {
				t.Fatalf("zero-copy %v: frame %d differs:\n got %d bytes %v len %d if %d\nwant %d bytes %v len %d if %d",
					zeroCopy, i, len(g.Data), g.Timestamp, g.WireLen, g.IfIndex, len(w.Data), w.Timestamp, w.WireLen, w.IfIndex)
			}
		}
	}
}

// copyOnly hides a reader's ZeroCopyReadPacketData.
type copyOnly struct{ r *pcapgo.Reader }

func (c copyOnly) ReadPacketData() ([]byte, gopacket.CaptureInfo, error) { return c.r.ReadPacketData() }

// TestDispatcher runs a real dispatcher over the adapter (run it with
// -race): every frame reaches a handler intact while the packet source
// reuses and overwrites its buffer, every batch is released exactly once,
// and every frame is accounted for.
func TestDispatcher(t *testing.T) {
	const n = 20000
	var pkts []pkt
	for i := range n {
		// An Ethernet/IPv4/UDP-looking frame whose addresses and ports vary,
		// so that the frames spread over the workers, carrying its number.
		size := 60 + i%900
		d := numbered(i, size)
		pkts = append(pkts, pkt{data: d, ci: ci(int64(i), size)})
	}
	for _, mode := range []steer.DispatchMode{steer.DispatchDeferred, steer.DispatchDirect, steer.DispatchHybrid} {
		t.Run(mode.String(), func(t *testing.T) {
			var seen [n]atomic.Int32
			var bad atomic.Int64
			d, err := steer.New(steer.Config{Workers: 3, Dispatch: mode}, func(p *steer.Packet) {
				i := int(uint64(p.Data[0])<<56 | uint64(p.Data[1])<<48 | uint64(p.Data[2])<<40 | uint64(p.Data[3])<<32 |
					uint64(p.Data[4])<<24 | uint64(p.Data[5])<<16 | uint64(p.Data[6])<<8 | uint64(p.Data[7]))
				if i < 0 || i >= n || checkNumbered(p.Data, i) != nil || p.Timestamp.Unix() != int64(i) {
					bad.Add(1)
					return
				}
				seen[i].Add(1)
			})
			if err != nil {
				t.Fatal(err)
			}
			src := newSource(t, &script{pkts: pkts}, gopacketsrc.WithBatchSize(32))
			rc := &releaseCounter{Source: src}
			if err := d.Run(context.Background(), rc); err != nil {
				t.Fatal(err)
			}
			if err := d.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if bad.Load() != 0 {
				t.Errorf("%d frames reached a handler damaged", bad.Load())
			}
			for i := range seen {
				if c := seen[i].Load(); c != 1 {
					t.Fatalf("frame %d handled %d times", i, c)
				}
			}
			if b, r, tw := rc.batches.Load(), rc.released.Load(), rc.twice.Load(); b != r || tw != 0 {
				t.Errorf("%d batches, %d released, %d released twice", b, r, tw)
			}
			st := d.Stats()
			if st.Frames != n || st.Handled() != n {
				t.Errorf("stats: %d frames, %d handled, %d dropped", st.Frames, st.Handled(), st.Dropped())
			}
		})
	}
}

// TestDecodeNoAllocs checks the example's claim: a worker's
// DecodingLayerParser decodes the sample's well-formed IPv4 frames in place,
// allocating nothing. (gopacket allocates for its errors, and for IPv6
// packets with a hop-by-hop header, which IPv6 decodes itself.)
func TestDecodeNoAllocs(t *testing.T) {
	ref, err := pcapfile.NewReader(sample.Reader())
	if err != nil {
		t.Fatal(err)
	}
	frames, _, err := readAll(t, ref)
	if err != io.EOF {
		t.Fatal(err)
	}
	dec := newDecoder(nil)
	var p steer.Packet
	var good []steer.Frame
	for _, f := range frames {
		p.Data = f.Data
		failed := dec.failed
		dec.decode(&p)
		if dec.failed == failed && slices.Contains(dec.decoded, layers.LayerTypeIPv4) &&
			!slices.Contains(dec.decoded, layers.LayerTypeIPv6) {
			good = append(good, f)
		}
	}
	if len(good) < len(frames)*4/5 {
		t.Fatalf("only %d of %d frames decode", len(good), len(frames))
	}
	// One run over every good frame: the count is their total.
	allocs := testing.AllocsPerRun(1, func() {
		for _, f := range good {
			p.Data = f.Data
			dec.decode(&p)
		}
	})
	if allocs != 0 {
		t.Errorf("%.0f allocations decoding %d frames", allocs, len(good))
	}
	if dec.tcp4 == 0 || dec.tcp6 == 0 || dec.udps == 0 {
		t.Errorf("decoded %d TCP/IPv4, %d TCP/IPv6, %d UDP", dec.tcp4, dec.tcp6, dec.udps)
	}
}

// idle is a live packet source with nothing to read: each read blocks for
// its timeout and then says so, as a pcap handle opened with a timeout does.
type idle struct {
	timeout time.Duration
	reads   atomic.Int64
}

func (s *idle) ZeroCopyReadPacketData() ([]byte, gopacket.CaptureInfo, error) {
	s.reads.Add(1)
	time.Sleep(s.timeout)
	return nil, gopacket.CaptureInfo{}, os.ErrDeadlineExceeded
}

// TestInterrupt checks the documented way to stop a dispatcher reading a
// live source that blocks: with a read timeout, cancelling ctx, or closing
// the adapter, stops Run within about one timeout.
func TestInterrupt(t *testing.T) {
	const timeout = 20 * time.Millisecond
	for _, how := range []string{"cancel", "close"} {
		t.Run(how, func(t *testing.T) {
			d, err := steer.New(steer.Config{Workers: 2}, func(*steer.Packet) {})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close(context.Background())
			pds := &idle{timeout: timeout}
			src, err := gopacketsrc.NewZeroCopy(pds, pcapfile.LinkTypeEthernet, gopacketsrc.WithLive())
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- d.Run(ctx, src) }()
			time.Sleep(3 * timeout)
			start := time.Now()
			if how == "cancel" {
				cancel()
			} else {
				src.Close()
			}
			select {
			case err := <-done:
				switch {
				case how == "cancel" && !errors.Is(err, context.Canceled),
					how == "close" && !errors.Is(err, gopacketsrc.ErrClosed):
					t.Errorf("Run returned %v", err)
				}
				if el := time.Since(start); el > 20*timeout {
					t.Errorf("Run took %v to stop, with a %v read timeout", el, timeout)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Run did not stop")
			}
			if src.Stats().Timeouts == 0 || pds.reads.Load() == 0 {
				t.Errorf("stats %+v after %d reads", src.Stats(), pds.reads.Load())
			}
		})
	}
}
