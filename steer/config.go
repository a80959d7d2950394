package steer

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/affinity"
	"github.com/rpsgo/rps/internal/rfstable"
)

// Limits of the configuration, as FreeBSD's net.isr.defaultqlimit and
// net.isr.maxqlimit and RSS's table size.
const (
	// DefaultQLimit is the queue limit, in frames, for inputs that drop on
	// a full queue (net.isr.defaultqlimit): a live source's latency bound.
	DefaultQLimit = 256
	// DefaultWaitQLimit is the queue limit for inputs that wait on a full
	// queue: twice netisr's, since a deeper queue costs a file or a slice no
	// latency and keeps the workers busy while the input is held back. A
	// held-back input is woken once the queue is down to half its limit.
	DefaultWaitQLimit = 512
	// MaxQLimit is the largest queue limit (net.isr.maxqlimit).
	MaxQLimit = 10240
	// DefaultBuckets is the indirection table's default size: a NIC's usual
	// RETA size and FreeBSD's RSS_TABLE_MAXLEN.
	DefaultBuckets = 128
	// maxBuckets is the largest indirection table.
	maxBuckets = 1 << 16
	// BatchSize is the most frames handed to a worker at once.
	BatchSize = 64
	// minKeyLen is the shortest Toeplitz key the dispatcher takes: the
	// longest input it hashes (an IPv6 4-tuple, 36 bytes) plus 4.
	minKeyLen = 40
)

// ErrConfig is wrapped by every configuration error of [New].
var ErrConfig = errors.New("invalid configuration")

// Config configures a [Dispatcher], grouped by concern. The zero value is
// safe: one worker per CPU the process may use ([DefaultWorkers]), unpinned,
// the RSS policy over 128 buckets, deferred dispatch, a random key, and
// queues that hold back a source that can wait (nothing is dropped from a
// file) and drop at the tail for a live one. A configuration that cannot
// steer is an error from New that says what to change.
//
// These defaults mirror a tuned FreeBSD kernel: options RSS (the software
// Toeplitz hash and its indirection table) and net.isr.maxthreads=-1 (one
// netisr thread per CPU), with deferred dispatch. A stock GENERIC kernel has
// no options RSS and one netisr thread, and dispatches DIRECT, so the
// receiving thread handles every packet: Config{Workers: 1, Policy:
// PolicyFlow, Dispatch: DispatchDirect} runs as it does (docs/freebsd-linux.md).
type Config struct {
	// Workers is the number of worker goroutines (workstreams, FreeBSD's
	// net.isr.maxthreads, whose default is 1). Zero means len(CPUs) when
	// CPUs is set, else DefaultWorkers(), as net.isr.maxthreads=-1 gives
	// one thread per CPU. More or fewer workers than CPUs are both fine.
	Workers int
	// CPUs pins the workers: worker i locks its goroutine to a thread bound
	// to CPUs[i % len(CPUs)] (net.isr.bindthreads). Empty means unpinned.
	// Linux only.
	CPUs []int

	// Policy selects the worker for each frame. Default PolicyRSS.
	Policy Policy
	// CPUFunc is the PolicyCPU function: it returns the worker for a
	// classified frame, or ok=false to let SOURCE decide.
	CPUFunc func(flowid uint32, ht hash.HashType) (worker int, ok bool) `json:"-"`
	// Buckets is the indirection table's size, a power of two, and with
	// PolicyRSS at least Workers unless RFS places the flows. Default 128,
	// or Workers rounded up to a power of two when that is more.
	Buckets int
	// Dispatch is the dispatch mode. Default DispatchDeferred.
	Dispatch DispatchMode

	// Hash configures the flowid.
	Hash HashConfig
	// VerifyChecksums verifies in software, in the worker before the
	// handler, the IPv4 header and TCP and UDP checksums of every frame
	// whose source did not say what it knows of them (Frame.Checksum): as
	// Suricata's checksum-validation mode does. The verdict is
	// Packet.Checksum; a frame whose checksum fails is handled all the
	// same, with ReasonBadChecksum unless it had a reason already. Off by
	// default: the check reads every byte of the packet (see Checksum).
	VerifyChecksums bool
	// Queue configures the workers' queues.
	Queue QueueConfig
	// RFS configures receive flow steering.
	RFS RFSConfig
	// Rebalance, when its Interval is set, moves buckets from the busiest
	// worker to the least busy one as load shifts.
	Rebalance RebalanceConfig

	// TickInterval is how often a per-worker state that implements
	// [Ticker] is ticked. Zero means one second; negative is an error.
	TickInterval time.Duration
	// Logger receives handler panics (at most one record a second, with
	// the count of those left out) and errors of per-worker states' Close.
	// Nil means slog.Default().
	Logger *slog.Logger `json:"-"`
	// OnPanic, when set, receives every recovered panic instead of the
	// Logger: a handler's, a hook's or a state's.
	OnPanic func(PanicInfo) `json:"-"`
	// Trace, when set, receives every steering decision (see Decision). It
	// runs in the dispatching goroutine and slows dispatch; for teaching
	// and debugging.
	Trace func(*Decision) `json:"-"`
}

// HashConfig configures the flowid: the hash function and its key, which
// tuple is hashed (FreeBSD's rss_config.c), and whether tunnels are opened
// to hash the flow inside them.
type HashConfig struct {
	// Algorithm is the hash function. Default hash.AlgorithmToeplitz, the
	// flowid a NIC's RSS and FreeBSD compute; hash.AlgorithmSipHash resists
	// an attacker who can observe collisions (see package hash).
	Algorithm hash.Algorithm
	// Key is the hash key: for Toeplitz (rss_key) 40 to hash.MaxKeyLen
	// bytes, 4 more than the longest input hashed (a 36-byte IPv6 4-tuple);
	// for SipHash hash.SipHashKeyLen bytes. Nil means a fresh random key:
	// a known key such as hash.MicrosoftKey lets anyone aim every flow at
	// one worker.
	Key []byte `json:"-"`
	// Symmetric puts the endpoints in canonical order before hashing, so
	// that both directions of a connection get one flowid (for stream
	// reassembly). FreeBSD has no counterpart. Linux's own flow hash is
	// symmetric by construction (__flow_hash_consistentify in
	// net/core/flow_dissector.c sorts the addresses, and apart from them the
	// ports, before SipHash), except for IPv6 with a flow label.
	Symmetric bool
	// Types is the set of RSS hash types in use (rss_gethashconfig): TCP
	// and UDP get their 4-tuple when their type is in the set, their
	// 2-tuple otherwise; SCTP follows UDP. Zero means hash.DefaultTypes
	// (TCP 4-tuples, everything else 2-tuples, as FreeBSD). The set must
	// hold hash.TypeIPv4 and hash.TypeIPv6: fragments and other protocols
	// hash by their addresses. hash.TypeIPv4|hash.TypeIPv6 hashes by IP
	// pair only.
	Types hash.Types
	// UDP4Tuple is the one-flag way to add hash.TypeUDPIPv4 and
	// hash.TypeUDPIPv6 to Types: UDP (and SCTP) hashed over addresses and
	// ports. Off by default, as in FreeBSD: the fragments of a large
	// datagram carry no ports and hash over addresses only, so with a
	// 4-tuple they may reach another worker than the datagram's
	// unfragmented siblings. Normalized, it says whether both UDP types
	// are in Types.
	UDP4Tuple bool
	// Tunnels says whether tunnels are decapsulated. Default TunnelsOuter:
	// a tunnelled frame is hashed by its outer header, as FreeBSD's RSS and
	// a NIC do. TunnelsInner opens VXLAN, GENEVE, GRE (with ERSPAN,
	// transparent Ethernet and Cisco MetaData), GTP-U, IP in IP and MPLS
	// over UDP, up to MaxTunnelDepth deep,
	// and hashes the innermost IP header, as a NIC that hashes inner
	// headers does (FreeBSD's main branch flags such a hash
	// M_HASHTYPE_INNER). MPLS and PPPoE are walked either way.
	Tunnels TunnelMode
	// Fragments says how fragments are hashed. Default FragmentsTuple:
	// every fragment by its addresses, as FreeBSD and Linux hash them, so
	// that with a 4-tuple hash type a datagram's later fragments may
	// reach another worker than its first and its flow's whole packets.
	// FragmentsFollow keeps every fragment of a datagram with its flow
	// (see FragmentMode).
	Fragments FragmentMode
	// VXLANPorts are the UDP destination ports taken for VXLAN with
	// TunnelsInner. Nil means VXLANPort (4789, IANA's); Linux's legacy
	// default is 8472. GENEVEPort, GTPUPort and MPLSUDPPort are fixed and
	// may not be listed.
	VXLANPorts []uint16
}

// QueueConfig configures the workers' queues (netisr's workstreams).
type QueueConfig struct {
	// Limit bounds each worker's queue, in frames (net.isr.defaultqlimit).
	// Zero means DefaultQLimit for inputs that drop and DefaultWaitQLimit
	// for inputs that wait; at most MaxQLimit.
	Limit int
	// Overflow is what a full queue does to the input that fills it.
	// Default OverflowAuto: wait for a source that can wait, drop for a
	// live one.
	Overflow Overflow
	// FlowLimit drops, while a worker's queue is at least half full and not
	// yet full, the frames of flows holding more than half of its recent
	// history (Linux's skb_flow_limit), so that an elephant's frames go
	// before the small flows' are tail dropped. A frame that finds the
	// queue full is left to Overflow's rule. Counted apart from QueueDrops.
	FlowLimit bool
	// StallTimeout is how long a live source (LiveSource) is held back by
	// a full queue that does not move, under OverflowAuto: past it the
	// worker counts as stalled, and frames for it are dropped at once
	// (StallDrops) until its queue moves again, so that one stuck handler
	// stops the other workers for at most this long. Zero means
	// DefaultStallTimeout; negative is an error.
	StallTimeout time.Duration
}

// DefaultStallTimeout is QueueConfig.StallTimeout's default: long enough
// for a garbage collection or a slow frame, short against the hundreds of
// milliseconds a live ring holds at the rates a software dispatcher meets.
const DefaultStallTimeout = 50 * time.Millisecond

// RFSConfig configures receive flow steering (Linux's RFS): a consumer
// names the worker that should handle a flow ([Dispatcher.SetDesired]) and
// the dispatcher moves the flow there without reordering it.
type RFSConfig struct {
	// Enabled turns RFS on. Off, no flow table is touched.
	Enabled bool
	// TableSize is the capacity of each input's flow table and of the
	// desired-worker table, a power of two from 16 to 2^26. Default 65536.
	TableSize int
}

// defaultRFSTableSize is the default capacity of the RFS flow tables.
const defaultRFSTableSize = 1 << 16

// PanicInfo describes a recovered panic of a user callback.
type PanicInfo struct {
	// Callback names the callback that panicked: "handler", "Tick",
	// "MoveOut", "MoveIn", "Close" (a state's), "Trace", "CPUFunc",
	// "release" (a batch's release callback) or "Backlog" (a live source's).
	Callback string
	Worker   int // the worker it ran for, -1 when none
	Value    any
	Summary  string // a handler's frame as Packet.String prints it, else the callback's name
	Stack    []byte
}

// DefaultWorkers is the default worker count, the one rule the library and
// its examples use: the number of CPUs the process may run on (its affinity
// mask), which may be fewer than runtime.NumCPU and differ from GOMAXPROCS.
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
		return fmt.Errorf("steer: unknown policy %d: %w", c.Policy, ErrConfig)
	}
	if c.Policy == PolicyCPU && c.CPUFunc == nil {
		return fmt.Errorf("steer: policy cpu needs a CPUFunc: %w", ErrConfig)
	}
	if c.Dispatch > DispatchDirect {
		return fmt.Errorf("steer: unknown dispatch mode %d: %w", c.Dispatch, ErrConfig)
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
		return fmt.Errorf("steer: unknown tunnel mode %d: %w", h.Tunnels, ErrConfig)
	}
	if h.Fragments > FragmentsFollow {
		return fmt.Errorf("steer: unknown fragment mode %d: %w", h.Fragments, ErrConfig)
	}
	if h.VXLANPorts == nil {
		h.VXLANPorts = []uint16{VXLANPort}
		return nil
	}
	for _, p := range h.VXLANPorts {
		if p == 0 || !isVXLANPort(p) {
			return fmt.Errorf("steer: VXLAN port %d: want a port other than 0, %d (GENEVE), %d (GTP-U) and %d (MPLS over UDP): %w",
				p, GENEVEPort, GTPUPort, MPLSUDPPort, ErrConfig)
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
			return fmt.Errorf("steer: SipHash key of %d bytes: want %d, or nil for a random key: %w: %w",
				len(h.Key), hash.SipHashKeyLen, hash.ErrSipHashKeyLength, ErrConfig)
		default:
			h.Key = append([]byte(nil), h.Key...)
		}
		return nil
	default:
		return fmt.Errorf("steer: unknown hash algorithm %d: %w", h.Algorithm, ErrConfig)
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
		return fmt.Errorf("steer: unknown overflow rule %d: %w", q.Overflow, ErrConfig)
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
