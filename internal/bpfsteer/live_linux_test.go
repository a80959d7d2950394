//go:build linux

package bpfsteer

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/steer"
)

// TestLiveFanout attaches the program to a real PACKET_FANOUT_EBPF group on
// the loopback device of a network namespace the test creates, sends
// frames with a packet socket and checks that every frame lands on the
// socket user space would pick for it. Each frame passes the group twice:
// as PACKET_OUTGOING from the transmit tap (skb->data at the MAC header,
// VLAN tags inline) and again on receive (skb->data past the MAC header,
// the outermost VLAN tag moved into skb->vlan_tci and reported in
// PACKET_AUXDATA), so both shapes of the skb are tested.
func TestLiveFanout(t *testing.T) {
	requirePriv(t)
	key, _ := hash.RandomKey(40)
	h, _ := hash.NewToeplitz(key)
	if !steerIsReal(t, h) {
		t.Skip("steer's classifier is still a stub")
	}
	const sockets = 4
	table := make([]uint32, 128)
	for i := range table {
		table[i] = uint32(i % 3) // workers 0..2; socket 3 is the fallback
	}
	opts := Options{Key: key, Table: table, Symmetric: true, UDP4Tuple: true, Fallback: 3}
	p := load(t, opts)
	cls, err := steer.NewClassifier(steer.HashConfig{Key: h.Key(), Symmetric: true, UDP4Tuple: true})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The thread enters a new network namespace and is never unlocked,
		// so Go discards it when this goroutine ends.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			t.Errorf("unshare(CLONE_NEWNET): %v", err)
			return
		}
		liveBody(t, p, cls, opts, sockets)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("live test timed out")
	}
}

func liveBody(t *testing.T, p *Program, cls *steer.Classifier, opts Options, sockets int) {
	// Bring lo up in the new namespace.
	ctl, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Errorf("socket: %v", err)
		return
	}
	defer unix.Close(ctl)
	ifr, _ := unix.NewIfreq("lo")
	if err := unix.IoctlIfreq(ctl, unix.SIOCGIFFLAGS, ifr); err != nil {
		t.Errorf("SIOCGIFFLAGS: %v", err)
		return
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(ctl, unix.SIOCSIFFLAGS, ifr); err != nil {
		t.Errorf("SIOCSIFFLAGS: %v", err)
		return
	}
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Errorf("lo: %v", err)
		return
	}
	allProto := int(htons(unix.ETH_P_ALL))
	sll := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: lo.Index}
	fds := make([]int, sockets)
	for i := range fds {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, allProto)
		if err != nil {
			t.Errorf("packet socket: %v", err)
			return
		}
		defer unix.Close(fd)
		fds[i] = fd
		for _, o := range [][3]int{
			{unix.SOL_SOCKET, unix.SO_RCVBUF, 4 << 20},
			{unix.SOL_PACKET, unix.PACKET_AUXDATA, 1},
		} {
			if err := unix.SetsockoptInt(fd, o[0], o[1], o[2]); err != nil {
				t.Errorf("setsockopt %v: %v", o, err)
				return
			}
		}
		if err := unix.Bind(fd, sll); err != nil {
			t.Errorf("bind: %v", err)
			return
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_FANOUT, 0x4242|unix.PACKET_FANOUT_EBPF<<16); err != nil {
			t.Errorf("PACKET_FANOUT: %v", err)
			return
		}
	}
	if err := unix.SetsockoptInt(fds[0], unix.SOL_PACKET, unix.PACKET_FANOUT_DATA, p.FD()); err != nil {
		t.Errorf("PACKET_FANOUT_DATA: %v", err)
		return
	}
	// Drain anything that arrived before the group existed.
	for _, fd := range fds {
		drain(fd)
	}

	tx, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Errorf("sender socket: %v", err)
		return
	}
	defer unix.Close(tx)
	g := &frameGen{r: rand.New(rand.NewPCG(rand.Uint64(), 3))}
	const frames = 400
	for i := 0; i < frames; i++ {
		f := g.frame()
		f[0] = f[0]&^1 | 2 // unicast, locally administered: not for this host
		if err := unix.Sendto(tx, f, 0, sll); err != nil {
			t.Errorf("send %d-byte frame: %v", len(f), err)
			return
		}
	}

	mask := uint32(len(opts.Table) - 1)
	buf := make([]byte, 1<<16)
	oob := make([]byte, 256)
	var got, outgoing, incoming, vlanValid, hashed int
	deadline := time.Now().Add(5 * time.Second)
	pfds := make([]unix.PollFd, len(fds))
	for got < 2*frames && time.Now().Before(deadline) {
		for i, fd := range fds {
			pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
		}
		n, err := unix.Poll(pfds, 500)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			break
		}
		for idx, fd := range fds {
			for {
				n, oobn, _, from, err := unix.Recvmsg(fd, buf, oob, unix.MSG_DONTWAIT)
				if err != nil {
					break
				}
				got++
				frame := buf[:n]
				var aux *unix.TpacketAuxdata
				if cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
					for _, c := range cmsgs {
						if c.Header.Level == unix.SOL_PACKET && c.Header.Type == unix.PACKET_AUXDATA && len(c.Data) >= 20 {
							aux = &unix.TpacketAuxdata{
								Status:   binary.NativeEndian.Uint32(c.Data[0:]),
								Vlan_tci: binary.NativeEndian.Uint16(c.Data[16:]),
							}
						}
					}
				}
				if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
					outgoing++
				} else {
					incoming++
				}
				var c steer.Classification
				if aux != nil && aux.Status&unix.TP_STATUS_VLAN_VALID != 0 {
					vlanValid++
					cls.ClassifyVLAN(frame, aux.Vlan_tci, &c)
				} else {
					cls.Classify(frame, &c)
				}
				want := opts.Fallback
				if c.HashType != hash.None {
					hashed++
					want = opts.Table[c.FlowID&mask]
				}
				if int(want)%len(fds) != idx {
					t.Errorf("frame %x (outgoing %v, vlan %v) on socket %d, user space picks %d (%v, reason %v)",
						frame, from.(*unix.SockaddrLinklayer).Pkttype == unix.PACKET_OUTGOING,
						aux != nil && aux.Status&unix.TP_STATUS_VLAN_VALID != 0, idx, want, c.HashType, c.Reason)
				}
			}
		}
	}
	t.Logf("received %d of %d copies: %d outgoing, %d incoming, %d with the VLAN tag out of band, %d hashed",
		got, 2*frames, outgoing, incoming, vlanValid, hashed)
	if got < frames || outgoing == 0 || incoming == 0 || vlanValid == 0 || hashed == 0 {
		t.Errorf("too few frames to judge: %d received, %d outgoing, %d incoming, %d VLAN, %d hashed",
			got, outgoing, incoming, vlanValid, hashed)
	}
}

func drain(fd int) {
	buf := make([]byte, 1<<16)
	for {
		if _, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT); err != nil {
			return
		}
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
