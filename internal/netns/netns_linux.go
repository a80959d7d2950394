//go:build linux

package netns

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const supported = true

// DefaultTimeout bounds a command run with Exec when its context has no
// deadline.
const DefaultTimeout = 30 * time.Second

// namePrefix starts every namespace this package creates; with the pid
// after it, stale namespaces of dead processes can be found and deleted.
const namePrefix = "rpsns-"

var counter atomic.Uint32

// Create makes two namespaces, A and B, named rpsns-PID-N-a and -b, joined
// by a veth pair (veth0 in A, veth1 in B) with addresses 10.X.Y.1/30 and
// 10.X.Y.2/30 (and fd00::1/64, fd00::2/64 with opts.IPv6), links up,
// loopback up, offloads off unless opts.KeepOffloads. The caller must Close
// the pair. Namespaces left behind by dead processes are deleted first.
func Create(opts Options) (*Pair, error) {
	removeStale()
	pid := os.Getpid()
	n := counter.Add(1)
	base := fmt.Sprintf("%s%d-%d", namePrefix, pid, n)
	// The /30 is inside the namespaces only; derive it from pid and counter
	// so concurrent pairs are easy to tell apart in traces.
	x := 64 + pid%128
	y := int(n) % 256
	p := &Pair{
		A: &NS{Name: base + "-a", Link: "veth0",
			Addr: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(x), byte(y), 1}), 30)},
		B: &NS{Name: base + "-b", Link: "veth1",
			Addr: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(x), byte(y), 2}), 30)},
		opts: opts,
	}
	if opts.IPv6 {
		p.A.Addr6 = netip.MustParsePrefix(fmt.Sprintf("fd00:%x:%x::1/64", pid&0xffff, n&0xffff))
		p.B.Addr6 = netip.MustParsePrefix(fmt.Sprintf("fd00:%x:%x::2/64", pid&0xffff, n&0xffff))
	}
	if err := p.build(); err != nil {
		_ = p.Close()
		return nil, err
	}
	return p, nil
}

func (p *Pair) build() error {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	for _, ns := range []*NS{p.A, p.B} {
		if out, err := run(ctx, "ip", "netns", "add", ns.Name); err != nil {
			return fmt.Errorf("netns: adding %s: %w: %s", ns.Name, err, out)
		}
		v6 := "1"
		if p.opts.IPv6 {
			v6 = "0"
		}
		for _, key := range []string{"net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"} {
			// Best effort: a kernel without IPv6 has no such key.
			_ = ns.writeSysctl(ctx, key, v6)
		}
	}
	if out, err := run(ctx, "ip", "link", "add", p.A.Link, "netns", p.A.Name, "type", "veth",
		"peer", "name", p.B.Link, "netns", p.B.Name); err != nil {
		return fmt.Errorf("netns: adding the veth pair: %w: %s", err, out)
	}
	for _, ns := range []*NS{p.A, p.B} {
		cmds := [][]string{
			{"ip", "-n", ns.Name, "link", "set", "lo", "up"},
			{"ip", "-n", ns.Name, "addr", "add", ns.Addr.String(), "dev", ns.Link},
		}
		if ns.Addr6.IsValid() {
			cmds = append(cmds, []string{"ip", "-n", ns.Name, "addr", "add", ns.Addr6.String(), "dev", ns.Link, "nodad"})
		}
		if p.opts.MTU > 0 {
			cmds = append(cmds, []string{"ip", "-n", ns.Name, "link", "set", ns.Link, "mtu", strconv.Itoa(p.opts.MTU)})
		}
		if !p.opts.KeepOffloads {
			cmds = append(cmds, []string{"ip", "netns", "exec", ns.Name, "ethtool", "-K", ns.Link, "tso", "off", "gso", "off", "gro", "off"})
		}
		cmds = append(cmds, []string{"ip", "-n", ns.Name, "link", "set", ns.Link, "up"})
		for _, c := range cmds {
			if out, err := run(ctx, c[0], c[1:]...); err != nil {
				return fmt.Errorf("netns: %s: %w: %s", strings.Join(c, " "), err, out)
			}
		}
	}
	return nil
}

func (p *Pair) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	var errs []error
	for _, ns := range []*NS{p.A, p.B} {
		if ns == nil {
			continue
		}
		if _, err := os.Stat(filepath.Join("/run/netns", ns.Name)); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if out, err := run(ctx, "ip", "netns", "del", ns.Name); err != nil {
			errs = append(errs, fmt.Errorf("netns: deleting %s: %w: %s", ns.Name, err, out))
		}
	}
	return errors.Join(errs...)
}

// removeStale deletes namespaces this package created in processes that no
// longer exist.
func removeStale() {
	ents, err := os.ReadDir("/run/netns")
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), namePrefix)
		if !ok {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = run(ctx, "ip", "netns", "del", e.Name())
			cancel()
		}
	}
}

func run(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := command(ctx, name, args...).CombinedOutput()
	return bytes.TrimSpace(out), err
}

// command is exec.CommandContext in a process group of its own, so that
// ctx's end kills the children too (trafgen forks its workers), and Wait
// does not hang on pipes they inherited.
func command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// Command returns a command that runs name inside the namespace (through
// ip netns exec), for processes the caller starts and waits for itself,
// such as a server. ctx's end kills it and every process it forked.
func (ns *NS) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return command(ctx, "ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// Exec runs name inside the namespace and returns its combined output. A
// ctx without deadline gets DefaultTimeout.
func (ns *NS) Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	out, err := run(ctx, "ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
	if err != nil {
		return out, fmt.Errorf("netns: %s in %s: %w: %s", name, ns.Name, err, out)
	}
	return out, nil
}

func (ns *NS) writeSysctl(ctx context.Context, key, val string) error {
	_, err := ns.Exec(ctx, "sysctl", "-q", "-w", key+"="+val)
	return err
}

// LinkState reads what `ip -d -j link show dev LINK` says of link inside
// the namespace: its promiscuity count and whether an XDP program is
// attached to it.
func (ns *NS) LinkState(ctx context.Context, link string) (LinkState, error) {
	out, err := ns.Exec(ctx, "ip", "-d", "-j", "link", "show", "dev", link)
	if err != nil {
		return LinkState{}, fmt.Errorf("netns: ip link show %s: %w: %s", link, err, out)
	}
	var links []struct {
		Promiscuity int `json:"promiscuity"`
		XDP         *struct {
			Prog *struct {
				ID int `json:"id"`
			} `json:"prog"`
			Attached []struct {
				Prog *struct {
					ID int `json:"id"`
				} `json:"prog"`
			} `json:"attached"`
		} `json:"xdp"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		return LinkState{}, fmt.Errorf("netns: parsing ip link show %s (%v): %s", link, err, out)
	}
	l := links[0]
	st := LinkState{Promiscuity: l.Promiscuity}
	if x := l.XDP; x != nil {
		st.XDP = x.Prog != nil || len(x.Attached) > 0
	}
	return st, nil
}

// LinkCounter reads /sys/class/net/LINK/statistics/COUNTER (such as
// rx_packets) as seen inside the namespace.
func (ns *NS) LinkCounter(ctx context.Context, link, counter string) (uint64, error) {
	if strings.ContainsAny(link+counter, "/") {
		return 0, fmt.Errorf("netns: bad link or counter name %q/%q", link, counter)
	}
	out, err := ns.Exec(ctx, "cat", filepath.Join("/sys/class/net", link, "statistics", counter))
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(string(out), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("netns: parsing %s of %s: %w", counter, link, err)
	}
	return v, nil
}

// Do runs fn on a goroutine whose OS thread is locked and moved into the
// namespace, and waits for it. Sockets fn creates belong to the namespace
// and keep working from any goroutine afterwards. Goroutines that fn starts
// do not inherit the namespace. The thread goes back to the original
// namespace afterwards; if that fails, it is left locked so that the
// runtime discards it.
func (ns *NS) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restored := false
		defer func() {
			if restored {
				runtime.UnlockOSThread()
			}
		}()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- fmt.Errorf("netns: opening the current namespace: %w", err)
			return
		}
		defer orig.Close()
		target, err := os.Open(filepath.Join("/run/netns", ns.Name))
		if err != nil {
			restored = true
			errc <- fmt.Errorf("netns: opening %s: %w", ns.Name, err)
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			restored = true
			errc <- fmt.Errorf("netns: entering %s: %w", ns.Name, err)
			return
		}
		ferr := fn()
		restored = unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil
		errc <- ferr
	}()
	return <-errc
}
