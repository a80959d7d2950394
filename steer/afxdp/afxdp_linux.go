//go:build linux

package afxdp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/bpfsteer"
	"github.com/rpsgo/rps/internal/livesock"
	"github.com/rpsgo/rps/internal/xsk"
	"github.com/rpsgo/rps/steer"
)

// Source is an AF_XDP socket on one queue of an interface. ReadBatch is
// meant for one reader goroutine (concurrent calls are serialised);
// Release, Stats and Close may be called from any goroutine.
type Source struct {
	cfg     Config
	name    string
	ifname  string
	ifindex int
	ns      xsk.NetNS     // the namespace of the interface
	sock    livesock.Sock // the socket, its poll set and its Close gate
	u       *xsk.UMEM
	owner   bool // the socket registered u (u closes it)
	rx      xsk.Ring
	grouped bool          // a socket of a Group (fed by its Steering)
	progMu  sync.Mutex    // guards prog; held through StopIntake
	prog    *redirect     // the program Open attached, nil in a group or once detached
	promisc *promisc      // Open's Config.Promisc, nil in a group (the Group's)
	attach  atomic.Uint32 // Info.Attach: the mode of the program feeding the socket now
	fedBy   atomic.Uint32 // the mode of the last program that fed it: SourceStats' Attach

	readMu   sync.Mutex    // held by the reader
	rxCons   uint32        // the RX consumer index, under readMu
	wake     uint32        // the RX ring's fill at which a gather ends (gatherWait), set at open
	handTo   uint32        // the RX producer index when the last gather ended: frames before it go out at once. Under readMu
	seenAt   time.Time     // when the current gather began (a frame in an idle ring, or the last gather's end); zero: none. Under readMu
	seenProd uint32        // the RX producer index at seenAt, under readMu
	napped   bool          // the reader napped in the current gather, under readMu
	gap      time.Duration // the frames' last measured spacing in the RX ring (0: none yet), under readMu
	rejected []uint64      // chunks of filtered frames, under readMu
	heldPool sync.Pool
	copyPool livesock.CopyPool

	refs atomic.Int64 // 1 while open + batches not released
	torn atomic.Bool

	delivered atomic.Uint64
	peak      atomic.Int64 // the fullest Backlog seen at a read
	filtered  atomic.Uint64
	badDescs  atomic.Uint64
	passed    atomic.Uint64 // Stats.PassedToKernel as last read from prog

	kstats livesock.Counters[Stats] // the kernel's counters, as last read
}

// Open opens an AF_XDP socket on queue cfg.Queue of the interface named
// ifname, in the caller's network namespace (a goroutine that changed
// namespace must keep its OS thread locked while calling Open), with a
// UMEM of its own, and attaches a small XDP program that redirects every
// frame of that queue to it (unless cfg.Attach is AttachNone); with
// cfg.PassUnhashed the program passes the frames it cannot hash, such as
// ARP, to the kernel stack instead, and with cfg.Host HostPass the frames
// the host needs. An interface that has addresses is refused unless
// cfg.Host says what to do with the host's frames (ErrHostAddrs). The
// program is attached through a BPF link: Close detaches it, and so does
// the process's exit.
func Open(ifname string, cfg Config) (*Source, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	runtime.LockOSThread() // one namespace from the lookup to the attach
	defer runtime.UnlockOSThread()
	ifi, err := livesock.Interface(ifname)
	if err != nil {
		return nil, fmt.Errorf("afxdp: %w", err)
	}
	host, err := hostAddrs(ifi, cfg)
	if err != nil {
		return nil, err
	}
	s, err := openSocket(ifi, cfg, nil)
	if err != nil {
		return nil, fmt.Errorf("afxdp: open %q queue %d: %w", ifname, cfg.Queue, err)
	}
	if cfg.Promisc {
		if s.promisc, err = openPromisc(ifi.Index); err != nil {
			s.Close()
			return nil, fmt.Errorf("afxdp: open %q queue %d: %w", ifname, cfg.Queue, err)
		}
	}
	if cfg.Attach != AttachNone {
		s.prog, err = attachRedirect(s.ns, ifi.Index, s.sock.FD(), cfg, host)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("afxdp: open %q queue %d: %w", ifname, cfg.Queue, err)
		}
		s.setAttach(s.prog.mode)
	}
	return s, nil
}

// openSocket creates a socket bound to ifi's queue cfg.Queue: with a UMEM
// of its own when shared is nil, else sharing shared's UMEM (and its FILL
// and COMPLETION rings, XDP_SHARED_UMEM).
func openSocket(ifi *net.Interface, cfg Config, shared *Source) (*Source, error) {
	ns, err := xsk.CurrentNetNS()
	if err != nil {
		return nil, err
	}
	s := &Source{
		ns:      ns,
		cfg:     cfg,
		name:    fmt.Sprintf("afxdp:%s:%d", ifi.Name, cfg.Queue),
		ifname:  ifi.Name,
		ifindex: ifi.Index,
	}
	s.sock.Init("afxdp", ErrClosed, ErrNotSupported)
	s.attach.Store(uint32(AttachNone))
	s.fedBy.Store(uint32(AttachNone))
	s.refs.Store(1)
	if err := s.setup(shared); err != nil {
		s.teardown()
		return nil, err
	}
	s.heldPool.New = func() any { return newHeld(s) }
	s.wake = uint32(min(max(cfg.BatchSize, cfg.RingSize/4), cfg.RingSize))
	s.copyPool.Init()
	return s, nil
}

func (s *Source) setup(shared *Source) error {
	cfg := &s.cfg
	fd, err := s.sock.Socket(unix.AF_XDP, unix.SOCK_RAW, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", livesock.Explain(err, livesock.NeedRaw))
	}
	var off unix.XDPMmapOffsets
	if shared == nil {
		// The completions of the chunks set aside for sending must all
		// fit in the COMPLETION ring.
		u, o, err := xsk.NewUMEM(fd, cfg.NumFrames, cfg.SendFrames, cfg.FrameSize, max(cfg.RingSize, cfg.SendFrames), true)
		if err != nil {
			return livesock.Explain(err, livesock.NeedMemlock)
		}
		s.u, s.owner, off = u, true, o
		u.Ifname, u.Ifindex, u.Queue, u.NS = s.ifname, s.ifindex, cfg.Queue, s.ns
	} else {
		if !shared.u.Ref() {
			return ErrClosed
		}
		s.u = shared.u
		if off, err = xsk.MmapOffsets(fd); err != nil {
			return err
		}
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_XDP, unix.XDP_RX_RING, cfg.RingSize); err != nil {
		return fmt.Errorf("setting the RX ring to %d entries: %w", cfg.RingSize, err)
	}
	if s.rx, err = xsk.MapDescRing(fd, off.Rx, unix.XDP_PGOFF_RX_RING, cfg.RingSize); err != nil {
		return fmt.Errorf("RX ring: %w", err)
	}
	sa := &unix.SockaddrXDP{Ifindex: uint32(s.ifindex), QueueID: uint32(cfg.Queue)}
	if shared == nil {
		sa.Flags = unix.XDP_USE_NEED_WAKEUP
		switch cfg.Bind {
		case BindZeroCopy:
			sa.Flags |= unix.XDP_ZEROCOPY
		case BindCopy:
			sa.Flags |= unix.XDP_COPY
		}
	} else {
		// A socket that shares a UMEM takes its owner's mode and flags.
		sa.Flags = unix.XDP_SHARED_UMEM
		sa.SharedUmemFD = uint32(shared.sock.FD())
	}
	if err := xsk.Bind(fd, sa); err != nil {
		switch {
		case errors.Is(err, unix.EBUSY):
			return fmt.Errorf("bind: %w (another AF_XDP socket holds the queue)", err)
		case cfg.Bind == BindZeroCopy && errors.Is(err, unix.EOPNOTSUPP):
			return fmt.Errorf("bind: %w (the driver has no zero-copy mode; use BindAuto or BindCopy)", err)
		case errors.Is(err, unix.EINVAL) && shared == nil:
			return fmt.Errorf("bind: %w (is there a receive queue %d on %s? `ethtool -l %s` lists its queues: Config.Queue must be below their number)",
				err, cfg.Queue, s.ifname, s.ifname)
		}
		return fmt.Errorf("bind: %w", err)
	}
	if shared == nil {
		if s.u.ZeroCopy, err = xsk.ZeroCopy(fd); err != nil {
			return err
		}
	}
	return s.sock.Arm(unix.POLLIN)
}

// setAttach records that a program attached in mode m feeds the socket
// (AttachNone: none does any more). SourceStats keeps the last mode other
// than AttachNone: the mode in which the socket received.
func (s *Source) setAttach(m AttachMode) {
	s.attach.Store(uint32(m))
	if m != AttachNone {
		s.fedBy.Store(uint32(m))
	}
}

// Info describes the socket: its interface and queue, how the program that
// feeds it is attached, and whether it is zero copy.
func (s *Source) Info() Info {
	return Info{
		Ifname:   s.ifname,
		Ifindex:  s.ifindex,
		Queue:    s.cfg.Queue,
		Attach:   AttachMode(s.attach.Load()),
		ZeroCopy: s.u.ZeroCopy,
	}
}

// Config returns the configuration in use, defaults filled in.
func (s *Source) Config() Config { return s.cfg }

// Live reports true: the kernel fills the RX ring whether or not the reader
// keeps up (steer.LiveSource).
func (s *Source) Live() bool { return true }

// backlogScale is the size Backlog reports: it gives the fuller of two
// rings as a fraction.
const backlogScale = 1 << 16

// Backlog reports how full the socket's buffer is (steer.LiveSource), as
// the fuller of its RX ring (frames not yet read) and its UMEM's FILL ring
// (the share of the UMEM's receive chunks not in it: frames read and not
// released, or waiting in RX), out of backlogScale.
func (s *Source) Backlog() (used, size int) {
	if !s.ref() {
		return 0, 0
	}
	defer s.unref()
	return s.backlog(), backlogScale
}

// backlog is Backlog's used, while the rings are mapped.
func (s *Source) backlog() int {
	rx := uint64(atomic.LoadUint32(s.rx.Prod)-atomic.LoadUint32(s.rx.Cons)) * backlogScale / uint64(s.rx.Mask+1)
	f := &s.u.Fill
	chunks := uint64(max(s.u.RxChunks, 1))
	avail := uint64(atomic.LoadUint32(f.Prod) - atomic.LoadUint32(f.Cons))
	fill := (chunks - min(avail, chunks)) * backlogScale / chunks
	return int(max(rx, fill))
}

// ref takes a reference on the socket, unless it is gone.
func (s *Source) ref() bool { return livesock.TryRef(&s.refs) }

// ReadBatch fills b with up to Config.BatchSize frames from the RX ring,
// after waiting for the ring to fill as Config.BatchTimeout says.
// Without Config.Copy the frames' Data are views into the UMEM; their
// chunks go back to the FILL ring when b.Release is called, which must
// happen exactly once per batch with frames, from any goroutine.
// ReadBatch returns an empty batch and a nil error when no frame arrived
// within Config.PollTimeout, ctx's error when ctx ends, and an error
// wrapping ErrClosed (and net.ErrClosed) after Close.
func (s *Source) ReadBatch(ctx context.Context, b *steer.Batch) error {
	_, err := s.readBatch(ctx, b, s.cfg.PollTimeout)
	return err
}

// readBatch is ReadBatch waiting up to timeout (negative: no limit). When
// err is nil it also returns the RX ring's consumer index after the read:
// every descriptor taken from the ring so far (modulo 2^32), the frames
// filtered out or skipped included.
func (s *Source) readBatch(ctx context.Context, b *steer.Batch, timeout time.Duration) (uint32, error) {
	b.Frames = b.Frames[:0]
	b.Release = nil
	if s.sock.Closed() {
		return 0, ErrClosed
	}
	s.readMu.Lock()
	defer s.readMu.Unlock()
	var deadline livesock.Deadline
	for {
		if s.sock.Closed() {
			return 0, ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if nap := s.gatherWait(); nap > 0 {
			if err := s.sock.Nap(ctx, nap); err != nil {
				return 0, err
			}
			continue
		}
		if s.take(b) > 0 {
			if used := int64(s.backlog()); used > s.peak.Load() {
				s.peak.Store(used)
			}
			if len(b.Frames) > 0 {
				return s.rxCons, nil
			}
			continue // every frame filtered out
		}
		wait, ok := deadline.Left(timeout)
		if !ok {
			return s.rxCons, nil
		}
		if s.u.Flush() {
			s.wakeup()
		}
		if err := s.poll(ctx, wait); err != nil {
			return 0, err
		}
	}
}

// gatherWait returns how long the reader should wait for more frames
// before it takes what the RX ring holds (Config.BatchTimeout), or zero to
// take now. A gather ends when the ring holds wake frames (a quarter of
// it, a batch at least) or BatchTimeout after it began; every frame in the
// ring then is handed over without another wait, in batches of BatchSize,
// so that one wake-up of the reader serves many batches, as one TPACKET_V3
// block does. The next gather begins as one ends, so that while frames
// keep coming the reader wakes once a gather, not once more for the first
// frame after it; a gather that ends with the ring empty leaves the reader
// idle, in poll, and the next begins when it finds a frame. Meanwhile the
// reader naps for the time the frames' spacing says the ring needs to
// reach wake frames, at most the rest of BatchTimeout (a quarter of
// BatchTimeout before it knows the spacing).
func (s *Source) gatherWait() time.Duration {
	if s.cfg.BatchTimeout <= 0 {
		return 0
	}
	prod := atomic.LoadUint32(s.rx.Prod)
	avail := prod - s.rxCons
	if int32(s.handTo-s.rxCons) > 0 || avail == 0 && s.seenAt.IsZero() {
		return 0 // frames a gather handed over, or nothing to wait for
	}
	now := time.Now()
	if !s.seenAt.IsZero() && !s.napped && now.Sub(s.seenAt) >= s.cfg.BatchTimeout {
		// The gather that began as the last ended was over before the
		// reader came back to it: none is on.
		s.seenAt = time.Time{}
	}
	if s.seenAt.IsZero() {
		if avail == 0 {
			return 0
		}
		s.seenAt, s.seenProd, s.napped = now, prod, false
	}
	since := now.Sub(s.seenAt)
	left := s.cfg.BatchTimeout - since
	if avail >= s.wake || left <= 0 {
		if avail == 0 {
			s.seenAt = time.Time{} // ended empty: the reader is idle
			return 0
		}
		s.handTo = prod
		s.seenAt, s.seenProd, s.napped = now, prod, false // the next gather begins
		return 0
	}
	if since > 0 {
		// Frames came every since/arrived; none: further apart than since.
		s.gap = since / time.Duration(max(prod-s.seenProd, 1))
	}
	s.napped = true
	if s.gap == 0 {
		return left / 4
	}
	return min(left, time.Duration(s.wake-avail)*s.gap)
}

// rxProduced returns the RX ring's producer index (an acquire load): every
// frame the kernel has placed in the ring so far, modulo 2^32, in the
// units of readBatch's consumer index. ok is false once the source is
// closed: its reader takes nothing more.
func (s *Source) rxProduced() (idx uint32, ok bool) {
	_ = s.sock.Do(func(int) error {
		if !s.sock.Closed() && s.rx.Prod != nil {
			idx, ok = atomic.LoadUint32(s.rx.Prod), true
		}
		return nil
	})
	return idx, ok
}

// take consumes up to BatchSize RX descriptors into b and returns how many
// it consumed. The producer index is loaded with acquire semantics before
// any descriptor is read, and the consumer index stored with release
// semantics after the last one was read: the kernel may then reuse the
// slots, but not the chunks, which stay user space's until they are given
// back to the FILL ring.
func (s *Source) take(b *steer.Batch) int {
	cons := s.rxCons
	avail := atomic.LoadUint32(s.rx.Prod) - cons
	if avail == 0 {
		return 0
	}
	n := min(avail, uint32(s.cfg.BatchSize))
	h := s.heldPool.Get().(*held)
	h.chunks = h.chunks[:0]
	s.rejected = s.rejected[:0]
	area := s.u.Area
	fs := s.u.FrameSize
	now := time.Now()
	var bad uint64
	// The frames are written field by field into their slots: a composite
	// literal appended is built on the stack and copied, and the copy's
	// wide loads wait for the narrower stores before them.
	frames := slices.Grow(b.Frames, int(n))
	got := len(frames)
	frames = frames[:got+int(n)]
	for i := uint32(0); i < n; i++ {
		d := s.rx.Desc(cons + i)
		addr, ln := d.Addr, uint64(d.Len)
		if addr >= uint64(len(area)) || ln > fs-addr%fs {
			bad++ // outside the UMEM or across a chunk's end: never from a sane kernel
			continue
		}
		chunk := addr &^ (fs - 1)
		data := area[addr : addr+ln : addr+ln]
		if s.cfg.Filter != nil {
			k, ok := s.cfg.Filter.Match(data)
			if !ok {
				s.rejected = append(s.rejected, chunk)
				continue
			}
			data = data[:k:k]
		}
		if s.cfg.SnapLen > 0 && len(data) > s.cfg.SnapLen {
			data = data[:s.cfg.SnapLen:s.cfg.SnapLen]
		}
		f := &frames[got]
		f.Data, f.Timestamp, f.WireLen, f.IfIndex = data, now, int(ln), s.ifindex
		f.VLAN, f.HasVLAN, f.FlowID, f.HashType = 0, false, 0, hash.None
		got++
		h.chunks = append(h.chunks, chunk)
	}
	b.Frames = frames[:got]
	s.rxCons = cons + n
	atomic.StoreUint32(s.rx.Cons, s.rxCons)
	if bad > 0 {
		s.badDescs.Add(bad)
	}
	if len(s.rejected) > 0 {
		s.filtered.Add(uint64(len(s.rejected)))
		s.giveBack(s.rejected)
	}
	got = len(b.Frames)
	s.delivered.Add(uint64(got))
	switch {
	case got == 0:
		s.heldPool.Put(h)
	case s.cfg.Copy:
		cb := s.copyPool.Get()
		for i := range b.Frames {
			cb.Add(b.Frames[i].Data)
		}
		cb.Finish(b.Frames)
		b.Release = cb.Release
		s.giveBack(h.chunks)
		s.heldPool.Put(h)
	default:
		s.refs.Add(1)
		h.armed.Store(true)
		b.Release = h.release
	}
	return int(n)
}

// giveBack returns chunks to the FILL ring and wakes a zero-copy driver
// that asked for it.
func (s *Source) giveBack(chunks []uint64) {
	if s.u.Give(chunks) {
		s.wakeup()
	}
}

// wakeup tells a zero-copy driver that the FILL ring has buffers again
// (a non-blocking recvfrom, as the kernel documents for need_wakeup).
func (s *Source) wakeup() {
	_ = s.sock.Do(func(fd int) error {
		_, _, _ = unix.Recvfrom(fd, nil, unix.MSG_DONTWAIT)
		return nil
	})
}

// held is one zero-copy batch's chunks, until its Release.
type held struct {
	s       *Source
	chunks  []uint64
	armed   atomic.Bool
	release func()
}

func newHeld(s *Source) *held {
	h := &held{s: s}
	h.release = func() {
		if !h.armed.CompareAndSwap(true, false) {
			return // a second Release of the same batch
		}
		s.giveBack(h.chunks)
		h.chunks = h.chunks[:0]
		s.heldPool.Put(h)
		s.unref()
	}
	return h
}

// unref drops one reference; the last one tears the socket down.
func (s *Source) unref() {
	if s.refs.Add(-1) == 0 {
		s.teardown()
	}
}

// poll waits until the RX ring has frames, Close or ctx ends, or wait
// passes (negative: no limit). In zero-copy mode poll also wakes the driver
// when it asked for it.
func (s *Source) poll(ctx context.Context, wait time.Duration) error {
	rev, err := s.sock.Poll(ctx, wait)
	if err != nil {
		return err
	}
	if rev&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
		if err := s.sock.SocketError(); err != nil {
			return err
		}
		// Nothing to report, but the socket will not become readable
		// (the device went down): do not spin.
		s.sock.Pause(10 * time.Millisecond)
	}
	return nil
}

// Stats returns the kernel's XDP_STATISTICS, the source's own counters
// and, with Config.PassUnhashed, the program's PassedToKernel. After Close
// it returns them as of Close.
func (s *Source) Stats() (Stats, error) {
	s.progMu.Lock()
	perr := s.readPassedLocked()
	s.progMu.Unlock()
	st, err := s.kstats.Get(s.readKernelStats)
	st.RxInvalidDescs += s.badDescs.Load()
	st.Delivered = s.delivered.Load()
	st.Filtered = s.filtered.Load()
	st.PassedToKernel = s.passed.Load()
	return st, errors.Join(err, perr)
}

// readPassedLocked reads the program's count of frames passed to the
// kernel, while it is attached; the caller holds progMu.
func (s *Source) readPassedLocked() error {
	n, err := s.prog.passed()
	if err != nil {
		return fmt.Errorf("afxdp: %s: %w", s.name, err)
	}
	if s.prog != nil {
		s.passed.Store(n)
	}
	return nil
}

// readKernelStats reads XDP_STATISTICS, which the kernel keeps from bind
// on, into st.
func (s *Source) readKernelStats(st *Stats) error {
	return s.withFD(func(fd int) error {
		ks, err := xsk.Statistics(fd)
		if err != nil {
			return fmt.Errorf("afxdp: %w", err)
		}
		st.RxDropped = ks.Rx_dropped
		st.RxInvalidDescs = ks.Rx_invalid_descs
		st.RxRingFull = ks.Rx_ring_full
		if s.owner {
			// The FILL ring's count, which every socket sharing the ring
			// reports: its owner alone carries it, so sums are right.
			st.RxFillRingEmptyDescs = ks.Rx_fill_ring_empty_descs
		}
		return nil
	})
}

// SourceStats reports the counters in the dispatcher's terms
// (steer.SourceStatser): Received is every frame the kernel redirected to
// the socket (Stats.Received), Dropped those it dropped for lack of a
// buffer or of RX ring room, Filtered those Config.Filter rejected, Kernel
// the kernel's XDP_STATISTICS under their own names, and Mode the attach
// and bind modes ("native, copy"). The attach mode is that of the program
// that fed the socket, kept after that program is detached (Close,
// StopIntake, a Steering's Close), so that a final report says how the
// socket received; "none" if no program of this package ever fed it.
func (s *Source) SourceStats() (steer.SourceStats, error) {
	st, err := s.Stats()
	used, size := s.Backlog()
	info := s.Info()
	info.Attach = AttachMode(s.fedBy.Load())
	return steer.SourceStats{
		Name:     s.name,
		Received: st.Received(),
		Dropped:  st.RxDropped + st.RxRingFull,
		Filtered: st.Filtered,
		RingUsed: used, RingPeak: int(s.peak.Load()), RingSize: size,
		Mode: info.Attach.String() + ", " + info.Mode(),
		Kernel: []steer.KernelCounter{
			{Name: "rx_dropped", Value: st.RxDropped},
			{Name: "rx_invalid_descs", Value: st.RxInvalidDescs},
			{Name: "rx_ring_full", Value: st.RxRingFull},
			{Name: "rx_fill_ring_empty_descs", Value: st.RxFillRingEmptyDescs},
			{Name: "passed_to_kernel", Value: st.PassedToKernel},
		},
	}, err
}

// withFD runs f with the socket descriptor unless it is closed.
func (s *Source) withFD(f func(fd int) error) error { return s.sock.Do(f) }

// StopIntake stops the socket taking frames, so that its RX ring can be
// read dry before Close: it detaches the XDP program Open attached (the
// queue's frames go to the kernel stack again) and then waits for an RCU
// grace period, so that when it returns every frame the program
// redirected to the socket is in its RX ring or counted as the kernel's
// drop, and no frame follows. ReadBatch goes on returning what the ring
// holds, then empty batches; the counters keep adding up (Stats.Received
// once the ring is read dry). Info().Attach is then AttachNone, and
// SourceStats keeps the mode the socket received in.
//
// StopIntake is for Open's socket: for a socket of a Group it returns an
// error wrapping steer.ErrConfig (the Steering's StopIntake stops a group), and so it
// does for a socket opened with AttachNone, which is fed by the caller's
// own program. It cannot be undone; a second call, or a call after Close,
// returns nil.
func (s *Source) StopIntake() error {
	switch {
	case s.grouped:
		return fmt.Errorf("afxdp: %w: stop intake: socket %s is fed by its group's Steering: use its Steering's StopIntake", steer.ErrConfig, s.name)
	case s.cfg.Attach == AttachNone:
		return fmt.Errorf("afxdp: %w: stop intake: socket %s was opened with AttachNone: take it out of the XSKMAP that feeds it", steer.ErrConfig, s.name)
	}
	s.progMu.Lock()
	defer s.progMu.Unlock()
	if s.prog == nil {
		return nil // stopped already, or closed
	}
	_ = s.readPassedLocked() // the final count
	err := s.prog.close()
	s.prog = nil
	s.setAttach(AttachNone)
	if err == nil {
		err = bpfsteer.GracePeriod()
	}
	if err != nil {
		return fmt.Errorf("afxdp: stop intake on %s: %w", s.name, err)
	}
	return nil
}

// detach detaches and frees the program Open attached, if it still is.
func (s *Source) detach() error {
	s.progMu.Lock()
	defer s.progMu.Unlock()
	_ = s.readPassedLocked() // the final count
	err := s.prog.close()
	s.prog = nil
	return err
}

// Close stops the source. It wakes a reader blocked in ReadBatch (which
// then returns ErrClosed), waits for it to leave, and detaches the XDP
// program Open attached, so that the queue's frames go to the kernel stack
// again; Info().Attach is then AttachNone, and SourceStats keeps the mode
// the socket received in. With Config.Promisc it gives the interface's
// promiscuous mode back. Frames still held by handlers stay valid: the
// UMEM is unmapped and the socket closed when the last batch is released.
// Close is idempotent.
func (s *Source) Close() error {
	if !s.sock.Stop() {
		return nil
	}
	var errs []error
	s.readMu.Lock() // the reader has left
	if err := s.detach(); err != nil {
		errs = append(errs, fmt.Errorf("afxdp: close: %w", err))
	}
	if err := s.promisc.close(); err != nil {
		errs = append(errs, fmt.Errorf("afxdp: close: %w", err))
	}
	s.setAttach(AttachNone)
	if err := s.kstats.Freeze(s.readKernelStats); err != nil && !errors.Is(err, ErrClosed) {
		errs = append(errs, err)
	}
	s.readMu.Unlock()
	s.unref()
	return errors.Join(errs...)
}

// teardown releases the kernel resources; it runs once, when the last
// reference is gone (or after a failed open). The socket's own RX ring is
// unmapped before its descriptor is closed, so that nothing holds the
// socket and the kernel releases it (unbinds it, takes it out of every
// XSKMAP) at once; the UMEM owner's descriptor is closed by the UMEM, after
// its FILL and COMPLETION rings are unmapped.
func (s *Source) teardown() {
	if !s.torn.CompareAndSwap(false, true) {
		return
	}
	_ = s.detach()
	s.sock.Teardown(s.rx.Unmap, s.owner)
	if s.u != nil {
		s.u.Unref()
	}
}

// SyscallConn returns a raw connection to the socket, for what the package
// does not cover (for example putting the socket into an XSKMAP of a
// program of one's own, with Config.Attach AttachNone). Its Read and Write
// are not supported; Control runs while the socket is open.
func (s *Source) SyscallConn() (syscall.RawConn, error) { return s.sock.SyscallConn() }

var (
	_ steer.LiveSource    = (*Source)(nil)
	_ steer.SourceStatser = (*Source)(nil)
)
