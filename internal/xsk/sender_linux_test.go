//go:build linux

package xsk

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rpsgo/rps/internal/livetest"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
)

// testEtherType marks the frames the Sender tests send (IEEE local
// experimental): the receiving stack drops them, a packet socket bound to
// it sees only them.
const testEtherType = 0x88b5

// testFrame is frame seq of the Sender tests: to dst from src, the
// sequence number, then bytes derived from it, n bytes in all.
func testFrame(dst, src net.HardwareAddr, seq uint64, n int) []byte {
	f := make([]byte, n)
	copy(f, dst)
	copy(f[6:], src)
	binary.BigEndian.PutUint16(f[12:], testEtherType)
	binary.BigEndian.PutUint64(f[14:], seq)
	for i := 22; i < n; i++ {
		f[i] = byte(seq*7 + uint64(i))
	}
	return f
}

// openSenderIn opens a Sender on link inside ns and closes it at cleanup.
func openSenderIn(t testing.TB, ns *netns.NS, link string, cfg SenderConfig) *Sender {
	t.Helper()
	var s *Sender
	if err := ns.Do(func() (err error) { s, err = OpenSender(link, cfg); return err }); err != nil {
		t.Fatalf("OpenSender in %s: %v", ns.Name, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// macOf returns link's MAC address inside ns.
func macOf(t testing.TB, ns *netns.NS, link string) net.HardwareAddr {
	t.Helper()
	var mac net.HardwareAddr
	if err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(link)
		if err == nil {
			mac = ifi.HardwareAddr
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return mac
}

// packetSocket opens an AF_PACKET socket inside ns that receives the
// frames of testEtherType arriving on link, with a large receive buffer.
// The caller closes it.
func packetSocket(t testing.TB, ns *netns.NS, link string) int {
	t.Helper()
	fd := -1
	proto := int(htons(testEtherType))
	if err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(link)
		if err != nil {
			return err
		}
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto); err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(testEtherType), Ifindex: ifi.Index}); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20); err != nil {
			return err
		}
		tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
		return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	}); err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		t.Fatalf("packet socket in %s: %v", ns.Name, err)
	}
	return fd
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// TestSenderDelivers sends many more frames than the UMEM has chunks, in
// batches of every size, and checks that each arrives at the peer intact
// and in order, that the peer's interface counts them all, and that the
// Sender's counters agree: every frame sent is completed and its chunk is
// free again. Empty and oversized frames are refused and counted. Close
// leaves no descriptor or mapping behind.
func TestSenderDelivers(t *testing.T) {
	netns.Require(t, "ethtool")
	before := livetest.OpenFDs(t)
	mapsBefore, areasBefore := livetest.SocketMaps(t), mappedAreas.Load()
	p := netns.New(t, netns.Options{})
	const numFrames = 64
	s := openSenderIn(t, p.A, p.A.Link, SenderConfig{NumFrames: numFrames, RingSize: 32, Wait: 2 * time.Second})
	if info := s.Info(); info.ZeroCopy || info.Ifname != p.A.Link {
		t.Fatalf("Info %+v: want copy mode (veth has no zero copy)", info)
	}
	// Refused frames: empty, and one byte longer than a chunk.
	if m, err := s.Send([][]byte{{}, make([]byte, DefaultFrameSize+1)}); m != 0 || err != nil {
		t.Errorf("Send of invalid frames: %d, %v", m, err)
	}
	const n = 10000
	if st := sendChecked(t, s, p, n, numFrames); st.Invalid != 2 {
		t.Errorf("stats %+v: want 2 invalid", st)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if st2, err := s.Stats(); err != nil || st2.Sent != n {
		t.Errorf("Stats after Close: %+v, %v", st2, err)
	}
	if _, err := s.Send([][]byte{make([]byte, 60)}); !errors.Is(err, ErrClosed) || !errors.Is(err, net.ErrClosed) {
		t.Errorf("Send after Close: %v, want ErrClosed", err)
	}
	if fds, maps, areas := livetest.OpenFDs(t), livetest.SocketMaps(t), mappedAreas.Load(); fds > before || maps != mapsBefore || areas != areasBefore {
		t.Errorf("leak: %d descriptors, %d ring and %d UMEM mappings, had %d, %d and %d", fds, maps, areas, before, mapsBefore, areasBefore)
	}
}

// sendChecked sends n numbered frames of random lengths from p.A through s
// in batches of 1 to 100, and checks that p.B receives each intact and in
// order, that p.B's interface counts them, and that s completes them all
// without a drop and has its numFrames chunks free again. It returns the
// final stats.
func sendChecked(t *testing.T, s *Sender, p *netns.Pair, n, numFrames int) SenderStats {
	t.Helper()
	st0, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	dst, src := macOf(t, p.B, p.B.Link), macOf(t, p.A, p.A.Link)
	pfd := packetSocket(t, p.B, p.B.Link)
	defer unix.Close(pfd)
	r0 := livetest.LinkRx(t, p.B)
	rng := rand.New(rand.NewPCG(1, 2))
	lengths := make([]int, n)
	for i := range lengths {
		lengths[i] = min(60+rng.IntN(DefaultFrameSize-60+1), 1514) // the veth MTU
	}
	type result struct {
		got, bad int
		err      error
	}
	resc := make(chan result, 1)
	go func() {
		var r result
		buf := make([]byte, 4096)
		deadline := time.Now().Add(20 * time.Second)
		for r.got+r.bad < n && time.Now().Before(deadline) {
			m, _, err := unix.Recvfrom(pfd, buf, 0)
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				r.err = err
				break
			}
			seq := uint64(r.got + r.bad)
			if want := testFrame(dst, src, seq, lengths[seq]); !bytes.Equal(buf[:m], want) {
				if r.bad++; r.bad < 5 {
					t.Errorf("frame %d: got %d bytes (seq %d), want %d", seq, m, binary.BigEndian.Uint64(buf[14:]), len(want))
				}
				continue
			}
			r.got++
		}
		resc <- r
	}()
	for sent := 0; sent < n; {
		k := min(1+rng.IntN(100), n-sent)
		batch := make([][]byte, k)
		for j := range batch {
			batch[j] = testFrame(dst, src, uint64(sent+j), lengths[sent+j])
		}
		m, err := s.Send(batch)
		if err != nil || m != k {
			t.Fatalf("Send of %d frames: %d, %v", k, m, err)
		}
		sent += k
	}
	r := <-resc
	if r.err != nil || r.got != n || r.bad != 0 {
		t.Fatalf("the peer received %d intact frames in order, %d others, of %d sent (%v)", r.got, r.bad, n, r.err)
	}
	var st SenderStats
	livetest.WaitStable(t, func() (string, bool) {
		if st, err = s.Stats(); err != nil {
			t.Fatal(err)
		}
		rx := livetest.LinkRx(t, p.B) - r0
		return fmt.Sprintf("%+v, peer rx %d", st, rx), st.Completed-st0.Completed == uint64(n) && rx == uint64(n)
	})
	if st.Sent-st0.Sent != uint64(n) || st.Dropped != st0.Dropped || st.TxInvalidDescs != 0 || st.InFlight() != 0 {
		t.Errorf("stats %+v (from %+v): want %d more sent and completed, none dropped", st, st0, n)
	}
	s.mu.Lock()
	s.reap()
	free := len(s.free)
	s.mu.Unlock()
	if free != numFrames {
		t.Errorf("%d chunks free after every frame completed, want %d", free, numFrames)
	}
	return st
}

// TestSenderCloseWhileBlocked blocks a Send for lack of chunks and closes
// the Sender under it. The Sender is on a bridge whose port's qdisc holds
// the frames (holdingBridge): the kernel has taken them off the TX ring but
// does not complete them, so every chunk is in flight and Send waits.
// Close must wake it at once.
func TestSenderCloseWhileBlocked(t *testing.T) {
	netns.Require(t, "ethtool", "tc")
	p := netns.New(t, netns.Options{})
	holdingBridge(t, p.A)
	const numFrames = 64
	s := openSenderIn(t, p.A, "rpsbr0", SenderConfig{NumFrames: numFrames, RingSize: 32, Wait: time.Minute})
	dst, src := macOf(t, p.B, p.B.Link), macOf(t, p.A, "rpsbr0")
	frames := make([][]byte, 4*numFrames)
	for i := range frames {
		frames[i] = testFrame(dst, src, uint64(i), 100)
	}
	type result struct {
		n   int
		err error
	}
	resc := make(chan result, 1)
	go func() {
		n, err := s.Send(frames)
		resc <- result{n, err}
	}()
	// Wait until every chunk is in flight and the Send is still waiting.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := s.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st.Sent == 0 && time.Now().After(deadline) {
			t.Fatalf("Send put nothing on the ring: %+v", st)
		}
		select {
		case r := <-resc:
			t.Fatalf("Send returned %d, %v before Close (%+v): the qdisc did not hold the frames", r.n, r.err, st)
		default:
		}
		if st.Sent >= numFrames && st.InFlight() > numFrames/2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the frames did not stay in flight: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case r := <-resc:
		if !errors.Is(r.err, ErrClosed) || r.n < numFrames/2 || r.n >= len(frames) {
			t.Errorf("the blocked Send returned %d, %v; want ErrClosed after some frames", r.n, r.err)
		}
		st, _ := s.Stats()
		if st.Sent != uint64(r.n) || st.Sent+st.Dropped != uint64(len(frames)) {
			t.Errorf("stats %+v: want %d sent and the other %d dropped", st, r.n, len(frames)-r.n)
		}
		t.Logf("Send returned %d, %v, %v after Close; %+v", r.n, r.err, time.Since(start), st)
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not wake the blocked Send")
	}
}

// TestSenderWaitBound checks the drop path: with a bounded wait, a Send
// that finds no chunk free gives up after about the wait and counts the
// rest as dropped; with a negative wait it does not wait at all.
func TestSenderWaitBound(t *testing.T) {
	netns.Require(t, "ethtool", "tc")
	for _, wait := range []time.Duration{100 * time.Millisecond, -1} {
		t.Run(fmt.Sprint(wait), func(t *testing.T) {
			// Frames held in a qdisc keep their socket, and so the queue,
			// after Close: a pair for each case.
			p := netns.New(t, netns.Options{})
			holdingBridge(t, p.A)
			const numFrames = 32
			s := openSenderIn(t, p.A, "rpsbr0", SenderConfig{NumFrames: numFrames, Wait: wait})
			dst, src := macOf(t, p.B, p.B.Link), macOf(t, p.A, "rpsbr0")
			frames := make([][]byte, 4*numFrames)
			for i := range frames {
				frames[i] = testFrame(dst, src, uint64(i), 100)
			}
			start := time.Now()
			n, err := s.Send(frames)
			took := time.Since(start)
			st, serr := s.Stats()
			if err != nil || serr != nil || n < numFrames || n >= len(frames) || st.Sent != uint64(n) || st.Sent+st.Dropped != uint64(len(frames)) {
				t.Errorf("Send: %d, %v in %v; stats %+v, %v: want the %d chunks and what completed sent, the rest dropped", n, err, took, st, serr, numFrames)
			}
			if wait > 0 && (took < wait || took > wait+time.Second) || wait < 0 && took > 50*time.Millisecond {
				t.Errorf("Send took %v with wait %v", took, wait)
			}
			t.Logf("wait %v: Send returned %d after %v, %+v", wait, n, took, st)
		})
	}
}

// holdingBridge puts ns's link in a bridge rpsbr0 and gives it a qdisc
// (tbf at 8 bit/s) that holds what the bridge sends: a veth alone would
// not do, since AF_XDP transmits on a device without its qdisc. The
// bucket lets a few frames through at first.
func holdingBridge(t *testing.T, ns *netns.NS) {
	t.Helper()
	for _, args := range [][]string{
		{"ip", "link", "add", "rpsbr0", "type", "bridge"},
		{"ip", "link", "set", ns.Link, "master", "rpsbr0"},
		{"ip", "link", "set", "rpsbr0", "up"},
		{"tc", "qdisc", "add", "dev", ns.Link, "root", "tbf", "rate", "8bit", "burst", "1600", "limit", "10000000"},
	} {
		if out, err := ns.Exec(context.Background(), args[0], args[1:]...); err != nil {
			netns.SkipOrFatal(t, fmt.Sprintf("%s: %v: %s", strings.Join(args, " "), err, out))
		}
	}
}

// TestSenderErrors checks what OpenSender and Send refuse: bad
// configurations, a missing interface, and a queue with no TX queue
// behind it. (A queue a receiving socket holds: TestSharedSender.)
func TestSenderErrors(t *testing.T) {
	for _, cfg := range []SenderConfig{
		{NumFrames: 3}, {FrameSize: 1000}, {RingSize: 3}, {NumFrames: 64, RingSize: 128},
		{Queue: -1}, {Bind: 7}, {NumFrames: 1 << 20, FrameSize: 4096},
	} {
		if _, err := OpenSender("lo", cfg); !errors.Is(err, steer.ErrConfig) {
			t.Errorf("OpenSender(%+v): %v, want steer.ErrConfig", cfg, err)
		}
	}
	netns.Require(t, "ethtool")
	p := netns.New(t, netns.Options{})
	if err := p.A.Do(func() error {
		_, err := OpenSender("rps-no-such-link", SenderConfig{})
		return err
	}); err == nil || errors.Is(err, steer.ErrConfig) {
		t.Errorf("OpenSender on a missing interface: %v", err)
	}

	// A veth with two receive queues and one transmit queue: queue 1 binds
	// but cannot transmit.
	out, err := p.A.Exec(context.Background(), "ip", "link", "add", "rpsq0", "numrxqueues", "2", "numtxqueues", "1",
		"type", "veth", "peer", "name", "rpsq1", "numrxqueues", "2", "numtxqueues", "1")
	if err == nil {
		out, err = p.A.Exec(context.Background(), "sh", "-c", "ip link set rpsq0 up && ip link set rpsq1 up")
	}
	if err != nil {
		netns.SkipOrFatal(t, fmt.Sprintf("veth with two receive queues: %v: %s", err, out))
	}
	s := openSenderIn(t, p.A, "rpsq0", SenderConfig{Queue: 1})
	f := testFrame(macOf(t, p.A, "rpsq1"), macOf(t, p.A, "rpsq0"), 0, 60)
	if n, err := s.Send([][]byte{f}); err == nil || !strings.Contains(err.Error(), "no TX queue") || n != 1 {
		t.Errorf("Send on a queue without TX queue: %d, %v", n, err)
	}
}
