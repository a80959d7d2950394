package steer

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/affinity"
)

// Queue limits, as FreeBSD's net.isr.defaultqlimit and net.isr.maxqlimit.
const (
	DefaultQLimit  = 256
	MaxQLimit      = 10240
	DefaultBuckets = 128 // a NIC's usual RETA size and FreeBSD's RSS_TABLE_MAXLEN
	MaxBuckets     = 1 << 16
	// BatchSize is the most frames handed to a worker at once.
	BatchSize = 64
)

// Policy is how a frame's worker is chosen: netisr_select_cpuid's
// NETISR_POLICY_* plus the RSS layer's rss_m2cpuid.
type Policy uint8

const (
	// PolicyRSS is the CPU policy with FreeBSD RSS's rss_m2cpuid: bucket =
	// flowid & (buckets-1), worker = table[bucket]. The default, because the
	// indirection table can be reprogrammed and rebalanced.
	PolicyRSS Policy = iota
	// PolicyFlow is NETISR_POLICY_FLOW with netisr_default_flow2cpu:
	// worker = flowid % workers.
	PolicyFlow
	// PolicySource is NETISR_POLICY_SOURCE: worker = (source id + ingress
	// interface index) % workers. Every policy falls back to it for frames
	// with HashType NONE.
	PolicySource
	// PolicyCPU is NETISR_POLICY_CPU with a caller-supplied function
	// (Config.CPUFunc); when it declines, SOURCE decides.
	PolicyCPU
)

var policyNames = [...]string{PolicyRSS: "rss", PolicyFlow: "flow", PolicySource: "source", PolicyCPU: "cpu"}

// String returns the policy's name: "rss", "flow", "source" or "cpu".
func (p Policy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// ParsePolicy parses a policy name as String prints it.
func ParsePolicy(s string) (Policy, error) {
	for i, n := range policyNames {
		if n == s {
			return Policy(i), nil
		}
	}
	return 0, fmt.Errorf("steer: unknown policy %q (want rss, flow, source or cpu): %w", s, ErrConfig)
}

// DispatchMode is how a frame reaches its handler, netisr's
// NETISR_DISPATCH_*.
type DispatchMode uint8

const (
	// Deferred always queues the frame to the selected worker
	// (NETISR_DISPATCH_DEFERRED). The default.
	Deferred DispatchMode = iota
	// Hybrid runs the handler inline when the caller is itself the selected
	// worker and that worker has nothing queued, and queues otherwise
	// (NETISR_DISPATCH_HYBRID).
	Hybrid
	// Direct runs the handler in the caller's goroutine
	// (NETISR_DISPATCH_DIRECT). The frame is still classified and accounted
	// to the workstream its policy selects.
	Direct
)

var dispatchNames = [...]string{Deferred: "deferred", Hybrid: "hybrid", Direct: "direct"}

// String returns "deferred", "hybrid" or "direct".
func (m DispatchMode) String() string {
	if int(m) < len(dispatchNames) {
		return dispatchNames[m]
	}
	return fmt.Sprintf("DispatchMode(%d)", uint8(m))
}

// ParseDispatch parses a dispatch mode name as String prints it.
func ParseDispatch(s string) (DispatchMode, error) {
	for i, n := range dispatchNames {
		if n == s {
			return DispatchMode(i), nil
		}
	}
	return 0, fmt.Errorf("steer: unknown dispatch mode %q (want direct, hybrid or deferred): %w", s, ErrConfig)
}

// ErrConfig is wrapped by every configuration error of [New].
var ErrConfig = errors.New("invalid configuration")

// Config configures a [Dispatcher]. The zero value is usable: one worker per
// allowed CPU, unpinned, RSS policy over 128 buckets, deferred dispatch,
// qlimit 256, a random key.
type Config struct {
	// Workers is the number of worker goroutines (workstreams). Zero means
	// len(CPUs) when CPUs is set, else the number of CPUs the process may
	// use. More or fewer workers than CPUs are both fine.
	Workers int
	// CPUs pins the workers: worker i calls runtime.LockOSThread and binds
	// its thread to CPUs[i % len(CPUs)] (FreeBSD's net.isr.bindthreads).
	// Empty means unpinned. Linux only.
	CPUs []int

	// Policy selects the worker for each frame. Default PolicyRSS.
	Policy Policy
	// CPUFunc is the PolicyCPU function: it returns the worker for a
	// classified frame, or ok=false to let SOURCE decide.
	CPUFunc func(flowid uint32, ht hash.HashType) (worker int, ok bool)
	// Buckets is the indirection table's size, a power of two. Default 128.
	Buckets int
	// Dispatch is the dispatch mode. Default Deferred.
	Dispatch DispatchMode

	// QLimit bounds each worker's queue, in frames (net.isr.defaultqlimit).
	// Default 256, at most MaxQLimit.
	QLimit int
	// Block makes a full queue hold the source back instead of dropping the
	// frame (for sources that must not drop, such as a file replay). A
	// re-dispatch from a handler never blocks.
	Block bool

	// Key is the Toeplitz key (8 to 64 bytes; 40 or more to hash IPv6
	// 4-tuples). Nil means a fresh random 40-byte key.
	Key []byte
	// KeyName labels the key in reports ("microsoft", "random", ...).
	KeyName string
	// Symmetric hashes both directions of a connection alike (canonical
	// order), for stream reassembly.
	Symmetric bool
	// UDP4Tuple hashes UDP over ports too (see ClassifierConfig.UDP4Tuple).
	UDP4Tuple bool

	// OnInit and OnClose run in each worker's goroutine when it starts and
	// before it exits; OnTick runs there every TickInterval. Per-worker
	// state touched only from these hooks and the handler needs no locks.
	OnInit       func(w *Worker)
	OnClose      func(w *Worker)
	OnTick       func(w *Worker, now time.Time)
	TickInterval time.Duration

	// OnPanic, when set, is told of every handler panic the worker
	// recovered. With CrashOnPanic the panic is not recovered.
	OnPanic      func(PanicInfo)
	CrashOnPanic bool

	// Expvar, when not empty, publishes the stats under this expvar name.
	// A name already published in the process is an error.
	Expvar string

	// MoveOut and MoveIn let per-flow state follow a flow when it changes
	// worker (an RFS move, a reprogrammed bucket, the rebalancer). MoveOut
	// runs in the old worker after its last frame of the moved flows and
	// returns a value; MoveIn runs in the new worker with that value before
	// its first frame of them. Nil hooks make moves free. With RFS on, the
	// hooks run once per flow move (Move.Bucket == -1), not per bucket; with
	// DIRECT dispatch they run in the dispatching goroutine, before the
	// flow's next frame.
	MoveOut func(w *Worker, m Move) any
	MoveIn  func(w *Worker, m Move, state any)

	// RFS enables receive flow steering: a consumer names the worker that
	// should handle a flow (Dispatcher.SetDesired) and the dispatcher moves
	// the flow there without reordering it. Off, the flow table is not
	// touched and costs nothing.
	RFS bool
	// FlowTableSize is the capacity of each input's flow table and of the
	// desired-worker table, a power of two. Default 65536.
	FlowTableSize int
	// FlowLimit drops first, when a worker's queue is at least half full,
	// the frames of flows holding more than half of its recent history
	// (Linux's skb_flow_limit). Counted apart from QDrops.
	FlowLimit bool
	// Trace, when set, receives every steering decision (see Decision). It
	// runs in the dispatching goroutine and slows dispatch; for teaching and
	// debugging.
	Trace func(*Decision)

	// Rebalance, when its Interval is set, moves buckets from the busiest
	// worker to the least busy one as load shifts.
	Rebalance RebalanceConfig
}

// PanicInfo describes a recovered handler panic.
type PanicInfo struct {
	Worker  int
	Value   any
	Summary string // the frame's summary, as Packet.String prints it
	Stack   []byte
}

// normalized returns a copy of c with defaults filled in, or a clear error.
func (c Config) normalized() (Config, error) {
	online, err := affinity.Allowed()
	if err != nil {
		return c, fmt.Errorf("steer: list CPUs: %w", err)
	}
	if len(c.CPUs) > 0 {
		if !affinity.Supported() {
			return c, fmt.Errorf("steer: pinning workers to CPUs on %s: %w", runtime.GOOS, affinity.ErrNotSupported)
		}
		ok := make(map[int]bool, len(online))
		for _, cpu := range online {
			ok[cpu] = true
		}
		for _, cpu := range c.CPUs {
			if !ok[cpu] {
				return c, fmt.Errorf("steer: CPU %d is not online: %w", cpu, ErrConfig)
			}
		}
	}
	switch {
	case c.Workers < 0:
		return c, fmt.Errorf("steer: %d workers: %w", c.Workers, ErrConfig)
	case c.Workers == 0 && len(c.CPUs) > 0:
		c.Workers = len(c.CPUs)
	case c.Workers == 0:
		c.Workers = len(online)
	}
	if c.Workers > 65535 {
		return c, fmt.Errorf("steer: %d workers exceed 65535: %w", c.Workers, ErrConfig)
	}
	if c.Policy > PolicyCPU {
		return c, fmt.Errorf("steer: unknown policy %d: %w", c.Policy, ErrConfig)
	}
	if c.Policy == PolicyCPU && c.CPUFunc == nil {
		return c, fmt.Errorf("steer: policy cpu needs a CPUFunc: %w", ErrConfig)
	}
	if c.Dispatch > Direct {
		return c, fmt.Errorf("steer: unknown dispatch mode %d: %w", c.Dispatch, ErrConfig)
	}
	if c.Buckets == 0 {
		c.Buckets = DefaultBuckets
	}
	if c.Buckets < 1 || c.Buckets > MaxBuckets || c.Buckets&(c.Buckets-1) != 0 {
		return c, fmt.Errorf("steer: %d buckets: want a power of two from 1 to %d: %w", c.Buckets, MaxBuckets, ErrConfig)
	}
	switch {
	case c.QLimit == 0:
		c.QLimit = DefaultQLimit
	case c.QLimit < 0:
		return c, fmt.Errorf("steer: qlimit %d is negative: %w", c.QLimit, ErrConfig)
	case c.QLimit > MaxQLimit:
		return c, fmt.Errorf("steer: qlimit %d exceeds maxqlimit %d: %w", c.QLimit, MaxQLimit, ErrConfig)
	}
	if c.Key == nil {
		k, err := hash.RandomKey(hash.DefaultKeyLen)
		if err != nil {
			return c, fmt.Errorf("steer: %w", err)
		}
		c.Key = k
		if c.KeyName == "" {
			c.KeyName = "random"
		}
	} else if len(c.Key) < hash.MinKeyLen || len(c.Key) > hash.MaxKeyLen {
		return c, fmt.Errorf("steer: key of %d bytes: %w: %w", len(c.Key), hash.ErrKeyLength, ErrConfig)
	}
	if c.KeyName == "" {
		c.KeyName = "custom"
	}
	if c.OnTick != nil && c.TickInterval <= 0 {
		c.TickInterval = time.Second
	}
	if c.FlowTableSize == 0 {
		c.FlowTableSize = DefaultFlowTableSize
	}
	if c.FlowTableSize < 8 || c.FlowTableSize&(c.FlowTableSize-1) != 0 {
		return c, fmt.Errorf("steer: flow table size %d: want a power of two of at least 8: %w", c.FlowTableSize, ErrConfig)
	}
	if err := c.Rebalance.normalize(); err != nil {
		return c, err
	}
	return c, nil
}
