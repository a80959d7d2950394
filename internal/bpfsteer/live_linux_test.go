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
	inNamespace(t, func() {
		g := &frameGen{r: rand.New(rand.NewPCG(rand.Uint64(), 3))}
		liveBody(t, p, cls, opts, sockets, g.frame, nil)
	})
}

// inNamespace runs body on a thread of its own in a new network namespace,
// within 30 seconds. The thread is never unlocked, so Go discards it, and
// the namespace with it, when body returns.
func inNamespace(t *testing.T, body func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			t.Errorf("unshare(CLONE_NEWNET): %v", err)
			return
		}
		body()
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("live test timed out")
	}
}

// TestLiveFanoutTunnels is TestLiveFanout with tunnels opened, SipHash
// and UDP 4-tuples, over frames of every encapsulation, half of them
// VXLAN carrying TCP and UDP flows: every copy lands where user space
// puts it, many by an inner header.
func TestLiveFanoutTunnels(t *testing.T) {
	requirePriv(t)
	hc := steer.HashConfig{Algorithm: hash.AlgorithmSipHash, Key: randKey(t, hash.SipHashKeyLen),
		Tunnels: steer.TunnelsInner, UDP4Tuple: true, VXLANPorts: []uint16{VXLANPort, 8472}}
	cls, err := steer.NewClassifier(hc)
	if err != nil {
		t.Fatal(err)
	}
	const sockets = 4
	table := make([]uint32, 64)
	for i := range table {
		table[i] = uint32(i % 3)
	}
	opts := optionsFor(hc, table, 3, HookSocketFilter)
	p := load(t, opts)
	var inner int
	inNamespace(t, func() {
		r := rand.New(rand.NewPCG(rand.Uint64(), 4))
		g := &encGen{r: r, vxlan: hc.VXLANPorts}
		gen := func() []byte {
			if r.IntN(2) == 0 {
				return g.frame()
			}
			in := tEth(etIPv4, tIPv4(byte(r.IntN(256)), uint8(g.pick(protoTCP, protoUDP)), g.bytes(20)), 0)
			return tEth(etIPv4, tIPv4(7, protoUDP, tUDP(hc.VXLANPorts[r.IntN(2)], append([]byte{0x08, 0, 0, 0, 0, 0, 9, 0}, in...))), r.IntN(2))
		}
		liveBody(t, p, cls, opts, sockets, gen, func(c *steer.Classification) {
			if c.HashType != hash.None && c.Key.Depth > 0 {
				inner++
			}
		})
	})
	t.Logf("%d copies hashed by an inner header", inner)
	if inner < 200 {
		t.Errorf("only %d copies were hashed by an inner header", inner)
	}
}

// liveBody runs the test in the namespace: frames from gen, each copy
// classified by cls (and passed to seen, if set) and checked against the
// socket it arrived on.
func liveBody(t *testing.T, p *Program, cls *steer.Classifier, opts Options, sockets int, gen func() []byte, seen func(*steer.Classification)) {
	lo := loUp(t)
	if lo == nil {
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
	const frames = 400
	for i := 0; i < frames; i++ {
		f := gen()
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
				if seen != nil {
					seen(&c)
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

// loUp brings lo up in the current namespace and returns it, or nil after
// reporting an error.
func loUp(t *testing.T) *net.Interface {
	ctl, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Errorf("socket: %v", err)
		return nil
	}
	defer unix.Close(ctl)
	ifr, _ := unix.NewIfreq("lo")
	if err := unix.IoctlIfreq(ctl, unix.SIOCGIFFLAGS, ifr); err != nil {
		t.Errorf("SIOCGIFFLAGS: %v", err)
		return nil
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(ctl, unix.SIOCSIFFLAGS, ifr); err != nil {
		t.Errorf("SIOCSIFFLAGS: %v", err)
		return nil
	}
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Errorf("lo: %v", err)
		return nil
	}
	return lo
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
