//go:build linux

package xsk

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rpsgo/rps/internal/livesock"
	"github.com/rpsgo/rps/steer"
)

// Sender is an AF_XDP socket that transmits on one queue of an interface,
// with a UMEM, a TX ring and a COMPLETION ring of its own. It needs no XDP
// program. Send, Stats and Close may be called from any goroutine; Send
// calls are serialised (the TX ring has one producer).
type Sender struct {
	cfg     SenderConfig
	ifname  string
	ifindex int
	fd      int
	u       *UMEM // the area and the FILL (unused) and COMPLETION rings
	owner   bool  // fd registered u (u closes it); else u is a receiving socket's
	tx      Ring

	mu       sync.Mutex // the TX ring's producer side, the COMPLETION ring's consumer side, free
	txProd   uint32     // the TX producer index, under mu
	compCons uint32     // the COMPLETION consumer index, under mu
	free     []uint64   // chunks neither on the TX ring nor in flight, under mu
	timer    *time.Timer

	closed atomic.Bool
	done   chan struct{}

	sent      atomic.Uint64
	completed atomic.Uint64
	dropped   atomic.Uint64
	invalid   atomic.Uint64
	badComps  atomic.Uint64

	kstats   livesock.Counters[SenderStats] // the kernel's counters, as last read
	fdMu     sync.RWMutex
	fdClosed bool
}

// Kicking a copy-mode kernel: the pause between kicks that made no
// progress grows from minKickPause to maxKickPause.
const (
	minKickPause = 20 * time.Microsecond
	maxKickPause = time.Millisecond
)

// xdpMaxTxSkbBudget is the socket option (Linux 6.17) that raises how
// many frames one sendto transmits in copy mode (32 by default).
const xdpMaxTxSkbBudget = 9

// OpenSender opens an AF_XDP socket for sending on queue cfg.Queue of the
// interface named ifname, in the caller's network namespace, with a UMEM
// of cfg.NumFrames chunks, a TX ring and a COMPLETION ring of its own. It
// attaches no XDP program and receives nothing. To send on a queue a
// receiving socket holds, use SharedSender.
func OpenSender(ifname string, cfg SenderConfig) (*Sender, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	runtime.LockOSThread() // one namespace from the lookup to the bind
	defer runtime.UnlockOSThread()
	ifi, err := livesock.Interface(ifname)
	if err != nil {
		return nil, fmt.Errorf("xsk: %w", err)
	}
	s := newSender(cfg, ifi.Name, ifi.Index)
	if err := s.setup(nil); err != nil {
		s.teardown()
		return nil, fmt.Errorf("xsk: sender on %q queue %d: %w", ifname, cfg.Queue, err)
	}
	s.takeChunks(s.u.sendChunks)
	s.u.sendChunks = nil
	return s, nil
}

// takeChunks makes chunks the free list, handed out from the end: the
// first chunk first.
func (s *Sender) takeChunks(chunks []uint64) {
	s.free = make([]uint64, len(chunks))
	for i := range s.free {
		s.free[i] = chunks[len(chunks)-1-i]
	}
}

// SharedSender opens a Sender on the interface and queue of a receiving
// socket that owns its UMEM (steer/afxdp's Source, through its
// SyscallConn), sharing that UMEM (XDP_SHARED_UMEM): the kernel allows one
// UMEM per device and queue, so this is how a port that receives through
// AF_XDP sends through it too. Its chunks are those the UMEM set aside for
// sending (afxdp.Config.SendFrames), which must be some; its completions
// come on the UMEM's COMPLETION ring, which the receiving socket does not
// use. The queue, the chunk size and the zero-copy mode are the UMEM's:
// cfg.Queue and cfg.Bind are not used, and cfg.NumFrames and
// cfg.FrameSize, when not zero, must be the chunks set aside and the
// UMEM's FrameSize. A UMEM has at most one Sender. Call SharedSender in the
// receiving socket's network namespace. The Sender may outlive the
// receiving socket: the UMEM goes when both are closed.
func SharedSender(src interface {
	SyscallConn() (syscall.RawConn, error)
}, cfg SenderConfig) (*Sender, error) {
	rc, err := src.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("xsk: shared sender: %w", err)
	}
	var s *Sender
	cerr := rc.Control(func(fd uintptr) { s, err = sharedSender(int(fd), cfg) })
	if cerr != nil {
		return nil, fmt.Errorf("xsk: shared sender: %w", cerr)
	}
	return s, err
}

// sharedSender is SharedSender on the UMEM the socket fd owns; fd is held
// open meanwhile, and with it the UMEM.
func sharedSender(fd int, cfg SenderConfig) (*Sender, error) {
	v, ok := owners.Load(fd)
	if !ok {
		return nil, fmt.Errorf("xsk: %w: the socket owns no UMEM: open it alone (a group's first socket, or afxdp.Open)", steer.ErrConfig)
	}
	u := v.(*UMEM)
	fs := int(u.FrameSize)
	u.mu.Lock()
	chunks := u.sendChunks
	u.sendChunks = nil
	u.mu.Unlock()
	giveBack := func() {
		if chunks != nil {
			u.mu.Lock()
			u.sendChunks = chunks
			u.mu.Unlock()
		}
	}
	switch {
	case chunks == nil:
		return nil, fmt.Errorf("xsk: %w: a Sender on %s queue %d needs chunks set aside in the UMEM (afxdp.Config.SendFrames), which has none left (none set aside, or a Sender took them)", steer.ErrConfig, u.Ifname, u.Queue)
	case cfg.NumFrames != 0 && cfg.NumFrames != len(chunks), cfg.FrameSize != 0 && cfg.FrameSize != fs:
		giveBack()
		return nil, fmt.Errorf("xsk: %w: a Sender sharing a UMEM has its %d chunks of %d bytes, not %d of %d", steer.ErrConfig, len(chunks), fs, cfg.NumFrames, cfg.FrameSize)
	}
	cfg.NumFrames, cfg.FrameSize, cfg.Queue, cfg.Bind = len(chunks), fs, u.Queue, BindAuto
	cfg, err := cfg.withDefaults()
	if err != nil {
		giveBack()
		return nil, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if ns, err := CurrentNetNS(); err != nil || ns != u.NS {
		giveBack()
		return nil, fmt.Errorf("xsk: sender on %s queue %d: called from another network namespace than the receiving socket's (%v)", u.Ifname, u.Queue, err)
	}
	// Hold the UMEM, and so its owner's descriptor, for the bind and for
	// as long as the Sender lives.
	if !u.Ref() {
		giveBack()
		return nil, fmt.Errorf("xsk: sender on %s queue %d: %w", u.Ifname, u.Queue, ErrClosed)
	}
	s := newSender(cfg, u.Ifname, u.Ifindex)
	s.u = u
	if err := s.setup(u); err != nil {
		s.teardown() // drops the reference
		giveBack()
		return nil, fmt.Errorf("xsk: sender on %s queue %d: %w", u.Ifname, u.Queue, err)
	}
	s.takeChunks(chunks)
	return s, nil
}

func newSender(cfg SenderConfig, ifname string, ifindex int) *Sender {
	s := &Sender{cfg: cfg, ifname: ifname, ifindex: ifindex, fd: -1, done: make(chan struct{})}
	s.timer = time.NewTimer(time.Hour)
	s.timer.Stop()
	return s
}

// setup creates the socket, with a UMEM of its own when shared is nil,
// else on shared, and its TX ring, and binds it.
func (s *Sender) setup(shared *UMEM) error {
	cfg := &s.cfg
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", livesock.Explain(err, livesock.NeedRaw))
	}
	s.fd = fd
	var off unix.XDPMmapOffsets
	if shared == nil {
		// Bind wants a FILL ring; nothing is ever put in it. The
		// COMPLETION ring can hold every chunk, so that the kernel never
		// lacks room to complete a frame.
		u, o, err := NewUMEM(fd, 0, cfg.NumFrames, cfg.FrameSize, cfg.NumFrames, false)
		if err != nil {
			return livesock.Explain(err, livesock.NeedMemlock)
		}
		s.u, s.owner, off = u, true, o
	} else if off, err = MmapOffsets(fd); err != nil {
		return err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_XDP, unix.XDP_TX_RING, cfg.RingSize); err != nil {
		return fmt.Errorf("setting the TX ring to %d entries: %w", cfg.RingSize, err)
	}
	if s.tx, err = MapDescRing(fd, off.Tx, unix.XDP_PGOFF_TX_RING, cfg.RingSize); err != nil {
		return fmt.Errorf("TX ring: %w", err)
	}
	sa := &unix.SockaddrXDP{Ifindex: uint32(s.ifindex), QueueID: uint32(cfg.Queue), Flags: unix.XDP_USE_NEED_WAKEUP}
	switch {
	case shared != nil:
		// A socket that shares a UMEM takes its owner's mode and flags.
		sa.Flags, sa.SharedUmemFD = unix.XDP_SHARED_UMEM, uint32(shared.OwnerFD)
	case cfg.Bind == BindZeroCopy:
		sa.Flags |= unix.XDP_ZEROCOPY
	case cfg.Bind == BindCopy:
		sa.Flags |= unix.XDP_COPY
	}
	if err := Bind(fd, sa); err != nil {
		switch {
		case errors.Is(err, unix.EBUSY):
			return fmt.Errorf("bind: %w (another AF_XDP socket, such as a receiving one, holds the queue: the kernel allows one UMEM per device and queue; see SharedSender)", err)
		case errors.Is(err, unix.EINVAL):
			return fmt.Errorf("bind: %w (is there a queue %d?)", err, cfg.Queue)
		case cfg.Bind == BindZeroCopy && errors.Is(err, unix.EOPNOTSUPP):
			return fmt.Errorf("bind: %w (the driver has no zero-copy mode; use BindAuto or BindCopy)", err)
		}
		return fmt.Errorf("bind: %w", err)
	}
	if shared == nil {
		if s.u.ZeroCopy, err = ZeroCopy(fd); err != nil {
			return err
		}
	}
	if !s.u.ZeroCopy && cfg.RingSize >= 32 {
		// Best effort (older kernels lack the option): let one kick
		// transmit a whole ring.
		_ = unix.SetsockoptInt(fd, unix.SOL_XDP, xdpMaxTxSkbBudget, cfg.RingSize)
	}
	return nil
}

// Info describes a Sender's socket.
type Info struct {
	Ifname   string
	Ifindex  int
	Queue    int
	ZeroCopy bool // the driver reads frames straight from the UMEM
}

// Info describes the socket: its interface and queue, and whether it is
// zero copy.
func (s *Sender) Info() Info {
	return Info{Ifname: s.ifname, Ifindex: s.ifindex, Queue: s.cfg.Queue, ZeroCopy: s.u.ZeroCopy}
}

// Config returns the configuration in use, defaults filled in.
func (s *Sender) Config() SenderConfig { return s.cfg }

// Send copies each frame into a free UMEM chunk, puts the frames on the TX
// ring in order and hands them to the kernel. The frames' bytes may be
// reused as soon as Send returns. It returns how many frames it put on the
// ring; every other one is counted, in SenderStats.Invalid (empty, or
// longer than FrameSize) or SenderStats.Dropped: when every chunk is in
// flight or the ring is full, Send waits for the kernel to complete frames
// for up to SenderConfig.Wait, then drops the rest of frames.
//
// In copy mode the kernel transmits only within sendto, so Send kicks it
// until it has taken every queued frame, for up to Wait in all; frames it
// leaves on the ring go with the next Send or Flush. A zero-copy driver
// transmits on its own and is woken only when it asks for it.
//
// Send returns ErrClosed after Close (a Send blocked in its wait returns
// at once), and the kernel's error when it refuses to transmit at all
// (ENETDOWN for a device that is down); frames already on the ring stay
// there.
func (s *Sender) Send(frames [][]byte) (int, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return 0, ErrClosed
	}
	w := waiter{s: s, pause: minKickPause}
	fs := int(s.u.FrameSize)
	area := s.u.Area
	n, i := 0, 0
	for i < len(frames) {
		s.reap()
		room := min(len(s.free), int(s.txFree()))
		if room == 0 {
			if err := s.kick(); err != nil {
				s.drop(frames[i:])
				return n, err
			}
			if s.reap(); min(len(s.free), int(s.txFree())) > 0 {
				continue
			}
			if ok, err := w.wait(); err != nil {
				s.drop(frames[i:])
				return n, err
			} else if !ok {
				s.drop(frames[i:])
				break
			}
			continue
		}
		prod := s.txProd
		for ; i < len(frames) && room > 0; i++ {
			f := frames[i]
			if len(f) == 0 || len(f) > fs {
				s.invalid.Add(1)
				continue
			}
			chunk := s.free[len(s.free)-1]
			s.free = s.free[:len(s.free)-1]
			copy(area[chunk:chunk+uint64(fs)], f)
			d := s.tx.Desc(prod)
			d.Addr, d.Len, d.Options = chunk, uint32(len(f)), 0
			prod++
			room--
			n++
		}
		if k := prod - s.txProd; k > 0 {
			// The descriptors are in memory before the kernel can see the
			// producer move.
			s.txProd = prod
			atomic.StoreUint32(s.tx.Prod, prod)
			s.sent.Add(uint64(k))
		}
	}
	return n, s.flush(&w)
}

// Flush hands every frame still on the TX ring to the kernel, waiting up
// to SenderConfig.Wait when a copy-mode kernel pushes back. Send does it
// already; Flush is for frames a pushed-back Send left behind.
func (s *Sender) Flush() error {
	if s.closed.Load() {
		return ErrClosed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	s.reap()
	w := waiter{s: s, pause: minKickPause}
	return s.flush(&w)
}

// flush kicks the kernel until the TX ring is empty (copy mode) or once
// (zero copy, when the driver asked for it). In copy mode it waits with w
// between kicks that made no progress, and gives up without error when w
// runs out. Under mu.
func (s *Sender) flush(w *waiter) error {
	for {
		before := atomic.LoadUint32(s.tx.Cons)
		if before == s.txProd {
			return nil
		}
		if err := s.kick(); err != nil {
			return err
		}
		if s.u.ZeroCopy {
			return nil
		}
		after := atomic.LoadUint32(s.tx.Cons)
		if after == s.txProd {
			return nil
		}
		if after != before {
			w.pause = minKickPause
			continue
		}
		s.reap()
		if ok, err := w.wait(); !ok || err != nil {
			return err
		}
	}
}

// kick tells the kernel that the TX ring has frames: a sendto with
// MSG_DONTWAIT (the kernel refuses a blocking one). In copy mode the
// kernel builds and transmits the frames inside the call, so it is always
// needed; a zero-copy driver needs it only when it set
// XDP_RING_NEED_WAKEUP in the TX ring's flags. EAGAIN (the socket's send
// buffer or the device is full, or the kernel stopped after its budget of
// frames) and EBUSY (the device dropped a frame, which still completes)
// are not errors: the frames left on the ring wait for the next kick.
func (s *Sender) kick() error {
	if atomic.LoadUint32(s.tx.Cons) == s.txProd {
		return nil
	}
	if s.u.ZeroCopy && atomic.LoadUint32(s.tx.Flags)&unix.XDP_RING_NEED_WAKEUP == 0 {
		return nil
	}
	for {
		before := atomic.LoadUint32(s.tx.Cons)
		err := unix.Sendto(s.fd, nil, unix.MSG_DONTWAIT, nil)
		switch {
		case err == nil:
			if !s.u.ZeroCopy && atomic.LoadUint32(s.tx.Cons) == before && before != s.txProd {
				// A copy-mode kernel that returns without taking a frame
				// has no TX queue of this number.
				return fmt.Errorf("xsk: send on %s queue %d: the kernel took no frame (the device has no TX queue %d)", s.ifname, s.cfg.Queue, s.cfg.Queue)
			}
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EBUSY):
			return nil
		}
		return fmt.Errorf("xsk: send on %s queue %d: %w", s.ifname, s.cfg.Queue, err)
	}
}

// reap takes the completed chunks off the COMPLETION ring into the free
// list: the producer index is loaded (acquire) before the entries are
// read, and the consumer index stored (release) after. Under mu.
func (s *Sender) reap() {
	cons := s.compCons
	prod := atomic.LoadUint32(s.u.Comp.Prod)
	if cons == prod {
		return
	}
	fs, size := s.u.FrameSize, uint64(len(s.u.Area))
	var bad uint64
	for ; cons != prod; cons++ {
		addr := *s.u.Comp.Addr(cons)
		if addr >= size {
			bad++ // never from a sane kernel
			continue
		}
		s.free = append(s.free, addr&^(fs-1))
	}
	n := prod - s.compCons
	s.compCons = cons
	atomic.StoreUint32(s.u.Comp.Cons, cons)
	s.completed.Add(uint64(n) - bad)
	if bad > 0 {
		s.badComps.Add(bad)
	}
}

// txFree is the number of free TX ring slots. Under mu.
func (s *Sender) txFree() uint32 {
	return s.tx.Mask + 1 - (s.txProd - atomic.LoadUint32(s.tx.Cons))
}

// drop counts frames Send gives up on.
func (s *Sender) drop(frames [][]byte) {
	fs := int(s.u.FrameSize)
	for _, f := range frames {
		if len(f) == 0 || len(f) > fs {
			s.invalid.Add(1)
		} else {
			s.dropped.Add(1)
		}
	}
}

// waiter is one Send's bounded wait: its deadline starts with the first
// pause, and each pause is longer than the last, up to maxKickPause.
type waiter struct {
	s        *Sender
	deadline time.Time
	pause    time.Duration
}

// wait pauses before the next try. It reports false when the Send's wait
// is used up (or none is allowed), and ErrClosed when Close is called.
func (w *waiter) wait() (bool, error) {
	s := w.s
	if s.cfg.Wait < 0 {
		return false, nil
	}
	now := time.Now()
	if w.deadline.IsZero() {
		w.deadline = now.Add(s.cfg.Wait)
	}
	left := w.deadline.Sub(now)
	if left <= 0 {
		return false, nil
	}
	s.timer.Reset(min(w.pause, left))
	select {
	case <-s.done:
		s.timer.Stop()
		return false, ErrClosed
	case <-s.timer.C:
	}
	w.pause = min(2*w.pause, maxKickPause)
	return true, nil
}

// Stats returns the Sender's counters and the kernel's TX counters from
// XDP_STATISTICS. After Close it returns them as of Close.
func (s *Sender) Stats() (SenderStats, error) {
	if s.mu.TryLock() {
		// Count the completions since the last Send (a Send holding mu
		// reaps them itself).
		if !s.closed.Load() {
			s.reap()
		}
		s.mu.Unlock()
	}
	st, err := s.kstats.Get(s.readKernelStats)
	st.Sent = s.sent.Load()
	st.Completed = s.completed.Load()
	st.Dropped = s.dropped.Load()
	st.Invalid = s.invalid.Load()
	st.TxInvalidDescs += s.badComps.Load()
	return st, err
}

// readKernelStats reads the TX counters of XDP_STATISTICS into st.
func (s *Sender) readKernelStats(st *SenderStats) error {
	s.fdMu.RLock()
	defer s.fdMu.RUnlock()
	if s.fdClosed || s.fd < 0 {
		return ErrClosed
	}
	ks, err := Statistics(s.fd)
	if err != nil {
		return fmt.Errorf("xsk: %w", err)
	}
	st.TxInvalidDescs = ks.Tx_invalid_descs
	st.TxRingEmptyDescs = ks.Tx_ring_empty_descs
	return nil
}

// Close stops the Sender: a Send blocked in its wait returns ErrClosed,
// and Close waits for it to leave. Frames still on the TX ring get one
// last kick; what the kernel does not take then is lost. Close unmaps the
// rings and the UMEM and closes the socket (frames the kernel is still
// transmitting keep their own references). It is idempotent.
func (s *Sender) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(s.done)
	s.mu.Lock()
	defer s.mu.Unlock()
	kerr := s.kick()
	s.reap()
	err := s.kstats.Freeze(s.readKernelStats)
	s.teardown()
	if kerr != nil {
		return kerr
	}
	return err
}

// teardown unmaps the TX ring and closes the socket, then drops the
// Sender's hold on the UMEM: the last holder unmaps its rings and area
// (and closes its owner's socket). It also undoes a failed open.
func (s *Sender) teardown() {
	s.fdMu.Lock()
	defer s.fdMu.Unlock()
	if s.fdClosed {
		return
	}
	s.fdClosed = true
	s.tx.Unmap()
	if !s.owner && s.fd >= 0 {
		_ = unix.Close(s.fd)
	}
	s.fd = -1
	if s.u != nil {
		s.u.Unref()
	}
}
