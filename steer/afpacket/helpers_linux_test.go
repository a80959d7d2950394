//go:build linux

package afpacket

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/livetest"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
)

// openIn opens a source on link inside ns and closes it at cleanup.
func openIn(t testing.TB, ns *netns.NS, link string, cfg Config) *Source {
	t.Helper()
	var s *Source
	err := ns.Do(func() (err error) {
		s, err = Open(link, cfg)
		return err
	})
	if err != nil {
		t.Fatalf("open in %s: %v", ns.Name, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// collector reads a source from a goroutine, passing each frame to
// onFrame (when not nil) under mu.
type collector struct {
	*livetest.Reader
	mu sync.Mutex
}

func collect(src *Source, onFrame func(f *steer.Frame)) *collector {
	c := &collector{}
	c.Reader = livetest.Read(src, func(b *steer.Batch) {
		if onFrame != nil {
			c.mu.Lock()
			for i := range b.Frames {
				onFrame(&b.Frames[i])
			}
			c.mu.Unlock()
		}
	})
	return c
}

// rx reads the link's rx_packets inside ns.
func rx(t testing.TB, ns *netns.NS) uint64 {
	t.Helper()
	return livetest.LinkRx(t, ns)
}

// settle waits until every frame the interface counted since r0 was seen
// by the sockets: rx delta == Packets == Delivered + Drops and the readers
// saw Delivered frames. It fails the test if they do not agree within 10s,
// and returns the final numbers.
func settle(t testing.TB, ns *netns.NS, r0 uint64, stats func() (Stats, error), seen func() uint64) (uint64, Stats) {
	t.Helper()
	var r uint64
	var st Stats
	livetest.WaitStable(t, func() (string, bool) {
		r = rx(t, ns) - r0
		var err error
		if st, err = stats(); err != nil {
			t.Fatal(err)
		}
		s := seen()
		return fmt.Sprintf("rx delta %d, %+v, seen %d", r, st, s), r == st.Packets && st.Packets == st.Delivered+st.Drops && s == st.Delivered
	})
	return r, st
}

// iperf runs an iperf3 server in A and a client in B with args, bounded.
func iperf(t testing.TB, p *netns.Pair, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	port := strconv.Itoa(20000 + os.Getpid()%20000)
	// The server is pinned to CPU 0 like the clients (-A 0): its ACKs then
	// reach the client's stack on CPU 0 too, so every data segment is sent,
	// and delivered to every capturing socket, from one CPU in one order.
	srv := p.A.Command(ctx, "iperf3", "-s", "-1", "-A", "0", "-B", p.A.Addr.Addr().String(), "-p", port)
	if err := srv.Start(); err != nil {
		t.Fatalf("iperf3 server: %v", err)
	}
	defer func() {
		cancel()
		_ = srv.Wait()
	}()
	var out []byte
	var err error
	for try := 0; try < 40; try++ {
		out, err = p.B.Exec(ctx, "iperf3", append([]string{"-c", p.A.Addr.Addr().String(), "-p", port}, args...)...)
		if err == nil || !strings.Contains(string(out), "connect") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("iperf3 client %v: %v", args, err)
	}
	return string(out)
}

// trafgenUDP sends count 64-byte UDP frames from B over its link towards
// A's address, with random source ports (many flows), and waits.
func trafgenUDP(t testing.TB, ctx context.Context, p *netns.Pair, count int, extra ...string) {
	t.Helper()
	livetest.TrafgenUDP(t, ctx, p, count, 0, extra...)
}

// trafgenUDPTagged is trafgenUDP with an 802.1Q tag carrying tci in the
// bytes when tci is not zero (the frame is then 68 bytes).
func trafgenUDPTagged(t testing.TB, ctx context.Context, p *netns.Pair, count int, tci uint16, extra ...string) {
	t.Helper()
	livetest.TrafgenUDP(t, ctx, p, count, tci, extra...)
}

// flow is an IPv4 TCP or UDP 4-tuple.
type flow struct {
	src, dst     netip.Addr
	sport, dport uint16
	proto        uint8
}

// parseFlow extracts the 4-tuple from an untagged IPv4 frame.
func parseFlow(b []byte) (flow, bool) {
	if len(b) < 14+20+4 || binary.BigEndian.Uint16(b[12:]) != 0x0800 {
		return flow{}, false
	}
	ip := b[14:]
	ihl := int(ip[0]&0xf) * 4
	if ip[0]>>4 != 4 || ihl < 20 || len(ip) < ihl+4 || (ip[9] != 6 && ip[9] != 17) {
		return flow{}, false
	}
	return flow{
		src:   netip.AddrFrom4([4]byte(ip[12:16])),
		dst:   netip.AddrFrom4([4]byte(ip[16:20])),
		sport: binary.BigEndian.Uint16(ip[ihl:]),
		dport: binary.BigEndian.Uint16(ip[ihl+2:]),
		proto: ip[9],
	}, true
}
