package steer

import (
	"context"
	"time"

	"github.com/rpsgo/rps/hash"
)

// Frame is one received frame as a [Source] delivers it: the bytes from the
// Ethernet header on, and what the source knows about them.
type Frame struct {
	Data      []byte    // the frame, valid until its batch is released
	Timestamp time.Time // the capture time the source recorded
	WireLen   int       // the length on the wire, > len(Data) when cut to a snap length; 0: len(Data)
	IfIndex   int       // the ingress interface index, used by PolicySource; 0 if unknown
	VLAN      uint16    // an 802.1Q tag delivered out of band (tp_vlan_tci), when HasVLAN
	HasVLAN   bool
	// FlowID and HashType carry a hash the source computed, as a NIC does;
	// with HashType NONE the dispatcher computes it.
	FlowID   uint32
	HashType hash.HashType
	Checksum Checksum // what the source knows (TP_STATUS_CSUM_VALID: ChecksumGood)
}

// wireLen returns WireLen, or len(Data) when WireLen is zero.
func (f *Frame) wireLen() int {
	if f.WireLen != 0 {
		return f.WireLen
	}
	return len(f.Data)
}

// Batch is a group of frames that share a buffer, and its release.
type Batch struct {
	Frames  []Frame
	Release func() // when not nil, called once every frame is done, from any goroutine
}

// LiveSource is implemented by sources that may be live, such as a ring the
// kernel fills. Under OverflowAuto, a full queue holds a live source back
// only while its ring is under three quarters full and the worker is not
// stalled (QueueConfig.StallTimeout); past either it drops at the tail.
type LiveSource interface {
	Source
	Live() bool // whether the source is live
	// Backlog reports how much of the kernel's ring holds frames not yet
	// given back, and its size (0: unknown), in the source's units.
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
