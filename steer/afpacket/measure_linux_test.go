//go:build linux

package afpacket

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/kgroup"
)

var measure = flag.Bool("measure", false, "run TestMeasureVsTcpdump (about three minutes)")

// cpuTime is this process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measureRow is one capture at one offered rate.
type measureRow struct {
	sent, seen, drops uint64
	cpu               time.Duration
	elapsed           time.Duration
}

// TestMeasureVsTcpdump sends 64-byte UDP frames with trafgen at rising
// rates over a veth and captures them with tcpdump (-w /dev/null, same
// buffer size) and with the dispatcher fed by a single socket (user-space
// steering, DEFERRED) and by HASH and EBPF fanout groups (DIRECT), and
// prints, per configuration, the highest rate with no drop and the CPU time
// per frame. Run with:
//
//	go test -run TestMeasureVsTcpdump ./steer/afpacket -measure -v
func TestMeasureVsTcpdump(t *testing.T) {
	if !*measure {
		t.Skip("measurement: run with -measure")
	}
	netns.Require(t, "trafgen", "tcpdump", "ethtool")
	p := netns.New(t, netns.Options{})
	const workers = 2
	ringKiB := DefaultBlockSize * DefaultNumBlocks / 1024
	rates := []int{100_000, 400_000, 800_000, 1_600_000, 0} // 0: as fast as trafgen goes
	const seconds = 1.5
	confs := []string{"tcpdump", "single+deferred", "hash+direct", "ebpf+direct"}
	results := map[string][]measureRow{}
	for _, rate := range rates {
		count := int(float64(rate) * seconds)
		if rate == 0 {
			count = 2_000_000
		}
		for _, c := range confs {
			var row measureRow
			if c == "tcpdump" {
				row = measureTcpdump(t, p, ringKiB, rate, count)
			} else {
				row = measureSteer(t, p, c, workers, rate, count)
			}
			results[c] = append(results[c], row)
			t.Logf("%-16s offered %7d pps (0: max): sent %d seen %d drops %d, %.0f ns CPU/frame", c, rate, row.sent, row.seen,
				row.drops, float64(row.cpu.Nanoseconds())/float64(max(row.seen, 1)))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| capture | ")
	for _, r := range rates {
		if r == 0 {
			fmt.Fprintf(&b, "max | ")
			continue
		}
		fmt.Fprintf(&b, "%d kpps | ", r/1000)
	}
	fmt.Fprintf(&b, "highest no-drop rate |\n|---|")
	for range rates {
		fmt.Fprintf(&b, "---|")
	}
	fmt.Fprintf(&b, "---|\n")
	for _, c := range confs {
		fmt.Fprintf(&b, "| %s | ", c)
		best := "none"
		for _, r := range results[c] {
			ns := float64(r.cpu.Nanoseconds()) / float64(max(r.seen, 1))
			achieved := float64(r.sent) / r.elapsed.Seconds() / 1000
			fmt.Fprintf(&b, "%.0f ns/frame, %d lost (%.0f kpps sent) | ", ns, r.drops, achieved)
			if r.drops == 0 && r.seen >= r.sent {
				best = fmt.Sprintf("%.0f kpps", achieved)
			}
		}
		fmt.Fprintf(&b, "%s |\n", best)
	}
	fmt.Fprintf(&b, "\nMachine: %s, %d CPUs, %s; ring %d KiB per socket (tcpdump -B %d), %d workers, 64-byte frames, %.1f s per step.\n",
		cpuModel(), runtime.NumCPU(), kernelRelease(), ringKiB, ringKiB, workers, seconds)
	t.Log(b.String())
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "model name") {
			if _, v, ok := strings.Cut(l, ":"); ok {
				return strings.TrimSpace(v)
			}
		}
	}
	return "unknown CPU"
}

func kernelRelease() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return "Linux " + strings.TrimSpace(string(b))
}

// send runs trafgen at rate for count frames and returns how long it took.
func send(t *testing.T, p *netns.Pair, rate, count int) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if rate > 0 {
		trafgenUDP(t, ctx, p, count, "--rate", strconv.Itoa(rate)+"pps")
	} else {
		trafgenUDP(t, ctx, p, count)
	}
	return time.Since(start)
}

func measureSteer(t *testing.T, p *netns.Pair, conf string, workers, rate, count int) measureRow {
	var handled atomic.Uint64
	cfg := steer.Config{Workers: workers, Hash: steer.HashConfig{UDP4Tuple: true}, Queue: steer.QueueConfig{Limit: steer.MaxQLimit}}
	mode := FanoutHash
	single := conf == "single+deferred"
	if single {
		cfg.Dispatch = steer.DispatchDeferred
	} else {
		cfg.Dispatch = steer.DispatchDirect
		if strings.HasPrefix(conf, "ebpf") {
			mode = FanoutEBPF
		}
	}
	d, err := steer.New(cfg, func(*steer.Packet) { handled.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	var closeSrc func() error
	if single {
		var s *Source
		if err := p.A.Do(func() (err error) { s, err = Open(p.A.Link, Config{IgnoreOutgoing: true}); return err }); err != nil {
			t.Fatal(err)
		}
		closeSrc = s.Close
		go func() { errc <- d.Run(ctx, s) }()
	} else {
		var g *Group
		if err := p.A.Do(func() (err error) {
			g, err = OpenGroup(p.A.Link, workers, Config{IgnoreOutgoing: true}, mode, 0)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		st, err := NewSteering(d, g, kgroup.Options{})
		if err != nil {
			t.Fatal(err)
		}
		closeSrc = func() error { st.Close(); return g.Close() }
		go func() { errc <- st.Run(ctx) }()
	}
	time.Sleep(50 * time.Millisecond)
	c0 := cpuTime()
	elapsed := send(t, p, rate, count)
	// Wait until everything the rings got was handled.
	deadline := time.Now().Add(5 * time.Second)
	var s steer.Stats
	for {
		s = d.Stats()
		recv, drop := sourceSums(&s)
		if recv >= uint64(count) && s.Handled()+s.Dropped()+drop >= recv || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cpu := cpuTime() - c0
	cancel()
	<-errc
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	d.Close(cctx)
	ccancel()
	closeSrc()
	s = d.Stats()
	_, kdrop := sourceSums(&s)
	return measureRow{sent: uint64(count), seen: s.Handled(), drops: kdrop + s.Dropped(), cpu: cpu, elapsed: elapsed}
}

var tcpdumpStat = regexp.MustCompile(`(\d+) packets? (captured|received by filter|dropped by kernel)`)

func measureTcpdump(t *testing.T, p *netns.Pair, ringKiB, rate, count int) measureRow {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := p.A.Command(ctx, "tcpdump", "-i", p.A.Link, "-w", "/dev/null", "-B", strconv.Itoa(ringKiB), "-n", "-Q", "in", "udp")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("tcpdump: %v", err)
	}
	// tcpdump says "listening on" once its socket is open.
	for i := 0; i < 200 && !strings.Contains(stderr.String(), "listening on"); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	elapsed := send(t, p, rate, count)
	time.Sleep(300 * time.Millisecond) // let it write out the last block
	_ = cmd.Process.Signal(os.Interrupt)
	_ = cmd.Wait()
	var row measureRow
	row.sent, row.elapsed = uint64(count), elapsed
	for _, m := range tcpdumpStat.FindAllStringSubmatch(stderr.String(), -1) {
		v, _ := strconv.ParseUint(m[1], 10, 64)
		switch m[2] {
		case "captured":
			row.seen = v
		case "dropped by kernel":
			row.drops = v
		}
	}
	if row.seen+row.drops < row.sent {
		row.drops += row.sent - row.seen - row.drops // lost before the socket counted them
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		row.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return row
}
