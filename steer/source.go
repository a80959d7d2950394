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
	FlowID    uint32        // a hash the source computed, as a NIC does
	HashType  hash.HashType // FlowID's type; NONE: the dispatcher hashes
	Checksum  Checksum      // what the source knows (TP_STATUS_CSUM_VALID: ChecksumGood)
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

// LiveSource is a source that may be live (a ring the kernel fills), which
// OverflowAuto holds back only while its ring has room (see Overflow).
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

// Source produces batches of frames: a capture file, a ring, a slice.
type Source interface {
	// ReadBatch fills b (maybe with nothing), or returns io.EOF or ctx's
	// error. b.Frames is free on the next call, the bytes at b.Release.
	ReadBatch(ctx context.Context, b *Batch) error
	// Close releases the source, and may be called during ReadBatch.
	Close() error
}
