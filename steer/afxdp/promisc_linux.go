//go:build linux

package afxdp

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/rpsgo/rps/internal/livesock"
)

// promisc holds an interface in promiscuous mode (Config.Promisc) the way
// the kernel counts it: a helper AF_PACKET socket with a PACKET_MR_PROMISC
// membership on the interface, which raises the interface's promiscuity
// count while the socket holds it and lowers it again when the socket
// closes, whoever closes it (the process's exit too), as for tcpdump. The
// socket has protocol 0, so no protocol hook is registered for it and it
// receives no frame. It must be opened in the interface's namespace.
type promisc struct {
	mu sync.Mutex
	fd int // -1 once closed
}

// openPromisc puts the interface ifindex of the caller's namespace in
// promiscuous mode until close.
func openPromisc(ifindex int) (*promisc, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("promiscuous mode: a packet socket: %w", livesock.Explain(err, livesock.NeedRaw))
	}
	mreq := unix.PacketMreq{Ifindex: int32(ifindex), Type: unix.PACKET_MR_PROMISC}
	if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("promiscuous mode: PACKET_MR_PROMISC membership: %w", err)
	}
	return &promisc{fd: fd}, nil
}

// close gives the membership back; it is idempotent and nil-safe.
func (p *promisc) close() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fd < 0 {
		return nil
	}
	err := unix.Close(p.fd)
	p.fd = -1
	if err != nil {
		return fmt.Errorf("leaving promiscuous mode: %w", err)
	}
	return nil
}
