//go:build linux

package afxdp

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/rpsgo/rps/internal/livetest"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
)

// TestOpenUnhashed sends sequence-numbered UDP frames and ARP requests to
// Open's socket. By default the socket takes every frame of its queue:
// the ARP requests reach it, and A's kernel never learns B's address.
// With Config.PassUnhashed the program passes them to the kernel stack,
// which learns it, counted in Stats.PassedToKernel, while every UDP frame
// still reaches the socket; the interface's rx_packets is what the socket
// received plus what was passed.
func TestOpenUnhashed(t *testing.T) {
	const flows, rounds, arps = 16, 50, 20
	for _, c := range []struct {
		name string
		cfg  Config
		want AttachMode
	}{
		{"takes all", Config{}, AttachNative},
		{"pass unhashed", Config{PassUnhashed: true}, AttachNative},
		{"pass unhashed generic", Config{PassUnhashed: true, Attach: AttachGeneric}, AttachGeneric},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := netns.New(t, netns.Options{})
			s := openIn(t, p.A, c.cfg)
			if a := s.Info().Attach; a != c.want {
				t.Fatalf("attach %v, want %v", a, c.want)
			}
			r0 := rxPackets(t, p.A)
			var seqs, arpSeen atomic.Uint64
			rd := livetest.Read(s, func(b *steer.Batch) {
				for _, f := range b.Frames {
					if livetest.IsARP(f.Data) {
						arpSeen.Add(1)
					} else if _, _, ok := livetest.ParseSeq(f.Data); ok {
						seqs.Add(1)
					}
				}
			})
			livetest.SendFrom(t, p, 64, livetest.SeqTraffic(p, 0, flows, rounds, arps))
			var st Stats
			t.Log(waitStable(t, func() (string, bool) {
				r := rxPackets(t, p.A) - r0
				var err error
				if st, err = s.Stats(); err != nil {
					t.Fatal(err)
				}
				return fmt.Sprintf("rx delta %d, %+v, seen %d (%d sequenced, %d ARP)", r, st, rd.Frames(), seqs.Load(), arpSeen.Load()),
					r == st.Received()+st.PassedToKernel && st.Delivered == rd.Frames() && seqs.Load() == flows*rounds
			}))
			rd.Stop(t)
			if c.cfg.PassUnhashed {
				if st.PassedToKernel != arps || arpSeen.Load() != 0 {
					t.Errorf("%d ARP requests: %d passed to the kernel, %d at the socket", arps, st.PassedToKernel, arpSeen.Load())
				}
				if !livetest.Neighbour(t, p) {
					t.Error("A's kernel did not learn B's address: the ARP requests did not reach it")
				}
			} else {
				if st.PassedToKernel != 0 || arpSeen.Load() != arps {
					t.Errorf("%d ARP requests: %d passed to the kernel, %d at the socket", arps, st.PassedToKernel, arpSeen.Load())
				}
				if livetest.Neighbour(t, p) {
					t.Error("A's kernel learnt B's address though its ARP requests went to the socket")
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if livetest.XDPAttached(t, p.A) {
				t.Error("an XDP program is still on the link after Close")
			}
			if st2, err := s.Stats(); err != nil || st2.PassedToKernel != st.PassedToKernel {
				t.Errorf("Stats after Close: %+v, %v; had %+v", st2, err, st)
			}
		})
	}
}
