package bpfsteer

import (
	"fmt"

	"github.com/rpsgo/rps/steer"
)

// DispatcherOptions returns the program's options for a dispatcher's
// configuration cfg (normalized, as steer.Dispatcher.Config returns it)
// and table: every field of cfg.Hash the classifier hashes by (the
// algorithm and key, the hash types, Symmetric, the tunnels opened with
// their VXLAN ports, the fragments followed), over base, whose other
// fields (Hook, Fallback, PassUnhashed) are kept. The result is checked with [Instructions], so
// that a refusal needs no privilege.
//
// What the program cannot honour is an error wrapping steer.ErrConfig and
// ErrOptions (or ErrKeyLength, ErrTableLength) that names what to change: a policy other than rss (the program has no per-flow state),
// more than [MaxVXLANPorts] VXLAN ports with tunnels inner. The program is
// never built to steer otherwise than the dispatcher would.
func DispatcherOptions(cfg steer.Config, table []int, base Options) (Options, error) {
	h := cfg.Hash
	if cfg.Policy != steer.PolicyRSS {
		return Options{}, fmt.Errorf("bpfsteer: %w: the program steers as the rss policy does, not %v: use the rss policy: %w", steer.ErrConfig, cfg.Policy, ErrOptions)
	}
	if h.Tunnels == steer.TunnelsInner && len(h.VXLANPorts) > MaxVXLANPorts {
		return Options{}, fmt.Errorf("bpfsteer: %w: %d VXLAN ports: the program matches at most %d; list fewer in HashConfig.VXLANPorts: %w",
			steer.ErrConfig, len(h.VXLANPorts), MaxVXLANPorts, ErrOptions)
	}
	o := base
	o.Algorithm, o.Key, o.Table = h.Algorithm, h.Key, WorkerTable(table)
	o.Symmetric, o.Types, o.UDP4Tuple = h.Symmetric, h.Types, h.UDP4Tuple
	o.Tunnels, o.VXLANPorts = h.Tunnels == steer.TunnelsInner, h.VXLANPorts
	o.FollowFragments = h.Fragments == steer.FragmentsFollow
	if _, err := Instructions(o); err != nil {
		return o, fmt.Errorf("%w: %w", steer.ErrConfig, err)
	}
	return o, nil
}

// WorkerTable returns a dispatcher's indirection table (bucket -> worker)
// as the program's (Options.Table, Program.SetTable, XDP.SetTable).
func WorkerTable(t []int) []uint32 {
	out := make([]uint32, len(t))
	for i, w := range t {
		out[i] = uint32(w)
	}
	return out
}
