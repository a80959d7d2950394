package bpfsteer

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/steer"
)

// TestDispatcherOptions checks that the options for a dispatcher keep the
// hook, fallback and PassUnhashed they are given, take every hash field
// from the dispatcher, and that a refusal is an options error. (The
// mapping of each hash field and the messages are checked through
// afpacket's TestProgramOptions.)
func TestDispatcherOptions(t *testing.T) {
	sip := make([]byte, hash.SipHashKeyLen)
	sip[3] = 7
	d, err := steer.New(steer.Config{Workers: 3, Hash: steer.HashConfig{Algorithm: hash.AlgorithmSipHash, Key: sip,
		Tunnels: steer.TunnelsInner, UDP4Tuple: true}}, func(*steer.Packet) {})
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
		want.Tunnels, want.VXLANPorts = true, cfg.Hash.VXLANPorts
		if !reflect.DeepEqual(o, want) {
			t.Errorf("base %+v: %+v, want %+v", base, o, want)
		}
	}
	cfg.Policy = steer.PolicyFlow
	if _, err := DispatcherOptions(cfg, table, Options{Hook: HookXDP}); !errors.Is(err, ErrOptions) || !IsOptionsError(err) {
		t.Errorf("flow policy: %v", err)
	}
	cfg.Policy = steer.PolicyRSS
	if _, err := DispatcherOptions(cfg, table, Options{PassUnhashed: true}); !errors.Is(err, ErrOptions) {
		t.Errorf("PassUnhashed on the socket filter: %v", err)
	}
	if IsOptionsError(errors.New("kernel says no")) || !IsOptionsError(ErrKeyLength) || !IsOptionsError(ErrTableLength) {
		t.Error("IsOptionsError tells the program's refusals from the kernel's errors wrong")
	}
}
