//go:build linux

package bpfsteer

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/rpsgo/rps/hash"
)

// tIPv6 is an IPv6 header from fd00::1 to dst, next header proto, then l4.
func tIPv6(dst netip.Addr, proto uint8, l4 []byte) []byte {
	h := make([]byte, 40)
	h[0], h[6], h[7] = 0x60, proto, 64
	h[4], h[5] = byte(len(l4)>>8), byte(len(l4))
	src := netip.MustParseAddr("fd00::1").As16()
	copy(h[8:24], src[:])
	d := dst.As16()
	copy(h[24:40], d[:])
	return append(h, l4...)
}

// TestXDPPassHost runs the real XDP program with PassHost over frames the
// host needs and frames it does not: ARP, neighbour discovery and packets
// to the host's addresses (IPv4, IPv6 global and link-local) are passed to
// the kernel and counted as HostPassed; a packet to another address, an
// ICMPv6 message that is no neighbour discovery, a tagged frame to a host
// address (the VLAN's interface's business) and a frame cut inside its IP
// header are steered as without PassHost. Without PassHost the host's
// frames are steered too. Every frame is counted once.
func TestXDPPassHost(t *testing.T) {
	requirePriv(t)
	host := []netip.Addr{netip.MustParseAddr("10.0.1.7"), netip.MustParseAddr("fd00::7"), netip.MustParseAddr("fe80::7")}
	ns := []byte{135, 0, 0, 0, 0, 0, 0, 0} // neighbour solicitation
	echo := []byte{128, 0, 0, 0, 0, 0, 0, 0}
	frames := []struct {
		name string
		f    []byte
		host bool
	}{
		{"arp", tEth(etARP, make([]byte, 28), 0), true},
		{"ipv4 to the host", tEth(etIPv4, tIPv4(7, protoTCP, tTCP(1)), 0), true},
		{"ipv4 to another", tEth(etIPv4, tIPv4(8, protoTCP, tTCP(1)), 0), false},
		{"ipv6 to the host", tEth(etIPv6, tIPv6(host[1], protoUDP, tUDP(53, nil)), 0), true},
		{"ipv6 to its link-local", tEth(etIPv6, tIPv6(host[2], protoTCP, tTCP(2)), 0), true},
		{"ipv6 to another", tEth(etIPv6, tIPv6(netip.MustParseAddr("fd00::8"), protoUDP, tUDP(53, nil)), 0), false},
		{"neighbour solicitation", tEth(etIPv6, tIPv6(netip.MustParseAddr("ff02::1:ff00:8"), protoICMPv6, ns), 0), true},
		{"icmpv6 echo to another", tEth(etIPv6, tIPv6(netip.MustParseAddr("fd00::8"), protoICMPv6, echo), 0), false},
		{"icmpv6 echo to the host", tEth(etIPv6, tIPv6(host[1], protoICMPv6, echo), 0), true},
		{"tagged ipv4 to the host", tEth(etIPv4, tIPv4(7, protoTCP, tTCP(1)), 1), false},
		{"ipv4 cut short", tEth(etIPv4, tIPv4(7, protoTCP, nil)[:12], 0), false},
	}
	for _, pass := range []bool{true, false} {
		opts := Options{Key: hash.MicrosoftKey[:], Table: []uint32{0}, Hook: HookXDP, PassHost: pass}
		if pass {
			opts.HostAddrs = host
		}
		x := loadXDP(t, opts, 1)
		if err := x.SetSocket(0, xsk(t)); err != nil {
			t.Fatal(err)
		}
		before, err := x.Counters()
		if err != nil {
			t.Fatal(err)
		}
		var hostFrames uint64
		for _, c := range frames {
			want := uint32(xdpRedirect)
			if c.host && pass {
				want = xdpPass
				hostFrames++
			}
			if got := run(t, x, c.f); got != want {
				t.Errorf("pass host %v: %s: verdict %d, want %d", pass, c.name, got, want)
			}
		}
		after, err := x.Counters()
		if err != nil {
			t.Fatal(err)
		}
		if got := after.HostPassed - before.HostPassed; got != hostFrames {
			t.Errorf("pass host %v: HostPassed %d, want %d", pass, got, hostFrames)
		}
		if got := after.Total() - before.Total(); got != uint64(len(frames)) {
			t.Errorf("pass host %v: %d frames counted of %d", pass, got, len(frames))
		}
	}
}

// TestHostOptions: PassHost and HostAddrs are for the XDP hook, at most
// MaxHostAddrs valid addresses, and HostAddrs means nothing without
// PassHost.
func TestHostOptions(t *testing.T) {
	base := Options{Key: hash.MicrosoftKey[:], Table: []uint32{0}}
	many := make([]netip.Addr, MaxHostAddrs+1)
	for i := range many {
		many[i] = netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
	}
	for _, c := range []struct {
		name string
		o    func(o *Options)
	}{
		{"socket filter", func(o *Options) { o.PassHost = true }},
		{"too many", func(o *Options) { o.Hook, o.PassHost, o.HostAddrs = HookXDP, true, many }},
		{"invalid", func(o *Options) { o.Hook, o.PassHost, o.HostAddrs = HookXDP, true, []netip.Addr{{}} }},
		{"addresses without PassHost", func(o *Options) { o.Hook, o.HostAddrs = HookXDP, many[:1] }},
	} {
		o := base
		c.o(&o)
		if _, err := Instructions(o); !errors.Is(err, ErrOptions) {
			t.Errorf("%s: %v, want ErrOptions", c.name, err)
		}
	}
	o := base
	o.Hook, o.PassHost, o.HostAddrs = HookXDP, true, many[:MaxHostAddrs]
	if _, err := Instructions(o); err != nil {
		t.Errorf("%d host addresses: %v", MaxHostAddrs, err)
	}
}
