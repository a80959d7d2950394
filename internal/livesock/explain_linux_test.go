//go:build linux

package livesock

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rpsgo/rps/internal/netns"
)

// TestExplain: an EPERM gets what to change (root, or the capabilities
// the operation needs), a locked-memory refusal the limit and the way
// around it; the result still wraps the error, and any other error, or
// nil, comes back as it is.
func TestExplain(t *testing.T) {
	eperm := fmt.Errorf("socket: %w", unix.EPERM)
	for _, c := range []struct {
		err  error
		need Need
		says []string
	}{
		{eperm, NeedRaw, []string{"root or CAP_NET_RAW"}},
		{eperm, NeedBPF, []string{"CAP_BPF", "RLIMIT_MEMLOCK"}},
		{eperm, NeedXDP, []string{"CAP_NET_ADMIN and CAP_BPF"}},
		{fmt.Errorf("registering the UMEM: %w", unix.ENOBUFS), NeedMemlock, []string{"RLIMIT_MEMLOCK", "CAP_IPC_LOCK", "Config.NumFrames"}},
	} {
		got := Explain(c.err, c.need)
		if !errors.Is(got, c.err) {
			t.Errorf("Explain(%v) = %v: does not wrap the error", c.err, got)
		}
		for _, s := range c.says {
			if !strings.Contains(got.Error(), s) {
				t.Errorf("Explain(%v, %d) = %q: does not say %q", c.err, c.need, got, s)
			}
		}
	}
	other := fmt.Errorf("bind: %w", unix.EINVAL)
	if got := Explain(other, NeedRaw); got != other {
		t.Errorf("Explain(EINVAL) = %v, want the error as it is", got)
	}
	if got := Explain(nil, NeedRaw); got != nil {
		t.Errorf("Explain(nil) = %v", got)
	}
}

// TestInterface: a missing interface's error names the namespace the
// lookup ran in, the initial one or a named one, and the interfaces that
// are there, without the net package's jargon, and still wraps its
// error.
func TestInterface(t *testing.T) {
	if _, err := Interface("lo"); err != nil {
		t.Fatal(err)
	}
	_, err := Interface("rps-nosuch0")
	var op *net.OpError
	if err == nil || !strings.Contains(err.Error(), `device "rps-nosuch0" does not exist in `+Namespace()+"; its interfaces are lo") ||
		strings.Contains(err.Error(), "route ip+net") || !errors.As(err, &op) {
		t.Errorf("in the test's namespace (%s): %v", Namespace(), err)
	}
	self, _ := os.Readlink("/proc/self/ns/net")
	init, ierr := os.Readlink("/proc/1/ns/net")
	switch ns := Namespace(); {
	case ierr == nil && init == self && ns != "the initial network namespace",
		ierr == nil && init != self && !strings.Contains(ns, "not the initial one"),
		ierr != nil && (strings.Contains(ns, "initial") || !strings.Contains(ns, self)):
		t.Errorf("Namespace() = %q; this process's is %s, init's %s (%v)", ns, self, init, ierr)
	}
	netns.Require(t)
	p := netns.New(t, netns.Options{})
	err = p.A.Do(func() error { _, err := Interface("rps-nosuch0"); return err })
	want := fmt.Sprintf(`device "rps-nosuch0" does not exist in network namespace %q; its interfaces are `, p.A.Name)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p.A.Link) || !strings.Contains(err.Error(), "lo") {
		t.Errorf("in %s: %v, want %q and its interfaces", p.A.Name, err, want)
	}
}
