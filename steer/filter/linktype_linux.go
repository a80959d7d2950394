package filter

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/rpsgo/rps/steer/filter/internal/bpfc"
)

// checkLinkType checks that the interface named ifname, in the calling
// thread's network namespace, delivers Ethernet frames (an Ethernet or
// loopback device), the link type the built-in compiler writes programs
// for; any other is left to tcpdump.
func checkLinkType(ifname string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("filter: reading the link type of %s: %w", ifname, err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(ifname)
	if err != nil {
		return fmt.Errorf("filter: interface %q: %w", ifname, err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFHWADDR, ifr); err != nil {
		return fmt.Errorf("filter: interface %s: %w", ifname, err)
	}
	switch typ := ifr.Uint16(); typ {
	case unix.ARPHRD_ETHER, unix.ARPHRD_LOOPBACK:
		return nil
	default:
		return fmt.Errorf("filter: interface %s has link type ARPHRD %d, not Ethernet: %w", ifname, typ, bpfc.ErrUnsupported)
	}
}
