//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/netns"
)

// syncBuffer is a bytes.Buffer safe for the reporting goroutine and the
// test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRun runs the command's run function for about a second per mode on a
// veth in a test namespace while trafgen sends a little UDP, and checks the
// reports: frames came in, were handled, and the kernel counters show up.
func TestRun(t *testing.T) {
	p, conf := trafficPair(t)
	frames := regexp.MustCompile(`Frames: (\d+) in, (\d+) handled, (\d+) dropped`)
	for _, fanout := range []string{"none", "ebpf"} {
		t.Run(fanout, func(t *testing.T) {
			var out syncBuffer
			o := options{iface: p.A.Link, fanout: fanout, workers: 2, policy: "rss", key: "random",
				duration: 1200 * time.Millisecond, interval: 400 * time.Millisecond, enter: p.A.Do}
			errc := make(chan error, 1)
			go func() { errc <- run(context.Background(), o, &out, io.Discard) }()
			time.Sleep(300 * time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if b, err := p.B.Exec(ctx, "trafgen", "--dev", p.B.Link, "--conf", conf, "--num", "3000",
				"--cpus", "1", "--no-sock-mem", "--notouch-irq", "--no-cpu-stats"); err != nil {
				t.Errorf("trafgen: %v: %s", err, b)
			}
			cancel()
			select {
			case err := <-errc:
				if err != nil {
					t.Fatalf("run: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("run did not stop after its duration")
			}
			s := out.String()
			if !bytes.Contains([]byte(s), []byte("--- final report")) || !bytes.Contains([]byte(s), []byte("--- report")) {
				t.Fatalf("missing periodic or final report:\n%s", s)
			}
			all := frames.FindAllStringSubmatch(s, -1)
			m := all[len(all)-1]
			in, _ := strconv.Atoi(m[1])
			handled, _ := strconv.Atoi(m[2])
			dropped, _ := strconv.Atoi(m[3])
			if in < 3000 || in != handled+dropped {
				t.Errorf("final report: %d in, %d handled, %d dropped; want at least the 3000 frames sent, all accounted", in, handled, dropped)
			}
			if !bytes.Contains([]byte(s), []byte("kernel received")) {
				t.Errorf("no kernel counters in the report")
			}
			t.Logf("final: %s", m[0])
		})
	}
}

// trafficPair makes a test namespace pair and a trafgen configuration for
// UDP frames from B to A, random source and destination ports.
func trafficPair(t *testing.T) (*netns.Pair, string) {
	t.Helper()
	netns.Require(t, "trafgen", "ethtool")
	p := netns.New(t, netns.Options{})
	conf := filepath.Join(t.TempDir(), "udp.cfg")
	src, dst := p.B.Addr.Addr().As4(), p.A.Addr.Addr().As4()
	cfg := "{ fill(0xff, 6), 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, c16(0x0800),\n" +
		" 0x45, 0x00, c16(50), drnd(2), c16(0x4000), 64, 17, csumip(14, 33),\n" +
		" " + ip(src) + ", " + ip(dst) + ",\n drnd(2), c16(9), c16(30), c16(0), fill(0x00, 22) }\n"
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, conf
}

// TestReconcileUnderTraffic stops the command while trafgen is still
// sending: the final report must reconcile with the kernel's counters
// (kernel received == steered + kernel dropped). With the sockets left open
// while the dispatcher closed, frames the kernel had counted sat in the
// rings and were counted by nothing else.
func TestReconcileUnderTraffic(t *testing.T) {
	p, conf := trafficPair(t)
	line := regexp.MustCompile(`Kernel received (\d+) = steered (\d+) \+ kernel dropped (\d+): (\w+)`)
	for _, fanout := range []string{"none", "ebpf"} {
		t.Run(fanout, func(t *testing.T) {
			var out syncBuffer
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			o := options{iface: p.A.Link, fanout: fanout, workers: 2, policy: "rss", key: "random",
				interval: time.Hour, quiet: true, enter: p.A.Do}
			errc := make(chan error, 1)
			go func() { errc <- run(ctx, o, &out, io.Discard) }()
			time.Sleep(200 * time.Millisecond)
			// Far more frames than trafgen sends before the stop: it is
			// still sending when the command stops, and is killed after.
			tctx, tcancel := context.WithCancel(context.Background())
			defer tcancel()
			gen := p.B.Command(tctx, "trafgen", "--dev", p.B.Link, "--conf", conf, "--num", "100000000",
				"--cpus", "1", "--no-sock-mem", "--notouch-irq", "--no-cpu-stats")
			if err := gen.Start(); err != nil {
				t.Fatalf("trafgen: %v", err)
			}
			time.Sleep(500 * time.Millisecond)
			stop()
			var err error
			select {
			case err = <-errc:
			case <-time.After(15 * time.Second):
				t.Fatal("run did not stop 15 s after its context ended")
			}
			tcancel()
			gen.Wait()
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			m := line.FindStringSubmatch(out.String())
			if m == nil {
				t.Fatalf("no reconciliation in the final report:\n%s", out.String())
			}
			var received, steered, dropped uint64
			fmt.Sscan(m[1]+" "+m[2]+" "+m[3], &received, &steered, &dropped)
			if received == 0 || received != steered+dropped || m[4] != "yes" {
				t.Errorf("final report: %s; want kernel received == steered + kernel dropped", m[0])
			}
			t.Logf("%s", m[0])
		})
	}
}

func ip(a [4]byte) string {
	return strconv.Itoa(int(a[0])) + ", " + strconv.Itoa(int(a[1])) + ", " + strconv.Itoa(int(a[2])) + ", " + strconv.Itoa(int(a[3]))
}
