//go:build linux

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// rrMissing says why the request/response experiment cannot run here.
func rrMissing() string {
	if os.Geteuid() != 0 {
		return "the request/response experiment needs root (network namespaces, AF_PACKET)"
	}
	for _, tool := range []string{"ip", "ethtool", "sysctl", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "the request/response experiment needs " + tool + " in PATH"
		}
	}
	return ""
}

// buildForwarder compiles examples/forwarder into dir.
func buildForwarder(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "forwarder")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/rpsgo/rps/examples/forwarder")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building examples/forwarder: %w: %s", err, out)
	}
	return bin, nil
}

// rrSpec is one request/response run.
type rrSpec struct {
	Workers  int
	Work     time.Duration
	Conns    int
	Duration time.Duration // measured, after a warm-up of a fifth of it
}

// runRR puts examples/forwarder between a client and a server namespace
// and drives Conns TCP connections doing 1-byte request/response through
// it, as netperf TCP_RR does: transactions per second, transaction latency
// and the client's TCP retransmissions.
func runRR(ctx context.Context, bin string, s rrSpec, rep int) (Result, error) {
	r := Result{Experiment: "rr", Impl: "forwarder", Source: "afpacket", Handler: fmt.Sprintf("work%v", s.Work),
		FrameSize: 67, Flows: s.Conns, Workers: s.Workers, Dispatch: "deferred", Policy: "rss", Rep: rep}
	l, err := newLine()
	if err != nil {
		return r, err
	}
	defer l.Close()
	fctx, fcancel := context.WithCancel(ctx)
	defer fcancel()
	fw := l.F.Command(fctx, bin, "-in", "f0", "-out", "f1", "-workers", strconv.Itoa(s.Workers), "-work", s.Work.String())
	stderr, err := fw.StderrPipe()
	if err != nil {
		return r, fmt.Errorf("forwarder stderr: %w", err)
	}
	if err := fw.Start(); err != nil {
		return r, fmt.Errorf("starting the forwarder: %w", err)
	}
	fwStart := time.Now()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var fwLog []string
	ready := false
	timeout := time.After(10 * time.Second)
	for !ready {
		select {
		case ln, ok := <-lines:
			if !ok {
				_ = fw.Wait()
				return r, fmt.Errorf("the forwarder exited: %s", strings.Join(fwLog, "; "))
			}
			fwLog = append(fwLog, ln)
			ready = strings.Contains(ln, "forwarding")
		case <-timeout:
			fcancel()
			_ = fw.Wait()
			return r, errors.New("the forwarder did not start within 10s")
		}
	}
	stopFw := func() (string, error) {
		_ = fw.Process.Signal(os.Interrupt)
		var stats string
		for ln := range lines {
			if s, ok := strings.CutPrefix(ln, "forwarder: stats "); ok {
				stats = s
			}
		}
		err := fw.Wait()
		return stats, err
	}

	// The server: echo one byte for each byte read.
	var ln net.Listener
	if err := l.S.Do(func() (err error) {
		ln, err = net.Listen("tcp4", lineServerAddr+":7007")
		return err
	}); err != nil {
		stopFw()
		return r, fmt.Errorf("server listen: %w", err)
	}
	var swg sync.WaitGroup
	var smu sync.Mutex
	var sconns []net.Conn
	swg.Add(1)
	go func() {
		defer swg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			smu.Lock()
			sconns = append(sconns, c)
			smu.Unlock()
			swg.Add(1)
			go func() {
				defer swg.Done()
				var b [1]byte
				for {
					if _, err := io.ReadFull(c, b[:]); err != nil {
						return
					}
					if _, err := c.Write(b[:]); err != nil {
						return
					}
				}
			}()
		}
	}()
	defer func() {
		ln.Close()
		smu.Lock()
		for _, c := range sconns {
			c.Close()
		}
		smu.Unlock()
		swg.Wait()
	}()

	retrans0, _ := retransSegs(ctx, l)
	var conns []net.Conn
	err = l.C.Do(func() error {
		d := net.Dialer{Timeout: 5 * time.Second}
		for i := 0; i < s.Conns; i++ {
			c, err := d.DialContext(ctx, "tcp4", lineServerAddr+":7007")
			if err != nil {
				return err
			}
			conns = append(conns, c)
		}
		return nil
	})
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	if err != nil {
		stopFw()
		return r, fmt.Errorf("connecting %d clients through the forwarder: %w", s.Conns, err)
	}
	warm := s.Duration / 5
	begin := time.Now()
	measureFrom, end := begin.Add(warm), begin.Add(warm+s.Duration)
	hists := make([]hist, len(conns))
	counts := make([]uint64, len(conns))
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	before := snapshot()
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetDeadline(end.Add(5 * time.Second))
			var b [1]byte
			for {
				t := time.Now()
				if !t.Before(end) {
					return
				}
				b[0] = byte(i)
				if _, err := c.Write(b[:]); err != nil {
					errs[i] = err
					return
				}
				if _, err := io.ReadFull(c, b[:]); err != nil {
					errs[i] = err
					return
				}
				if t.After(measureFrom) {
					hists[i].Record(time.Since(t))
					counts[i]++
				}
			}
		}()
	}
	wg.Wait()
	after := snapshot()
	retrans1, rerr := retransSegs(ctx, l)
	fwStats, fwErr := stopFw()
	fwLife := time.Since(fwStart)
	var total uint64
	lat := new(hist)
	nerr := 0
	for i := range conns {
		total += counts[i]
		lat.Merge(&hists[i])
		if errs[i] != nil {
			nerr++
		}
	}
	r.TPS = float64(total) / s.Duration.Seconds()
	r.Frames = total
	if rerr == nil {
		r.Retrans = retrans1 - retrans0
	}
	r.finish(s.Duration, before, after, lat)
	r.Mpps, r.Gbps, r.NsPerFrame, r.AllocsPerFrame = 0, 0, 0, 0
	// CPU: the forwarder process's own, over its life.
	if fw.ProcessState != nil {
		if ru, ok := fw.ProcessState.SysUsage().(*syscall.Rusage); ok {
			r.UserSec = time.Duration(ru.Utime.Nano()).Seconds()
			r.SysSec = time.Duration(ru.Stime.Nano()).Seconds()
			r.CPUShare = (r.UserSec + r.SysSec) / fwLife.Seconds()
		}
	}
	r.Note = fmt.Sprintf("%d conns, %v measured after %v warm-up, %d client errors; forwarder %s; cpu columns are the forwarder process's",
		s.Conns, s.Duration, warm, nerr, fwStats)
	if fwErr != nil && !strings.Contains(fwErr.Error(), "interrupt") {
		r.Note += fmt.Sprintf("; forwarder exit: %v", fwErr)
	}
	return r, nil
}

// retransSegs reads Tcp RetransSegs from /proc/net/snmp in the client
// namespace.
func retransSegs(ctx context.Context, l *line) (uint64, error) {
	out, err := l.C.Exec(ctx, "cat", "/proc/net/snmp")
	if err != nil {
		return 0, err
	}
	var names []string
	for _, ln := range strings.Split(string(out), "\n") {
		rest, ok := strings.CutPrefix(ln, "Tcp: ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == "RetransSegs" && i < len(f) {
				return strconv.ParseUint(f[i], 10, 64)
			}
		}
	}
	return 0, errors.New("no RetransSegs in /proc/net/snmp")
}
