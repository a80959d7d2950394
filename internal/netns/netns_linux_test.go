//go:build linux

package netns

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestPair(t *testing.T) {
	p := New(t, Options{})
	ctx := context.Background()
	for _, ns := range []*NS{p.A, p.B} {
		if _, err := os.Stat(filepath.Join("/run/netns", ns.Name)); err != nil {
			t.Fatalf("namespace %s: %v", ns.Name, err)
		}
		out, err := ns.Exec(ctx, "ip", "-o", "addr", "show", "dev", ns.Link)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), ns.Addr.String()) || strings.Contains(string(out), "inet6") {
			t.Errorf("%s addresses: %s", ns.Name, out)
		}
		feat, err := ns.Exec(ctx, "ethtool", "-k", ns.Link)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(feat), "tcp-segmentation-offload: off") {
			t.Errorf("%s: TSO still on", ns.Name)
		}
	}
	// Do runs inside A: the interface is visible there, and the thread
	// comes back to the original namespace.
	before, _ := os.Readlink("/proc/thread-self/ns/net")
	var inside string
	err := p.A.Do(func() error {
		inside, _ = os.Readlink("/proc/thread-self/ns/net")
		_, err := net.InterfaceByName(p.A.Link)
		return err
	})
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if inside == before {
		t.Errorf("Do did not change namespace (%s)", inside)
	}
	// Traffic between the ends, counted inside B.
	r0, err := p.B.LinkCounter(ctx, p.B.Link, "rx_packets")
	if err != nil {
		t.Fatal(err)
	}
	err = p.A.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		dst := &unix.SockaddrInet4{Port: 9, Addr: p.B.Addr.Addr().As4()}
		for i := 0; i < 5; i++ {
			if err := unix.Sendto(fd, []byte("x"), 0, dst); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r1, err := p.B.LinkCounter(ctx, p.B.Link, "rx_packets")
	if err != nil {
		t.Fatal(err)
	}
	if r1-r0 < 5 {
		t.Errorf("B received %d frames, want at least 5", r1-r0)
	}
	if _, err := p.B.LinkCounter(ctx, "../x", "rx_packets"); err == nil {
		t.Error("LinkCounter accepted a path")
	}
	// Close is idempotent and removes everything.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for _, ns := range []*NS{p.A, p.B} {
		if _, err := os.Stat(filepath.Join("/run/netns", ns.Name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("namespace %s left behind: %v", ns.Name, err)
		}
	}
}

func TestPairIPv6(t *testing.T) {
	p := New(t, Options{IPv6: true, KeepOffloads: true, MTU: 9000})
	out, err := p.A.Exec(context.Background(), "ip", "-o", "addr", "show", "dev", p.A.Link)
	if err != nil {
		t.Fatal(err)
	}
	if !p.A.Addr6.IsValid() || !strings.Contains(string(out), p.A.Addr6.String()) {
		t.Errorf("IPv6 address %v missing: %s", p.A.Addr6, out)
	}
	link, err := p.A.Exec(context.Background(), "ip", "-o", "link", "show", "dev", p.A.Link)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(link), "mtu 9000") {
		t.Errorf("MTU not set: %s", link)
	}
}

func TestCommandKillsChildren(t *testing.T) {
	p := New(t, Options{KeepOffloads: true})
	ctx, cancel := context.WithCancel(context.Background())
	// sh forks a sleep that holds the output pipe: only killing the whole
	// process group ends the command before WaitDelay.
	cmd := p.A.Command(ctx, "sh", "-c", "sleep 30 & sleep 30")
	done := make(chan error, 1)
	go func() {
		_, err := cmd.CombinedOutput()
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	cancel()
	if err := <-done; err == nil {
		t.Fatal("killed command reported success")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("command took %v to end: its children survived", d)
	}
}
