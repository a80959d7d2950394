package afpacket

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/bpfsteer"
	"github.com/rpsgo/rps/steer"
)

// dispatcherConfig returns the normalized configuration of a dispatcher
// built from cfg, as NewSteering reads it.
func dispatcherConfig(t *testing.T, cfg steer.Config) (steer.Config, []int) {
	t.Helper()
	cfg.Workers = 2
	d, err := steer.New(cfg, func(*steer.Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	return d.Config(), d.Table()
}

// TestProgramOptions checks that the program gets every field of the
// dispatcher's hash configuration, and that what it cannot honour is an
// ErrConfig that names what to change.
func TestProgramOptions(t *testing.T) {
	sip := make([]byte, hash.SipHashKeyLen)
	sip[0] = 1
	for _, hc := range []steer.HashConfig{
		{},
		{UDP4Tuple: true, Symmetric: true},
		{Types: hash.TypeIPv4 | hash.TypeIPv6},
		{Algorithm: hash.AlgorithmSipHash, Key: sip, Tunnels: steer.TunnelsInner, VXLANPorts: []uint16{4789, 8472}},
		{Tunnels: steer.TunnelsInner, Types: hash.TypeIPv4 | hash.TypeIPv6 | hash.TypeUDPIPv6},
	} {
		cfg, table := dispatcherConfig(t, steer.Config{Hash: hc})
		o, err := programOptions(cfg, table, 1)
		if err != nil {
			t.Fatalf("%+v: %v", hc, err)
		}
		h := cfg.Hash
		want := bpfsteer.Options{Algorithm: h.Algorithm, Key: h.Key, Table: toU32(table), Symmetric: h.Symmetric,
			Types: h.Types, UDP4Tuple: h.UDP4Tuple, Tunnels: h.Tunnels == steer.TunnelsInner, VXLANPorts: h.VXLANPorts, Fallback: 1}
		if !reflect.DeepEqual(o, want) {
			t.Errorf("%+v: options %+v, want %+v", hc, o, want)
		}
	}

	many := make([]uint16, bpfsteer.MaxVXLANPorts+1)
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
		cfg, table := dispatcherConfig(t, c.cfg)
		_, err := programOptions(cfg, table, 0)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want ErrConfig naming %q", c.name, err, c.says)
		}
	}
	// Ports the classifier does not use, the program does not look at.
	cfg, table := dispatcherConfig(t, steer.Config{Hash: steer.HashConfig{VXLANPorts: many}})
	if _, err := programOptions(cfg, table, 0); err != nil {
		t.Errorf("many VXLAN ports, tunnels outer: %v", err)
	}
	// The program's own refusals are configuration errors too.
	if err := programError(bpfsteer.ErrOptions); !errors.Is(err, ErrConfig) || !errors.Is(err, bpfsteer.ErrOptions) {
		t.Errorf("programError(ErrOptions) = %v", err)
	}
	if err := programError(errors.New("kernel says no")); errors.Is(err, ErrConfig) {
		t.Errorf("a kernel error is no configuration error: %v", err)
	}
}
