//go:build linux

package afxdp

import (
	"context"
	"net"
	"testing"

	"github.com/rpsgo/rps/internal/netns"
)

// promiscuity reads the link's promiscuity count inside ns (`ip -d link
// show`): how many holders keep it in promiscuous mode.
func promiscuity(t testing.TB, ns *netns.NS) int {
	t.Helper()
	st, err := ns.LinkState(context.Background(), ns.Link)
	if err != nil {
		t.Fatal(err)
	}
	return st.Promiscuity
}

// TestPromisc: with Config.Promisc an open socket, or a group (once, not
// per socket), raises the interface's promiscuity count, and Close lowers
// it again without a descriptor left behind; without it the count does
// not move. The count is the kernel's, so a holder of its own (as tcpdump
// would be) keeps the interface promiscuous across the Close.
func TestPromisc(t *testing.T) {
	netns.Require(t)
	p := netns.New(t, netns.Options{})
	base, fds0 := promiscuity(t, p.A), openFDs(t)

	s := openIn(t, p.A, Config{})
	if n := promiscuity(t, p.A); n != base {
		t.Errorf("without Promisc an open socket moved promiscuity from %d to %d", base, n)
	}
	s.Close()

	s = openIn(t, p.A, Config{Promisc: true})
	if n := promiscuity(t, p.A); n != base+1 {
		t.Errorf("promiscuity %d while a socket with Promisc is open, want %d", n, base+1)
	}
	other, err := openPromiscIn(p.A)
	if err != nil {
		t.Fatal(err)
	}
	if n := promiscuity(t, p.A); n != base+2 {
		t.Errorf("promiscuity %d with a second holder, want %d", n, base+2)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := promiscuity(t, p.A); n != base+1 {
		t.Errorf("promiscuity %d after Close with another holder, want %d", n, base+1)
	}
	other.close()
	if n := promiscuity(t, p.A); n != base {
		t.Errorf("promiscuity %d after every holder closed, want %d", n, base)
	}

	var g *Group
	if err := p.A.Do(func() (err error) { g, err = OpenGroup(p.A.Link, 3, Config{Host: HostTake, Promisc: true}); return err }); err != nil {
		t.Fatal(err)
	}
	if n := promiscuity(t, p.A); n != base+1 {
		t.Errorf("promiscuity %d while a group of 3 with Promisc is open, want %d (one per group)", n, base+1)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if n := promiscuity(t, p.A); n != base {
		t.Errorf("promiscuity %d after the group's Close, want %d", n, base)
	}
	if fds := openFDs(t); fds != fds0 {
		t.Errorf("%d descriptors open after Close, %d before", fds, fds0)
	}
}

// openPromiscIn opens a promiscuous-mode holder on ns's link.
func openPromiscIn(ns *netns.NS) (p *promisc, err error) {
	err = ns.Do(func() error {
		ifi, err := net.InterfaceByName(ns.Link)
		if err != nil {
			return err
		}
		p, err = openPromisc(ifi.Index)
		return err
	})
	return p, err
}
