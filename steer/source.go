package steer

import (
	"context"
	"time"

	"github.com/rpsgo/rps/hash"
)

// Frame is one received frame as a [Source] delivers it: the bytes from the
// Ethernet header on, and what the source knows about them.
type Frame struct {
	// Data is the frame from its Ethernet header. It is a view into the
	// source's buffer (a file read buffer, a ring block) and stays valid
	// until the batch it came in is released.
	Data []byte
	// Timestamp is the capture time the source recorded (the pcap record
	// time, the ring header's time). The dispatcher never reads the clock per
	// frame.
	Timestamp time.Time
	// WireLen is the frame's length on the wire, which may exceed len(Data)
	// when the capture was truncated to a snap length. Zero means len(Data).
	WireLen int
	// IfIndex is the ingress interface index (FreeBSD's m->m_pkthdr.rcvif),
	// used by the SOURCE policy. Zero when unknown.
	IfIndex int
	// VLAN is an 802.1Q tag the source delivered out of band (Linux strips
	// it into tp_vlan_tci); valid when HasVLAN is set.
	VLAN    uint16
	HasVLAN bool
	// FlowID and HashType carry a hash the source already computed, as a NIC
	// or a kernel program would (m->m_pkthdr.flowid and M_HASHTYPE_*). With
	// HashType NONE the dispatcher computes the software hash.
	FlowID   uint32
	HashType hash.HashType
	// Checksum is what the source knows of the frame's checksums, such as
	// AF_PACKET's TP_STATUS_CSUM_VALID (ChecksumGood) and
	// TP_STATUS_CSUMNOTREADY (ChecksumPartial); ChecksumUnknown when it
	// knows nothing, which Config.VerifyChecksums then verifies.
	Checksum Checksum
}

// wireLen returns WireLen, or len(Data) when WireLen is zero.
func (f *Frame) wireLen() int {
	if f.WireLen != 0 {
		return f.WireLen
	}
	return len(f.Data)
}

// Batch is a group of frames that share a buffer, and the callback that
// gives the buffer back.
type Batch struct {
	Frames []Frame
	// Release, when not nil, is called exactly once after every frame of the
	// batch has been handled, dropped or panicked, from whichever goroutine
	// finished last. A source uses it to reuse a buffer or return a ring block to the
	// kernel.
	Release func()
}

// LiveSource is implemented by sources that may say they are live: frames
// arrive whether or not the reader keeps up (a ring the kernel fills).
// Holding such a reader back leaves the frames in the kernel's ring, where
// the kernel counts what it cannot hold; it costs nothing while the ring
// has room, but holding it back for a stalled worker would stop every other
// worker too. Under OverflowAuto, [Dispatcher.Run] therefore holds a live
// source back on a full queue only while its ring is less than three
// quarters full (LiveRingHighWater) and the worker is not stalled (its
// queue has moved within Config.Queue.StallTimeout); past either it drops
// at the tail, as netisr does. Any other source is always held back.
type LiveSource interface {
	Source
	// Live reports whether the source is live.
	Live() bool
	// Backlog reports how much of the kernel's buffer behind the source is
	// taken by frames not yet given back to the kernel (read or not), and
	// its size, in units of the source's choosing (ring blocks, ring
	// entries); size 0 when the source cannot tell. It is called while the
	// source's reader waits for room in a queue, from the goroutine that
	// reads the source.
	Backlog() (used, size int)
}

// liveSource returns src as a live source, or nil when it is not one.
func liveSource(src Source) LiveSource {
	if l, ok := src.(LiveSource); ok && l.Live() {
		return l
	}
	return nil
}

// LiveRingHighWater is the share of a live source's ring (LiveSource.Backlog)
// past which a full queue drops at its tail rather than hold the reader
// back: three quarters.
const LiveRingHighWater = 0.75

// Source produces batches of frames. A capture file, an AF_PACKET ring and
// an in-memory slice all implement it.
type Source interface {
	// ReadBatch fills b with the next frames. It returns io.EOF when the
	// source is exhausted, and ctx's error when ctx ends while it waits. A
	// batch with no frames and a nil error is allowed (a poll timeout).
	// The dispatcher does not call ReadBatch again before it is done with b's
	// Frames slice (it copies what it needs), but the frame bytes must stay
	// valid until b.Release is called.
	ReadBatch(ctx context.Context, b *Batch) error
	// Close releases the source's resources. It is safe to call while
	// another goroutine is blocked in ReadBatch, which then returns an error.
	Close() error
}
