//go:build linux

package afxdp

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/rpsgo/rps/internal/bpfsteer"
	"github.com/rpsgo/rps/steer"
)

// hostAddrs reads the addresses of ifi (in the calling thread's network
// namespace) for cfg.Host: with HostRefuse an interface that has any but
// IPv6 link-local ones is an error wrapping ErrHostAddrs that names them;
// with HostPass it returns the destinations the program passes to the
// stack: the addresses, the IPv4 subnets' broadcast addresses and
// 255.255.255.255. Otherwise, and without a program, it returns nil.
func hostAddrs(ifi *net.Interface, cfg Config) ([]netip.Addr, error) {
	if cfg.Attach == AttachNone || cfg.Host == HostTake {
		return nil, nil
	}
	as, err := ifi.Addrs()
	if err != nil {
		return nil, fmt.Errorf("afxdp: reading the addresses of %q: %w", ifi.Name, err)
	}
	var prefixes []netip.Prefix
	for _, a := range as {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(ipn.IP); ok {
				ones, _ := ipn.Mask.Size()
				prefixes = append(prefixes, netip.PrefixFrom(ip.Unmap(), ones))
			}
		}
	}
	if cfg.Host == HostRefuse {
		var in []string
		for _, p := range prefixes {
			if p.Addr().Is4() || !p.Addr().IsLinkLocalUnicast() {
				in = append(in, p.String())
			}
		}
		if len(in) == 0 {
			return nil, nil
		}
		return nil, fmt.Errorf("afxdp: %w: %q has the addresses %s, and the XDP program would take every frame of its queue %d from the kernel stack: "+
			"the host would stop answering there, ARP and its connections to them included; set Config.Host to HostPass to pass the frames the host needs "+
			"to its stack, or to HostTake to take them all", ErrHostAddrs, ifi.Name, strings.Join(in, ", "), cfg.Queue)
	}
	var addrs []netip.Addr
	v4 := false
	for _, p := range prefixes {
		addrs = append(addrs, p.Addr())
		if p.Addr().Is4() {
			v4 = true
			if p.Bits() <= 30 {
				addrs = append(addrs, broadcast(p))
			}
		}
	}
	if v4 {
		addrs = append(addrs, netip.AddrFrom4([4]byte{255, 255, 255, 255}))
	}
	if len(addrs) > bpfsteer.MaxHostAddrs {
		return nil, fmt.Errorf("afxdp: %w: %q has %d addresses and broadcast addresses, more than the %d the program passes to the stack: use HostTake, or another interface",
			steer.ErrConfig, ifi.Name, len(addrs), bpfsteer.MaxHostAddrs)
	}
	return addrs, nil
}

// broadcast returns the broadcast address of the IPv4 prefix p.
func broadcast(p netip.Prefix) netip.Addr {
	a := p.Addr().As4()
	v := binary.BigEndian.Uint32(a[:]) | (1<<(32-p.Bits()) - 1)
	binary.BigEndian.PutUint32(a[:], v)
	return netip.AddrFrom4(a)
}
