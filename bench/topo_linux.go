//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rpsgo/rps/internal/netns"
)

// line is three namespaces in a row, client - forwarder - server:
//
//	C: c0 10.201.0.1/24 ==veth== f0 :F: f1 ==veth== s0 10.201.0.2/24 :S
//
// The forwarder namespace has no addresses and does not route: only a
// program that copies frames from f0 to f1 and back (examples/forwarder)
// connects C and S, which share one subnet as if F were a cable. Offloads
// (TSO, GSO, GRO and TX checksumming) are off on every veth, so that every
// frame is a real, checksummed frame no larger than the MTU.
type line struct {
	C, F, S *netns.NS
}

const (
	lineClientAddr = "10.201.0.1"
	lineServerAddr = "10.201.0.2"
)

var lineCounter atomic.Uint32

func newLine() (l *line, err error) {
	base := fmt.Sprintf("rpsbench-%d-%d", os.Getpid(), lineCounter.Add(1))
	l = &line{
		C: &netns.NS{Name: base + "-c", Link: "c0"},
		F: &netns.NS{Name: base + "-f", Link: "f0"},
		S: &netns.NS{Name: base + "-s", Link: "s0"},
	}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmds := [][]string{}
	for _, ns := range []*netns.NS{l.C, l.F, l.S} {
		cmds = append(cmds, []string{"ip", "netns", "add", ns.Name},
			[]string{"ip", "netns", "exec", ns.Name, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"},
			[]string{"ip", "netns", "exec", ns.Name, "sysctl", "-q", "-w", "net.ipv6.conf.default.disable_ipv6=1"},
			[]string{"ip", "-n", ns.Name, "link", "set", "lo", "up"})
	}
	cmds = append(cmds,
		[]string{"ip", "link", "add", "c0", "netns", l.C.Name, "type", "veth", "peer", "name", "f0", "netns", l.F.Name},
		[]string{"ip", "link", "add", "s0", "netns", l.S.Name, "type", "veth", "peer", "name", "f1", "netns", l.F.Name},
		[]string{"ip", "-n", l.C.Name, "addr", "add", lineClientAddr + "/24", "dev", "c0"},
		[]string{"ip", "-n", l.S.Name, "addr", "add", lineServerAddr + "/24", "dev", "s0"})
	for _, nl := range [][2]string{{l.C.Name, "c0"}, {l.F.Name, "f0"}, {l.F.Name, "f1"}, {l.S.Name, "s0"}} {
		cmds = append(cmds,
			[]string{"ip", "netns", "exec", nl[0], "ethtool", "-K", nl[1], "tso", "off", "gso", "off", "gro", "off", "tx", "off"},
			[]string{"ip", "-n", nl[0], "link", "set", nl[1], "up"})
	}
	for _, c := range cmds {
		if out, err := exec.CommandContext(ctx, c[0], c[1:]...).CombinedOutput(); err != nil {
			return l, fmt.Errorf("%s: %w: %s", strings.Join(c, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return l, nil
}

// Close deletes the namespaces (and the veths with them).
func (l *line) Close() error {
	var errs []error
	for _, ns := range []*netns.NS{l.C, l.F, l.S} {
		if _, err := os.Stat("/run/netns/" + ns.Name); err != nil {
			continue
		}
		if out, err := exec.Command("ip", "netns", "del", ns.Name).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("deleting %s: %w: %s", ns.Name, err, out))
		}
	}
	return errors.Join(errs...)
}
