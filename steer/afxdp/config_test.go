package afxdp

import (
	"encoding"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net"
	"os"
	"strings"
	"testing"

	"golang.org/x/net/bpf"

	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/filter"
)

func TestConfigDefaults(t *testing.T) {
	c, err := Config{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.NumFrames != DefaultNumFrames || c.FrameSize != DefaultFrameSize || c.RingSize != DefaultRingSize ||
		c.BatchSize != DefaultBatchSize || c.PollTimeout != DefaultPollTimeout || c.BatchTimeout != DefaultBatchTimeout || c.Bind != BindAuto || c.Attach != AttachAuto ||
		c.Host != HostRefuse {
		t.Fatalf("defaults not applied: %+v", c)
	}
	if umem := c.NumFrames * c.FrameSize; umem > 32<<20 {
		t.Fatalf("the default UMEM takes %d bytes", umem)
	}
}

func TestConfigInvalid(t *testing.T) {
	page := os.Getpagesize()
	// A live program reading the out-of-band VLAN tag cannot run in user
	// space.
	vlan, err := filter.New([]bpf.RawInstruction{
		{Op: 0x20, K: 0xfffff02c}, // ld vlan_tci (SKF_AD_OFF + SKF_AD_VLAN_TAG)
		{Op: 0x06, K: 0xffff},
	}, "vlan")
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string]Config{
		"negative queue":     {Queue: -1},
		"queue too large":    {Queue: 1 << 16},
		"frames not pow2":    {NumFrames: 100},
		"negative frames":    {NumFrames: -4},
		"frame below min":    {FrameSize: 1024},
		"frame not pow2":     {FrameSize: 3000},
		"frame above page":   {FrameSize: 2 * page},
		"umem too large":     {NumFrames: 1 << 20, FrameSize: 2048},
		"ring not pow2":      {RingSize: 1000},
		"ring too large":     {RingSize: 2 * MaxRingSize},
		"negative batch":     {BatchSize: -1},
		"batch timeout":      {BatchTimeout: MaxBatchTimeout + 1},
		"negative snap":      {SnapLen: -1},
		"unknown bind":       {Bind: 7},
		"unknown attach":     {Attach: 9},
		"unknown host mode":  {Host: 9},
		"kernel-only filter": {Filter: vlan},
		"negative send":      {SendFrames: -1},
		"send not pow2":      {SendFrames: 3},
		"send over the UMEM": {SendFrames: MaxUMEMSize / DefaultFrameSize},
	}
	for name, c := range bad {
		if _, err := c.withDefaults(); !errors.Is(err, steer.ErrConfig) {
			t.Errorf("%s: %v, want steer.ErrConfig", name, err)
		}
		if _, err := Open("lo", c); !errors.Is(err, steer.ErrConfig) {
			t.Errorf("%s: Open: %v, want steer.ErrConfig", name, err)
		}
	}
	if !errors.Is(ErrClosed, net.ErrClosed) {
		t.Error("ErrClosed does not wrap net.ErrClosed")
	}
}

// TestErrClosedText: ErrClosed is what a Source, Group, Steering or Sender
// returns after Close, so its text names a socket, not a source.
func TestErrClosedText(t *testing.T) {
	if got, want := ErrClosed.Error(), "afxdp: socket closed: "+net.ErrClosed.Error(); got != want {
		t.Errorf("ErrClosed reads %q, want %q", got, want)
	}
}

func TestModeNames(t *testing.T) {
	for m, want := range map[BindMode]string{BindAuto: "auto", BindZeroCopy: "zerocopy", BindCopy: "copy", 9: "BindMode(9)"} {
		if m.String() != want {
			t.Errorf("%d: %q, want %q", m, m.String(), want)
		}
	}
	for m, want := range map[AttachMode]string{AttachAuto: "auto", AttachNative: "native", AttachGeneric: "generic", AttachNone: "none", 9: "AttachMode(9)"} {
		if m.String() != want {
			t.Errorf("%d: %q, want %q", m, m.String(), want)
		}
	}
	for m, want := range map[HostMode]string{HostRefuse: "refuse", HostPass: "pass", HostTake: "take", 9: "HostMode(9)"} {
		if m.String() != want {
			t.Errorf("%d: %q, want %q", m, m.String(), want)
		}
	}
	if (Info{ZeroCopy: true}).Mode() != "zerocopy" || (Info{}).Mode() != "copy" {
		t.Error("Info.Mode")
	}
}

func TestStatsReceived(t *testing.T) {
	s := Stats{Delivered: 1, Filtered: 2, RxDropped: 4, RxInvalidDescs: 8, RxRingFull: 16, RxFillRingEmptyDescs: 32}
	if s.Received() != 23 {
		t.Errorf("Received %d, want 23 (invalid descriptors and FILL-empty events are not frames)", s.Received())
	}
	if d := s.Add(s); d.Received() != 46 || d.RxFillRingEmptyDescs != 64 || d.RxInvalidDescs != 16 {
		t.Errorf("Add: %+v", d)
	}
}

// TestModeText: both modes are encoding.TextMarshaler and
// TextUnmarshaler by their String names, parsed in any case; an unknown
// name or value is an error wrapping steer.ErrConfig, and a failed parse leaves
// the mode as it was.
func TestModeText(t *testing.T) {
	var (
		_ encoding.TextMarshaler   = BindAuto
		_ encoding.TextUnmarshaler = (*BindMode)(nil)
		_ encoding.TextMarshaler   = AttachAuto
		_ encoding.TextUnmarshaler = (*AttachMode)(nil)
	)
	for _, m := range []BindMode{BindAuto, BindZeroCopy, BindCopy} {
		b, err := m.MarshalText()
		var back BindMode
		if err != nil || string(b) != m.String() || back.UnmarshalText([]byte(strings.ToUpper(string(b)))) != nil || back != m {
			t.Errorf("%v: marshalled %q, %v; back %v", m, b, err, back)
		}
	}
	for _, m := range []AttachMode{AttachAuto, AttachNative, AttachGeneric, AttachNone} {
		b, err := m.MarshalText()
		var back AttachMode
		if err != nil || string(b) != m.String() || back.UnmarshalText([]byte(strings.ToUpper(string(b)))) != nil || back != m {
			t.Errorf("%v: marshalled %q, %v; back %v", m, b, err, back)
		}
	}
	for _, m := range []HostMode{HostRefuse, HostPass, HostTake} {
		b, err := m.MarshalText()
		var back HostMode
		if err != nil || string(b) != m.String() || back.UnmarshalText([]byte(strings.ToUpper(string(b)))) != nil || back != m {
			t.Errorf("%v: marshalled %q, %v; back %v", m, b, err, back)
		}
	}
	bind, attach := BindCopy, AttachGeneric
	if err := bind.UnmarshalText([]byte("zc")); !errors.Is(err, steer.ErrConfig) || bind != BindCopy {
		t.Errorf("bind mode \"zc\": %v, mode %v; want steer.ErrConfig and copy kept", err, bind)
	}
	if err := attach.UnmarshalText([]byte("offload")); !errors.Is(err, steer.ErrConfig) || attach != AttachGeneric {
		t.Errorf("attach mode \"offload\": %v, mode %v; want steer.ErrConfig and generic kept", err, attach)
	}
	if _, err := BindMode(9).MarshalText(); !errors.Is(err, steer.ErrConfig) {
		t.Errorf("BindMode(9): %v, want steer.ErrConfig", err)
	}
	if _, err := AttachMode(9).MarshalText(); !errors.Is(err, steer.ErrConfig) {
		t.Errorf("AttachMode(9): %v, want steer.ErrConfig", err)
	}
	j, err := json.Marshal(struct {
		Bind   BindMode
		Attach AttachMode
	}{BindZeroCopy, AttachNative})
	if err != nil || string(j) != `{"Bind":"zerocopy","Attach":"native"}` {
		t.Errorf("JSON %s, %v", j, err)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.TextVar(&bind, "bind", BindAuto, "")
	fs.TextVar(&attach, "attach", AttachAuto, "")
	if err := fs.Parse([]string{"-bind", "Copy", "-attach", "GENERIC"}); err != nil || bind != BindCopy || attach != AttachGeneric {
		t.Errorf("flags: %v, %v, %v", err, bind, attach)
	}
}
