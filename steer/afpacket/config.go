package afpacket

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/filter"
)

// Sentinel errors, for errors.Is. An invalid Config or argument is an
// error wrapping steer.ErrConfig, as in every package of the module.
var (
	// ErrNotSupported is returned on systems without AF_PACKET.
	ErrNotSupported = errors.New("afpacket: not supported on this system")
	// ErrClosed is returned by a Source or Group used after Close. It wraps
	// net.ErrClosed, so errors.Is(err, net.ErrClosed) holds too.
	ErrClosed = fmt.Errorf("afpacket: source closed: %w", net.ErrClosed)
)

// Defaults for the zero values of Config. They give a 4 MiB ring per socket.
const (
	DefaultBlockSize    = 256 << 10 // tp_block_size: 256 KiB
	DefaultNumBlocks    = 16        // tp_block_nr
	DefaultFrameSize    = 2048      // tp_frame_size (TPACKET_V3 only checks it)
	DefaultBlockTimeout = 10 * time.Millisecond
	DefaultPollTimeout  = 100 * time.Millisecond
	DefaultBatchSize    = steer.BatchSize

	// MaxRingSize bounds BlockSize*NumBlocks, so that a typo cannot pin
	// gigabytes of kernel memory.
	MaxRingSize = 1 << 30
	// MaxFilterLen is the kernel's BPF_MAXINSNS.
	MaxFilterLen = 4096

	// tpacketAlignment is TPACKET_ALIGNMENT, and minFrameSize is
	// TPACKET3_HDRLEN (48 + sizeof(struct sockaddr_ll)) rounded up to it.
	tpacketAlignment = 16
	minFrameSize     = 80
)

// Config tunes a Source. The zero value is usable: every zero field takes
// the default named beside it.
type Config struct {
	// BlockSize is the size of one ring block (tp_block_size), a multiple
	// of the page size. The kernel fills a block with as many frames as fit
	// and hands the whole block over at once, so a frame (after the snap
	// length) never exceeds a block. Default DefaultBlockSize.
	BlockSize int
	// NumBlocks is the number of blocks in the ring (tp_block_nr), at least
	// 2. Default DefaultNumBlocks.
	NumBlocks int
	// FrameSize is tp_frame_size, a multiple of 16 between 80 and
	// BlockSize. TPACKET_V3 packs frames of any size into blocks and uses it
	// only for the kernel's sanity checks. Default DefaultFrameSize.
	FrameSize int
	// BlockTimeout is tp_retire_blk_tov: how long the kernel waits before
	// handing over a block that is not full. It bounds the latency at low
	// rates. Between 1ms and 60s, in whole milliseconds. Default
	// DefaultBlockTimeout.
	BlockTimeout time.Duration
	// PollTimeout is how long ReadBatch waits for a block before it returns
	// an empty batch and a nil error. Negative waits until a block, ctx's
	// end or Close. Default DefaultPollTimeout.
	PollTimeout time.Duration
	// BatchSize is the most frames one ReadBatch call returns; a block with
	// more frames is handed out over several calls and returned to the
	// kernel when every batch taken from it is released. Default
	// DefaultBatchSize (steer.BatchSize).
	BatchSize int
	// SnapLen, when positive, truncates every frame to SnapLen bytes; the
	// kernel then copies only that much into the ring (it is the return
	// value of the socket filter). Frame.WireLen still says the full length.
	SnapLen int
	// Promisc puts the interface in promiscuous mode while the socket is
	// open (PACKET_MR_PROMISC membership, undone by the kernel on close).
	Promisc bool
	// IgnoreOutgoing skips the frames the host sends (PACKET_IGNORE_OUTGOING;
	// in a fanout group, PACKET_FANOUT_FLAG_IGNORE_OUTGOING as well).
	IgnoreOutgoing bool
	// Filter is a classic BPF program attached with SO_ATTACH_FILTER, run
	// by the kernel on every frame before it reaches the ring: its return
	// value is the number of bytes to keep (clamped to SnapLen), 0 drops
	// the frame, which is then counted nowhere (not in tp_packets). In a
	// fanout group every socket carries it once the group is complete (see
	// OpenGroup). CompileFilter makes one from tcpdump's syntax.
	Filter []SockFilter
	// Copy makes ReadBatch copy the frames into a pooled buffer and give the
	// ring block back at once, for handlers that keep frames or hold batches
	// for long. Without it frames are views into the ring (zero copy).
	Copy bool
	// FillRxHash asks for the skb's hash (TP_FT_REQ_FILL_RXHASH, TPACKET_V3
	// only) as Frame.FlowID, HashType OPAQUE_HASH: skb_get_hash, the NIC's
	// RSS hash when the driver set an L4 one (Toeplitz with its key, random
	// per boot on most NICs), else the kernel's SipHash flow hash; an
	// outgoing frame's is its socket's random txhash. Consistent per flow
	// and direction, but neither matches the dispatcher's key.
	FillRxHash bool
}

// CompileFilter returns the program for a filter in tcpdump's syntax
// ("tcp port 80", or its words as separate arguments), or for a program text
// as `tcpdump -dd` prints it, for Config.Filter on the interface named
// ifname: an expression is compiled as `tcpdump -i ifname` would attach it,
// which on Linux also matches the 802.1Q tag the kernel has taken out of
// the frame (see package steer/filter). Call it where Open will be called,
// in the interface's network namespace. Its errors are steer/filter's:
// ErrExpression for an expression libpcap rejects, ErrNoCompiler for one
// only tcpdump compiles when tcpdump is not installed.
func CompileFilter(ifname string, expr ...string) ([]SockFilter, error) {
	p, err := filter.Compile(filter.Options{Interface: ifname}, expr...)
	if err != nil {
		return nil, err
	}
	return SockFilters(p), nil
}

// SockFilters returns p's instructions as Config.Filter takes them.
func SockFilters(p *filter.Program) []SockFilter {
	raw := p.Instructions()
	out := make([]SockFilter, len(raw))
	for i, ins := range raw {
		out[i] = SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	return out
}

// withDefaults returns c with the zero fields set and checks it.
func (c Config) withDefaults() (Config, error) {
	c.BlockSize = cmp.Or(c.BlockSize, DefaultBlockSize)
	c.NumBlocks = cmp.Or(c.NumBlocks, DefaultNumBlocks)
	c.FrameSize = cmp.Or(c.FrameSize, min(DefaultFrameSize, c.BlockSize))
	c.BlockTimeout = cmp.Or(c.BlockTimeout, DefaultBlockTimeout)
	c.PollTimeout = cmp.Or(c.PollTimeout, DefaultPollTimeout)
	c.BatchSize = cmp.Or(c.BatchSize, DefaultBatchSize)
	page := os.Getpagesize()
	switch {
	case c.BlockSize < 0 || c.BlockSize%page != 0:
		return c, fmt.Errorf("afpacket: %w: block size %d is not a positive multiple of the page size %d", steer.ErrConfig, c.BlockSize, page)
	case c.NumBlocks < 2:
		return c, fmt.Errorf("afpacket: %w: %d blocks, need at least 2", steer.ErrConfig, c.NumBlocks)
	case c.BlockSize > MaxRingSize || c.NumBlocks > MaxRingSize/c.BlockSize:
		return c, fmt.Errorf("afpacket: %w: ring of %d blocks of %d bytes exceeds %d bytes", steer.ErrConfig, c.NumBlocks, c.BlockSize, MaxRingSize)
	case c.FrameSize < minFrameSize || c.FrameSize%tpacketAlignment != 0:
		return c, fmt.Errorf("afpacket: %w: frame size %d is not a multiple of %d of at least %d", steer.ErrConfig, c.FrameSize, tpacketAlignment, minFrameSize)
	case c.FrameSize > c.BlockSize:
		return c, fmt.Errorf("afpacket: %w: frame size %d exceeds the block size %d", steer.ErrConfig, c.FrameSize, c.BlockSize)
	case c.BlockTimeout < time.Millisecond || c.BlockTimeout > time.Minute || c.BlockTimeout%time.Millisecond != 0:
		return c, fmt.Errorf("afpacket: %w: block timeout %v is not whole milliseconds between 1ms and 1m", steer.ErrConfig, c.BlockTimeout)
	case c.BatchSize < 0:
		return c, fmt.Errorf("afpacket: %w: negative batch size %d", steer.ErrConfig, c.BatchSize)
	case c.SnapLen < 0:
		return c, fmt.Errorf("afpacket: %w: negative snap length %d", steer.ErrConfig, c.SnapLen)
	case len(c.Filter) > MaxFilterLen:
		return c, fmt.Errorf("afpacket: %w: filter of %d instructions exceeds %d", steer.ErrConfig, len(c.Filter), MaxFilterLen)
	}
	return c, nil
}

// Stats are a socket's counters. The kernel's counters (PACKET_STATISTICS)
// are reset by every read, so the Source adds them up; the totals run from
// Open.
type Stats struct {
	// Packets is the number of frames the kernel passed to the socket after
	// its filter, whether it found room for them or not (tp_packets, which
	// for TPACKET_V3 includes Drops).
	Packets uint64
	// Drops is the number of those frames dropped because the ring had no
	// free block (tp_drops). Packets - Drops frames reached the ring.
	Drops uint64
	// FreezeQueueCount counts the times the kernel found the next block
	// still held by user space and froze the ring until it came back
	// (tp_freeze_q_cnt).
	FreezeQueueCount uint64
	// Delivered is the number of frames ReadBatch handed out. Once the ring
	// is drained it equals Packets - Drops.
	Delivered uint64
	// Blocks is the number of ring blocks ReadBatch took from the kernel.
	Blocks uint64
}

// Add returns the sum of s and o, field by field.
func (s Stats) Add(o Stats) Stats {
	return Stats{
		Packets:          s.Packets + o.Packets,
		Drops:            s.Drops + o.Drops,
		FreezeQueueCount: s.FreezeQueueCount + o.FreezeQueueCount,
		Delivered:        s.Delivered + o.Delivered,
		Blocks:           s.Blocks + o.Blocks,
	}
}

// FanoutMode is how the kernel spreads a fanout group's frames over its
// sockets (PACKET_FANOUT_*). Only HASH and EBPF keep every frame of a flow
// on one socket by construction.
type FanoutMode uint8

const (
	// FanoutHash picks the socket by the high bits of a symmetric flow
	// hash the kernel computes for the fanout (PACKET_FANOUT_HASH:
	// __skb_get_hash_symmetric, SipHash over sorted addresses and ports),
	// not the skb's (nor the NIC's): a flow, both its directions, stays on
	// one socket while the group's size does not change. IPv4 fragments
	// hash by their addresses only, unless with FanoutFlagDefrag.
	FanoutHash FanoutMode = 0
	// FanoutLB deals frames round robin (PACKET_FANOUT_LB); flows are
	// spread by load, not kept together.
	FanoutLB FanoutMode = 1
	// FanoutCPU picks the socket from the CPU the tap runs on
	// (PACKET_FANOUT_CPU: smp_processor_id() % sockets): the NIC queue's
	// interrupt CPU, or the one RPS or RFS chose. On a single-queue NIC
	// without RPS that is one CPU; RPS spreads frames over rps_cpus, and
	// RFS may move a flow.
	FanoutCPU FanoutMode = 2
	// FanoutRollover fills one socket and moves to the next when it is
	// full (PACKET_FANOUT_ROLLOVER); flows are spread by load.
	FanoutRollover FanoutMode = 3
	// FanoutRandom picks a random socket (PACKET_FANOUT_RND); flows are
	// not kept together.
	FanoutRandom FanoutMode = 4
	// FanoutQM picks the socket from the frame's recorded RX queue
	// (PACKET_FANOUT_QM); flows follow the NIC's queue choice.
	FanoutQM FanoutMode = 5
	// FanoutEBPF lets an eBPF socket-filter program return the socket
	// index (PACKET_FANOUT_EBPF, set with Group.SetEBPF); a flow stays on
	// one socket if the program says so.
	FanoutEBPF FanoutMode = 7
)

var fanoutModeNames = map[FanoutMode]string{
	FanoutHash: "hash", FanoutLB: "lb", FanoutCPU: "cpu", FanoutRollover: "rollover",
	FanoutRandom: "rnd", FanoutQM: "qm", FanoutEBPF: "ebpf",
}

// String returns the mode's short name, such as "hash".
func (m FanoutMode) String() string {
	if n, ok := fanoutModeNames[m]; ok {
		return n
	}
	return fmt.Sprintf("FanoutMode(%d)", uint8(m))
}

// FanoutFlag modifies a fanout group (PACKET_FANOUT_FLAG_*).
type FanoutFlag uint16

const (
	// FanoutFlagRollover moves a frame to another socket when the chosen
	// one's ring is full (PACKET_FANOUT_FLAG_ROLLOVER). It trades flow
	// affinity for fewer drops. Not allowed with FanoutRollover.
	FanoutFlagRollover FanoutFlag = 0x1000
	// FanoutFlagIgnoreOutgoing skips frames the host sends
	// (PACKET_FANOUT_FLAG_IGNORE_OUTGOING). OpenGroup sets it when
	// Config.IgnoreOutgoing is set, because the group's kernel hook, not
	// the socket's, decides.
	FanoutFlagIgnoreOutgoing FanoutFlag = 0x4000
	// FanoutFlagDefrag reassembles IP fragments before choosing a socket
	// (PACKET_FANOUT_FLAG_DEFRAG): a datagram's fragments hash alike.
	FanoutFlagDefrag FanoutFlag = 0x8000

	fanoutFlagUniqueID FanoutFlag = 0x2000 // PACKET_FANOUT_FLAG_UNIQUEID
	fanoutFlagsKnown              = FanoutFlagRollover | FanoutFlagIgnoreOutgoing | FanoutFlagDefrag
)

// validateFanout checks a mode and flags before any socket is opened.
func validateFanout(n int, mode FanoutMode, flags FanoutFlag) error {
	if _, ok := fanoutModeNames[mode]; !ok {
		return fmt.Errorf("afpacket: %w: unknown fanout mode %d", steer.ErrConfig, mode)
	}
	if flags&^fanoutFlagsKnown != 0 {
		return fmt.Errorf("afpacket: %w: unknown fanout flags %#x", steer.ErrConfig, uint16(flags&^fanoutFlagsKnown))
	}
	if mode == FanoutRollover && flags&FanoutFlagRollover != 0 {
		return fmt.Errorf("afpacket: %w: the rollover flag is not allowed in rollover mode", steer.ErrConfig)
	}
	if n < 1 || n > maxFanoutMembers {
		return fmt.Errorf("afpacket: %w: %d sockets in a fanout group, need 1..%d", steer.ErrConfig, n, maxFanoutMembers)
	}
	return nil
}

// maxFanoutMembers is the kernel's default group size (PACKET_FANOUT_MAX
// for the int form of the option).
const maxFanoutMembers = 256
