package steer

import (
	"fmt"
	"strconv"
	"strings"
)

// Policy is how a frame's worker is chosen (NETISR_POLICY_*).
type Policy uint8

// The policies. Each places a frame without a hash as PolicySource does.
const (
	PolicyRSS    Policy = iota // the default: worker = table[flowid & (buckets-1)] (options RSS)
	PolicyFlow                 // NETISR_POLICY_FLOW: worker = flowid % workers
	PolicySource               // NETISR_POLICY_SOURCE: worker = (input id + ifindex) % workers
	PolicyCPU                  // Config.CPUFunc's answer; when it declines, PolicySource
)

// DispatchMode is how a frame reaches its handler, netisr's
// NETISR_DISPATCH_*.
type DispatchMode uint8

// The dispatch modes. Each accounts a frame to its selected worker, whose
// state the handler gets.
const (
	DispatchDeferred DispatchMode = iota // the default: queue the frame to its worker
	// DispatchHybrid runs the handler inline when the caller is the
	// selected worker (reading a source, or re-dispatching) and that worker
	// is idle, and queues otherwise.
	DispatchHybrid
	DispatchDirect // runs the handler in the caller's goroutine
)

// Overflow is what a full worker queue does to the input filling it.
type Overflow uint8

// The overflow rules. A re-dispatch never waits.
const (
	// OverflowAuto, the default, holds back a source that can wait, and a
	// LiveSource until its ring fills or the worker stalls; then it drops.
	OverflowAuto Overflow = iota
	OverflowWait          // always holds the input back until there is room
	OverflowDrop          // always drops at the tail (QueueDrops), as netisr does
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
	return 0, unknownName(kind, strconv.Quote(s), names)
}

// unknownName is the error for a value of kind that is none of names: it
// says which it takes, for parseName and for New's checks of numbers.
func unknownName(kind, value string, names []string) error {
	return fmt.Errorf("steer: unknown %s %s (want %s): %w", kind, value, strings.Join(names, ", "), ErrConfig)
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
