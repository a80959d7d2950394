//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/capture"
	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/afxdp"
	"github.com/rpsgo/rps/steer/pcapfile"
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
	return p, udpConf(t, p)
}

// udpConf writes the trafgen configuration of trafficPair: 64-byte UDP
// frames from B to A, random source and destination ports.
func udpConf(t *testing.T, p *netns.Pair) string {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "udp.cfg")
	src, dst := p.B.Addr.Addr().As4(), p.A.Addr.Addr().As4()
	cfg := "{ fill(0xff, 6), 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, c16(0x0800),\n" +
		" 0x45, 0x00, c16(50), drnd(2), c16(0x4000), 64, 17, csumip(14, 33),\n" +
		" " + ip(src) + ", " + ip(dst) + ",\n drnd(2), c16(9), c16(30), c16(0), fill(0x00, 22) }\n"
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return conf
}

// TestReconcileUnderTraffic stops the command while trafgen is still
// sending: the final report must reconcile with the kernel's counters
// (kernel received == steered + kernel dropped). With the sockets left open
// while the dispatcher closed, frames the kernel had counted sat in the
// rings and were counted by nothing else. With -xdp, the AF_XDP sockets'
// counters add up the same way. Intake stops before the drain (a
// drop-all filter, or with -xdp afxdp's StopIntake), so the rings are read
// dry at once although trafgen still sends: the command says nothing of a
// ring that would not dry.
func TestReconcileUnderTraffic(t *testing.T) {
	p, conf := trafficPair(t)
	line := regexp.MustCompile(`Kernel received (\d+) = steered (\d+) \+ kernel dropped (\d+): (\w+)`)
	for _, tc := range []struct {
		fanout string
		xdp    bool
	}{{"none", false}, {"ebpf", false}, {"none", true}, {"ebpf", true}} {
		name := tc.fanout
		if tc.xdp {
			name += "-xdp"
		}
		t.Run(name, func(t *testing.T) {
			var out, errOut syncBuffer
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			o := options{iface: p.A.Link, fanout: tc.fanout, workers: 2, policy: "rss", key: "random",
				interval: time.Hour, quiet: true, enter: p.A.Do, xdp: tc.xdp, xdpHost: afxdp.HostTake}
			errc := make(chan error, 1)
			go func() { errc <- run(ctx, o, &out, &errOut) }()
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
			if strings.Contains(errOut.String(), "reading the rings dry") {
				t.Errorf("the drain did not end: intake went on after the stop:\n%s", errOut.String())
			}
			t.Logf("%s", m[0])
		})
	}
}

func ip(a [4]byte) string {
	return strconv.Itoa(int(a[0])) + ", " + strconv.Itoa(int(a[1])) + ", " + strconv.Itoa(int(a[2])) + ", " + strconv.Itoa(int(a[3]))
}

// tcpConf writes a trafgen configuration for 64-byte TCP ACKs from B to
// A's port dport, from random source ports in 49152-49407 (never a port a
// test's filter names, so that "tcp port 5201" cannot match a frame to
// port 80 by its source port), to a MAC address that is not A's, so that A
// sends nothing back: what B sends is what A receives.
func tcpConf(t *testing.T, p *netns.Pair, dport int) string {
	t.Helper()
	conf := filepath.Join(t.TempDir(), fmt.Sprintf("tcp%d.cfg", dport))
	src, dst := p.B.Addr.Addr().As4(), p.A.Addr.Addr().As4()
	cfg := "{ 0x02, 0x00, 0x00, 0x00, 0x00, 0x99, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, c16(0x0800),\n" +
		" 0x45, 0x00, c16(50), drnd(2), c16(0x4000), 64, 6, csumip(14, 33),\n" +
		" " + ip(src) + ", " + ip(dst) + ",\n" +
		" 0xc0, drnd(), c16(" + strconv.Itoa(dport) + "), drnd(4), c32(0), 0x50, 0x10, c16(512), c16(0), c16(0), fill(0x00, 10) }\n"
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return conf
}

// send runs trafgen in B with conf for count frames.
func send(t *testing.T, p *netns.Pair, conf string, count int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if b, err := p.B.Exec(ctx, "trafgen", "--dev", p.B.Link, "--conf", conf, "--num", strconv.Itoa(count),
		"--cpus", "1", "--no-sock-mem", "--notouch-irq", "--no-cpu-stats"); err != nil {
		t.Errorf("trafgen: %v: %s", err, b)
	}
}

// bgRun is the command running in the background (startArgs).
type bgRun struct {
	out, errOut syncBuffer
	cancel      context.CancelFunc
	wait        func(t *testing.T) error
}

// startArgs parses args and runs the command in p's A side in the
// background; bg.stop stops it. It stops at the test's end too.
func startArgs(t *testing.T, p *netns.Pair, args []string) *bgRun {
	t.Helper()
	o, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o.enter = p.A.Do
	bg := &bgRun{}
	var ctx context.Context
	ctx, bg.cancel = context.WithCancel(context.Background())
	t.Cleanup(bg.cancel)
	bg.wait = runBackground(ctx, o, &bg.out, &bg.errOut)
	return bg
}

// stop ends the run (as Ctrl-C does) and returns its error.
func (bg *bgRun) stop(t *testing.T) error {
	t.Helper()
	bg.cancel()
	return bg.wait(t)
}

// runBackground starts run with o and returns a function that waits for
// it (at most 20 s) and returns its error.
func runBackground(ctx context.Context, o options, out, errOut io.Writer) func(t *testing.T) error {
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, o, out, errOut) }()
	return func(t *testing.T) error {
		t.Helper()
		select {
		case err := <-errc:
			return err
		case <-time.After(20 * time.Second):
			t.Fatal("run did not stop")
			return nil
		}
	}
}

var reconcileLine = regexp.MustCompile(`Kernel received (\d+) = steered (\d+) \+ kernel dropped (\d+)(?: \+ past -c (\d+))?(?: \+ filtered \d+)?: (\w+)`)

// reconcile returns the final report's kernel received, steered, kernel
// dropped and read after -c, and fails unless they add up.
func reconcile(t *testing.T, out string) (received, steered, dropped, after uint64) {
	t.Helper()
	m := reconcileLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no reconciliation in the final report:\n%s", out)
	}
	n := make([]uint64, 4)
	for i := range n {
		n[i], _ = strconv.ParseUint(m[i+1], 10, 64)
	}
	if m[5] != "yes" {
		t.Errorf("the final report does not add up: %s", m[0])
	}
	return n[0], n[1], n[2], n[3]
}

// TestFilter gives the filter as tcpdump takes it: "tcp port 5201" runs in
// the kernel, so of the TCP frames to 5201, the UDP frames to 5201 and the
// TCP frames to 80 that cross the link, the sockets receive and the
// workers steer exactly the first, with one socket and with a fanout group.
// With -xdp it runs in user space: the sockets take all 5000, steer the
// 2000 and count the 3000 others as filtered.
func TestFilter(t *testing.T) {
	netns.Require(t, "trafgen", "tcpdump", "ethtool")
	p, udpConf := trafficPair(t)
	tcp5201, tcp80 := tcpConf(t, p, 5201), tcpConf(t, p, 80)
	for _, tc := range []struct {
		fanout string
		xdp    bool
	}{{"none", false}, {"hash", false}, {"ebpf", false}, {"none", true}, {"ebpf", true}} {
		name, args, wantReceived, where := tc.fanout, []string{}, uint64(2000), "in the kernel"
		if tc.xdp {
			name, args, wantReceived, where = name+"-xdp", []string{"-xdp", "-xdp-host", "take"}, 5000, "in user space"
		}
		t.Run(name, func(t *testing.T) {
			args = append(args, "-i", p.A.Link, "-fanout", tc.fanout, "-workers", "2", "-q", "-interval", "1h", "tcp", "port", "5201")
			bg := startArgs(t, p, args)
			out, errOut := &bg.out, &bg.errOut
			time.Sleep(300 * time.Millisecond)
			r0, _ := p.A.LinkCounter(context.Background(), p.A.Link, "rx_packets")
			send(t, p, tcp5201, 2000)
			send(t, p, udpConf, 1500)
			send(t, p, tcp80, 1500)
			time.Sleep(200 * time.Millisecond)
			r1, _ := p.A.LinkCounter(context.Background(), p.A.Link, "rx_packets")
			if err := bg.stop(t); err != nil {
				t.Fatalf("run: %v\n%s", err, errOut.String())
			}
			received, steered, dropped, _ := reconcile(t, out.String())
			if r1-r0 != 5000 || received != wantReceived || steered != 2000 || dropped != 0 {
				t.Errorf("the link received %d frames, the sockets %d, steered %d, kernel dropped %d; want 5000, %d, 2000, 0",
					r1-r0, received, steered, dropped, wantReceived)
			}
			if tc.xdp && !strings.Contains(out.String(), " + filtered 3000: yes") {
				t.Errorf("the reconciliation does not count the 3000 frames filtered in user space:\n%s", out.String())
			}
			// tcpdump's "received by filter" is the frames that passed the
			// filter, wherever it ran.
			counts := "2000 packets captured\n2000 packets received by filter\n0 packets dropped by kernel\n0 packets dropped in user space\n"
			if !strings.Contains(errOut.String(), `filter "tcp port 5201"`) || !strings.Contains(errOut.String(), where) ||
				!strings.Contains(errOut.String(), counts) {
				t.Errorf("status lines:\n%s", errOut.String())
			}
			// With the kernel's fanout the worker is the kernel's choice,
			// and the status line says so rather than naming a policy.
			kernelPicks := strings.Contains(errOut.String(), "the kernel's fanout hash picks the worker")
			if policy := strings.Contains(errOut.String(), ", policy rss, key "); kernelPicks != (tc.fanout == "hash") || policy == kernelPicks {
				t.Errorf("-fanout %s: the status line says the kernel picks %v, names the policy %v:\n%s", tc.fanout, kernelPicks, policy, errOut.String())
			}
		})
	}
	var errOut bytes.Buffer
	if err := run(context.Background(), options{iface: p.A.Link, fanout: "none", policy: "rss", key: "random", interval: time.Second,
		filter: "tcp port", enter: p.A.Do}, io.Discard, &errOut); !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), "syntax error") {
		t.Errorf("a bad filter: %v, want a usage error with tcpdump's message", err)
	}
}

// TestCount: -c N steers exactly N frames while traffic goes on, then stops
// by itself; the frames the rings held past N are read and counted, and
// the kernel's counters still add up.
func TestCount(t *testing.T) {
	p, conf := trafficPair(t)
	for _, fanout := range []string{"none", "ebpf"} {
		t.Run(fanout, func(t *testing.T) {
			var out syncBuffer
			o := options{iface: p.A.Link, fanout: fanout, workers: 2, policy: "rss", key: "random", interval: time.Hour,
				quiet: true, count: 1000, duration: 30 * time.Second, enter: p.A.Do}
			tctx, tcancel := context.WithCancel(context.Background())
			defer tcancel()
			wait := runBackground(context.Background(), o, &out, io.Discard)
			time.Sleep(200 * time.Millisecond)
			gen := p.B.Command(tctx, "trafgen", "--dev", p.B.Link, "--conf", conf, "--num", "100000000",
				"--cpus", "1", "--no-sock-mem", "--notouch-irq", "--no-cpu-stats")
			if err := gen.Start(); err != nil {
				t.Fatalf("trafgen: %v", err)
			}
			begin := time.Now()
			err := wait(t)
			took := time.Since(begin)
			tcancel()
			gen.Wait()
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if took > 10*time.Second {
				t.Errorf("run took %v to stop after -c 1000", took)
			}
			received, steered, dropped, after := reconcile(t, out.String())
			if steered != 1000 || received != steered+dropped+after {
				t.Errorf("received %d, steered %d, dropped %d, after -c %d; want 1000 steered", received, steered, dropped, after)
			}
			t.Logf("received %d, steered %d, dropped %d, after -c %d, stopped in %v", received, steered, dropped, after, took)
		})
	}
}

// TestWriteAndJSON writes one pcap per worker with a snap length, and the
// JSON report: the files hold every steered frame, cut to the snap length,
// each flow in one file; the JSON report adds up and names the capture.
func TestWriteAndJSON(t *testing.T) {
	p, conf := trafficPair(t)
	dir := t.TempDir()
	pattern := filepath.Join(dir, "w%d.pcap")
	o, err := parseFlags([]string{"-i", p.A.Link, "-fanout", "ebpf", "-workers", "2", "-s", "48", "-p", "-q",
		"-interval", "1h", "-json", "-w", pattern}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r, errOut := runJSON(t, p, o, conf, 3000)
	tot := r.Totals
	if r.Command != "livesteer" || r.Input != p.A.Link || r.Live == nil || r.Live.Fanout != "ebpf" || !r.Live.KeepsFlows ||
		r.Live.SnapLen != 48 || r.Live.Promiscuous || !r.Interrupted {
		t.Errorf("report: %+v, live %+v", r, r.Live)
	}
	if tot.Steered < 3000 || !tot.Balanced || tot.KernelReceived != tot.Steered+tot.KernelDropped || tot.Written != tot.Handled ||
		tot.Read != tot.Steered || len(r.Sources) != 2 {
		t.Errorf("totals %+v, %d sources", tot, len(r.Sources))
	}
	if !strings.Contains(errOut, "--- final report") {
		t.Error("the text report is not on standard error")
	}
	var records uint64
	owner := map[string]int{}
	for w := 0; w < 2; w++ {
		f, err := pcapfile.Open(fmt.Sprintf(pattern, w))
		if err != nil {
			t.Fatal(err)
		}
		var b steer.Batch
		for {
			err := f.ReadBatch(context.Background(), &b)
			for _, fr := range b.Frames {
				records++
				if len(fr.Data) > 48 || fr.WireLen != 64 {
					t.Fatalf("worker %d: a record of %d bytes, wire %d; want at most 48 of 64", w, len(fr.Data), fr.WireLen)
				}
				// The UDP source and destination ports name the flow.
				key := string(fr.Data[26:38])
				if o, ok := owner[key]; ok && o != w {
					t.Errorf("a flow in the files of workers %d and %d", o, w)
				}
				owner[key] = w
			}
			if b.Release != nil {
				b.Release()
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
	}
	if records != tot.Written {
		t.Errorf("the files hold %d records, the report says %d written", records, tot.Written)
	}
}

// runJSON runs the command with o (-json among its flags) in p's A side
// while B sends n frames of conf, stops it, and returns its JSON report
// and its standard error.
func runJSON(t *testing.T, p *netns.Pair, o options, conf string, n int) (capture.Report, string) {
	t.Helper()
	o.enter = p.A.Do
	var stdout, errOut syncBuffer
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	wait := runBackground(ctx, o, &stdout, &errOut)
	waitCapturing(t, &errOut)
	send(t, p, conf, n)
	time.Sleep(200 * time.Millisecond)
	stop()
	if err := wait(t); err != nil {
		t.Fatalf("run: %v", err)
	}
	var r capture.Report
	if err := json.Unmarshal([]byte(stdout.String()), &r); err != nil {
		t.Fatalf("standard output is not the JSON report: %v\n%s", err, stdout.String())
	}
	return r, errOut.String()
}

// TestInterrupt runs the command in a child process inside the namespace
// and sends it SIGINT, as Ctrl-C does: it must print the final report and
// tcpdump's counts, and exit with status 0.
func TestInterrupt(t *testing.T) {
	p, conf := trafficPair(t)
	cmd := p.A.Command(context.Background(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LIVESTEER_MAIN="+strings.Join([]string{"-i", p.A.Link, "-workers", "2", "-q"}, "\n"))
	var stdout bytes.Buffer
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var errOut strings.Builder
	for line := range lines {
		errOut.WriteString(line + "\n")
		if strings.Contains(line, "capturing on") {
			break
		}
	}
	send(t, p, conf, 500)
	time.Sleep(200 * time.Millisecond)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for line := range lines {
			errOut.WriteString(line + "\n")
		}
		done <- cmd.Wait()
	}()
	select {
	case err = <-done:
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		t.Fatal("one interrupt did not stop the command within 15 s")
	}
	if err != nil {
		t.Errorf("exit: %v, want status 0\n%s", err, errOut.String())
	}
	received, steered, _, _ := reconcile(t, stdout.String())
	if steered < 500 || !strings.Contains(stdout.String(), "--- final report") {
		t.Errorf("final report: %d received, %d steered, want the 500 frames sent", received, steered)
	}
	if !regexp.MustCompile(`\d+ packets captured\n\d+ packets received by filter\n\d+ packets dropped by kernel\n\d+ packets dropped in user space`).MatchString(errOut.String()) {
		t.Errorf("no tcpdump counts on standard error:\n%s", errOut.String())
	}
}
