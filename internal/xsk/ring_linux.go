//go:build linux

package xsk

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Ring is one of the four rings the kernel shares with user space: a
// producer index, a consumer index, a flags word and a power-of-two array
// of entries. See the package documentation for the order of accesses.
type Ring struct {
	mem   []byte
	Prod  *uint32
	Cons  *uint32
	Flags *uint32
	desc  unsafe.Pointer
	Mask  uint32
}

// MapRing maps a ring of entries entries of entrySize bytes, described by
// off, at the socket's page offset pgoff.
func MapRing(fd int, off unix.XDPRingOffset, pgoff int64, entries, entrySize int) (Ring, error) {
	size := int(off.Desc) + entries*entrySize
	mem, err := unix.Mmap(fd, pgoff, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return Ring{}, fmt.Errorf("mapping a ring of %d entries: %w", entries, err)
	}
	return Ring{
		mem:   mem,
		Prod:  (*uint32)(unsafe.Pointer(&mem[off.Producer])),
		Cons:  (*uint32)(unsafe.Pointer(&mem[off.Consumer])),
		Flags: (*uint32)(unsafe.Pointer(&mem[off.Flags])),
		desc:  unsafe.Pointer(&mem[off.Desc]),
		Mask:  uint32(entries - 1),
	}, nil
}

// MapDescRing maps an RX or TX ring of entries descriptors (struct
// xdp_desc) at the socket's page offset pgoff (XDP_PGOFF_RX_RING,
// XDP_PGOFF_TX_RING).
func MapDescRing(fd int, off unix.XDPRingOffset, pgoff int64, entries int) (Ring, error) {
	return MapRing(fd, off, pgoff, entries, int(unsafe.Sizeof(unix.XDPDesc{})))
}

// Statistics reads the socket's XDP_STATISTICS. A kernel before 5.9
// writes the first three counters only (it counts rx_ring_full in
// rx_dropped): the others read zero.
func Statistics(fd int) (unix.XDPStatistics, error) {
	var ks unix.XDPStatistics
	if _, err := Getsockopt(fd, unix.SOL_XDP, unix.XDP_STATISTICS, unsafe.Pointer(&ks), unsafe.Sizeof(ks)); err != nil {
		return ks, fmt.Errorf("reading XDP_STATISTICS: %w", err)
	}
	return ks, nil
}

// ZeroCopy reports whether the bound socket fd is in zero-copy mode
// (XDP_OPTIONS).
func ZeroCopy(fd int) (bool, error) {
	opts, err := unix.GetsockoptInt(fd, unix.SOL_XDP, unix.XDP_OPTIONS)
	if err != nil {
		return false, fmt.Errorf("reading XDP_OPTIONS: %w", err)
	}
	return opts&unix.XDP_OPTIONS_ZEROCOPY != 0, nil
}

// Unmap unmaps the ring; it is idempotent.
func (r *Ring) Unmap() {
	if r.mem != nil {
		_ = unix.Munmap(r.mem)
		*r = Ring{}
	}
}

// Desc returns RX or TX entry i (struct xdp_desc).
func (r *Ring) Desc(i uint32) *unix.XDPDesc {
	return (*unix.XDPDesc)(unsafe.Add(r.desc, uintptr(i&r.Mask)*unsafe.Sizeof(unix.XDPDesc{})))
}

// Addr returns FILL or COMPLETION entry i (a u64 UMEM address).
func (r *Ring) Addr(i uint32) *uint64 {
	return (*uint64)(unsafe.Add(r.desc, uintptr(i&r.Mask)*8))
}

// UMEM is the memory area the kernel writes frames into, and its FILL and
// COMPLETION rings. It belongs to the socket that registered it (the
// owner); the sockets of a group, and a Sender, share it. The FILL ring
// has exactly one producer at a time: every Give holds mu.
type UMEM struct {
	Area      []byte
	FrameSize uint64
	Fill      Ring
	Comp      Ring
	OwnerFD   int // the registering socket; its mappings hold the rings
	ZeroCopy  bool
	// Ifname, Ifindex, Queue and NS are the device and queue the owner is
	// bound to, and its network namespace, for a SharedSender.
	Ifname  string
	Ifindex int
	Queue   int
	NS      NetNS

	mu       sync.Mutex  // the FILL ring's producer side
	fillProd uint32      // the producer index, written only under mu
	spill    []uint64    // chunks that found no slot (see FillRingSize), under mu
	spilled  atomic.Bool // spill is not empty
	// RxChunks is the number of chunks that go round through the FILL
	// ring (frames, in NewUMEM).
	RxChunks int

	refs atomic.Int32 // sockets (and a Sender) not torn down
	torn atomic.Bool

	sendChunks []uint64 // chunks never in FILL, until a SharedSender takes them (under mu)
}

// Give hands chunks (addresses of chunk starts) to the kernel through the
// FILL ring: the addresses are written into the slots first, then the
// producer index is published with a release store. It reports whether a
// zero-copy driver asked to be woken (XDP_RING_NEED_WAKEUP).
func (u *UMEM) Give(chunks []uint64) bool {
	if len(chunks) == 0 {
		return false
	}
	u.mu.Lock()
	u.fillLocked(chunks)
	u.mu.Unlock()
	return u.wantsWakeup()
}

// Flush puts chunks that found no slot in an earlier Give into the FILL
// ring, if it has room now; a reader calls it before it waits, so that a
// spilled chunk cannot stay out of the kernel's reach while no frame comes
// to release another. It reports what Give reports.
func (u *UMEM) Flush() bool {
	if !u.spilled.Load() {
		return false
	}
	u.mu.Lock()
	n := u.fillLocked(nil)
	u.mu.Unlock()
	return n > 0 && u.wantsWakeup()
}

// fillLocked writes the spilled chunks, then chunks, into the FILL ring's
// free slots, keeps what finds none in the spill, and publishes the
// producer index. It returns how many it wrote. The caller holds mu.
func (u *UMEM) fillLocked(chunks []uint64) uint32 {
	prod := u.fillProd
	free := u.Fill.Mask + 1 - (prod - atomic.LoadUint32(u.Fill.Cons))
	put := func(list []uint64) []uint64 {
		n := min(uint32(len(list)), free)
		for _, a := range list[:n] {
			*u.Fill.Addr(prod) = a
			prod++
		}
		free -= n
		return list[n:]
	}
	rest := put(u.spill)
	u.spill = append(u.spill[:0], rest...)
	u.spill = append(u.spill, put(chunks)...)
	u.spilled.Store(len(u.spill) > 0)
	n := prod - u.fillProd
	u.fillProd = prod
	atomic.StoreUint32(u.Fill.Prod, prod)
	return n
}

// wantsWakeup reports whether a zero-copy driver asked to be woken
// (XDP_RING_NEED_WAKEUP on the FILL ring).
func (u *UMEM) wantsWakeup() bool {
	return u.ZeroCopy && atomic.LoadUint32(u.Fill.Flags)&unix.XDP_RING_NEED_WAKEUP != 0
}

// FillRingSize is the number of FILL ring entries for frames chunks:
// twice as many. The kernel publishes its consumer index lazily: it takes
// the entries it saw at once and stores the index only when it comes back
// for more or ends a NAPI poll (xskq_cons_release and xskq_cons_get_entries
// in net/xdp/xsk_queue.h, xsk_flush in net/xdp/xsk.c). Until then the
// entries it has used still count as full, so a ring of frames entries can
// look full while the kernel holds none of their chunks, and a chunk coming
// back would find no slot. The entries not yet released are at most the
// ones the kernel saw, frames at most, and the chunks given back since, no
// more than it used: twice frames.
func FillRingSize(frames int) int { return 2 * max(frames, 1) }

// Ref takes a reference for another socket, unless the UMEM is gone.
func (u *UMEM) Ref() bool {
	for {
		r := u.refs.Load()
		if r <= 0 {
			return false
		}
		if u.refs.CompareAndSwap(r, r+1) {
			return true
		}
	}
}

// Unref drops one socket's reference; the last one unmaps the rings and
// the area and closes the owner socket.
func (u *UMEM) Unref() {
	if u.refs.Add(-1) > 0 || !u.torn.CompareAndSwap(false, true) {
		return
	}
	u.teardown()
}

func (u *UMEM) teardown() {
	owners.Delete(u.OwnerFD)
	u.Fill.Unmap()
	u.Comp.Unmap()
	if u.OwnerFD >= 0 {
		_ = unix.Close(u.OwnerFD)
		u.OwnerFD = -1
	}
	if u.Area != nil {
		if unmapArea(u.Area) == nil {
			mappedAreas.Add(-1)
		}
		u.Area = nil
	}
}

// hugePage is the size of a transparent huge page on x86-64 (and arm64
// with 4 KiB pages).
const hugePage = 2 << 20

// mapArea maps size bytes of anonymous memory for a UMEM, every page
// faulted in. An area of a huge page or more starts on a huge-page
// boundary and the kernel is asked to back it with transparent huge pages
// (MADV_HUGEPAGE, before any page is touched; where THP is off it keeps
// small pages, and only the speed differs): frames lie a chunk, 2 KiB,
// apart, so a reader that looks at every frame's headers would otherwise
// touch a new 4 KiB page every other frame and miss the TLB on most of
// them in a UMEM of 32 MiB.
func mapArea(size int) ([]byte, error) {
	const prot, flags = unix.PROT_READ | unix.PROT_WRITE, unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	if size < hugePage {
		p, err := unix.MmapPtr(-1, 0, nil, uintptr(size), prot, flags|unix.MAP_POPULATE)
		if err != nil {
			return nil, err
		}
		return unsafe.Slice((*byte)(p), size), nil
	}
	// Map a huge page more, then unmap the ends around an aligned area.
	raw, err := unix.MmapPtr(-1, 0, nil, uintptr(size+hugePage), prot, flags)
	if err != nil {
		return nil, err
	}
	lead := (hugePage - uintptr(raw)%hugePage) % hugePage
	if lead > 0 {
		_ = unix.MunmapPtr(raw, lead)
	}
	if tail := hugePage - lead; tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(raw, lead+uintptr(size)), tail)
	}
	area := unsafe.Slice((*byte)(unsafe.Add(raw, lead)), size)
	_ = unix.Madvise(area, unix.MADV_HUGEPAGE) // advice only
	for i := 0; i < len(area); i += os.Getpagesize() {
		area[i] = 0 // fault every page in now, as MAP_POPULATE would
	}
	return area, nil
}

// unmapArea unmaps an area of mapArea.
func unmapArea(area []byte) error {
	return unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(area)), uintptr(len(area)))
}

// mappedAreas counts the UMEM areas mapped.
var mappedAreas atomic.Int64

// MappedAreas returns the number of UMEM areas the process has mapped,
// for leak checks.
func MappedAreas() int64 { return mappedAreas.Load() }

// owners maps an owner socket's descriptor to its UMEM, while both are
// there: SharedSender looks the UMEM up under the socket's Control.
var owners sync.Map

// Getsockopt reads a socket option into the n bytes at p and returns the
// length the kernel wrote.
func Getsockopt(fd, level, opt int, p unsafe.Pointer, n uintptr) (int, error) {
	l := uint32(n)
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(p), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return 0, e
	}
	return int(l), nil
}

// setsockopt sets a socket option to the n bytes at p.
func setsockopt(fd, level, opt int, p unsafe.Pointer, n uintptr) error {
	return unix.SetsockoptString(fd, level, opt, unsafe.String((*byte)(p), n))
}

// NewUMEM registers an area of frames+sendFrames chunks of frameSize bytes
// on the socket fd, which becomes its owner, creates and maps its FILL
// ring (FillRingSize(frames) entries) and COMPLETION ring (compSize entries, at least
// sendFrames), and puts the first frames chunks into the FILL ring; the
// others are kept for a SharedSender, whose completions the COMPLETION
// ring can all hold. With fill false the FILL ring stays empty (a socket
// that only sends). It returns the mmap offsets for the socket's own
// rings. The UMEM has one reference, the owner's.
func NewUMEM(fd, frames, sendFrames, frameSize, compSize int, fill bool) (*UMEM, unix.XDPMmapOffsets, error) {
	var off unix.XDPMmapOffsets
	total := frames + sendFrames
	fillSize := FillRingSize(frames)
	compSize = max(compSize, sendFrames, 1)
	u := &UMEM{FrameSize: uint64(frameSize), OwnerFD: -1}
	area, err := mapArea(total * frameSize)
	if err != nil {
		return nil, off, fmt.Errorf("allocating the UMEM: %w", err)
	}
	u.Area = area
	mappedAreas.Add(1)
	reg := unix.XDPUmemReg{
		Addr: uint64(uintptr(unsafe.Pointer(&area[0]))),
		Len:  uint64(len(area)),
		Size: uint32(frameSize),
	}
	if err := setsockopt(fd, unix.SOL_XDP, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		u.teardown()
		return nil, off, fmt.Errorf("registering the UMEM (%d frames of %d bytes): %w", total, frameSize, err)
	}
	for _, o := range [][2]int{{unix.XDP_UMEM_FILL_RING, fillSize}, {unix.XDP_UMEM_COMPLETION_RING, compSize}} {
		if err := unix.SetsockoptInt(fd, unix.SOL_XDP, o[0], o[1]); err != nil {
			u.teardown()
			return nil, off, fmt.Errorf("setting ring option %d to %d entries: %w", o[0], o[1], err)
		}
	}
	if off, err = MmapOffsets(fd); err != nil {
		u.teardown()
		return nil, off, err
	}
	if u.Fill, err = MapRing(fd, off.Fr, unix.XDP_UMEM_PGOFF_FILL_RING, fillSize, 8); err != nil {
		u.teardown()
		return nil, off, fmt.Errorf("FILL ring: %w", err)
	}
	if u.Comp, err = MapRing(fd, off.Cr, unix.XDP_UMEM_PGOFF_COMPLETION_RING, compSize, 8); err != nil {
		u.teardown()
		return nil, off, fmt.Errorf("COMPLETION ring: %w", err)
	}
	chunks := make([]uint64, total)
	for i := range chunks {
		chunks[i] = uint64(i) * u.FrameSize
	}
	u.RxChunks = frames
	if fill {
		u.Give(chunks[:frames])
	}
	if sendFrames > 0 {
		u.sendChunks = chunks[frames:]
	}
	u.OwnerFD = fd
	u.refs.Store(1)
	owners.Store(fd, u)
	return u, off, nil
}

// MmapOffsets reads the socket's ring offsets (XDP_MMAP_OFFSETS).
func MmapOffsets(fd int) (unix.XDPMmapOffsets, error) {
	var off unix.XDPMmapOffsets
	n, err := Getsockopt(fd, unix.SOL_XDP, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), unsafe.Sizeof(off))
	if err != nil {
		return off, fmt.Errorf("reading XDP_MMAP_OFFSETS: %w", err)
	}
	if uintptr(n) < unsafe.Sizeof(off) {
		return off, fmt.Errorf("reading XDP_MMAP_OFFSETS: %d bytes, the kernel has no ring flags (need Linux 5.4)", n)
	}
	return off, nil
}

// bindBusyWait bounds how long Bind retries while the queue is busy: the
// kernel lets go of a closed socket's queue only after an RCU grace period
// and a work item (xsk_destruct, xp_release_deferred), so a socket closed
// just before still holds it for a moment.
const bindBusyWait = time.Second

// Bind binds fd to sa, retrying while the queue is busy, up to a second.
func Bind(fd int, sa *unix.SockaddrXDP) error {
	deadline := time.Now().Add(bindBusyWait)
	pause := 100 * time.Microsecond
	for {
		err := unix.Bind(fd, sa)
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(pause)
		pause = min(2*pause, 10*time.Millisecond)
	}
}

// NetNS identifies a network namespace (the device and inode of its
// /proc file).
type NetNS struct{ dev, ino uint64 }

// CurrentNetNS returns the namespace of the calling thread; the caller
// must have locked its OS thread for the answer to stay true.
func CurrentNetNS() (NetNS, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return NetNS{}, fmt.Errorf("reading the network namespace: %w", err)
	}
	return NetNS{dev: uint64(st.Dev), ino: st.Ino}, nil
}
