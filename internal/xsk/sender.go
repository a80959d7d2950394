package xsk

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/rpsgo/rps/steer"
)

// ErrClosed is returned by a Sender used after Close. It wraps
// net.ErrClosed.
var ErrClosed = fmt.Errorf("xsk: sender closed: %w", net.ErrClosed)

// ErrNotSupported is returned on systems without AF_XDP.
var ErrNotSupported = errors.New("xsk: not supported on this system")

// Bind modes of SenderConfig.Bind.
const (
	BindAuto     = 0 // zero copy where the driver has it, else copy
	BindZeroCopy = 1 // XDP_ZEROCOPY or fail
	BindCopy     = 2 // XDP_COPY
)

// DefaultFrameSize is SenderConfig.FrameSize's default.
const DefaultFrameSize = 2048

// DefaultSendWait is SenderConfig.Wait's default: how long Send waits for
// a free chunk or TX ring slot before it drops the rest of its frames.
const DefaultSendWait = 10 * time.Millisecond

// Defaults of SenderConfig's NumFrames and RingSize: an 8 MiB UMEM.
const (
	DefaultSendFrames   = 4096
	DefaultSendRingSize = 2048
)

// SenderConfig tunes a Sender. The zero value is usable: every zero field
// takes the default named beside it.
type SenderConfig struct {
	// Queue is the queue the socket binds to; in copy mode the frames
	// leave through the device's TX queue of that number, which must
	// exist. The kernel allows one UMEM per device and queue, so a queue
	// that a Source (Open, OpenGroup) holds is refused. Default 0.
	Queue int
	// NumFrames is the number of UMEM chunks, a power of two: the most
	// frames in flight (on the TX ring, or sent and not yet completed).
	// Default DefaultSendFrames.
	NumFrames int
	// FrameSize is the UMEM chunk size, a power of two between
	// MinFrameSize and the page size, and the longest frame Send takes
	// (there is no headroom on the way out). Default DefaultFrameSize.
	FrameSize int
	// RingSize is the number of TX ring entries, a power of two up to
	// NumFrames. (The COMPLETION ring has NumFrames entries, so the
	// kernel always finds room to complete a frame.) Default
	// DefaultSendRingSize, or NumFrames when that is smaller.
	RingSize int
	// Bind is BindAuto, BindZeroCopy or BindCopy. Default BindAuto.
	Bind int
	// Wait bounds how long one Send call blocks when every chunk is in
	// flight or the TX ring is full, and how long it keeps handing queued
	// frames to a copy-mode kernel that pushes back. Negative does not
	// wait: frames without room are dropped at once. Default
	// DefaultSendWait.
	Wait time.Duration
}

// withDefaults returns c with the zero fields set and checks it.
func (c SenderConfig) withDefaults() (SenderConfig, error) {
	if c.NumFrames == 0 {
		c.NumFrames = DefaultSendFrames
	}
	if c.FrameSize == 0 {
		c.FrameSize = DefaultFrameSize
	}
	if c.RingSize == 0 {
		c.RingSize = min(DefaultSendRingSize, max(c.NumFrames, 1))
	}
	if c.Wait == 0 {
		c.Wait = DefaultSendWait
	}
	page := os.Getpagesize()
	switch {
	case c.Queue < 0 || c.Queue > 1<<16-1:
		return c, fmt.Errorf("xsk: %w: queue %d is not between 0 and 65535", steer.ErrConfig, c.Queue)
	case !pow2(c.NumFrames):
		return c, fmt.Errorf("xsk: %w: %d frames is not a power of two", steer.ErrConfig, c.NumFrames)
	case c.FrameSize < DefaultFrameSize || c.FrameSize > page || !pow2(c.FrameSize):
		return c, fmt.Errorf("xsk: %w: frame size %d is not a power of two between %d and the page size %d", steer.ErrConfig, c.FrameSize, DefaultFrameSize, page)
	case c.NumFrames > 1<<30/c.FrameSize:
		return c, fmt.Errorf("xsk: %w: UMEM of %d frames of %d bytes exceeds 1 GiB", steer.ErrConfig, c.NumFrames, c.FrameSize)
	case !pow2(c.RingSize) || c.RingSize > c.NumFrames:
		return c, fmt.Errorf("xsk: %w: TX ring size %d is not a power of two up to the %d frames", steer.ErrConfig, c.RingSize, c.NumFrames)
	case c.Bind < BindAuto || c.Bind > BindCopy:
		return c, fmt.Errorf("xsk: %w: unknown bind mode %d", steer.ErrConfig, c.Bind)
	}
	return c, nil
}

// SenderStats are a Sender's counters, running from OpenSender. Every
// frame given to Send is in exactly one of Sent, Dropped and Invalid; a
// sent frame is in flight (InFlight) until the kernel completes it.
type SenderStats struct {
	// Sent is the number of frames Send put on the TX ring.
	Sent uint64
	// Completed is the number of sent frames the kernel has finished
	// with (their chunks came back on the COMPLETION ring). In copy mode
	// the kernel completes a frame when the skb it built is freed, after
	// the device (or a veth peer) has taken it, whether it was delivered
	// or dropped on the way.
	Completed uint64
	// Dropped is the number of frames Send dropped because no chunk was
	// free or the TX ring was full for SenderConfig.Wait.
	Dropped uint64
	// Invalid is the number of frames Send refused: empty, or longer than
	// SenderConfig.FrameSize.
	Invalid uint64
	// TxInvalidDescs is the kernel's tx_invalid_descs: TX descriptors it
	// skipped as invalid. Send writes none, so nonzero means a bug.
	TxInvalidDescs uint64
	// TxRingEmptyDescs is the kernel's tx_ring_empty_descs: the times the
	// kernel looked for frames on the TX ring and found none (an event
	// count, not a drop count).
	TxRingEmptyDescs uint64
}

// InFlight is the number of frames sent and not yet completed.
func (s SenderStats) InFlight() uint64 { return s.Sent - s.Completed }

func pow2(n int) bool { return n > 0 && n&(n-1) == 0 }
