// Package netns builds throwaway network namespaces for tests and benchmarks
// that need real traffic: two namespaces joined by a veth pair, with private
// addresses that exist only inside them, deleted again on Close.
//
//	netns.Require(t, "iperf3")
//	p := netns.New(t, netns.Options{})
//	// p.A and p.B are the two ends: run a server in A, a client in B,
//	// open a capture socket in A with p.A.Do(func() error { ... }).
//
// Nothing here touches the host's own interfaces or addresses: the veth pair
// is created directly inside the namespaces, so even its names (veth0 in A,
// veth1 in B) never appear in the caller's namespace.
//
// The package needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and the ip tool;
// Require skips a test without them, or fails it when STEER_REQUIRE_PRIV=1.
package netns

import (
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"testing"
)

// ErrNotSupported is returned on systems without network namespaces.
var ErrNotSupported = errors.New("netns: not supported on this system")

// RequirePrivEnv is the environment variable that turns the skips of
// privileged tests into failures when set to "1".
const RequirePrivEnv = "STEER_REQUIRE_PRIV"

// Options shape a namespace pair. The zero value gives IPv4 only, offloads
// off, the default MTU.
type Options struct {
	// KeepOffloads leaves the veth offloads (TSO, GSO, GRO) as the kernel
	// set them, so that TCP crosses the pair as 64 KiB super-frames. By
	// default New turns them off with ethtool on both ends, so that one
	// frame on the wire is one frame in every counter.
	KeepOffloads bool
	// IPv6 adds fd00::/64 addresses and keeps IPv6 on. By default IPv6 is
	// disabled in both namespaces so that no neighbour discovery or MLD
	// frame appears behind a test's back.
	IPv6 bool
	// MTU sets the veth MTU when positive.
	MTU int
}

// NS is one end of a pair: a named network namespace holding one veth.
type NS struct {
	// Name is the namespace name (under /run/netns).
	Name string
	// Link is the name of the veth inside the namespace.
	Link string
	// Addr is the IPv4 address of Link, in a /30 shared with the peer.
	Addr netip.Prefix
	// Addr6 is the IPv6 address of Link when Options.IPv6 is set.
	Addr6 netip.Prefix
}

// Pair is two namespaces joined by a veth pair: A.Link and B.Link are the
// two ends.
type Pair struct {
	A, B *NS
	opts Options
	done bool
}

// Options returns the options the pair was created with.
func (p *Pair) Options() Options { return p.opts }

// Close deletes both namespaces, which deletes the veth pair with them. It
// is idempotent.
func (p *Pair) Close() error {
	if p.done {
		return nil
	}
	p.done = true
	return p.close()
}

// Require checks that the test runs as root and that ip and the named
// tools are installed. Otherwise it skips the test with the reason, or
// fails it when STEER_REQUIRE_PRIV=1.
func Require(t testing.TB, tools ...string) {
	t.Helper()
	if reason := missing(tools); reason != "" {
		SkipOrFatal(t, reason)
	}
}

// SkipOrFatal skips t with msg, or fails it when STEER_REQUIRE_PRIV=1.
func SkipOrFatal(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv(RequirePrivEnv) == "1" {
		t.Fatalf("%s (%s=1 requires privileged tests to run)", msg, RequirePrivEnv)
	}
	t.Skip(msg)
}

func missing(tools []string) string {
	if !supported {
		return "network namespaces need Linux"
	}
	if os.Geteuid() != 0 {
		return "needs root for network namespaces and AF_PACKET"
	}
	for _, tool := range append([]string{"ip"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			return "needs the " + tool + " tool in PATH"
		}
	}
	return ""
}

// New creates a pair as Create does, after Require(t) (plus ethtool unless
// opts.KeepOffloads), and deletes it in t.Cleanup. A failure to create the
// namespaces skips the test, or fails it when STEER_REQUIRE_PRIV=1.
func New(t testing.TB, opts Options) *Pair {
	t.Helper()
	var tools []string
	if !opts.KeepOffloads {
		tools = append(tools, "ethtool")
	}
	Require(t, tools...)
	p, err := Create(opts)
	if err != nil {
		SkipOrFatal(t, "cannot create network namespaces: "+err.Error())
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("netns: cleanup: %v", err)
		}
	})
	return p
}

// LinkState is what NS.LinkState reads of a link.
type LinkState struct {
	// Promiscuity is the kernel's count of promiscuous-mode holders
	// (PACKET_MR_PROMISC memberships and the IFF_PROMISC flag).
	Promiscuity int
	// XDP says whether an XDP program is attached, in any mode.
	XDP bool
}
