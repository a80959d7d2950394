package bpfsteer

import (
	"errors"
	"testing"

	"github.com/cilium/ebpf/asm"

	"github.com/rpsgo/rps/hash"
)

type rejectCase struct {
	name string
	opts Options
	err  error
}

// rejectCases are options the program refuses, and why.
func rejectCases() []rejectCase {
	key := make([]byte, 40)
	key[0] = 1
	t128 := make([]uint32, 128)
	ports := make([]uint16, MaxVXLANPorts+1)
	for i := range ports {
		ports[i] = uint16(8000 + i)
	}
	return []rejectCase{
		{"a 39-byte Toeplitz key", Options{Key: make([]byte, 39), Table: t128}, ErrKeyLength},
		{"a 65-byte Toeplitz key", Options{Key: make([]byte, 65), Table: t128}, ErrKeyLength},
		{"a 40-byte SipHash key", Options{Algorithm: hash.AlgorithmSipHash, Key: key, Table: t128}, ErrKeyLength},
		{"an unknown algorithm", Options{Algorithm: 7, Key: key, Table: t128}, ErrOptions},
		{"types without ipv4", Options{Key: key, Table: t128, Types: hash.TypeIPv6 | hash.TypeTCPIPv6}, ErrOptions},
		{"an unknown type", Options{Key: key, Table: t128, Types: hash.DefaultTypes | 1<<12}, ErrOptions},
		{"too many VXLAN ports", Options{Key: key, Table: t128, Tunnels: true, VXLANPorts: ports}, ErrOptions},
		{"the GENEVE port as VXLAN's", Options{Key: key, Table: t128, Tunnels: true, VXLANPorts: []uint16{GENEVEPort}}, ErrOptions},
		{"port 0 as VXLAN's", Options{Key: key, Table: t128, Tunnels: true, VXLANPorts: []uint16{4789, 0}}, ErrOptions},
		{"PassUnhashed on the socket filter", Options{Key: key, Table: t128, PassUnhashed: true}, ErrOptions},
		{"a queue on the socket filter", Options{Key: key, Table: t128, Queue: 1}, ErrOptions},
		{"an unknown hook", Options{Key: key, Table: t128, Hook: 7}, ErrOptions},
		{"no table", Options{Key: key}, ErrTableLength},
		{"96 buckets", Options{Key: key, Table: make([]uint32, 96)}, ErrTableLength},
		{"2^17 buckets", Options{Key: key, Table: make([]uint32, 1<<17)}, ErrTableLength},
	}
}

func TestInstructionsRejects(t *testing.T) {
	for _, tc := range rejectCases() {
		if _, err := Instructions(tc.opts); !errors.Is(err, tc.err) {
			t.Errorf("Instructions(%s) = %v, want %v", tc.name, err, tc.err)
		}
	}
	// The VXLAN ports are not looked at when tunnels are not opened.
	if _, err := Instructions(Options{Key: make([]byte, 40), Table: make([]uint32, 2), VXLANPorts: make([]uint16, 100)}); err != nil {
		t.Errorf("VXLAN ports without tunnels: %v", err)
	}
}

// TestHookHelpers checks that each hook's program calls its own context's
// helpers only and refers to the maps its loader creates.
func TestHookHelpers(t *testing.T) {
	for _, tc := range []struct {
		hook       Hook
		want, deny []asm.BuiltinFunc
		maps       []string
	}{
		{HookSocketFilter, []asm.BuiltinFunc{asm.FnSkbLoadBytes},
			[]asm.BuiltinFunc{asm.FnXdpLoadBytes, asm.FnXdpGetBuffLen, asm.FnRedirectMap}, []string{ToeplitzMapName, TableMapName}},
		{HookXDP, []asm.BuiltinFunc{asm.FnXdpLoadBytes, asm.FnXdpGetBuffLen, asm.FnRedirectMap},
			[]asm.BuiltinFunc{asm.FnSkbLoadBytes}, []string{ToeplitzMapName, TableMapName, XSKMapName, XDPStatsMapName}},
	} {
		insns, err := Instructions(Options{Key: make([]byte, 40), Table: make([]uint32, 8), Tunnels: true, Hook: tc.hook})
		if err != nil {
			t.Fatal(err)
		}
		calls := map[asm.BuiltinFunc]bool{}
		refs := map[string]bool{}
		for _, in := range insns {
			if in.IsBuiltinCall() {
				calls[asm.BuiltinFunc(in.Constant)] = true
			}
			if in.IsLoadFromMap() {
				refs[in.Reference()] = true
			}
		}
		for _, fn := range tc.want {
			if !calls[fn] {
				t.Errorf("%v: no call of %v", tc.hook, fn)
			}
		}
		for _, fn := range tc.deny {
			if calls[fn] {
				t.Errorf("%v: calls %v", tc.hook, fn)
			}
		}
		for _, m := range tc.maps {
			if !refs[m] {
				t.Errorf("%v: no reference to map %s", tc.hook, m)
			}
		}
		if len(refs) != len(tc.maps) {
			t.Errorf("%v: refers to maps %v, want %v", tc.hook, refs, tc.maps)
		}
	}
}
