//go:build linux

package afpacket

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
)

func TestOpenErrors(t *testing.T) {
	netns.Require(t)
	if _, err := Open("rps-no-such-if0", Config{}); err == nil {
		t.Fatal("Open of a missing interface succeeded")
	}
	if _, err := Open("lo", Config{NumBlocks: 1}); !errors.Is(err, steer.ErrConfig) {
		t.Fatalf("bad config: got %v, want steer.ErrConfig", err)
	}
}

// TestCountsMatchInterface checks, with offloads off, that every frame the
// interface received was delivered by ReadBatch or counted as a drop, for
// TCP, UDP and small-frame floods.
func TestCountsMatchInterface(t *testing.T) {
	netns.Require(t, "iperf3", "trafgen", "ethtool")
	p := netns.New(t, netns.Options{})
	cases := []struct {
		name string
		cfg  Config
		run  func(t *testing.T)
		min  uint64
	}{
		{"tcp", Config{IgnoreOutgoing: true}, func(t *testing.T) { iperf(t, p, "-P", "8", "-t", "2") }, 1000},
		{"udp", Config{IgnoreOutgoing: true, Copy: true}, func(t *testing.T) { iperf(t, p, "-u", "-b", "200M", "-t", "2") }, 1000},
		{"trafgen64", Config{IgnoreOutgoing: true, SnapLen: 64}, func(t *testing.T) {
			trafgenUDP(t, context.Background(), p, 200000)
		}, 1000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := openIn(t, p.A, p.A.Link, tc.cfg)
			var bad, flows int
			seen := map[flow]bool{}
			c := collect(src, func(f *steer.Frame) {
				if f.IfIndex != src.Interface() || f.Timestamp.IsZero() || f.WireLen < len(f.Data) || len(f.Data) == 0 {
					bad++
				}
				if k, ok := parseFlow(f.Data); ok && !seen[k] {
					seen[k] = true
					flows++
				}
			})
			r0 := rx(t, p.A)
			st0, _ := src.Stats()
			tc.run(t)
			r, st := settle(t, p.A, r0, src.Stats, func() uint64 { return c.Frames() + st0.Delivered })
			c.Stop(t)
			st.Packets -= st0.Packets
			t.Logf("%s: rx %d, delivered %d, drops %d, freezes %d, blocks %d, flows %d",
				tc.name, r, st.Delivered, st.Drops, st.FreezeQueueCount, st.Blocks, flows)
			if r < tc.min {
				t.Errorf("only %d frames crossed the link", r)
			}
			if bad != 0 {
				t.Errorf("%d frames with bad metadata", bad)
			}
		})
	}
}

// TestSuperFrames keeps the offloads on: TCP crosses the veth as GSO
// super-frames, each counted once with its real length beyond the snap
// length.
func TestSuperFrames(t *testing.T) {
	netns.Require(t, "iperf3")
	p := netns.New(t, netns.Options{KeepOffloads: true})
	const snap = 128
	src := openIn(t, p.A, p.A.Link, Config{IgnoreOutgoing: true, SnapLen: snap})
	var maxLen, super, truncBad int
	c := collect(src, func(f *steer.Frame) {
		if f.WireLen > maxLen {
			maxLen = f.WireLen
		}
		if f.WireLen > 1514 {
			super++
		}
		if len(f.Data) > snap || (f.WireLen > snap && len(f.Data) != snap) {
			truncBad++
		}
	})
	r0 := rx(t, p.A)
	iperf(t, p, "-P", "2", "-t", "1")
	r, st := settle(t, p.A, r0, src.Stats, c.Frames)
	c.Stop(t)
	t.Logf("rx %d, delivered %d, drops %d, super-frames %d, largest %d bytes", r, st.Delivered, st.Drops, super, maxLen)
	if super == 0 || maxLen <= 1514 {
		t.Errorf("no super-frame seen (largest %d)", maxLen)
	}
	if truncBad != 0 {
		t.Errorf("%d frames not truncated to the snap length", truncBad)
	}
}

// TestVLAN checks that 802.1Q-tagged frames arrive without the tag in
// their bytes and with the VLAN id out of band (the kernel untags before the
// packet taps run).
func TestVLAN(t *testing.T) {
	t.Run("tagged-frames", func(t *testing.T) {
		netns.Require(t, "trafgen", "ethtool")
		p := netns.New(t, netns.Options{})
		src := openIn(t, p.A, p.A.Link, Config{IgnoreOutgoing: true})
		v := &vlanCheck{id: 100, frameLen: 64}
		c := collect(src, v.frame)
		r0 := rx(t, p.A)
		const n = 500
		// PCP 5 and DEI set around VLAN id 100: only the id must come out.
		trafgenUDPTagged(t, context.Background(), p, n, 5<<13|1<<12|100)
		settle(t, p.A, r0, src.Stats, c.Frames)
		c.Stop(t)
		v.check(t, n)
	})
	t.Run("subinterface", func(t *testing.T) {
		p := netns.New(t, netns.Options{})
		ctx := context.Background()
		for i, ns := range []*netns.NS{p.A, p.B} {
			sub := ns.Link + ".100"
			addr := []string{"10.250.100.1/30", "10.250.100.2/30"}[i]
			for _, args := range [][]string{
				{"link", "add", "link", ns.Link, "name", sub, "type", "vlan", "id", "100"},
				{"addr", "add", addr, "dev", sub},
				{"link", "set", sub, "up"},
			} {
				if out, err := ns.Exec(ctx, "ip", args...); err != nil {
					if strings.Contains(string(out), "Unknown device type") {
						t.Skip("the kernel has no 802.1Q support (CONFIG_VLAN_8021Q); the tagged-frames case covers the capture side")
					}
					t.Fatal(err)
				}
			}
		}
		src := openIn(t, p.A, p.A.Link, Config{IgnoreOutgoing: true, BlockTimeout: 2 * time.Millisecond})
		v := &vlanCheck{id: 100}
		c := collect(src, v.frame)
		const n = 50
		err := p.B.Do(func() error {
			conn, err := net.Dial("udp4", "10.250.100.1:9")
			if err != nil {
				return err
			}
			defer conn.Close()
			for i := 0; i < n; i++ {
				if _, err := conn.Write([]byte("vlan test payload")); err != nil {
					return err
				}
				time.Sleep(time.Millisecond) // let ARP resolve without losing datagrams
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) && v.udpSeen(c) < n {
			time.Sleep(20 * time.Millisecond)
		}
		c.Stop(t)
		v.check(t, n)
	})
}

// vlanCheck tallies the VLAN metadata of captured frames.
type vlanCheck struct {
	id                                    uint16
	frameLen                              int // when positive, every frame's length
	tagged, untagged, wrongID, tagInBytes int
	udp, wrongLen                         int
}

func (v *vlanCheck) frame(f *steer.Frame) {
	switch {
	case !f.HasVLAN:
		v.untagged++
	case f.VLAN != v.id:
		v.wrongID++
	default:
		v.tagged++
	}
	if len(f.Data) >= 14 && binary.BigEndian.Uint16(f.Data[12:]) == 0x8100 {
		v.tagInBytes++
	}
	if v.frameLen > 0 && (len(f.Data) != v.frameLen || f.WireLen != v.frameLen) {
		v.wrongLen++
	}
	if k, ok := parseFlow(f.Data); ok && k.proto == 17 && k.dport == 9 {
		v.udp++
	}
}

func (v *vlanCheck) udpSeen(c *collector) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return v.udp
}

// check wants n UDP frames to port 9, all tagged with the id, none with
// the tag left in the bytes, and every frame frameLen long when set.
func (v *vlanCheck) check(t *testing.T, n int) {
	t.Helper()
	t.Logf("tagged %d, untagged %d, wrong id %d, tag in bytes %d, udp %d", v.tagged, v.untagged, v.wrongID, v.tagInBytes, v.udp)
	if v.udp != n {
		t.Errorf("saw %d of %d datagrams", v.udp, n)
	}
	if v.untagged != 0 || v.wrongID != 0 || v.tagInBytes != 0 || v.tagged < n {
		t.Errorf("VLAN metadata wrong")
	}
	if v.wrongLen != 0 {
		t.Errorf("%d frames not %d bytes long", v.wrongLen, v.frameLen)
	}
}

// TestDropsCounted holds every block so the ring fills: the kernel drops,
// and after the blocks come back every frame is delivered or dropped.
func TestDropsCounted(t *testing.T) {
	netns.Require(t, "trafgen", "ethtool")
	p := netns.New(t, netns.Options{})
	src := openIn(t, p.A, p.A.Link, Config{IgnoreOutgoing: true, BlockSize: 4096, NumBlocks: 2, FrameSize: 2048, BatchSize: 8})
	r0 := rx(t, p.A)
	ctx := context.Background()
	var held []func()
	var b steer.Batch
	var delivered uint64
	// Take what arrives, holding every batch.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			err := src.ReadBatch(rctx, &b)
			cancel()
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Error(err)
				return
			}
			delivered += uint64(len(b.Frames))
			if b.Release != nil {
				held = append(held, b.Release)
			}
		}
	}()
	trafgenUDP(t, ctx, p, 3000)
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	mid, err := src.Stats()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range held {
		r()
	}
	c := collect(src, nil)
	r, st := settle(t, p.A, r0, src.Stats, func() uint64 { return delivered + c.Frames() })
	c.Stop(t)
	t.Logf("while held: %+v (%d batches held); final: rx %d, %+v", mid, len(held), r, st)
	if mid.Drops == 0 || mid.FreezeQueueCount == 0 {
		t.Errorf("a full ring caused no drops or freezes: %+v", mid)
	}
}

// TestCloseWakesReader closes a source while its reader waits in poll.
func TestCloseWakesReader(t *testing.T) {
	p := netns.New(t, netns.Options{})
	src := openIn(t, p.A, p.A.Link, Config{PollTimeout: -1})
	errc := make(chan error, 1)
	go func() {
		var b steer.Batch
		errc <- src.ReadBatch(context.Background(), &b)
	}()
	time.Sleep(50 * time.Millisecond)
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) || !errors.Is(err, net.ErrClosed) {
			t.Fatalf("ReadBatch after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake the reader")
	}
	if err := src.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := src.SyscallConn(); !errors.Is(err, ErrClosed) {
		t.Fatalf("SyscallConn after Close: %v", err)
	}
}

// TestContextWakesReader cancels the context of a reader waiting in poll.
func TestContextWakesReader(t *testing.T) {
	p := netns.New(t, netns.Options{})
	src := openIn(t, p.A, p.A.Link, Config{PollTimeout: -1})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		var b steer.Batch
		errc <- src.ReadBatch(ctx, &b)
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("ReadBatch after cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancel did not wake the reader")
	}
	// The source still works: a poll timeout returns an empty batch.
	var b steer.Batch
	short, cancel2 := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel2()
	if err := src.ReadBatch(short, &b); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReadBatch after a cancelled one: %v", err)
	}
	rc, err := src.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd uintptr
	if err := rc.Control(func(f uintptr) { fd = f }); err != nil || fd == 0 {
		t.Fatalf("Control: fd %d, %v", fd, err)
	}
}

// TestReadBatchAllocs checks that reading a filled ring allocates nothing
// per batch in zero-copy mode.
func TestReadBatchAllocs(t *testing.T) {
	netns.Require(t, "trafgen", "ethtool")
	p := netns.New(t, netns.Options{})
	src := openIn(t, p.A, p.A.Link, Config{IgnoreOutgoing: true, BlockTimeout: 2 * time.Millisecond})
	trafgenUDP(t, context.Background(), p, 10000)
	time.Sleep(20 * time.Millisecond)
	ctx := context.Background()
	var b steer.Batch
	var frames int
	allocs := testing.AllocsPerRun(100, func() {
		if err := src.ReadBatch(ctx, &b); err != nil {
			t.Fatal(err)
		}
		frames += len(b.Frames)
		if b.Release != nil {
			b.Release()
		}
	})
	if frames < 50*DefaultBatchSize {
		t.Fatalf("read only %d frames", frames)
	}
	if allocs != 0 {
		t.Errorf("%v allocations per ReadBatch", allocs)
	}
}
