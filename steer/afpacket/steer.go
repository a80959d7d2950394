package afpacket

import (
	"fmt"

	"github.com/rpsgo/rps/steer"
)

// KeepsFlows reports whether the kernel keeps every frame of a flow on one
// socket in this mode by construction: true for FanoutHash and FanoutEBPF
// (the latter while the table does not change, and across changes made
// with the Steering's SetTable), false for the others.
func (m FanoutMode) KeepsFlows() bool { return m == FanoutHash || m == FanoutEBPF }

// ParseFanoutMode parses a mode name as String prints it ("hash", "lb",
// "cpu", "rollover", "rnd", "qm", "ebpf").
func ParseFanoutMode(s string) (FanoutMode, error) {
	for m, n := range fanoutModeNames {
		if n == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("afpacket: %w: unknown fanout mode %q (want hash, lb, cpu, rollover, rnd, qm or ebpf)", steer.ErrConfig, s)
}
