package capture

import (
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/steer"
)

// parseHash parses args into HashFlags as a command does and returns the
// configuration for key.
func parseHash(args []string, key []byte) (steer.HashConfig, error) {
	var h HashFlags
	fs := cli.NewFlagSet("demo", "", "", io.Discard)
	h.Register(fs)
	if err := cli.Parse(fs, args); err != nil {
		return steer.HashConfig{}, err
	}
	return h.Config(key, false)
}

func TestHashFlags(t *testing.T) {
	hc, err := parseHash(nil, nil)
	if err != nil || hc.Tunnels != steer.TunnelsOuter || hc.Types != hash.DefaultTypes || hc.UDP4Tuple ||
		hc.Algorithm != hash.AlgorithmToeplitz || hc.VXLANPorts != nil || hc.Key != nil {
		t.Errorf("defaults: %+v, %v", hc, err)
	}
	hc, err = parseHash([]string{"-tunnels", "INNER", "-vxlan-ports", "4789, 8472", "-hashtypes", "ipv4,ipv6", "-hash", "siphash"}, nil)
	if err != nil || hc.Tunnels != steer.TunnelsInner || !slices.Equal(hc.VXLANPorts, []uint16{4789, 8472}) ||
		hc.Types != hash.TypeIPv4|hash.TypeIPv6 || hc.Algorithm != hash.AlgorithmSipHash {
		t.Errorf("all set: %+v, %v", hc, err)
	}
	hc, err = parseHash([]string{"-udp4tuple"}, hash.MicrosoftKey[:])
	if err != nil || !hc.UDP4Tuple || hc.Types != hash.DefaultTypes || len(hc.Key) != hash.DefaultKeyLen {
		t.Errorf("-udp4tuple: %+v, %v", hc, err)
	}
	for _, tc := range []struct {
		args   []string
		key    []byte
		config bool   // steer's refusal: errors.Is steer.ErrConfig too
		msg    string // in the error
	}{
		{args: []string{"-tunnels", "sideways"}, msg: "tunnel mode"},
		{args: []string{"-vxlan-ports", "0"}, msg: "-vxlan-ports"},
		{args: []string{"-vxlan-ports", "70000"}, msg: "-vxlan-ports"},
		{args: []string{"-vxlan-ports", "4789,x"}, msg: "-vxlan-ports"},
		{args: []string{"-vxlan-ports", "4789,4789"}, msg: "twice"},
		{args: []string{"-vxlan-ports", "6081"}, config: true, msg: "-vxlan-ports"},
		{args: []string{"-hashtypes", "tcp_ipv4,tcp_ipv6"}, config: true, msg: "-hashtypes"},
		{args: []string{"-hashtypes", "ipv4,ippair"}, msg: "ippair"},
		{args: []string{"-hash", "md5"}, msg: "md5"},
		{args: []string{"-hash", "siphash"}, key: hash.MicrosoftKey[:], config: true, msg: "-hash siphash and -key"},
	} {
		_, err := parseHash(tc.args, tc.key)
		if !errors.Is(err, cli.ErrUsage) || tc.config != errors.Is(err, steer.ErrConfig) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: %v; want a usage error saying %q (steer.ErrConfig %v)", tc.args, err, tc.msg, tc.config)
		}
	}
}

// TestHashFlagsHelp: every flag is in the usage, with its default.
func TestHashFlagsHelp(t *testing.T) {
	var h HashFlags
	var b strings.Builder
	fs := cli.NewFlagSet("demo", "", "", &b)
	h.Register(fs)
	if err := cli.Parse(fs, []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatal(err)
	}
	for _, want := range []string{"-tunnels mode", "(default outer)", "-vxlan-ports ports", "-hashtypes set",
		"(default ipv4,tcp_ipv4,ipv6,tcp_ipv6)", "-udp4tuple", "-hash function", "(default toeplitz)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, b.String())
		}
	}
}

func TestHashSummary(t *testing.T) {
	for _, tc := range []struct {
		hc   steer.HashConfig
		want string
	}{
		{steer.HashConfig{}, "toeplitz over ipv4,tcp_ipv4,ipv6,tcp_ipv6, tunnels outer"},
		{steer.HashConfig{Algorithm: hash.AlgorithmSipHash, UDP4Tuple: true, Tunnels: steer.TunnelsInner, Symmetric: true},
			"siphash over ipv4,tcp_ipv4,udp_ipv4,ipv6,tcp_ipv6,udp_ipv6, tunnels inner (vxlan ports 4789), symmetric"},
		{steer.HashConfig{Types: hash.TypeIPv4 | hash.TypeIPv6, Tunnels: steer.TunnelsInner, VXLANPorts: []uint16{8472, 4789}},
			"toeplitz over ipv4,ipv6, tunnels inner (vxlan ports 8472,4789)"},
	} {
		if got := HashSummary(tc.hc); got != tc.want {
			t.Errorf("HashSummary(%+v) = %q, want %q", tc.hc, got, tc.want)
		}
	}
}
