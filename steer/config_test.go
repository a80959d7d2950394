package steer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rpsgo/rps/hash"
	"go.uber.org/goleak"
)

// TestConfigErrorsSayWhatToChange adds to TestConfigErrors: every error of
// New wraps ErrConfig and names the setting and what it may be.
func TestConfigErrorsSayWhatToChange(t *testing.T) {
	h := func(*Packet) {}
	cases := []struct {
		cfg  Config
		want []string // the setting, and what to set it to
	}{
		{Config{Workers: 70000}, []string{"70000 workers", "65535"}},
		{Config{Workers: -3}, []string{"-3 workers", "zero (the default) or more"}},
		{Config{Buckets: 3}, []string{"3 buckets", "power of two from 1 to 65536"}},
		{Config{Policy: 9}, []string{"unknown policy 9", "want rss, flow, source, cpu"}},
		{Config{Dispatch: 7}, []string{"unknown dispatch mode 7", "want deferred, hybrid, direct"}},
		{Config{Queue: QueueConfig{Overflow: 9}}, []string{"unknown overflow rule 9", "want auto, wait, drop"}},
		{Config{Hash: HashConfig{Tunnels: 5}}, []string{"unknown tunnel mode 5", "want outer, inner"}},
		{Config{Hash: HashConfig{Fragments: 5}}, []string{"unknown fragment mode 5", "want tuple, follow"}},
		{Config{Hash: HashConfig{Algorithm: 5}}, []string{"unknown hash algorithm 5", "want toeplitz or siphash"}},
		{Config{Buckets: 1 << 17}, []string{"131072 buckets", "power of two from 1 to 65536"}},
		{Config{Workers: 4, Buckets: 2}, []string{"2 buckets for 4 workers", "use at least 4 buckets"}},
		{Config{Workers: 200, Buckets: 128}, []string{"128 buckets for 200 workers", "use at least 256 buckets"}},
		{Config{Hash: HashConfig{Key: make([]byte, minKeyLen-1)}}, []string{"key of 39 bytes", "want 40 to 64", "nil for a random key"}},
		{Config{Hash: HashConfig{Key: make([]byte, hash.MaxKeyLen+1)}}, []string{"key of 65 bytes", "want 40 to 64"}},
		{Config{Queue: QueueConfig{Limit: MaxQLimit + 1}}, []string{"queue limit 10241", "maxqlimit 10240"}},
		{Config{Queue: QueueConfig{Limit: -5}}, []string{"queue limit -5", "negative"}},
		{Config{RFS: RFSConfig{Enabled: true, TableSize: 24}}, []string{"RFS table size 24", "power of two from 16 to 67108864"}},
		{Config{TickInterval: -time.Millisecond}, []string{"tick interval -1ms", "set a positive interval, or zero for one second"}},
		{Config{Policy: PolicyCPU}, []string{"policy cpu", "CPUFunc"}},
		{Config{Policy: 9}, []string{"policy 9"}},
		{Config{Dispatch: 9}, []string{"dispatch mode 9"}},
		{Config{Queue: QueueConfig{Overflow: 9}}, []string{"overflow rule 9"}},
		{Config{Rebalance: RebalanceConfig{Interval: -time.Second}}, []string{"rebalance interval -1s", "negative"}},
	}
	for _, c := range cases {
		d, err := New(c.cfg, h)
		if err == nil {
			d.Close(context.Background())
			t.Errorf("no error where New should say %q", c.want)
			continue
		}
		if !errors.Is(err, ErrConfig) {
			t.Errorf("error %q does not wrap ErrConfig", err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q: does not say %q", err, w)
			}
		}
	}
	if _, err := New(Config{Hash: HashConfig{Key: make([]byte, 16)}}, h); !errors.Is(err, hash.ErrKeyLength) {
		t.Errorf("a 16-byte key: %v, want it to wrap hash.ErrKeyLength too", err)
	}
}

// TestConfigAccepted: configurations that steer are accepted, with their
// defaults filled in; the default table grows to cover every worker.
func TestConfigAccepted(t *testing.T) {
	defer goleak.VerifyNone(t)
	cases := []struct {
		cfg         Config
		wantBuckets int
	}{
		{Config{Workers: 200}, 256}, // more workers than DefaultBuckets
		{Config{Workers: 128}, DefaultBuckets},
		{Config{Workers: 3}, DefaultBuckets},
		{Config{Workers: 4, Buckets: 4}, 4},
		{Config{Workers: 4, Buckets: 1, Policy: PolicyFlow}, 1},            // the table is not used
		{Config{Workers: 4, Buckets: 1, RFS: RFSConfig{Enabled: true}}, 1}, // RFS places the flows
		{Config{Workers: 2, Hash: HashConfig{Key: hash.MicrosoftKey[:minKeyLen]}}, DefaultBuckets},
		{Config{Workers: 2, Hash: HashConfig{Key: append(hash.MicrosoftKey[:], hash.MicrosoftKey[:hash.MaxKeyLen-minKeyLen]...)}}, DefaultBuckets},
	}
	for _, c := range cases {
		d, err := New(c.cfg, func(*Packet) {})
		if err != nil {
			t.Errorf("%d workers, %d buckets, policy %v, RFS %t, key of %d bytes: %v",
				c.cfg.Workers, c.cfg.Buckets, c.cfg.Policy, c.cfg.RFS.Enabled, len(c.cfg.Hash.Key), err)
			continue
		}
		got := d.Config()
		if err := d.Close(context.Background()); err != nil {
			t.Error(err)
		}
		if got.Buckets != c.wantBuckets || len(d.Table()) != c.wantBuckets || got.Workers != c.cfg.Workers {
			t.Errorf("%d workers, %d buckets asked: %d workers, %d buckets (table of %d); want %d workers, %d buckets",
				c.cfg.Workers, c.cfg.Buckets, got.Workers, got.Buckets, len(d.Table()), c.cfg.Workers, c.wantBuckets)
		}
		if got.TickInterval != time.Second || got.Logger == nil || got.RFS.TableSize != 1<<16 || len(got.Hash.Key) < minKeyLen {
			t.Errorf("%d workers: defaults not filled in: tick %v, logger %v, RFS table %d, key of %d bytes",
				c.cfg.Workers, got.TickInterval, got.Logger, got.RFS.TableSize, len(got.Hash.Key))
		}
	}
}

// enums holds one of each enum, as a configuration file would.
type enums struct {
	Policy   Policy
	Dispatch DispatchMode
	Overflow Overflow
	Reason   Reason
}

// TestEnumsText: Policy, DispatchMode, Overflow and Reason encode by name,
// decode in any case, through encoding/json and flag.TextVar, and refuse
// unknown names with an error wrapping ErrConfig.
func TestEnumsText(t *testing.T) {
	type enum interface {
		String() string
		MarshalText() ([]byte, error)
	}
	type decoder interface{ UnmarshalText([]byte) error }
	var all []struct {
		v   enum
		dec func() (decoder, func() enum)
	}
	add := func(v enum, dec func() (decoder, func() enum)) {
		all = append(all, struct {
			v   enum
			dec func() (decoder, func() enum)
		}{v, dec})
	}
	for p := PolicyRSS; p <= PolicyCPU; p++ {
		add(p, func() (decoder, func() enum) { var x Policy; return &x, func() enum { return x } })
	}
	for m := DispatchDeferred; m <= DispatchDirect; m++ {
		add(m, func() (decoder, func() enum) { var x DispatchMode; return &x, func() enum { return x } })
	}
	for o := OverflowAuto; o <= OverflowDrop; o++ {
		add(o, func() (decoder, func() enum) { var x Overflow; return &x, func() enum { return x } })
	}
	for r := range numReasons {
		add(r, func() (decoder, func() enum) { var x Reason; return &x, func() enum { return x } })
	}
	for _, e := range all {
		b, err := e.v.MarshalText()
		if err != nil || string(b) != e.v.String() || strings.Contains(string(b), "(") {
			t.Errorf("%T %v: MarshalText = %q, %v; want its name", e.v, e.v, b, err)
		}
		for _, s := range []string{string(b), strings.ToUpper(string(b)), strings.ToUpper(string(b[:1])) + string(b[1:])} {
			d, got := e.dec()
			if err := d.UnmarshalText([]byte(s)); err != nil || got() != e.v {
				t.Errorf("%T: UnmarshalText(%q) = %v, %v; want %v", e.v, s, got(), err, e.v)
				break
			}
		}
		d, _ := e.dec()
		if err := d.UnmarshalText([]byte("zzz")); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), e.v.String()) {
			t.Errorf("%T: unknown name: %v; want ErrConfig listing the names", e.v, err)
		}
	}

	in := enums{PolicySource, DispatchHybrid, OverflowDrop, ReasonBadIHL}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"Policy":"source","Dispatch":"hybrid","Overflow":"drop","Reason":"bad-ihl"}`; string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
	var out enums
	if err := json.Unmarshal([]byte(strings.ToUpper(string(b))), &out); err != nil || out != in {
		t.Errorf("JSON back: %+v, %v; want %+v", out, err, in)
	}
	if err := json.Unmarshal([]byte(`{"Policy":"hash"}`), &out); !errors.Is(err, ErrConfig) {
		t.Errorf("JSON with an unknown policy: %v, want ErrConfig", err)
	}

	var p Policy
	if err := p.UnmarshalText([]byte("RSS")); err != nil || p != PolicyRSS {
		t.Errorf(`Policy.UnmarshalText("RSS") = %v, %v`, p, err)
	}
	var m DispatchMode
	if err := m.UnmarshalText([]byte("Direct")); err != nil || m != DispatchDirect {
		t.Errorf(`DispatchMode.UnmarshalText("Direct") = %v, %v`, m, err)
	}
	if err := p.UnmarshalText([]byte("round-robin")); !errors.Is(err, ErrConfig) {
		t.Errorf(`Policy.UnmarshalText("round-robin"): %v, want ErrConfig`, err)
	}

	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var cfg Config
	fs.TextVar(&cfg.Policy, "policy", PolicyRSS, "")
	fs.TextVar(&cfg.Dispatch, "dispatch", DispatchDeferred, "")
	fs.TextVar(&cfg.Queue.Overflow, "overflow", OverflowAuto, "")
	if err := fs.Parse([]string{"-policy", "FLOW", "-dispatch=hybrid", "-overflow", "Wait"}); err != nil {
		t.Fatal(err)
	}
	if cfg.Policy != PolicyFlow || cfg.Dispatch != DispatchHybrid || cfg.Queue.Overflow != OverflowWait {
		t.Errorf("flags gave %v %v %v, want flow hybrid wait", cfg.Policy, cfg.Dispatch, cfg.Queue.Overflow)
	}
	if err := fs.Parse([]string{"-overflow", "block"}); err == nil {
		t.Error("-overflow block: no error")
	}
}

// TestStatsJSON: Stats encodes to JSON (Config's functions and logger left
// out) without the key's bytes, and decodes back; Stats.KeyFingerprint
// names the key.
func TestStatsJSON(t *testing.T) {
	defer goleak.VerifyNone(t)
	custom := bytes.Repeat([]byte{0x5a, 0x17}, minKeyLen/2)
	sum := sha256.Sum256(custom)
	cases := []struct {
		key  []byte
		want *regexp.Regexp
	}{
		{nil, regexp.MustCompile(`^random [0-9a-f]{8}$`)},
		{hash.MicrosoftKey[:], regexp.MustCompile(`^microsoft$`)},
		{custom, regexp.MustCompile(`^` + hex.EncodeToString(sum[:4]) + `$`)},
	}
	for _, c := range cases {
		d, err := New(Config{
			Workers:  2,
			Policy:   PolicyCPU,
			CPUFunc:  func(flowid uint32, _ hash.HashType) (int, bool) { return int(flowid % 2), true },
			Dispatch: DispatchHybrid,
			Hash:     HashConfig{Key: c.key},
			Queue:    QueueConfig{Overflow: OverflowDrop},
			Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
			OnPanic:  func(PanicInfo) {},
			Trace:    func(*Decision) {},
		}, func(*Packet) {})
		if err != nil {
			t.Fatal(err)
		}
		st := runAndClose(t, d, dtTraffic(rand.New(rand.NewPCG(51, 1)), 10, 100))
		if !c.want.MatchString(st.KeyFingerprint) {
			t.Errorf("Stats.KeyFingerprint %q, want %v", st.KeyFingerprint, c.want)
		}
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatalf("json.Marshal(Stats): %v", err)
		}
		key := st.Config.Hash.Key
		for _, enc := range []string{base64.StdEncoding.EncodeToString(key), hex.EncodeToString(key)} {
			if bytes.Contains(b, []byte(enc)) {
				t.Errorf("Stats JSON holds the key's bytes (%s)", enc)
			}
		}
		for _, want := range []string{`"Policy":"cpu"`, `"Dispatch":"hybrid"`, `"Overflow":"drop"`, `"KeyFingerprint":"` + st.KeyFingerprint + `"`} {
			if !bytes.Contains(b, []byte(want)) {
				t.Errorf("Stats JSON lacks %s: %s", want, b)
			}
		}
		var back Stats
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("Stats JSON does not decode back: %v", err)
		}
		if back.Frames != 100 || back.KeyFingerprint != st.KeyFingerprint || back.Config.Policy != PolicyCPU || back.Config.Dispatch != DispatchHybrid ||
			back.Config.Queue.Overflow != OverflowDrop || back.Config.Workers != 2 {
			t.Errorf("Stats JSON decoded to %+v", back)
		}
	}
}
