package afxdp

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/filter"
)

// ErrNotSupported is returned on systems without AF_XDP; an invalid Config
// or argument is an error wrapping steer.ErrConfig.
var ErrNotSupported = errors.New("afxdp: not supported on this system")

// ErrHostAddrs, which wraps steer.ErrConfig, is wrapped by Open's and
// OpenGroup's error on an interface with addresses under HostRefuse.
var ErrHostAddrs = fmt.Errorf("%w: the interface carries the host's own traffic", steer.ErrConfig)

// ErrClosed is returned by a Source or Group used after Close. It wraps
// net.ErrClosed, so errors.Is(err, net.ErrClosed) holds too.
var ErrClosed = fmt.Errorf("afxdp: socket closed: %w", net.ErrClosed)

// Defaults for the zero values of Config. They give a 32 MiB UMEM per
// socket (or per group, whose sockets share one) and an RX ring of 8192
// frames: 6.8 ms at 1.2 Mpps. Every chunk is in the FILL ring, the RX ring
// or a handler's batch: with twice as many chunks as RX entries the ring
// can fill while handlers hold thousands of frames, and ride out the
// stalls of a reader that shares its CPU with the traffic, where 2048
// entries lost frames from 500 kpps up (docs/performance.md). Without
// CAP_IPC_LOCK the kernel charges the UMEM to RLIMIT_MEMLOCK, and refuses
// one beyond it (ENOBUFS): lower NumFrames, or raise the limit.
const (
	DefaultNumFrames   = 16384
	DefaultFrameSize   = 2048
	DefaultRingSize    = 8192
	DefaultPollTimeout = 100 * time.Millisecond
	// DefaultBatchTimeout is Config.BatchTimeout's default: long enough
	// that a wake-up of the reader serves hundreds of frames from 250 kpps
	// up (a shorter one costs the reader more CPU a frame, see
	// docs/performance.md), a tenth of an AF_PACKET socket's default block
	// timeout, and 1200 frames at 1.2 Mpps, well within the default ring.
	DefaultBatchTimeout = time.Millisecond
	// MaxBatchTimeout bounds Config.BatchTimeout.
	MaxBatchTimeout  = time.Second
	DefaultBatchSize = steer.BatchSize

	// MinFrameSize is the smallest Config.FrameSize, the kernel's
	// XDP_UMEM_MIN_CHUNK_SIZE; the largest is the page size.
	MinFrameSize = 2048
	// MaxUMEMSize bounds NumFrames*FrameSize, so that a typo cannot pin
	// gigabytes of memory.
	MaxUMEMSize = 1 << 30
	// MaxRingSize bounds Config.RingSize.
	MaxRingSize = 1 << 20
	// MaxGroupSize bounds the sockets of a Group.
	MaxGroupSize = 1024
)

// BindMode chooses between zero copy and copy mode at bind time.
type BindMode uint8

const (
	// BindAuto asks for zero copy and lets the kernel fall back to copy
	// mode where the driver has no zero-copy support (bind without
	// XDP_ZEROCOPY or XDP_COPY). Info.ZeroCopy says which one it got.
	BindAuto BindMode = iota
	// BindZeroCopy insists on zero copy (XDP_ZEROCOPY): Open fails on a
	// driver without it, such as veth.
	BindZeroCopy
	// BindCopy insists on copy mode (XDP_COPY).
	BindCopy
)

// String returns "auto", "zerocopy" or "copy".
func (m BindMode) String() string { return bindNames.name(uint8(m)) }

// MarshalText encodes the mode by its String name.
func (m BindMode) MarshalText() ([]byte, error) { return bindNames.marshal(uint8(m)) }

// UnmarshalText parses a bind mode's String name, in any case. On error m
// is unchanged.
func (m *BindMode) UnmarshalText(b []byte) error { return unmarshalMode(bindNames, b, m) }

// AttachMode is how an XDP program is attached to the interface.
type AttachMode uint8

const (
	// AttachAuto tries the driver's own XDP hook (native) and falls back
	// to the generic hook on the skb path.
	AttachAuto AttachMode = iota
	// AttachNative attaches in the driver (XDP_FLAGS_DRV_MODE) or fails.
	AttachNative
	// AttachGeneric attaches on the generic, skb-based hook
	// (XDP_FLAGS_SKB_MODE), which every device has: the kernel has built an
	// skb before the program runs, so it costs more per frame.
	AttachGeneric
	// AttachNone attaches no program: Open's socket receives nothing
	// until the caller puts it into an XSKMAP of a program of its own (see
	// Source.SyscallConn). In Info it means that no program of this
	// package is attached (a Group before its Steering).
	AttachNone
)

// String returns "auto", "native", "generic" or "none".
func (m AttachMode) String() string { return attachNames.name(uint8(m)) }

// MarshalText encodes the mode by its String name.
func (m AttachMode) MarshalText() ([]byte, error) { return attachNames.marshal(uint8(m)) }

// UnmarshalText parses an attach mode's String name, in any case. On
// error m is unchanged.
func (m *AttachMode) UnmarshalText(b []byte) error { return unmarshalMode(attachNames, b, m) }

// HostMode says what the XDP program does with the frames the host itself
// needs on the interface (Config.Host).
type HostMode uint8

const (
	// HostRefuse refuses an interface that has addresses (any but IPv6
	// link-local ones): Open and OpenGroup return an error wrapping
	// ErrHostAddrs that names them.
	HostRefuse HostMode = iota
	// HostPass passes the frames the host needs to the kernel stack,
	// counted: ARP, IPv6 neighbour discovery, and packets to the
	// interface's addresses as Open or OpenGroup read them (with its IPv4
	// subnets' broadcast addresses and 255.255.255.255).
	HostPass
	// HostTake takes every frame of the queue, the host's own included,
	// for a port given over to capture.
	HostTake
)

// String returns "refuse", "pass" or "take".
func (m HostMode) String() string { return hostNames.name(uint8(m)) }

// MarshalText encodes the mode by its String name.
func (m HostMode) MarshalText() ([]byte, error) { return hostNames.marshal(uint8(m)) }

// UnmarshalText parses a host mode's String name, in any case. On error m
// is unchanged.
func (m *HostMode) UnmarshalText(b []byte) error { return unmarshalMode(hostNames, b, m) }

// modeNames are an enum's names, indexed by value.
type modeNames struct {
	kind  string // the type's name, for values out of range
	what  string // what a value is, for errors
	names []string
}

var (
	bindNames   = modeNames{"BindMode", "bind mode", []string{BindAuto: "auto", BindZeroCopy: "zerocopy", BindCopy: "copy"}}
	attachNames = modeNames{"AttachMode", "attach mode", []string{AttachAuto: "auto", AttachNative: "native", AttachGeneric: "generic", AttachNone: "none"}}
	hostNames   = modeNames{"HostMode", "host mode", []string{HostRefuse: "refuse", HostPass: "pass", HostTake: "take"}}
)

// name returns v's name, or kind(v) when v is out of range.
func (n modeNames) name(v uint8) string {
	if int(v) < len(n.names) {
		return n.names[v]
	}
	return fmt.Sprintf("%s(%d)", n.kind, v)
}

// marshal returns v's name, or an error wrapping steer.ErrConfig when v is out
// of range.
func (n modeNames) marshal(v uint8) ([]byte, error) {
	if int(v) >= len(n.names) {
		return nil, fmt.Errorf("afxdp: %w: unknown %s %d", steer.ErrConfig, n.what, v)
	}
	return []byte(n.names[v]), nil
}

// unmarshalMode sets *m to the value named b, in any case, or returns an
// error wrapping steer.ErrConfig and leaves *m as it was.
func unmarshalMode[T ~uint8](n modeNames, b []byte, m *T) error {
	for i, name := range n.names {
		if strings.EqualFold(name, string(b)) {
			*m = T(i)
			return nil
		}
	}
	return fmt.Errorf("afxdp: %w: unknown %s %q (want %s)", steer.ErrConfig, n.what, b, strings.Join(n.names, ", "))
}

// Config tunes a Source. The zero value is usable: every zero field takes
// the default named beside it.
type Config struct {
	// Queue is the NIC receive queue the socket binds to (sxdp_queue_id).
	// Only frames that arrive on this queue reach the socket; the others
	// go on to the kernel stack. Default 0.
	Queue int
	// NumFrames is the number of UMEM chunks, a power of two. Every frame
	// in flight (in the FILL ring, the RX ring, or held by a handler)
	// occupies one. Default DefaultNumFrames.
	NumFrames int
	// FrameSize is the UMEM chunk size, a power of two between
	// MinFrameSize (2048, XDP_UMEM_MIN_CHUNK_SIZE) and the page size. The
	// kernel writes a frame 256 bytes (XDP_PACKET_HEADROOM) into its chunk,
	// so the longest frame it can take is FrameSize-256 bytes: longer ones
	// are dropped and counted in Stats.RxDropped. Default
	// DefaultFrameSize.
	FrameSize int
	// RingSize is the number of RX ring entries, a power of two. (The FILL
	// ring has NumFrames entries, so that every chunk always has a slot in
	// it.) Default DefaultRingSize.
	RingSize int
	// BatchSize is the most frames one ReadBatch call returns. Default
	// DefaultBatchSize (steer.BatchSize).
	BatchSize int
	// BatchTimeout is how long the reader waits for its RX ring to fill
	// before it hands frames over, as a TPACKET_V3 block is handed over
	// when it is full or its retire timeout passes. An AF_XDP socket is
	// readable as soon as one frame is in its ring, so without the wait a
	// reader wakes up and hands a batch on for every few frames, and those
	// wake-ups and hand-offs, not the frames, are what a reader spends most
	// on. With it, ReadBatch gathers: it waits until the ring holds a
	// quarter of RingSize (BatchSize at least) or BatchTimeout has passed
	// since the gather began, then hands over everything the ring holds,
	// BatchSize frames a call, without waiting again. A gather begins when
	// the reader finds a frame in an idle ring, or as the one before ends
	// while frames keep coming. So at high rates one wake-up serves many
	// full batches, and a frame waits BatchTimeout at most. The wait (ppoll(2))
	// may run over by the kernel's timer slack, 50 µs for a normal thread;
	// Close and the context's end cut it short. Frames are timestamped when
	// ReadBatch takes them, after the wait.
	//
	// The RX ring must hold what arrives meanwhile: BatchTimeout times the
	// frame rate, plus whatever the reader's other stalls let pile up, must
	// stay below RingSize, or the kernel drops (Stats.RxRingFull).
	//
	// Negative hands frames over as soon as the ring has any. Default
	// DefaultBatchTimeout; at most MaxBatchTimeout.
	BatchTimeout time.Duration
	// PollTimeout is how long ReadBatch waits for a frame before it returns
	// an empty batch and a nil error. Negative waits until a frame, ctx's
	// end or Close. Default DefaultPollTimeout.
	PollTimeout time.Duration
	// Bind chooses zero copy or copy mode. Default BindAuto.
	Bind BindMode
	// PassUnhashed makes Open's program pass the frames of the queue that
	// it cannot hash (non-IP such as ARP, malformed headers: user space
	// gives them HashType NONE) to the kernel stack, counted in
	// Stats.PassedToKernel, instead of redirecting them to the socket: the
	// host keeps answering ARP and neighbour discovery on the interface.
	// Open then attaches the library's steering program (with one socket)
	// instead of its smallest one, at some cost a frame: the program parses
	// each frame's headers and hashes it. Without it the socket takes every
	// frame of its queue, as a Steering's group does without
	// kgroup.Options.PassUnhashed. A Group's sockets ignore it: their
	// Steering's options decide. Default false.
	PassUnhashed bool
	// Host says what becomes of the frames the host itself needs on the
	// interface (its ARP, its operator's connections), which the sockets
	// would take from the kernel stack. Default HostRefuse.
	Host HostMode
	// Attach chooses the XDP hook of the program Open attaches (OpenGroup
	// attaches none; its Steering does, with this mode). Default
	// AttachAuto.
	Attach AttachMode
	// Copy makes ReadBatch copy the frames into a pooled buffer and give
	// their chunks back to the FILL ring at once, for handlers that keep
	// frames or hold batches for long. Without it frames are views into
	// the UMEM.
	Copy bool
	// SnapLen, when positive, cuts every frame's Data to SnapLen bytes.
	// Frame.WireLen still says the full length. (The kernel copies whole
	// frames into the UMEM either way.)
	SnapLen int
	// Filter is a capture filter run in user space on every frame
	// (filter.Program.Match), after the frame has left the kernel: the XDP
	// program cannot run classic BPF. Frames it rejects are counted in
	// Stats.Filtered (SourceStats.Filtered) and their chunks go straight
	// back to the FILL ring; they do not reach the kernel stack either
	// (see the package documentation). The frames it accepts are cut to
	// its return value. The program must run in user space
	// (filter.Program.UserSpace), so a filter compiled for a live
	// interface that reads the out-of-band VLAN tag is refused: compile it
	// for a file (filter.Options without Interface), which reads tags in
	// the bytes, as XDP sees them.
	Filter *filter.Program
	// Promisc puts the interface in promiscuous mode while the socket is
	// open (a group's while the Group is): the frames sent to other MAC
	// addresses reach the XDP program too, on a NIC that filters them.
	// The kernel counts promiscuity per holder, as for tcpdump: a helper
	// AF_PACKET socket that receives nothing holds a PACKET_MR_PROMISC
	// membership, and Close (or the process's exit) gives it back, so
	// the interface leaves promiscuous mode unless someone else holds it.
	Promisc bool
	// SendFrames, a power of two or zero, adds that many chunks to the
	// UMEM that the FILL ring never gets, for a socket that sends through
	// the same UMEM and queue (XDP_SHARED_UMEM), which the kernel
	// requires of a socket that sends on a queue a Source holds; see
	// Sending in the package documentation. Default 0, none.
	SendFrames int
}

// withDefaults returns c with the zero fields set and checks it.
func (c Config) withDefaults() (Config, error) {
	c.NumFrames = cmp.Or(c.NumFrames, DefaultNumFrames)
	c.FrameSize = cmp.Or(c.FrameSize, DefaultFrameSize)
	c.RingSize = cmp.Or(c.RingSize, DefaultRingSize)
	c.BatchSize = cmp.Or(c.BatchSize, DefaultBatchSize)
	c.PollTimeout = cmp.Or(c.PollTimeout, DefaultPollTimeout)
	c.BatchTimeout = cmp.Or(c.BatchTimeout, DefaultBatchTimeout)
	if err := checkUMEM(c.Queue, c.NumFrames, c.FrameSize); err != nil {
		return c, err
	}
	switch {
	case c.SendFrames < 0 || c.SendFrames > 0 && !pow2(c.SendFrames):
		return c, fmt.Errorf("afxdp: %w: %d send frames is not zero or a power of two", steer.ErrConfig, c.SendFrames)
	case c.SendFrames > MaxUMEMSize/c.FrameSize-c.NumFrames:
		return c, fmt.Errorf("afxdp: %w: UMEM of %d+%d frames of %d bytes exceeds %d bytes", steer.ErrConfig, c.NumFrames, c.SendFrames, c.FrameSize, MaxUMEMSize)
	case c.RingSize < 0 || !pow2(c.RingSize) || c.RingSize > MaxRingSize:
		return c, fmt.Errorf("afxdp: %w: ring size %d is not a power of two up to %d", steer.ErrConfig, c.RingSize, MaxRingSize)
	case c.BatchSize < 0:
		return c, fmt.Errorf("afxdp: %w: negative batch size %d", steer.ErrConfig, c.BatchSize)
	case c.BatchTimeout > MaxBatchTimeout:
		return c, fmt.Errorf("afxdp: %w: batch timeout %v exceeds %v", steer.ErrConfig, c.BatchTimeout, MaxBatchTimeout)
	case c.SnapLen < 0:
		return c, fmt.Errorf("afxdp: %w: negative snap length %d", steer.ErrConfig, c.SnapLen)
	case c.Bind > BindCopy:
		return c, fmt.Errorf("afxdp: %w: unknown bind mode %d", steer.ErrConfig, c.Bind)
	case c.Attach > AttachNone:
		return c, fmt.Errorf("afxdp: %w: unknown attach mode %d", steer.ErrConfig, c.Attach)
	case c.Host > HostTake:
		return c, fmt.Errorf("afxdp: %w: unknown host mode %d", steer.ErrConfig, c.Host)
	}
	if c.Filter != nil {
		if err := c.Filter.UserSpace(); err != nil {
			return c, fmt.Errorf("afxdp: %w: the filter must run in user space: %w", steer.ErrConfig, err)
		}
	}
	return c, nil
}

// checkUMEM checks a socket's queue and its UMEM's geometry.
func checkUMEM(queue, frames, frameSize int) error {
	page := os.Getpagesize()
	switch {
	case queue < 0 || queue > 1<<16-1:
		return fmt.Errorf("afxdp: %w: queue %d is not between 0 and 65535", steer.ErrConfig, queue)
	case !pow2(frames):
		return fmt.Errorf("afxdp: %w: %d frames is not a power of two", steer.ErrConfig, frames)
	case frameSize < MinFrameSize || frameSize > page || !pow2(frameSize):
		return fmt.Errorf("afxdp: %w: frame size %d is not a power of two between %d and the page size %d", steer.ErrConfig, frameSize, MinFrameSize, page)
	case frames > MaxUMEMSize/frameSize:
		return fmt.Errorf("afxdp: %w: UMEM of %d frames of %d bytes exceeds %d bytes", steer.ErrConfig, frames, frameSize, MaxUMEMSize)
	}
	return nil
}

// validateGroup checks a group's size before any socket is opened.
func validateGroup(n int) error {
	if n < 1 || n > MaxGroupSize {
		return fmt.Errorf("afxdp: %w: %d sockets in a group, need 1..%d", steer.ErrConfig, n, MaxGroupSize)
	}
	return nil
}

func pow2(n int) bool { return n > 0 && n&(n-1) == 0 }

// Stats are a socket's counters, running from Open. The Rx fields are the
// kernel's XDP_STATISTICS, which the kernel keeps per socket and does not
// reset on read.
type Stats struct {
	// Delivered is the number of frames ReadBatch handed out.
	Delivered uint64
	// Filtered is the number of frames Config.Filter rejected.
	Filtered uint64
	// RxDropped counts frames the kernel dropped for the socket for lack
	// of a buffer (copy mode: the FILL ring was empty) or because they did
	// not fit in a chunk (rx_dropped).
	RxDropped uint64
	// RxInvalidDescs is the kernel's rx_invalid_descs plus the RX
	// descriptors ReadBatch found outside the UMEM and skipped; nonzero
	// means a bug. (The kernel counts a bad address in the FILL ring on
	// the FILL ring, which XDP_STATISTICS does not report.)
	RxInvalidDescs uint64
	// RxRingFull counts frames dropped because the RX ring was full: the
	// reader did not keep up (rx_ring_full).
	RxRingFull uint64
	// RxFillRingEmptyDescs counts the times the kernel found the FILL ring
	// empty when it wanted a buffer (rx_fill_ring_empty_descs): once per
	// frame in copy mode, once per refill attempt in a zero-copy driver.
	// It counts events, not frames. It belongs to the FILL ring, which the
	// sockets of a group share: the kernel reports the one count on every
	// socket, and this package on the first (the ring's owner) only, zero
	// on the others, so that sums over sockets (Group.Stats, the
	// dispatcher's and steer/metrics' sums over sources) are right.
	RxFillRingEmptyDescs uint64
	// PassedToKernel counts the frames of the socket's queue that Open's
	// program passed to the kernel stack: with Config.PassUnhashed those
	// it could not hash, with HostPass the host's own. They never reached
	// the socket, so they are not in Received. Zero for a Group's sockets
	// (see the Steering's unhashed_passed and host_passed). It stops
	// counting when the program is detached (StopIntake, Close).
	PassedToKernel uint64
}

// Received is the number of frames the kernel redirected to the socket:
// Delivered + Filtered + RxDropped + RxRingFull, once the RX ring is
// drained.
func (s Stats) Received() uint64 {
	return s.Delivered + s.Filtered + s.RxDropped + s.RxRingFull
}

// Add returns the sum of s and o, field by field.
func (s Stats) Add(o Stats) Stats {
	return Stats{
		Delivered:            s.Delivered + o.Delivered,
		Filtered:             s.Filtered + o.Filtered,
		RxDropped:            s.RxDropped + o.RxDropped,
		RxInvalidDescs:       s.RxInvalidDescs + o.RxInvalidDescs,
		RxRingFull:           s.RxRingFull + o.RxRingFull,
		RxFillRingEmptyDescs: s.RxFillRingEmptyDescs + o.RxFillRingEmptyDescs,
		PassedToKernel:       s.PassedToKernel + o.PassedToKernel,
	}
}

// Info describes an open socket.
type Info struct {
	Ifname  string
	Ifindex int
	Queue   int
	// Attach is how the XDP program that feeds the socket is attached:
	// AttachNative or AttachGeneric, or AttachNone when this package
	// attached none (Config.Attach AttachNone, a Group before its
	// Steering).
	Attach AttachMode
	// ZeroCopy reports that the driver DMAs frames straight into the UMEM
	// (XDP_OPTIONS_ZEROCOPY); false is copy mode, where the kernel copies
	// each frame into a chunk.
	ZeroCopy bool
}

// Mode returns "zerocopy" or "copy".
func (i Info) Mode() string {
	if i.ZeroCopy {
		return "zerocopy"
	}
	return "copy"
}
