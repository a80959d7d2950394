package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/bpfsteer"
	"github.com/rpsgo/rps/internal/capture"
	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/internal/privdrop"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/afpacket"
)

// TestMain lets a test run main() in a child process, to see its exit
// status and its signal handling: LIVESTEER_MAIN holds the arguments,
// separated by newlines.
func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv("LIVESTEER_MAIN"); ok {
		os.Args = append([]string{"livesteer"}, strings.Split(args, "\n")...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestParseFlags: -h prints the usage, a missing -i or a bad value is a
// usage error, and the defaults are the library's (0 workers, 0 qlimit).
func TestParseFlags(t *testing.T) {
	var errOut bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, &errOut); !errors.Is(err, flag.ErrHelp) ||
		!strings.HasPrefix(errOut.String(), "Usage: livesteer -i IFACE [flags] [filter expression]\n") ||
		!strings.Contains(errOut.String(), "steer.DefaultWorkers()") {
		t.Errorf("-h: %v\n%s", err, errOut.String())
	}
	for _, args := range [][]string{{}, {"-i", "eth0", "-fanout", "nope"}, {"-i", "eth0", "-policy", "nope"},
		{"-i", "eth0", "-dispatch", "later"}, {"-i", "eth0", "-key", "nope"}, {"-i", "eth0", "-qlimit", "20000"},
		{"-i", "eth0", "-workers", "-1"}, {"-i", "eth0", "tcp", "-c", "5"}, {"-i", "eth0", "-c", "-1"},
		{"-i", "eth0", "-s", "-1"}, {"-i", "eth0", "-json", "-w", "-"}, {"-i", "eth0", "-f", "tcp", "udp"},
		{"-i", "eth0", "-tunnels", "deep"}, {"-i", "eth0", "-vxlan-ports", "6081"}, {"-i", "eth0", "-vxlan-ports", "0"},
		{"-i", "eth0", "-hashtypes", "tcp_ipv4"}, {"-i", "eth0", "-hashtypes", "ippair"}, {"-i", "eth0", "-hash", "crc32"},
		{"-i", "eth0", "-hash", "siphash", "-key", "microsoft"}, {"-i", "eth0", "-hash", "siphash", "-key", "symmetric"},
		{"-i", "eth0", "-key", "6d5a56da255b0ec2"}, {"-i", "eth0", "-hash", "siphash", "-key", "6d5a"},
		{"-i", "eth0", "-Z", ""}} {
		if _, err := parseFlags(args, io.Discard); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
	o, err := parseFlags([]string{"-i", "eth0", "-fanout", "ebpf"}, io.Discard)
	if err != nil || o.iface != "eth0" || o.workers != 0 || o.qlimit != 0 || o.fanout != "ebpf" || o.noPromisc || o.filter != "" ||
		o.user != "nobody" || o.userSet {
		t.Errorf("parsed %+v, %v", o, err)
	}
	o, err = parseFlags([]string{"-i", "eth0", "-c", "5", "-s", "96", "-p", "-w", "x-%d.pcap", "tcp", "port", "80"}, io.Discard)
	if err != nil || o.count != 5 || o.snaplen != 96 || !o.noPromisc || o.write != "x-%d.pcap" || o.filter != "tcp port 80" {
		t.Errorf("parsed %+v, %v", o, err)
	}
	if o, err := parseFlags([]string{"-i", "eth0", "-Z", "root"}, io.Discard); err != nil || o.user != "root" || !o.userSet {
		t.Errorf("-Z root: %+v, %v", o, err)
	}
	// -version needs no interface.
	if o, err := parseFlags([]string{"-version"}, io.Discard); err != nil || !o.version {
		t.Errorf("-version: %+v, %v", o, err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), options{version: true}, &out, io.Discard); err != nil || !strings.HasPrefix(out.String(), "livesteer version ") {
		t.Errorf("run -version: %v, %q", err, out.String())
	}
}

// TestConfig: the hash flags reach the dispatcher's configuration, with the
// key, the dispatch default and the rest.
func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want func(c steer.Config) bool
	}{
		{[]string{}, func(c steer.Config) bool {
			h := c.Hash
			return h.Tunnels == steer.TunnelsOuter && h.Types == hash.DefaultTypes && !h.UDP4Tuple && h.Algorithm == hash.AlgorithmToeplitz &&
				h.VXLANPorts == nil && h.Key == nil && c.Dispatch == steer.DispatchDeferred
		}},
		{[]string{"-udp4tuple", "-key", "microsoft"}, func(c steer.Config) bool {
			return c.Hash.UDP4Tuple && string(c.Hash.Key) == string(hash.MicrosoftKey[:]) && !c.Hash.Symmetric
		}},
		{[]string{"-key", "0x" + capture.KeyHex(hash.MicrosoftKey[:])}, func(c steer.Config) bool {
			return string(c.Hash.Key) == string(hash.MicrosoftKey[:]) && !c.Hash.Symmetric // a key in hex, as pcapsteer takes it
		}},
		{[]string{"-key", strings.Repeat("a5", hash.SipHashKeyLen), "-hash", "siphash"}, func(c steer.Config) bool {
			return len(c.Hash.Key) == hash.SipHashKeyLen && c.Hash.Algorithm == hash.AlgorithmSipHash
		}},
		{[]string{"-key", "symmetric", "-fanout", "ebpf"}, func(c steer.Config) bool {
			return c.Hash.Symmetric && string(c.Hash.Key) == string(hash.SymmetricKey[:]) && c.Dispatch == steer.DispatchDirect
		}},
		{[]string{"-tunnels", "inner", "-vxlan-ports", "8472,4789", "-hashtypes", "ipv4,ipv6", "-hash", "siphash"}, func(c steer.Config) bool {
			h := c.Hash
			return h.Tunnels == steer.TunnelsInner && slices.Equal(h.VXLANPorts, []uint16{8472, 4789}) &&
				h.Types == hash.TypeIPv4|hash.TypeIPv6 && h.Algorithm == hash.AlgorithmSipHash && h.Key == nil
		}},
	} {
		o, err := parseFlags(append([]string{"-i", "eth0"}, tc.args...), io.Discard)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		c, err := o.config()
		if err != nil || !tc.want(c) {
			t.Errorf("%q: config %+v, %v", tc.args, c, err)
			continue
		}
		// And steer takes it: the dispatcher hashes as the flags say.
		d, err := steer.New(c, func(*steer.Packet) {})
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		got := d.Config().Hash
		d.Close(context.Background())
		if got.Tunnels != c.Hash.Tunnels || got.Algorithm != c.Hash.Algorithm || got.UDP4Tuple != c.Hash.UDP4Tuple ||
			got.Types&^(hash.TypeUDPIPv4|hash.TypeUDPIPv6) != c.Hash.Types&^(hash.TypeUDPIPv4|hash.TypeUDPIPv6) {
			t.Errorf("%q: the dispatcher hashes with %+v", tc.args, got)
		}
	}
}

// TestSteeringError: a configuration the fanout group or its kernel
// program refuses (every one wraps steer.ErrConfig, the program's own
// refusals too) is a usage error (exit 2) that keeps its message and
// sentinels; other errors stay what they are.
func TestSteeringError(t *testing.T) {
	for _, c := range []struct{ inner, sentinel error }{
		{steer.ErrConfig, steer.ErrConfig},
		{fmt.Errorf("bpfsteer: %w: %w", steer.ErrConfig, bpfsteer.ErrKeyLength), bpfsteer.ErrKeyLength},
	} {
		err := steeringError(fmt.Errorf("afpacket: building the steering program: %w", c.inner))
		if !errors.Is(err, cli.ErrUsage) || !errors.Is(err, steer.ErrConfig) || !errors.Is(err, c.sentinel) || !strings.Contains(err.Error(), c.inner.Error()) {
			t.Errorf("%v: %v, want a usage error", c.inner, err)
		}
	}
	if err := steeringError(afpacket.ErrNotSupported); errors.Is(err, cli.ErrUsage) {
		t.Errorf("%v is a usage error", err)
	}
}

// TestFailedStartKeepsFile: a capture that fails to start (no such
// interface, no such -Z user) leaves an existing -w file as it was. It
// was cut to a 24-byte header.
func TestFailedStartKeepsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keep.pcap")
	const body = "an earlier capture"
	for _, args := range [][]string{
		{"-i", "nosuchif0"},
		{"-i", "lo", "-Z", "no-such-user-here"},
	} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		o, err := parseFlags(append(args, "-q", "-w", path), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		o.drop = func(privdrop.Target) (privdrop.Dropped, error) {
			return privdrop.Dropped{}, errors.New("the test drops nothing")
		}
		if err := run(context.Background(), o, io.Discard, io.Discard); err == nil {
			t.Fatalf("%q: the capture started", args)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != body {
			t.Errorf("%q: the -w file holds %q (%v), want it as before", args, b, err)
		}
		if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
			t.Errorf("%q: the run left %v", args, ents)
		}
	}
}
