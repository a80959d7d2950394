package bpfsteer

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/steer"
)

// TestDispatcherOptions checks that the options for a dispatcher keep the
// hook, fallback and PassUnhashed they are given, take every hash field
// from the dispatcher, and that a refusal is an options error. (The
// mapping of each hash field and the messages are checked through
// TestDispatcherOptionsMapping.)
func TestDispatcherOptions(t *testing.T) {
	sip := make([]byte, hash.SipHashKeyLen)
	sip[3] = 7
	d, err := steer.New(steer.Config{Workers: 3, Hash: steer.HashConfig{Algorithm: hash.AlgorithmSipHash, Key: sip,
		Tunnels: steer.TunnelsInner, UDP4Tuple: true, Fragments: steer.FragmentsFollow}}, func(*steer.Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	cfg, table := d.Config(), d.Table()
	for _, base := range []Options{{}, {Hook: HookXDP, PassUnhashed: true}, {Hook: HookXDP, Fallback: 2}} {
		o, err := DispatcherOptions(cfg, table, base)
		if err != nil {
			t.Fatalf("%+v: %v", base, err)
		}
		want := base
		want.Algorithm, want.Key, want.Table, want.UDP4Tuple, want.Types = hash.AlgorithmSipHash, cfg.Hash.Key, WorkerTable(table), true, cfg.Hash.Types
		want.Tunnels, want.VXLANPorts, want.FollowFragments = true, cfg.Hash.VXLANPorts, true
		if !reflect.DeepEqual(o, want) {
			t.Errorf("base %+v: %+v, want %+v", base, o, want)
		}
	}
	cfg.Policy = steer.PolicyFlow
	if _, err := DispatcherOptions(cfg, table, Options{Hook: HookXDP}); !errors.Is(err, ErrOptions) || !errors.Is(err, steer.ErrConfig) {
		t.Errorf("flow policy: %v", err)
	}
	cfg.Policy = steer.PolicyRSS
	if _, err := DispatcherOptions(cfg, table, Options{PassUnhashed: true}); !errors.Is(err, ErrOptions) || !errors.Is(err, steer.ErrConfig) {
		t.Errorf("PassUnhashed on the socket filter: %v", err)
	}
}

// TestDispatcherOptionsMapping checks that the program gets every field of
// the dispatcher's hash configuration, and that what it cannot honour is a
// configuration error that names what to change.
func TestDispatcherOptionsMapping(t *testing.T) {
	normalized := func(cfg steer.Config) (steer.Config, []int) {
		t.Helper()
		cfg.Workers = 2
		d, err := steer.New(cfg, func(*steer.Packet) {})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close(context.Background())
		return d.Config(), d.Table()
	}
	sip := make([]byte, hash.SipHashKeyLen)
	sip[0] = 1
	for _, hc := range []steer.HashConfig{
		{},
		{UDP4Tuple: true, Symmetric: true},
		{Types: hash.TypeIPv4 | hash.TypeIPv6},
		{Algorithm: hash.AlgorithmSipHash, Key: sip, Tunnels: steer.TunnelsInner, VXLANPorts: []uint16{4789, 8472}},
		{Tunnels: steer.TunnelsInner, Types: hash.TypeIPv4 | hash.TypeIPv6 | hash.TypeUDPIPv6},
	} {
		cfg, table := normalized(steer.Config{Hash: hc})
		o, err := DispatcherOptions(cfg, table, Options{Fallback: 1})
		if err != nil {
			t.Fatalf("%+v: %v", hc, err)
		}
		h := cfg.Hash
		want := Options{Algorithm: h.Algorithm, Key: h.Key, Table: WorkerTable(table), Symmetric: h.Symmetric,
			Types: h.Types, UDP4Tuple: h.UDP4Tuple, Tunnels: h.Tunnels == steer.TunnelsInner, VXLANPorts: h.VXLANPorts, Fallback: 1}
		if !reflect.DeepEqual(o, want) {
			t.Errorf("%+v: options %+v, want %+v", hc, o, want)
		}
	}
	many := make([]uint16, MaxVXLANPorts+1)
	for i := range many {
		many[i] = uint16(5000 + i)
	}
	for _, c := range []struct {
		name string
		cfg  steer.Config
		says string // what the message must name
	}{
		{"too many VXLAN ports", steer.Config{Hash: steer.HashConfig{Tunnels: steer.TunnelsInner, VXLANPorts: many}}, "HashConfig.VXLANPorts"},
		{"the flow policy", steer.Config{Policy: steer.PolicyFlow}, "rss policy"},
	} {
		cfg, table := normalized(c.cfg)
		_, err := DispatcherOptions(cfg, table, Options{})
		if !errors.Is(err, steer.ErrConfig) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want steer.ErrConfig naming %q", c.name, err, c.says)
		}
	}
	// Ports the classifier does not use, the program does not look at.
	cfg, table := normalized(steer.Config{Hash: steer.HashConfig{VXLANPorts: many}})
	if _, err := DispatcherOptions(cfg, table, Options{}); err != nil {
		t.Errorf("many VXLAN ports, tunnels outer: %v", err)
	}
}
