package steer

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"time"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/affinity"
	"github.com/rpsgo/rps/internal/rfstable"
)

// Limits and defaults of the configuration.
const (
	DefaultQLimit       = 256                   // frames, for inputs that drop (net.isr.defaultqlimit)
	DefaultWaitQLimit   = 512                   // frames, for inputs that wait (a file), which lose no latency
	MaxQLimit           = 10240                 // the largest queue limit (net.isr.maxqlimit)
	DefaultBuckets      = 128                   // the indirection table's size (RSS_TABLE_MAXLEN)
	BatchSize           = 64                    // the most frames handed to a worker at once
	DefaultStallTimeout = 50 * time.Millisecond // longer than a garbage collection, short for a live ring
	// maxBuckets is the largest indirection table.
	maxBuckets = 1 << 16
	// minKeyLen is the shortest Toeplitz key the dispatcher takes: the
	// longest input it hashes (an IPv6 4-tuple, 36 bytes) plus 4.
	minKeyLen = 40
)

// ErrConfig is wrapped by every configuration error of [New].
var ErrConfig = errors.New("invalid configuration")

// Config configures a [Dispatcher]. The zero value is safe: a worker per
// CPU, the RSS policy over 128 buckets, deferred dispatch, a random key,
// queues that hold back a file and drop for a live source: FreeBSD with
// options RSS. New says what to change in a configuration that cannot steer.
type Config struct {
	Workers int   // zero: len(CPUs) when set, else DefaultWorkers()
	CPUs    []int // pins worker i to CPUs[i % len(CPUs)] (Linux only); empty: unpinned

	Policy Policy // default PolicyRSS
	// CPUFunc is PolicyCPU's: a frame's worker, or ok=false for PolicySource.
	CPUFunc func(flowid uint32, ht hash.HashType) (worker int, ok bool) `json:"-"`
	// Buckets is the table's size, a power of two, with PolicyRSS at least
	// Workers (unless RFS places the flows). Default 128 or more.
	Buckets  int
	Dispatch DispatchMode // default DispatchDeferred

	Hash HashConfig
	// VerifyChecksums verifies IPv4, TCP and UDP checksums in the worker
	// when the source did not (Packet.Checksum); it reads every byte.
	VerifyChecksums bool
	Queue           QueueConfig
	RFS             RFSConfig
	Rebalance       RebalanceConfig

	TickInterval time.Duration   // how often Ticker states tick; zero: one second
	Logger       *slog.Logger    `json:"-"` // nil: slog.Default(); gets panics (a record a second) and Close errors
	OnPanic      func(PanicInfo) `json:"-"` // when set, gets every recovered panic instead of Logger
	Trace        func(*Decision) `json:"-"` // when set, gets every frame's Decision; slows dispatch
}

// HashConfig configures the flowid: the hash and its key, the tuples
// hashed (FreeBSD's rss_config.c), and whether tunnels are opened.
type HashConfig struct {
	// Algorithm is Toeplitz by default, as a NIC's; SipHash resists an
	// attacker who observes collisions.
	Algorithm hash.Algorithm
	// Key is the key: for Toeplitz 40 (a 36-byte IPv6 4-tuple plus 4) to
	// hash.MaxKeyLen bytes, for SipHash hash.SipHashKeyLen. Nil: a random
	// key; a known one (hash.MicrosoftKey) lets anyone aim flows at a worker.
	Key       []byte `json:"-"`
	Symmetric bool   // both directions of a connection get one flowid
	// Types is the set of hash types in use (rss_gethashconfig): TCP and
	// UDP (and SCTP) get a 4-tuple when their type is in it. It must hold
	// TypeIPv4 and TypeIPv6. Zero: hash.DefaultTypes (TCP 4-tuples only).
	Types hash.Types
	// UDP4Tuple adds UDP's 4-tuple types. Off, as in FreeBSD: a datagram's
	// fragments, which carry no ports, could reach another worker.
	UDP4Tuple bool
	Tunnels   TunnelMode   // default TunnelsOuter
	Fragments FragmentMode // default FragmentsTuple
	// VXLANPorts are VXLAN's UDP ports under TunnelsInner; nil: VXLANPort.
	// GENEVE's (6081), GTP-U's (2152) and MPLS over UDP's (6635) are fixed.
	VXLANPorts []uint16
}

// QueueConfig configures the workers' queues.
type QueueConfig struct {
	// Limit bounds each queue, in frames, whatever the batches' size. Zero:
	// DefaultQLimit for inputs that drop, DefaultWaitQLimit for those that
	// wait; at most MaxQLimit.
	Limit    int
	Overflow Overflow // what a full queue does to its input; default OverflowAuto
	// FlowLimit drops, while a queue is at least half full, the frames of
	// flows holding more than half of its recent history (skb_flow_limit).
	FlowLimit bool
	// StallTimeout is how long a full queue that does not move holds a live
	// source back, before its frames drop (StallDrops); 0: the default.
	StallTimeout time.Duration
}

// RFSConfig configures receive flow steering (Linux's RFS): a consumer
// names a flow's worker ([Dispatcher.SetDesired]) and the flow moves there
// without reordering.
type RFSConfig struct {
	Enabled   bool
	TableSize int // the flow tables' capacity, a power of two, 16 to 2^26; default 65536
}

// defaultRFSTableSize is the default capacity of the RFS flow tables.
const defaultRFSTableSize = 1 << 16

// PanicInfo describes a recovered panic of a user callback.
type PanicInfo struct {
	Callback string // "handler", "Tick", "MoveOut", "MoveIn", "Close", "Trace", "CPUFunc", "release", "Backlog"
	Worker   int    // the worker it ran for, -1 when none
	Value    any
	Summary  string // a handler's frame as Packet.String prints it, else the callback's name
	Stack    []byte
}

// DefaultWorkers is the number of CPUs the process may run on (its affinity).
func DefaultWorkers() int {
	if cpus, err := affinity.Allowed(); err == nil && len(cpus) > 0 {
		return len(cpus)
	}
	return runtime.NumCPU()
}

// normalized returns a copy of c with defaults filled in, or an error that
// says what to change.
func (c Config) normalized() (Config, error) {
	if err := c.normalizeWorkers(); err != nil {
		return c, err
	}
	if err := c.normalizeSteering(); err != nil {
		return c, err
	}
	if err := c.Hash.normalize(); err != nil {
		return c, err
	}
	if err := c.Queue.normalize(); err != nil {
		return c, err
	}
	if err := c.RFS.normalize(); err != nil {
		return c, err
	}
	if c.TickInterval < 0 {
		return c, fmt.Errorf("steer: tick interval %v is negative: set a positive interval, or zero for one second: %w", c.TickInterval, ErrConfig)
	}
	if c.TickInterval == 0 {
		c.TickInterval = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if err := c.Rebalance.normalize(); err != nil {
		return c, err
	}
	return c, nil
}

// normalizeWorkers checks the worker count and the CPUs to pin them to.
func (c *Config) normalizeWorkers() error {
	online, err := affinity.Allowed()
	if err != nil {
		return fmt.Errorf("steer: list CPUs: %w", err)
	}
	if len(c.CPUs) > 0 {
		if !affinity.Supported() {
			return fmt.Errorf("steer: pinning workers to CPUs on %s: %w", runtime.GOOS, affinity.ErrNotSupported)
		}
		ok := make(map[int]bool, len(online))
		for _, cpu := range online {
			ok[cpu] = true
		}
		for _, cpu := range c.CPUs {
			if !ok[cpu] {
				return fmt.Errorf("steer: CPU %d is not one the process may use (allowed: %v): %w", cpu, online, ErrConfig)
			}
		}
	}
	switch {
	case c.Workers < 0:
		return fmt.Errorf("steer: %d workers: want zero (the default) or more: %w", c.Workers, ErrConfig)
	case c.Workers == 0 && len(c.CPUs) > 0:
		c.Workers = len(c.CPUs)
	case c.Workers == 0:
		c.Workers = DefaultWorkers()
	}
	if c.Workers > 65535 {
		return fmt.Errorf("steer: %d workers exceed 65535: %w", c.Workers, ErrConfig)
	}
	return nil
}

// normalizeSteering checks the policy, the dispatch mode and the table.
func (c *Config) normalizeSteering() error {
	if c.Policy > PolicyCPU {
		return unknownName("policy", strconv.Itoa(int(c.Policy)), policyNames)
	}
	if c.Policy == PolicyCPU && c.CPUFunc == nil {
		return fmt.Errorf("steer: policy cpu needs a CPUFunc: %w", ErrConfig)
	}
	if c.Dispatch > DispatchDirect {
		return unknownName("dispatch mode", strconv.Itoa(int(c.Dispatch)), dispatchNames)
	}
	if c.Buckets == 0 {
		c.Buckets = max(DefaultBuckets, ceilPow2(c.Workers))
	}
	if c.Buckets < 1 || c.Buckets > maxBuckets || c.Buckets&(c.Buckets-1) != 0 {
		return fmt.Errorf("steer: %d buckets: want a power of two from 1 to %d: %w", c.Buckets, maxBuckets, ErrConfig)
	}
	if c.Policy == PolicyRSS && c.Buckets < c.Workers && !c.RFS.Enabled {
		return fmt.Errorf("steer: %d buckets for %d workers: only %d workers would get frames; use at least %d buckets: %w",
			c.Buckets, c.Workers, c.Buckets, ceilPow2(c.Workers), ErrConfig)
	}
	return nil
}

// ceilPow2 returns the least power of two >= n (1 for n <= 1).
func ceilPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// normalize checks the hash function, its key (or makes a random one),
// the hash types and the tunnel options.
func (h *HashConfig) normalize() error {
	if err := h.normalizeKey(); err != nil {
		return err
	}
	if h.Types == 0 {
		h.Types = hash.DefaultTypes
	}
	if h.UDP4Tuple {
		h.Types |= hash.TypeUDPIPv4 | hash.TypeUDPIPv6
	}
	if h.Types&^hash.AllTypes != 0 || !h.Types.Has(hash.TypeIPv4|hash.TypeIPv6) {
		return fmt.Errorf("steer: hash types %v: want a set of %v that holds ipv4 and ipv6 (fragments and other protocols hash by their addresses): %w",
			h.Types, hash.AllTypes, ErrConfig)
	}
	h.UDP4Tuple = h.Types.Has(hash.TypeUDPIPv4 | hash.TypeUDPIPv6)
	if h.Tunnels > TunnelsInner {
		return unknownName("tunnel mode", strconv.Itoa(int(h.Tunnels)), tunnelModeNames)
	}
	if h.Fragments > FragmentsFollow {
		return unknownName("fragment mode", strconv.Itoa(int(h.Fragments)), fragmentModeNames)
	}
	if h.VXLANPorts == nil {
		h.VXLANPorts = []uint16{VXLANPort}
		return nil
	}
	for _, p := range h.VXLANPorts {
		if p == 0 || !isVXLANPort(p) {
			return fmt.Errorf("steer: VXLAN port %d: want a port other than 0, %d (GENEVE), %d (GTP-U) and %d (MPLS over UDP): %w",
				p, genevePort, gtpuPort, mplsUDPPort, ErrConfig)
		}
	}
	h.VXLANPorts = append([]uint16(nil), h.VXLANPorts...)
	return nil
}

// normalizeKey checks the algorithm and its key, or makes a random key.
func (h *HashConfig) normalizeKey() error {
	switch h.Algorithm {
	case hash.AlgorithmToeplitz:
	case hash.AlgorithmSipHash:
		switch {
		case h.Key == nil:
			k, err := hash.RandomKey(hash.SipHashKeyLen)
			if err != nil {
				return fmt.Errorf("steer: %w", err)
			}
			h.Key = k
		case len(h.Key) != hash.SipHashKeyLen:
			return fmt.Errorf("steer: SipHash key of %d bytes (or nil for a random key): %w: %w",
				len(h.Key), hash.ErrSipHashKeyLength, ErrConfig)
		default:
			h.Key = append([]byte(nil), h.Key...)
		}
		return nil
	default:
		return fmt.Errorf("steer: unknown hash algorithm %d (want %v or %v): %w", h.Algorithm, hash.AlgorithmToeplitz, hash.AlgorithmSipHash, ErrConfig)
	}
	if h.Key == nil {
		k, err := hash.RandomKey(hash.DefaultKeyLen)
		if err != nil {
			return fmt.Errorf("steer: %w", err)
		}
		h.Key = k
		return nil
	}
	if len(h.Key) < minKeyLen || len(h.Key) > hash.MaxKeyLen {
		// The error is also hash.ErrKeyLength, without its text, whose
		// bounds are the hash package's, not the dispatcher's.
		return &configError{
			msg: fmt.Sprintf("steer: Toeplitz key of %d bytes: want %d to %d (a key must be 4 bytes longer than the longest input it hashes, a 36-byte IPv6 4-tuple), or nil for a random key: %v",
				len(h.Key), minKeyLen, hash.MaxKeyLen, ErrConfig),
			errs: []error{hash.ErrKeyLength, ErrConfig},
		}
	}
	if allZero(h.Key) {
		return fmt.Errorf("steer: a Toeplitz key whose bytes are all zero hashes every flow to 0, so every frame would go to one worker: set another key, or nil for a random one: %w", ErrConfig)
	}
	h.Key = append([]byte(nil), h.Key...)
	return nil
}

// normalize checks the queue limit and the overflow rule.
func (q *QueueConfig) normalize() error {
	switch {
	case q.Limit < 0:
		return fmt.Errorf("steer: queue limit %d is negative: %w", q.Limit, ErrConfig)
	case q.Limit > MaxQLimit:
		return fmt.Errorf("steer: queue limit %d exceeds maxqlimit %d: %w", q.Limit, MaxQLimit, ErrConfig)
	}
	if q.Overflow > OverflowDrop {
		return unknownName("overflow rule", strconv.Itoa(int(q.Overflow)), overflowNames)
	}
	switch {
	case q.StallTimeout < 0:
		return fmt.Errorf("steer: stall timeout %v is negative: set a positive duration, or zero for %v: %w", q.StallTimeout, DefaultStallTimeout, ErrConfig)
	case q.StallTimeout == 0:
		q.StallTimeout = DefaultStallTimeout
	}
	return nil
}

// limit is the queue limit for an input that waits (or drops).
func (q *QueueConfig) limit(wait bool) int {
	switch {
	case q.Limit > 0:
		return q.Limit
	case wait:
		return DefaultWaitQLimit
	}
	return DefaultQLimit
}

// waits reports whether an input whose source can (or cannot) wait is held
// back by a full queue.
func (q *QueueConfig) waits(canWait bool) bool {
	switch q.Overflow {
	case OverflowWait:
		return true
	case OverflowDrop:
		return false
	}
	return canWait
}

// normalize checks the flow table size.
func (r *RFSConfig) normalize() error {
	if r.TableSize == 0 {
		r.TableSize = defaultRFSTableSize
	}
	if r.TableSize < rfstable.MinCapacity || r.TableSize > rfstable.MaxCapacity || r.TableSize&(r.TableSize-1) != 0 {
		return fmt.Errorf("steer: RFS table size %d: want a power of two from %d to %d: %w",
			r.TableSize, rfstable.MinCapacity, rfstable.MaxCapacity, ErrConfig)
	}
	return nil
}

// keyFingerprint names a key in reports without printing it: "microsoft"
// for the public key, else the first 4 bytes of its SHA-256 in hex.
func keyFingerprint(key []byte) string {
	if string(key) == string(hash.MicrosoftKey[:]) {
		return "microsoft"
	}
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:4])
}

// allZero reports whether every byte of b is zero.
func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// configError is an error with its own message that wraps several
// sentinels.
type configError struct {
	msg  string
	errs []error
}

func (e *configError) Error() string   { return e.msg }
func (e *configError) Unwrap() []error { return e.errs }
