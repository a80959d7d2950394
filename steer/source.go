package steer

import (
	"context"
	"time"

	"github.com/rpsgo/rps/hash"
)

// Frame is one received frame as a [Source] delivers it: the bytes from the
// Ethernet header on, and what the source knows about them.
type Frame struct {
	// Data is the frame, a view into the source's buffer, valid until the
	// batch it came in is released.
	Data      []byte
	Timestamp time.Time // the capture time the source recorded
	// WireLen is the frame's length on the wire, which exceeds len(Data)
	// when the capture was cut to a snap length. Zero means len(Data).
	WireLen int
	IfIndex int // the ingress interface index, used by PolicySource; 0 if unknown
	// VLAN is an 802.1Q tag the source delivered out of band (Linux's
	// tp_vlan_tci), when HasVLAN is set.
	VLAN    uint16
	HasVLAN bool
	// FlowID and HashType carry a hash the source computed, as a NIC does;
	// with HashType NONE the dispatcher computes it.
	FlowID   uint32
	HashType hash.HashType
	// Checksum is what the source knows of the checksums (AF_PACKET's
	// TP_STATUS_CSUM_VALID gives ChecksumGood).
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
	// Release, when not nil, is called once, after every frame of the
	// batch is handled, dropped or panicked, from the goroutine that
	// finished last.
	Release func()
}

// LiveSource is implemented by sources that may be live: frames arrive
// whether or not the reader keeps up (a ring the kernel fills). Under
// OverflowAuto, [Dispatcher.Run] holds a live source back on a full queue
// only while its ring is under three quarters full and the worker is not
// stalled (QueueConfig.StallTimeout); past either it drops at the tail, as
// netisr does, so that one stuck worker cannot stop the others.
type LiveSource interface {
	Source
	Live() bool // whether the source is live
	// Backlog reports how much of the kernel's buffer behind the source
	// holds frames not yet given back, and its size, in the source's units
	// (size 0: unknown). It is called from the reading goroutine.
	Backlog() (used, size int)
}

// liveSource returns src as a live source, or nil when it is not one.
func liveSource(src Source) LiveSource {
	if l, ok := src.(LiveSource); ok && l.Live() {
		return l
	}
	return nil
}

// liveRingHighWater is the share of a live source's ring (LiveSource.Backlog)
// past which a full queue drops at its tail rather than hold the reader
// back: three quarters.
const liveRingHighWater = 0.75

// Source produces batches of frames: a capture file, an AF_PACKET ring, a
// slice.
type Source interface {
	// ReadBatch fills b with the next frames: io.EOF when the source is
	// exhausted, ctx's error when ctx ends while it waits; an empty batch
	// is allowed. It is not called again before the dispatcher is done
	// with b.Frames, but the bytes must stay valid until b.Release.
	ReadBatch(ctx context.Context, b *Batch) error
	// Close releases the source's resources, and may be called while
	// ReadBatch blocks, which then returns an error.
	Close() error
}
