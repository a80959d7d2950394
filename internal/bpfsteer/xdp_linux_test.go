//go:build linux

package bpfsteer

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
)

// steering is a loaded program the agreement tests run: the socket
// filter, or the XDP program built to return the socket index it would
// redirect to.
type steering interface {
	ebpfProgram() *ebpf.Program
	Close() error
}

// hooks are the hooks the agreement tests cover.
var hooks = []Hook{HookSocketFilter, HookXDP}

// forHooks runs body once per hook, as a subtest named after it.
func forHooks(t *testing.T, body func(t *testing.T, hook Hook)) {
	t.Helper()
	for _, h := range hooks {
		t.Run(h.String(), func(t *testing.T) { body(t, h) })
	}
}

// loadHook loads the program for opts at opts.Hook; an XDP program returns
// the index it would redirect to.
func loadHook(t testing.TB, opts Options) steering {
	t.Helper()
	if opts.Hook == HookSocketFilter {
		return load(t, opts)
	}
	opts.testReturn = true
	return loadXDP(t, opts, 1)
}

// loadReal loads the program for opts at opts.Hook as it is used: an XDP
// program with one socket slot, left empty.
func loadReal(t testing.TB, opts Options) steering {
	t.Helper()
	if opts.Hook == HookSocketFilter {
		return load(t, opts)
	}
	return loadXDP(t, opts, 1)
}

// loadXDP loads an XDP program with sockets slots.
func loadXDP(t testing.TB, opts Options, sockets int) *XDP {
	t.Helper()
	x, err := NewXDP(opts, sockets)
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			t.Fatalf("verifier rejected the XDP program: %+v", ve)
		}
		t.Fatalf("NewXDP: %v", err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

// xsk opens an AF_XDP socket, closed at the test's end. The XSKMAP takes
// it unbound: enough for bpf_redirect_map to find it, which is all that
// BPF_PROG_TEST_RUN without live frames exercises.
func xsk(t *testing.T) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("AF_XDP socket: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// TestXDPRedirect runs the real XDP program (not the test build) over
// random frames with some XSKMAP slots filled: each frame's verdict is
// XDP_REDIRECT when its worker's slot (user space's choice, or the
// fallback) holds a socket, else XDP_PASS, and the counters add up to
// what the frames should have counted, with Fallback and with
// PassUnhashed, and after a slot is cleared.
func TestXDPRedirect(t *testing.T) {
	requirePriv(t)
	const sockets = 4
	key := randKey(t, 40)
	hc := steer.HashConfig{Key: key, Symmetric: true, UDP4Tuple: true}
	cls, err := steer.NewClassifier(hc)
	if err != nil {
		t.Fatal(err)
	}
	table := make([]uint32, 64)
	for i := range table {
		table[i] = uint32(i % 3) // workers 0..2; socket 3 is the fallback
	}
	g := &frameGen{r: rand.New(rand.NewPCG(rand.Uint64(), 4))}
	var frames [][]byte
	for len(frames) < 2000 {
		if f := g.frame(); testable(f) {
			frames = append(frames, f)
		}
	}
	for _, pass := range []bool{false, true} {
		opts := optionsFor(hc, table, 3, HookXDP)
		opts.PassUnhashed = pass
		x := loadXDP(t, opts, sockets)
		filled := map[int]bool{0: true, 1: true, 3: true} // slot 2 empty
		for i := range filled {
			if err := x.SetSocket(i, xsk(t)); err != nil {
				t.Fatal(err)
			}
		}
		for round := 0; round < 2; round++ {
			if round == 1 {
				if err := x.ClearSocket(1); err != nil {
					t.Fatal(err)
				}
				delete(filled, 1)
			}
			before, err := x.Counters()
			if err != nil {
				t.Fatal(err)
			}
			want := XDPCounters{Redirected: make([]uint64, sockets)}
			var c steer.Classification
			for _, f := range frames {
				cls.Classify(f, &c)
				verdict, worker := uint32(xdpPass), -1
				switch {
				case c.HashType != hash.None:
					worker = int(table[c.FlowID&uint32(len(table)-1)])
				case pass:
					want.UnhashedPassed++
				default:
					want.UnhashedFallback++
					worker = 3
				}
				if worker >= 0 {
					if filled[worker] {
						verdict = xdpRedirect
						want.Redirected[worker]++
					} else {
						want.NoSocket++
					}
				}
				if got := run(t, x, f); got != verdict {
					t.Fatalf("pass %v round %d: frame %x (%v, worker %d): verdict %d, want %d", pass, round, f, c.HashType, worker, got, verdict)
				}
			}
			after, err := x.Counters()
			if err != nil {
				t.Fatal(err)
			}
			got := XDPCounters{Redirected: make([]uint64, sockets),
				UnhashedPassed:   after.UnhashedPassed - before.UnhashedPassed,
				UnhashedFallback: after.UnhashedFallback - before.UnhashedFallback,
				NoSocket:         after.NoSocket - before.NoSocket}
			for i := range got.Redirected {
				got.Redirected[i] = after.Redirected[i] - before.Redirected[i]
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("pass %v round %d: counters %+v, want %+v", pass, round, got, want)
			}
			if got.Total() != uint64(len(frames)) {
				t.Errorf("pass %v round %d: counters total %d of %d frames", pass, round, got.Total(), len(frames))
			}
			if want.NoSocket == 0 || (want.UnhashedPassed == 0) == pass || (want.UnhashedFallback == 0) != pass {
				t.Fatalf("frames too thin: %+v", want)
			}
			t.Logf("pass %v round %d: %+v", pass, round, got)
		}
	}
}

// TestXDPSetTable checks the XDP program's table, Sync and Close: the
// next frame after SetTable sees the new table, Sync returns (from many
// goroutines at once), a table naming a socket the program has not is
// refused, and every method of a closed program says so.
func TestXDPSetTable(t *testing.T) {
	requirePriv(t)
	key := randKey(t, 40)
	const sockets = 8
	x := loadXDP(t, Options{Key: key, Table: make([]uint32, 32), Fallback: 7}, sockets)
	xt := loadXDP(t, Options{Key: key, Table: make([]uint32, 32), Fallback: 7, testReturn: true}, sockets)
	f := tEth(etIPv4, tIPv4(1, protoTCP, tTCP(1)), 0)
	for round := uint32(1); round < sockets; round++ {
		next := make([]uint32, 32)
		for i := range next {
			next[i] = round
		}
		setTable(t, x, next)
		setTable(t, xt, next)
		if w := run(t, xt, f); w != round {
			t.Fatalf("round %d: frame went to %d", round, w)
		}
		var wg sync.WaitGroup
		errs := make([]error, 4)
		start := time.Now()
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = x.Sync()
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("Sync: %v", err)
		}
		if round == 1 {
			t.Logf("4 concurrent Syncs: %v", time.Since(start))
		}
	}
	bad := make([]uint32, 32)
	bad[5] = sockets
	if err := x.SetTable(bad); !errors.Is(err, ErrOptions) {
		t.Errorf("SetTable naming socket %d of %d: %v, want ErrOptions", sockets, sockets, err)
	}
	if err := x.SetTable(make([]uint32, 64)); !errors.Is(err, ErrTableLength) {
		t.Errorf("SetTable of another length: %v, want ErrTableLength", err)
	}
	for _, i := range []int{-1, sockets} {
		if err := x.SetSocket(i, xsk(t)); !errors.Is(err, ErrOptions) {
			t.Errorf("SetSocket(%d): %v, want ErrOptions", i, err)
		}
	}
	if err := x.SetSocket(0, int(os.Stdin.Fd())); err == nil {
		t.Error("SetSocket with a file that is no AF_XDP socket: no error")
	}
	if err := x.ClearSocket(2); err != nil {
		t.Errorf("ClearSocket of an empty slot: %v", err)
	}
	if x.Sockets() != sockets {
		t.Errorf("Sockets() = %d", x.Sockets())
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if x.Program() != nil {
		t.Error("Program() after Close is not nil")
	}
	closed := map[string]error{
		"SetTable":    x.SetTable(make([]uint32, 32)),
		"SetSocket":   x.SetSocket(0, 0),
		"ClearSocket": x.ClearSocket(0),
		"Sync":        x.Sync(),
	}
	_, closed["Table"] = x.Table()
	_, closed["Counters"] = x.Counters()
	for name, err := range closed {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

// TestNewXDPRejects checks what NewXDP and New refuse.
func TestNewXDPRejects(t *testing.T) {
	key := randKey(t, 40)
	t4 := []uint32{0, 1, 2, 3}
	for _, c := range []struct {
		name    string
		opts    Options
		sockets int
		err     error
	}{
		{"no sockets", Options{Key: key, Table: t4}, 0, ErrOptions},
		{"too many sockets", Options{Key: key, Table: t4}, MaxTableLen + 1, ErrOptions},
		{"a bucket naming a socket past the last", Options{Key: key, Table: t4}, 3, ErrOptions},
		{"the fallback past the last socket", Options{Key: key, Table: t4, Fallback: 4}, 4, ErrOptions},
		{"a bad key", Options{Key: key[:20], Table: t4}, 4, ErrKeyLength},
	} {
		if _, err := NewXDP(c.opts, c.sockets); !errors.Is(err, c.err) {
			t.Errorf("NewXDP(%s) = %v, want %v", c.name, err, c.err)
		}
	}
	if _, err := New(Options{Key: key, Table: t4, Hook: HookXDP}); !errors.Is(err, ErrOptions) {
		t.Errorf("New with HookXDP: %v, want ErrOptions", err)
	}
	requirePriv(t)
	// The fallback is not a socket when unhashed frames are passed.
	loadXDP(t, Options{Key: key, Table: t4, Fallback: 9, PassUnhashed: true}, 4)
}

// TestXDPLive attaches the XDP program through a BPF link, in generic
// mode, to lo in a network namespace the test creates, sends frames on
// it with a packet socket and checks the counters: every frame seen once
// on receive, the ones user space hashes counted as having no socket (the
// slots are empty), the others passed (PassUnhashed).
func TestXDPLive(t *testing.T) {
	requirePriv(t)
	hc := steer.HashConfig{Key: randKey(t, 40), UDP4Tuple: true}
	cls, err := steer.NewClassifier(hc)
	if err != nil {
		t.Fatal(err)
	}
	opts := optionsFor(hc, make([]uint32, 16), 0, HookXDP)
	opts.PassUnhashed = true
	x := loadXDP(t, opts, 2)
	inNamespace(t, func() {
		lo := loUp(t)
		if lo == nil {
			return
		}
		l, err := link.AttachXDP(link.XDPOptions{Program: x.Program(), Interface: lo.Index, Flags: link.XDPGenericMode})
		if err != nil {
			t.Errorf("attach: %v", err)
			return
		}
		defer l.Close()
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Errorf("packet socket: %v", err)
			return
		}
		defer unix.Close(fd)
		g := &frameGen{r: rand.New(rand.NewPCG(rand.Uint64(), 5))}
		var hashed, unhashed uint64
		var c steer.Classification
		sll := &unix.SockaddrLinklayer{Ifindex: lo.Index, Halen: 6}
		for hashed+unhashed < 500 {
			f := g.frame()
			if err := unix.Sendto(fd, f, 0, sll); err != nil {
				t.Errorf("send a %d-byte frame: %v", len(f), err)
				return
			}
			if cls.Classify(f, &c); c.HashType != hash.None {
				hashed++
			} else {
				unhashed++
			}
		}
		var got XDPCounters
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if got, err = x.Counters(); err != nil {
				t.Error(err)
				return
			}
			if got.Total() >= hashed+unhashed {
				break
			}
		}
		want := XDPCounters{Redirected: make([]uint64, 2), NoSocket: hashed, UnhashedPassed: unhashed}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("counters %+v, want %+v", got, want)
		}
	})
}

// xdpMD is struct xdp_md (include/uapi/linux/bpf.h), the context of an
// XDP test run.
type xdpMD struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

// runOnQueue runs x over frame as if it had arrived on receive queue q of
// device ifindex: BPF_PROG_TEST_RUN with an xdp_md context in
// RunOptions.Context. The kernel (net/bpf/test_run.c,
// xdp_convert_md_to_buff) looks ingress_ifindex up in the calling
// thread's network namespace and refuses an rx_queue_index at or past
// that device's real_num_rx_queues; data_end must be the frame's length.
func runOnQueue(x *XDP, frame []byte, ifindex int, q uint32) (uint32, error) {
	return x.Program().Run(&ebpf.RunOptions{Data: frame,
		Context: xdpMD{DataEnd: uint32(len(frame)), IngressIfindex: uint32(ifindex), RxQueueIndex: q}})
}

// TestXDPQueue checks that the program steers only the frames of its
// queue (Options.Queue): run as if received on each queue of a veth with
// two receive queues, in a network namespace the test creates, a frame
// of the program's queue is redirected to its worker's socket (the
// fallback's for ARP), counted there, and a frame of the other queue,
// hashed or not, is passed to the kernel and counted in OtherQueue only.
func TestXDPQueue(t *testing.T) {
	requirePriv(t)
	netns.Require(t)
	// The 32 flows differ in five low bits of their addresses and ports
	// (a = 1 to 16): 89 of 200000 random keys put them all on one worker,
	// and the frames are then too thin. This key puts 15 on worker 0 and
	// 17 on worker 1.
	hc := steer.HashConfig{Key: hash.MicrosoftKey[:], UDP4Tuple: true}
	cls, err := steer.NewClassifier(hc)
	if err != nil {
		t.Fatal(err)
	}
	const sockets = 3
	table := make([]uint32, 16)
	for i := range table {
		table[i] = uint32(i % 2) // workers 0 and 1; socket 2 is the fallback
	}
	arp := tEth(0x0806, make([]byte, 28), 0)
	frames := [][]byte{arp}
	for a := byte(1); a <= 16; a++ {
		frames = append(frames, tEth(etIPv4, tIPv4(a, protoTCP, tTCP(a)), 0), tEth(etIPv4, tIPv4(a, protoUDP, tUDP(53, []byte{a})), 1))
	}
	progs := make([]*XDP, 2)
	for q := range progs {
		opts := optionsFor(hc, table, 2, HookXDP)
		opts.Queue = uint32(q)
		progs[q] = loadXDP(t, opts, sockets)
		for i := 0; i < sockets; i++ {
			if err := progs[q].SetSocket(i, xsk(t)); err != nil {
				t.Fatal(err)
			}
		}
	}
	inNamespace(t, func() {
		cmd := exec.Command("ip", "link", "add", "q0", "numtxqueues", "2", "numrxqueues", "2", "type", "veth",
			"peer", "name", "q1", "numtxqueues", "2", "numrxqueues", "2")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%v: %v: %s", cmd, err, out)
			return
		}
		dev, err := net.InterfaceByName("q0")
		if err != nil {
			t.Errorf("q0: %v", err)
			return
		}
		if _, err := runOnQueue(progs[0], arp, dev.Index, 2); err == nil {
			t.Errorf("a test run on queue 2 of a device of 2 queues: no error")
		}
		for q, x := range progs {
			want := XDPCounters{Redirected: make([]uint64, sockets)}
			var c steer.Classification
			for _, f := range frames {
				cls.Classify(f, &c)
				worker := uint32(2)
				if c.HashType != hash.None {
					worker = table[c.FlowID&uint32(len(table)-1)]
				} else {
					want.UnhashedFallback++
				}
				want.Redirected[worker]++
				want.OtherQueue++
				for rxq := uint32(0); rxq < 2; rxq++ {
					verdict := uint32(xdpPass)
					if rxq == uint32(q) {
						verdict = xdpRedirect
					}
					got, err := runOnQueue(x, f, dev.Index, rxq)
					if err != nil {
						t.Errorf("test run on queue %d: %v", rxq, err)
						return
					}
					if got != verdict {
						t.Errorf("program of queue %d: frame %x on queue %d: verdict %d, want %d", q, f, rxq, got, verdict)
					}
				}
			}
			got, err := x.Counters()
			if err != nil {
				t.Error(err)
				return
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("program of queue %d: counters %+v, want %+v", q, got, want)
			}
			if got.Total() != 2*uint64(len(frames)) {
				t.Errorf("program of queue %d: counters total %d of %d runs", q, got.Total(), 2*len(frames))
			}
			if want.UnhashedFallback == 0 || want.Redirected[0] == 0 || want.Redirected[1] == 0 {
				t.Errorf("frames too thin: %+v", want)
			}
		}
	})
}
