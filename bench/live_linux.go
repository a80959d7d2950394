//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/afpacket"
)

// liveEnv is a veth pair in two namespaces the bench created: trafgen sends
// from B, the sockets under test read in A.
type liveEnv struct {
	pair *netns.Pair
	dir  string
}

// liveMissing says why live runs cannot happen here, or "" when they can.
func liveMissing() string {
	if os.Geteuid() != 0 {
		return "live runs need root (network namespaces, AF_PACKET)"
	}
	for _, tool := range []string{"ip", "ethtool", "trafgen"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "live runs need " + tool + " in PATH (Debian: iproute2, ethtool, netsniff-ng)"
		}
	}
	return ""
}

func newLiveEnv(dir string) (*liveEnv, error) {
	p, err := netns.Create(netns.Options{})
	if err != nil {
		return nil, fmt.Errorf("creating the namespaces: %w", err)
	}
	return &liveEnv{pair: p, dir: dir}, nil
}

func (e *liveEnv) Close() error { return e.pair.Close() }

// trafgenConfig writes a trafgen configuration for UDP/IPv4 frames of size
// bytes (without FCS) from B to A, from random source addresses (the last
// byte) and ports: up to 2^24 4-tuples.
func (e *liveEnv) trafgenConfig(size int) (string, error) {
	size = max(size, 60)
	src, dst := e.pair.B.Addr.Addr().As4(), e.pair.A.Addr.Addr().As4()
	var sb strings.Builder
	sb.WriteString("{\n fill(0xff, 6),\n 0x02, 0x00, 0x00, 0x00, 0x00, 0x02,\n c16(0x0800),\n")
	fmt.Fprintf(&sb, " 0x45, 0x00, c16(%d), drnd(2), c16(0x4000), 64, 17, csumip(14, 33),\n", size-14)
	fmt.Fprintf(&sb, " %d, %d, %d, drnd(),\n %d, %d, %d, %d,\n", src[0], src[1], src[2], dst[0], dst[1], dst[2], dst[3])
	fmt.Fprintf(&sb, " drnd(2), c16(9), c16(%d), c16(0),\n fill(0x00, %d)\n}\n", size-34, size-42)
	file := filepath.Join(e.dir, fmt.Sprintf("udp%d.trafgen", size))
	if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
		return "", fmt.Errorf("writing the trafgen config: %w", err)
	}
	return file, nil
}

// runLive sends c.Frames frames with trafgen across the veth pair and
// receives them with c's implementation:
//
//	rps           one AF_PACKET socket, steered in user space (c.Dispatch)
//	rps-fanout    a kernel fanout group (c.Source names the mode), one socket
//	              per worker read by that worker (RunOnWorkers, DIRECT)
//	kernel-fanout the same group without the library: a goroutine per
//	              socket calls the handler (the kernel-only baseline)
//	single        one socket, one goroutine calling the handler
func runLive(ctx context.Context, e *liveEnv, c Case, sp spinner, rep int) (Result, error) {
	r := c.result(rep)
	wk := newWork(c.Handler, sp)
	cfg := afpacket.Config{IgnoreOutgoing: true}
	mode := afpacket.FanoutHash
	if m, ok := strings.CutPrefix(c.Source, "fanout-"); ok {
		switch m {
		case "hash":
		case "lb":
			mode = afpacket.FanoutLB
		case "cpu":
			mode = afpacket.FanoutCPU
		default:
			return r, fmt.Errorf("unknown fanout mode %q", m)
		}
	}
	var single *afpacket.Source
	var group *afpacket.Group
	err := e.pair.A.Do(func() (err error) {
		if c.Impl == "rps" || c.Impl == "single" {
			single, err = afpacket.Open(e.pair.A.Link, cfg)
		} else {
			group, err = afpacket.OpenGroup(e.pair.A.Link, c.Workers, cfg, mode, 0)
		}
		return err
	})
	if err != nil {
		return r, fmt.Errorf("opening AF_PACKET sockets: %w", err)
	}
	var stamped []*stampSource
	stats := func() (afpacket.Stats, error) {
		if single != nil {
			return single.Stats()
		}
		return group.Stats()
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	var d *steer.Dispatcher
	switch c.Impl {
	case "rps", "rps-fanout":
		scfg := c.steerConfig()
		scfg.Hash.UDP4Tuple = true // trafgen's flows differ in their ports too
		// Hold the reader back on a full queue, as the in-memory runs do:
		// the ring then fills and the kernel drops, counted beside the run.
		scfg.Queue.Overflow = steer.OverflowWait
		if c.Impl == "rps-fanout" {
			scfg.Dispatch = steer.Direct
		}
		d, err = wk.dispatcher(scfg)
		if err != nil {
			break
		}
		if single != nil {
			s := newStampSource(single)
			stamped = append(stamped, s)
			go func() { done <- d.Run(rctx, s) }()
		} else {
			srcs := make([]steer.Source, c.Workers)
			for i := range srcs {
				s := newStampSource(group.Source(i))
				stamped = append(stamped, s)
				srcs[i] = s
			}
			go func() { done <- d.RunOnWorkers(rctx, srcs) }()
		}
	case "single", "kernel-fanout":
		var srcs []*afpacket.Source
		if single != nil {
			srcs = []*afpacket.Source{single}
		} else {
			srcs = group.Sources()
		}
		errs := make(chan error, len(srcs))
		wws := wk.baseline(len(srcs))
		for i, src := range srcs {
			s := newStampSource(src)
			stamped = append(stamped, s)
			go func() { errs <- readDirect(rctx, s, wws[i]) }()
		}
		go func() {
			var first error
			for range srcs {
				if err := <-errs; err != nil && first == nil {
					first = err
				}
			}
			done <- first
		}()
	default:
		err = fmt.Errorf("unknown live implementation %q", c.Impl)
	}
	closeAll := func() {
		if single != nil {
			single.Close()
		}
		if group != nil {
			group.Close()
		}
	}
	if err != nil {
		closeAll()
		return r, err
	}
	conf, err := e.trafgenConfig(c.Size)
	if err != nil {
		cancel()
		<-done
		closeAll()
		return r, err
	}
	rx0, _ := e.pair.A.LinkCounter(ctx, e.pair.A.Link, "rx_packets")
	before := snapshot()
	tctx, tcancel := context.WithTimeout(ctx, 60*time.Second)
	out, terr := e.pair.B.Exec(tctx, "trafgen", "--dev", e.pair.B.Link, "--conf", conf, "--num", strconv.Itoa(c.Frames),
		"--cpus", "1", "--no-sock-mem", "--notouch-irq", "--no-cpu-stats")
	tcancel()
	// Wait until every frame that reached the socket was handed out.
	var st afpacket.Stats
	deadline := time.Now().Add(5 * time.Second)
	last, stable := "", 0
	for time.Now().Before(deadline) && stable < 3 {
		time.Sleep(30 * time.Millisecond)
		st, _ = stats()
		cur := fmt.Sprint(st)
		if st.Packets == st.Delivered+st.Drops && cur == last {
			stable++
		} else {
			stable = 0
		}
		last = cur
	}
	cancel()
	runErr := <-done
	if d != nil {
		if cerr := d.Close(context.Background()); runErr == nil {
			runErr = cerr
		}
		ds := d.Stats()
		r.Drops = ds.Dropped()
	}
	after := snapshot()
	st, _ = stats()
	closeAll()
	if terr != nil {
		return r, fmt.Errorf("trafgen: %w: %s", terr, out)
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return r, runErr
	}
	rx1, _ := e.pair.A.LinkCounter(ctx, e.pair.A.Link, "rx_packets")
	if c.Impl == "rps-fanout" {
		r.Dispatch = steer.Direct.String()
	}
	r.KernelDrops = st.Drops
	r.PerWorker, r.Frames = wk.counts()
	el := span(stamped...)
	r.Note = fmt.Sprintf("sent %d, veth rx %d, socket saw %d; rate over first..last batch", c.Frames, rx1-rx0, st.Packets)
	r.finish(el, before, after, wk.latency())
	if el > 0 {
		// The sockets idle (in poll) outside the span, so the CPU time is
		// the span's.
		r.CPUShare = (r.UserSec + r.SysSec) / el.Seconds()
	}
	return r, nil
}
