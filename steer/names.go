package steer

import (
	"fmt"
	"strings"
)

// Policy is how a frame's worker is chosen: netisr_select_cpuid's
// NETISR_POLICY_*, with the RSS indirection table as the CPU policy that
// FreeBSD's options RSS gives its IP handlers.
type Policy uint8

const (
	// PolicyRSS is NETISR_POLICY_CPU as FreeBSD's IP handlers have it under
	// options RSS: ip_nh's rss_soft_m2cpuid_v4 (ip6_nh's _v6) hashes in
	// software when the NIC's hash does not fit, then rss_hash2cpuid looks
	// the hash up (ether_nh's rss_m2cpuid looks up the hash as given):
	// bucket = flowid & (buckets-1), worker = table[bucket]. The default,
	// because the indirection table can be reprogrammed and rebalanced.
	// rss_hash2cpuid maps only the six RSS hash types and gives
	// OPAQUE_HASH and the _EX types no CPU; here every hash goes through
	// the table (docs/freebsd-linux.md says why).
	PolicyRSS Policy = iota
	// PolicyFlow is NETISR_POLICY_FLOW with netisr_default_flow2cpu:
	// worker = flowid % workers.
	PolicyFlow
	// PolicySource is NETISR_POLICY_SOURCE: worker = (source id + ingress
	// interface index) % workers. Every policy falls back to it for frames
	// without a hash: HashType NONE, and OPAQUE (whose HASHPROP bit is
	// clear), which FreeBSD's FLOW policy would take modulo its threads.
	PolicySource
	// PolicyCPU is NETISR_POLICY_CPU with a caller-supplied function
	// (Config.CPUFunc); when it declines, SOURCE decides.
	PolicyCPU
)

// DispatchMode is how a frame reaches its handler, netisr's
// NETISR_DISPATCH_*.
type DispatchMode uint8

const (
	// DispatchDeferred always queues the frame to the selected worker
	// (NETISR_DISPATCH_DEFERRED). The default: FreeBSD's global default is
	// DIRECT, which for one reader would steer nothing, and its IP
	// handlers are HYBRID under options RSS.
	DispatchDeferred DispatchMode = iota
	// DispatchHybrid runs the handler inline when the caller is itself the selected
	// worker and that worker is idle, and queues otherwise
	// (NETISR_DISPATCH_HYBRID). The caller is a worker when it reads a
	// source: Run reads in worker 0 under DispatchHybrid (see Run for when it
	// cannot), RunOnWorkers in every worker; or when a handler re-dispatches.
	DispatchHybrid
	// DispatchDirect runs the handler in the caller's goroutine
	// (NETISR_DISPATCH_DIRECT). The frame is still classified, and a worker
	// selected by the policy: the handler gets that worker's state, and the
	// frame is accounted to it. FreeBSD's DIRECT selects nothing and counts
	// the packet on the current CPU's workstream.
	DispatchDirect
)

// Overflow is what a full worker queue does to the input filling it.
type Overflow uint8

const (
	// OverflowAuto waits for a source that can wait (a file, a slice, an
	// Input fed by the caller); a live one (a [LiveSource] such as a ring
	// the kernel fills) it holds back only while its ring is under three
	// quarters full and the worker is not stalled, and drops at the tail
	// past either (see LiveSource). The default.
	OverflowAuto Overflow = iota
	// OverflowWait always holds the input back until there is room, a
	// live one too, however full its ring. A re-dispatch from a handler
	// never waits.
	OverflowWait
	// OverflowDrop always drops at the tail and counts QueueDrops, as netisr
	// does.
	OverflowDrop
)

var (
	policyNames   = []string{PolicyRSS: "rss", PolicyFlow: "flow", PolicySource: "source", PolicyCPU: "cpu"}
	dispatchNames = []string{DispatchDeferred: "deferred", DispatchHybrid: "hybrid", DispatchDirect: "direct"}
	overflowNames = []string{OverflowAuto: "auto", OverflowWait: "wait", OverflowDrop: "drop"}
)

// name returns names[v], or kind(v) when v is out of range.
func name(names []string, kind string, v uint8) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", kind, v)
}

// parseName finds s among names, ignoring case.
func parseName(names []string, kind, s string) (uint8, error) {
	for i, n := range names {
		if strings.EqualFold(n, s) {
			return uint8(i), nil
		}
	}
	return 0, fmt.Errorf("steer: unknown %s %q (want %s): %w", kind, s, strings.Join(names, ", "), ErrConfig)
}

// String returns the policy's name: "rss", "flow", "source" or "cpu".
func (p Policy) String() string { return name(policyNames, "Policy", uint8(p)) }

// MarshalText encodes the policy by name.
func (p Policy) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText parses a policy name, in any case.
func (p *Policy) UnmarshalText(b []byte) error {
	v, err := parseName(policyNames, "policy", string(b))
	*p = Policy(v)
	return err
}

// String returns "deferred", "hybrid" or "direct".
func (m DispatchMode) String() string { return name(dispatchNames, "DispatchMode", uint8(m)) }

// MarshalText encodes the mode by name.
func (m DispatchMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText parses a dispatch mode name, in any case.
func (m *DispatchMode) UnmarshalText(b []byte) error {
	v, err := parseName(dispatchNames, "dispatch mode", string(b))
	*m = DispatchMode(v)
	return err
}

// String returns "auto", "wait" or "drop".
func (o Overflow) String() string { return name(overflowNames, "Overflow", uint8(o)) }

// MarshalText encodes the rule by name.
func (o Overflow) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText parses an overflow rule name, in any case.
func (o *Overflow) UnmarshalText(b []byte) error {
	v, err := parseName(overflowNames, "overflow rule", string(b))
	*o = Overflow(v)
	return err
}

// MarshalText encodes the reason by name, as the report prints it.
func (r Reason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText parses a reason name, in any case.
func (r *Reason) UnmarshalText(b []byte) error {
	v, err := parseName(reasonNames[:], "reason", string(b))
	*r = Reason(v)
	return err
}
