//go:build linux

package afxdp

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ring is one of the four rings the kernel shares with user space: a
// producer index, a consumer index, a flags word and a power-of-two array
// of entries. Each index has one writer: the side that owns it stores it
// with a release store (atomic.StoreUint32) after it wrote or read the
// entries, and the other side loads it with an acquire load
// (atomic.LoadUint32) before it touches them.
type ring struct {
	mem   []byte
	prod  *uint32
	cons  *uint32
	flags *uint32
	desc  unsafe.Pointer
	mask  uint32
}

// mapRing maps a ring of entries entries of entrySize bytes, described by
// off, at the socket's page offset pgoff.
func mapRing(fd int, off unix.XDPRingOffset, pgoff int64, entries, entrySize int) (ring, error) {
	size := int(off.Desc) + entries*entrySize
	mem, err := unix.Mmap(fd, pgoff, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return ring{}, fmt.Errorf("mapping a ring of %d entries: %w", entries, err)
	}
	return ring{
		mem:   mem,
		prod:  (*uint32)(unsafe.Pointer(&mem[off.Producer])),
		cons:  (*uint32)(unsafe.Pointer(&mem[off.Consumer])),
		flags: (*uint32)(unsafe.Pointer(&mem[off.Flags])),
		desc:  unsafe.Pointer(&mem[off.Desc]),
		mask:  uint32(entries - 1),
	}, nil
}

func (r *ring) unmap() {
	if r.mem != nil {
		_ = unix.Munmap(r.mem)
		*r = ring{}
	}
}

// rxDesc returns RX entry i (struct xdp_desc).
func (r *ring) rxDesc(i uint32) *unix.XDPDesc {
	return (*unix.XDPDesc)(unsafe.Add(r.desc, uintptr(i&r.mask)*unsafe.Sizeof(unix.XDPDesc{})))
}

// addr returns FILL or COMPLETION entry i (a u64 UMEM address).
func (r *ring) addr(i uint32) *uint64 {
	return (*uint64)(unsafe.Add(r.desc, uintptr(i&r.mask)*8))
}

// umem is the memory area the kernel writes frames into, and its FILL and
// COMPLETION rings. It belongs to the socket that registered it (the
// owner); the sockets of a group share it. The FILL ring has exactly one
// producer at a time: every give holds mu.
type umem struct {
	area      []byte
	frameSize uint64
	fill      ring
	comp      ring
	ownerFD   int // the registering socket; its mappings hold the rings
	zeroCopy  bool

	mu       sync.Mutex // the FILL ring's producer side
	fillProd uint32     // the producer index, written only under mu
	spill    []uint64   // chunks that found no slot (never, while the count holds)

	refs atomic.Int32 // sockets (and a Sender) not torn down
	torn atomic.Bool

	sendChunks []uint64 // Config.SendFrames chunks, never in FILL, until a Sender takes them (under mu)
}

// give hands chunks (addresses of chunk starts) to the kernel through the
// FILL ring: the addresses are written into the slots first, then the
// producer index is published with a release store. It reports whether a
// zero-copy driver asked to be woken (XDP_RING_NEED_WAKEUP).
func (u *umem) give(chunks []uint64) bool {
	if len(chunks) == 0 {
		return false
	}
	u.mu.Lock()
	prod := u.fillProd
	free := u.fill.mask + 1 - (prod - atomic.LoadUint32(u.fill.cons))
	if len(u.spill) > 0 {
		n := min(uint32(len(u.spill)), free)
		for _, a := range u.spill[:n] {
			*u.fill.addr(prod) = a
			prod++
		}
		u.spill = append(u.spill[:0], u.spill[n:]...)
		free -= n
	}
	n := min(uint32(len(chunks)), free)
	for _, a := range chunks[:n] {
		*u.fill.addr(prod) = a
		prod++
	}
	if int(n) < len(chunks) {
		u.spill = append(u.spill, chunks[n:]...)
	}
	u.fillProd = prod
	atomic.StoreUint32(u.fill.prod, prod)
	u.mu.Unlock()
	return u.zeroCopy && atomic.LoadUint32(u.fill.flags)&unix.XDP_RING_NEED_WAKEUP != 0
}

// unref drops one socket's reference; the last one unmaps the rings and
// the area and closes the owner socket.
func (u *umem) unref() {
	if u.refs.Add(-1) > 0 || !u.torn.CompareAndSwap(false, true) {
		return
	}
	u.teardown()
}

func (u *umem) teardown() {
	u.fill.unmap()
	u.comp.unmap()
	if u.ownerFD >= 0 {
		_ = unix.Close(u.ownerFD)
		u.ownerFD = -1
	}
	if u.area != nil {
		if unix.Munmap(u.area) == nil {
			mappedAreas.Add(-1)
		}
		u.area = nil
	}
}

// mappedAreas counts the UMEM areas mapped, for the tests' leak checks.
var mappedAreas atomic.Int64

// getsockopt reads a socket option into the n bytes at p and returns the
// length the kernel wrote.
func getsockopt(fd, level, opt int, p unsafe.Pointer, n uintptr) (int, error) {
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

// newUMEM registers an area of cfg.NumFrames+cfg.SendFrames chunks on the
// socket fd, creates and maps its FILL and COMPLETION rings, and puts the
// first NumFrames chunks into the FILL ring; the others are kept for a
// Sender (sendChunks), whose completions the COMPLETION ring can all hold.
// It returns the mmap offsets for the socket's own rings.
func newUMEM(fd int, cfg *Config) (*umem, unix.XDPMmapOffsets, error) {
	u, off, err := registerUMEM(fd, cfg.NumFrames+cfg.SendFrames, cfg.FrameSize, cfg.NumFrames, max(cfg.RingSize, cfg.SendFrames))
	if err != nil {
		return nil, off, err
	}
	chunks := make([]uint64, cfg.NumFrames+cfg.SendFrames)
	for i := range chunks {
		chunks[i] = uint64(i) * u.frameSize
	}
	u.give(chunks[:cfg.NumFrames])
	if cfg.SendFrames > 0 {
		u.sendChunks = chunks[cfg.NumFrames:]
	}
	return u, off, nil
}

// registerUMEM allocates an area of frames chunks of frameSize bytes,
// registers it on the socket fd (XDP_UMEM_REG), and creates and maps a
// FILL ring of fillSize entries and a COMPLETION ring of compSize entries
// (bind wants both, even on a socket that only sends). The FILL ring is
// left empty. It returns the mmap offsets for the socket's own rings.
func registerUMEM(fd, frames, frameSize, fillSize, compSize int) (*umem, unix.XDPMmapOffsets, error) {
	var off unix.XDPMmapOffsets
	u := &umem{frameSize: uint64(frameSize), ownerFD: -1}
	area, err := unix.Mmap(-1, 0, frames*frameSize, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, off, fmt.Errorf("allocating the UMEM: %w", err)
	}
	u.area = area
	mappedAreas.Add(1)
	reg := unix.XDPUmemReg{
		Addr: uint64(uintptr(unsafe.Pointer(&area[0]))),
		Len:  uint64(len(area)),
		Size: uint32(frameSize),
	}
	if err := setsockopt(fd, unix.SOL_XDP, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		u.teardown()
		return nil, off, fmt.Errorf("registering the UMEM (%d frames of %d bytes): %w", frames, frameSize, err)
	}
	if err := setRingSizes(fd, unix.XDP_UMEM_FILL_RING, fillSize, unix.XDP_UMEM_COMPLETION_RING, compSize); err != nil {
		u.teardown()
		return nil, off, err
	}
	if off, err = mmapOffsets(fd); err != nil {
		u.teardown()
		return nil, off, err
	}
	if u.fill, err = mapRing(fd, off.Fr, unix.XDP_UMEM_PGOFF_FILL_RING, fillSize, 8); err != nil {
		u.teardown()
		return nil, off, fmt.Errorf("FILL ring: %w", err)
	}
	if u.comp, err = mapRing(fd, off.Cr, unix.XDP_UMEM_PGOFF_COMPLETION_RING, compSize, 8); err != nil {
		u.teardown()
		return nil, off, fmt.Errorf("COMPLETION ring: %w", err)
	}
	return u, off, nil
}

// setRingSizes sets two ring sizes (setsockopt of an int each).
func setRingSizes(fd, opt1, n1, opt2, n2 int) error {
	for _, o := range [][2]int{{opt1, n1}, {opt2, n2}} {
		if err := unix.SetsockoptInt(fd, unix.SOL_XDP, o[0], o[1]); err != nil {
			return fmt.Errorf("setting ring option %d to %d entries: %w", o[0], o[1], err)
		}
	}
	return nil
}

func mmapOffsets(fd int) (unix.XDPMmapOffsets, error) {
	var off unix.XDPMmapOffsets
	n, err := getsockopt(fd, unix.SOL_XDP, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), unsafe.Sizeof(off))
	if err != nil {
		return off, fmt.Errorf("reading XDP_MMAP_OFFSETS: %w", err)
	}
	if uintptr(n) < unsafe.Sizeof(off) {
		return off, fmt.Errorf("reading XDP_MMAP_OFFSETS: %d bytes, the kernel has no ring flags (need Linux 5.4)", n)
	}
	return off, nil
}
