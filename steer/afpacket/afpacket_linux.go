//go:build linux

package afpacket

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/livesock"
	"github.com/rpsgo/rps/steer"
)

// SockFilter is one classic BPF instruction (struct sock_filter).
type SockFilter = unix.SockFilter

// Offsets in struct tpacket_block_desc (version, offset_to_priv, then
// struct tpacket_hdr_v1).
const (
	blkStatusOff   = 8
	blkNumPktsOff  = 12
	blkFirstPktOff = 16
	blkLenOff      = 20

	tpFtReqFillRxhash = 0x1 // TP_FT_REQ_FILL_RXHASH
)

// block is user space's view of one ring block.
type block struct {
	// out is set while the block is handed out (from the reader taking it
	// until the last reference is dropped and the status word says
	// TP_STATUS_KERNEL again). The reader never takes a block that is out.
	out atomic.Bool
	// refs counts the reader's walk plus every batch not yet released.
	refs    atomic.Int32
	release func() // bound once: releases one reference
	_       [32]byte
}

// Source is a TPACKET_V3 receive ring on one interface. ReadBatch is meant
// for one reader goroutine (concurrent calls are serialised); Release, Stats
// and Close may be called from any goroutine.
type Source struct {
	cfg     Config
	name    string
	ifindex int
	sock    livesock.Sock // the socket, its poll set and its Close gate
	ring    []byte
	blocks  []block

	readMu   sync.Mutex // held by the reader
	cur      int        // next block to take
	walkBlk  int        // block being walked, -1 if none
	walkLeft uint32     // frames left in it
	walkOff  int        // ring offset of the next frame header
	timer    *time.Timer
	copyPool livesock.CopyPool

	done     chan struct{}
	released chan struct{} // a block came back
	refs     atomic.Int64  // 1 while open + blocks out
	torn     atomic.Bool

	delivered atomic.Uint64
	nblocks   atomic.Uint64
	peak      atomic.Int64 // the most blocks Backlog saw held at a block's take

	kstats livesock.Counters[Stats] // the kernel part of the totals
}

// Open opens a TPACKET_V3 ring on the interface named ifname in the
// caller's network namespace (a goroutine that changed namespace must keep
// its OS thread locked while calling Open).
func Open(ifname string, cfg Config) (*Source, error) {
	return open(ifname, cfg, nil)
}

// open opens a source; a non-nil initial filter is attached before bind
// instead of cfg.Filter (used by groups to hold frames back until every
// member joined).
func open(ifname string, cfg Config, initial []SockFilter) (*Source, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ifi, err := livesock.Interface(ifname)
	if err != nil {
		return nil, fmt.Errorf("afpacket: %w", err)
	}
	s := &Source{
		cfg:      cfg,
		name:     "afpacket:" + ifname,
		ifindex:  ifi.Index,
		walkBlk:  -1,
		done:     make(chan struct{}),
		released: make(chan struct{}, 1),
		blocks:   make([]block, cfg.NumBlocks),
	}
	s.sock.Init("afpacket", ErrClosed, ErrNotSupported)
	s.refs.Store(1)
	if err := s.setup(initial); err != nil {
		s.teardown()
		return nil, fmt.Errorf("afpacket: open %q: %w", ifname, err)
	}
	for i := range s.blocks {
		i := i
		s.blocks[i].release = func() { s.unref(i) }
	}
	s.copyPool.Init()
	return s, nil
}

func (s *Source) setup(initial []SockFilter) error {
	cfg := &s.cfg
	fd, err := s.sock.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", livesock.Explain(err, livesock.NeedRaw))
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3); err != nil {
		return fmt.Errorf("setting TPACKET_V3: %w", err)
	}
	if cfg.IgnoreOutgoing {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
			return fmt.Errorf("setting PACKET_IGNORE_OUTGOING: %w", err)
		}
	}
	f := initial
	if f == nil {
		f = s.userFilter()
	}
	if f != nil {
		if err := attachFilter(fd, f); err != nil {
			return err
		}
	}
	req := unix.TpacketReq3{
		Block_size:     uint32(cfg.BlockSize),
		Block_nr:       uint32(cfg.NumBlocks),
		Frame_size:     uint32(cfg.FrameSize),
		Frame_nr:       uint32(cfg.BlockSize / cfg.FrameSize * cfg.NumBlocks),
		Retire_blk_tov: uint32(cfg.BlockTimeout / time.Millisecond),
	}
	if cfg.FillRxHash {
		req.Feature_req_word = tpFtReqFillRxhash
	}
	if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return fmt.Errorf("setting PACKET_RX_RING (%d blocks of %d bytes): %w", cfg.NumBlocks, cfg.BlockSize, err)
	}
	ring, err := unix.Mmap(fd, 0, cfg.BlockSize*cfg.NumBlocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap ring: %w", err)
	}
	s.ring = ring
	sa := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: s.ifindex}
	if err := unix.Bind(fd, sa); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	if cfg.Promisc {
		mreq := unix.PacketMreq{Ifindex: int32(s.ifindex), Type: unix.PACKET_MR_PROMISC}
		if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
			return fmt.Errorf("setting promiscuous mode: %w", err)
		}
	}
	return s.sock.Arm(unix.POLLIN | unix.POLLERR)
}

// userFilter is cfg.Filter with the snap length applied: every "ret #k"
// is clamped to SnapLen, or a lone "ret #SnapLen" when there is no filter.
func (s *Source) userFilter() []SockFilter {
	snap := uint32(s.cfg.SnapLen)
	if len(s.cfg.Filter) == 0 {
		if snap == 0 {
			return nil
		}
		return []SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: snap}}
	}
	f := append([]SockFilter(nil), s.cfg.Filter...)
	if snap > 0 {
		for i := range f {
			if f[i].Code == unix.BPF_RET|unix.BPF_K && f[i].K > snap {
				f[i].K = snap
			}
		}
	}
	return f
}

// dropAll is a classic BPF program that drops every frame ("ret #0").
var dropAll = []SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 0}}

func attachFilter(fd int, f []SockFilter) error {
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog); err != nil {
		return fmt.Errorf("attaching a %d-instruction filter: %w", len(f), err)
	}
	return nil
}

// setFilter replaces the socket's filter with the configured one (or none).
func (s *Source) setFilter() error {
	return s.withFD(func(fd int) error {
		if f := s.userFilter(); f != nil {
			return attachFilter(fd, f)
		}
		err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DETACH_FILTER, 0)
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("detaching the filter: %w", err)
		}
		return nil
	})
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Interface returns the index of the interface the socket is bound to.
func (s *Source) Interface() int { return s.ifindex }

// Config returns the configuration in use, defaults filled in.
func (s *Source) Config() Config { return s.cfg }

func (s *Source) status(i int) *uint32 {
	return (*uint32)(unsafe.Pointer(&s.ring[i*s.cfg.BlockSize+blkStatusOff]))
}

func (s *Source) u32(off int) uint32 {
	return *(*uint32)(unsafe.Pointer(&s.ring[off]))
}

// Live reports true: the kernel fills the ring whether or not the reader
// keeps up (steer.LiveSource).
func (s *Source) Live() bool { return true }

// Backlog reports how many of the ring's blocks hold frames not yet given
// back to the kernel (retired to user space, read or not), of NumBlocks
// (steer.LiveSource).
func (s *Source) Backlog() (used, size int) {
	if !s.ref() {
		return 0, 0
	}
	defer s.dropRef()
	return int(s.blocksHeld()), len(s.blocks)
}

// blocksHeld counts the blocks retired to user space. The ring is mapped.
func (s *Source) blocksHeld() (n int64) {
	for i := range s.blocks {
		if atomic.LoadUint32(s.status(i))&unix.TP_STATUS_USER != 0 {
			n++
		}
	}
	return n
}

// ref takes a reference on the ring, unless it is gone.
func (s *Source) ref() bool { return livesock.TryRef(&s.refs) }

// dropRef drops a reference ref took.
func (s *Source) dropRef() {
	if s.refs.Add(-1) == 0 {
		s.teardown()
	}
}

// ReadBatch fills b with up to Config.BatchSize frames from the ring. In
// zero-copy mode the frames' Data are views into a ring block, which goes
// back to the kernel once b.Release has been called for every batch taken
// from it; b.Release must be called exactly once per batch with frames, from
// any goroutine. ReadBatch returns an empty batch and a nil error when no
// block arrived within Config.PollTimeout, ctx's error when ctx ends, and an
// error wrapping ErrClosed (and net.ErrClosed) after Close.
func (s *Source) ReadBatch(ctx context.Context, b *steer.Batch) error {
	return s.readBatch(ctx, b, s.cfg.PollTimeout)
}

// readBatch is ReadBatch with its own poll timeout (the fanout glue polls
// briefly while it holds frames back).
func (s *Source) readBatch(ctx context.Context, b *steer.Batch, pollTimeout time.Duration) error {
	b.Frames = b.Frames[:0]
	b.Release = nil
	if s.sock.Closed() {
		return ErrClosed
	}
	s.readMu.Lock()
	defer s.readMu.Unlock()
	var deadline livesock.Deadline
	for {
		if s.sock.Closed() {
			return ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if s.walkBlk >= 0 {
			s.fill(b)
			if len(b.Frames) > 0 {
				return nil
			}
			continue
		}
		if s.tryTake() {
			continue
		}
		wait, ok := deadline.Left(pollTimeout)
		if !ok {
			return nil
		}
		var err error
		if s.blocks[s.cur].out.Load() {
			// Still held from the previous lap: wait for a release.
			err = s.waitRelease(ctx, wait)
		} else {
			err = s.poll(ctx, wait)
		}
		if err != nil {
			return err
		}
	}
}

// tryTake makes the current block the one being walked if the kernel has
// handed it over and no handler still holds it from the previous lap.
func (s *Source) tryTake() bool {
	i := s.cur
	blk := &s.blocks[i]
	if blk.out.Load() || atomic.LoadUint32(s.status(i))&unix.TP_STATUS_USER == 0 {
		return false
	}
	s.refs.Add(1)
	blk.refs.Store(1)
	blk.out.Store(true)
	s.nblocks.Add(1)
	if used := s.blocksHeld(); used > s.peak.Load() {
		s.peak.Store(used)
	}
	base := i * s.cfg.BlockSize
	s.walkBlk = i
	s.walkLeft = s.u32(base + blkNumPktsOff)
	s.walkOff = base + int(s.u32(base+blkFirstPktOff))
	s.cur = (i + 1) % len(s.blocks)
	if s.walkLeft == 0 {
		s.endWalk()
	}
	return true
}

// fill appends frames of the walked block to b.
func (s *Source) fill(b *steer.Batch) {
	i := s.walkBlk
	base := i * s.cfg.BlockSize
	end := base + s.cfg.BlockSize
	if blen := int(s.u32(base + blkLenOff)); blen > 0 && blen <= s.cfg.BlockSize {
		end = base + blen
	}
	max := s.cfg.BatchSize
	var cb *livesock.CopyBuf
	if s.cfg.Copy {
		cb = s.copyPool.Get()
	}
	for len(b.Frames) < max && s.walkLeft > 0 {
		off := s.walkOff
		if off < base || off+unix.SizeofTpacket3Hdr > end {
			s.walkLeft = 0 // corrupt offset: stop walking this block
			break
		}
		h := (*unix.Tpacket3Hdr)(unsafe.Pointer(&s.ring[off]))
		start := off + int(h.Mac)
		stop := start + int(h.Snaplen)
		if int(h.Mac) < unix.SizeofTpacket3Hdr || stop > end {
			s.walkLeft = 0
			break
		}
		data := s.ring[start:stop:stop]
		if s.cfg.SnapLen > 0 && len(data) > s.cfg.SnapLen {
			data = data[:s.cfg.SnapLen:s.cfg.SnapLen]
		}
		f := steer.Frame{
			Timestamp: time.Unix(int64(h.Sec), int64(h.Nsec)),
			WireLen:   int(h.Len),
			IfIndex:   s.ifindex,
		}
		if h.Status&unix.TP_STATUS_VLAN_VALID != 0 {
			f.VLAN = uint16(h.Hv1.Vlan_tci & 0xfff)
			f.HasVLAN = true
		}
		f.Checksum = checksumStatus(h.Status)
		if s.cfg.FillRxHash && h.Hv1.Rxhash != 0 {
			f.FlowID = h.Hv1.Rxhash
			f.HashType = hash.OpaqueHash
		}
		if cb != nil {
			cb.Add(data)
		} else {
			f.Data = data
		}
		b.Frames = append(b.Frames, f)
		s.walkLeft--
		if h.Next_offset == 0 {
			s.walkLeft = 0
		}
		s.walkOff = off + int(h.Next_offset)
	}
	n := len(b.Frames)
	s.delivered.Add(uint64(n))
	switch {
	case cb != nil && n > 0:
		cb.Finish(b.Frames)
		b.Release = cb.Release
	case cb != nil:
		s.copyPool.Put(cb)
	case n > 0:
		s.blocks[i].refs.Add(1)
		b.Release = s.blocks[i].release
	}
	if s.walkLeft == 0 {
		s.endWalk()
	}
}

// endWalk drops the reader's reference on the walked block.
func (s *Source) endWalk() {
	i := s.walkBlk
	s.walkBlk = -1
	s.unref(i)
}

// unref drops one reference on block i; the last one gives the block back
// to the kernel, and the last block of a closed source unmaps the ring.
func (s *Source) unref(i int) {
	blk := &s.blocks[i]
	n := blk.refs.Add(-1)
	if n > 0 {
		return
	}
	if n < 0 { // a Release called twice: ignore it
		blk.refs.Add(1)
		return
	}
	atomic.StoreUint32(s.status(i), unix.TP_STATUS_KERNEL)
	blk.out.Store(false)
	select {
	case s.released <- struct{}{}:
	default:
	}
	if s.refs.Add(-1) == 0 {
		s.teardown()
	}
}

// waitRelease waits until a held block comes back.
func (s *Source) waitRelease(ctx context.Context, wait time.Duration) error {
	var tc <-chan time.Time
	if wait > 0 {
		if s.timer == nil {
			s.timer = time.NewTimer(wait)
		} else {
			s.timer.Reset(wait)
		}
		defer s.timer.Stop()
		tc = s.timer.C
	}
	select {
	case <-s.released:
		return nil
	case <-s.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	case <-tc:
		return nil
	}
}

// poll waits until the kernel hands over a block, Close or ctx ends, or
// wait passes (negative: no limit).
func (s *Source) poll(ctx context.Context, wait time.Duration) error {
	i := s.cur
	rev, err := s.sock.Poll(ctx, wait)
	if err != nil {
		return err
	}
	if rev&unix.POLLERR != 0 {
		if err := s.sock.SocketError(); err != nil {
			return err
		}
	}
	if rev&unix.POLLIN != 0 && atomic.LoadUint32(s.status(i))&unix.TP_STATUS_USER == 0 {
		// The kernel says readable when the block before its current one is
		// not its own; that block may be one a handler still holds while
		// ours is empty. Back off briefly rather than spin.
		s.sock.Pause(time.Millisecond)
	}
	return nil
}

// Stats returns the running totals of the kernel's counters and of the
// frames delivered. After Close it returns the totals as of Close.
func (s *Source) Stats() (Stats, error) {
	st, err := s.kstats.Get(s.readKernelStats)
	st.Delivered = s.delivered.Load()
	st.Blocks = s.nblocks.Load()
	return st, err
}

// readKernelStats adds what PACKET_STATISTICS counted since its last read
// (a read resets it) to st.
func (s *Source) readKernelStats(st *Stats) error {
	return s.withFD(func(fd int) error {
		ks, err := unix.GetsockoptTpacketStatsV3(fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
		if err != nil {
			return fmt.Errorf("afpacket: reading PACKET_STATISTICS: %w", err)
		}
		st.Packets += uint64(ks.Packets)
		st.Drops += uint64(ks.Drops)
		st.FreezeQueueCount += uint64(ks.Freeze_q_cnt)
		return nil
	})
}

// SourceStats reports the kernel's counters in the dispatcher's terms
// (steer.SourceStatser), so that a dispatcher's stats include the frames the
// kernel dropped before the dispatcher saw them.
func (s *Source) SourceStats() (steer.SourceStats, error) {
	st, err := s.Stats()
	used, size := s.Backlog()
	return steer.SourceStats{Name: s.name, Received: st.Packets, Dropped: st.Drops,
		RingUsed: used, RingPeak: int(s.peak.Load()), RingSize: size,
		Kernel: []steer.KernelCounter{{Name: "tp_freeze_q_cnt", Value: st.FreezeQueueCount}}}, err
}

// withFD runs f with the socket descriptor unless it is closed.
func (s *Source) withFD(f func(fd int) error) error { return s.sock.Do(f) }

// Close stops the source. It wakes a reader blocked in ReadBatch (which
// then returns ErrClosed) and waits for it to leave. Blocks still held by
// handlers stay mapped: the ring is unmapped and the socket closed when the
// last of them is released (until then the socket drops every frame).
// Close is idempotent.
func (s *Source) Close() error {
	if !s.sock.Stop() {
		return nil
	}
	close(s.done)
	s.readMu.Lock()
	if s.walkBlk >= 0 {
		s.endWalk()
	}
	s.readMu.Unlock()

	err := s.kstats.Freeze(s.readKernelStats)
	if s.refs.Load() > 1 {
		_ = s.withFD(func(fd int) error { return attachFilter(fd, dropAll) })
	}
	if s.refs.Add(-1) == 0 {
		s.teardown()
	}
	if err != nil && !errors.Is(err, ErrClosed) {
		return err
	}
	return nil
}

// teardown releases the kernel resources; it runs once, when the last
// reference is gone (or after a failed open).
func (s *Source) teardown() {
	if !s.torn.CompareAndSwap(false, true) {
		return
	}
	s.sock.Teardown(func() {
		if s.ring != nil {
			_ = unix.Munmap(s.ring)
			s.ring = nil
		}
	}, false)
}

// SyscallConn returns a raw connection for socket options the package does
// not cover (for example SO_ATTACH_BPF). Its Read and Write are not
// supported; Control runs while the socket is open.
func (s *Source) SyscallConn() (syscall.RawConn, error) { return s.sock.SyscallConn() }

var (
	_ steer.Source        = (*Source)(nil)
	_ steer.SourceStatser = (*Source)(nil)
)

// checksumStatus is what a frame's tp_status says of its checksums
// (tpacket_rcv in net/packet/af_packet.c): TP_STATUS_CSUMNOTREADY when
// the frame's checksum is left to offload (CHECKSUM_PARTIAL: sent by this
// host or a guest), TP_STATUS_CSUM_VALID when the NIC or the stack found
// the transport checksum good (skb_csum_unnecessary), neither when nobody
// checked.
func checksumStatus(status uint32) steer.Checksum {
	switch {
	case status&unix.TP_STATUS_CSUMNOTREADY != 0:
		return steer.ChecksumPartial
	case status&unix.TP_STATUS_CSUM_VALID != 0:
		return steer.ChecksumGood
	}
	return steer.ChecksumUnknown
}
