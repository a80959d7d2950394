//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/internal/pace"
)

// threadCreds returns, for each thread of process pid, its Uid line and
// its CapPrm and CapEff values.
func threadCreds(t *testing.T, pid int) []string {
	t.Helper()
	files, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/status")
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread or the process has gone
		}
		var cred []string
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && (k == "Uid" || k == "CapPrm" || k == "CapEff") {
				cred = append(cred, k+" "+strings.Join(strings.Fields(v), " "))
			}
		}
		out = append(out, strings.Join(cred, ", "))
	}
	return out
}

// TestDropPrivileges runs livesteer as a process of its own, as root, in
// A's namespace with -Z 65534 and -w a file per worker, over an AF_PACKET
// fanout group steered by the library's program and over AF_XDP sockets
// steered in XDP (-xdp-host take): while it captures, every thread of the
// process has uid 65534 and no capability; what it does after the drop
// still works: it handles the paced frames sent meanwhile, reads the
// program's counters, stops intake, drains, detaches its program (none is
// left on the link), restores promiscuous mode and closes, exiting 0 with
// a final report that reconciles; the -w files belong to uid 65534.
func TestDropPrivileges(t *testing.T) {
	netns.Require(t)
	p := netns.New(t, netns.Options{})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const frames = 3000
	spec := pace.Spec{Dev: p.B.Link, Frames: frames, Rate: 20000, Size: 64, Src: p.B.Addr.Addr(), Dst: p.A.Addr.Addr()}
	dropped := regexp.MustCompile(`livesteer: dropped to \S+ \(uid 65534, gid 65534\), with no capability`)
	reconciled := regexp.MustCompile(`Kernel received (\d+) = steered (\d+) \+ kernel dropped 0: yes`)
	base := promiscuity(t, p.A)
	for _, mode := range [][]string{{"-fanout", "ebpf"}, {"-xdp", "-xdp-host", "take", "-fanout", "ebpf"}} {
		t.Run(strings.Join(mode, " "), func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			// The paced flows differ in one byte of the source address:
			// a random key sends them all to one worker once in 256 keys,
			// leaving a -w file empty; the public key splits them.
			args := append([]string{"-i", p.A.Link, "-key", "microsoft", "-workers", "2", "-q", "-duration", "3s", "-Z", "65534", "-w", filepath.Join(dir, "w-%d.pcap")}, mode...)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := p.A.Command(ctx, exe, "-test.run", "^$")
			cmd.Env = append(os.Environ(), "LIVESTEER_MAIN="+strings.Join(args, "\n"))
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var creds []string
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				creds = threadCreds(t, cmd.Process.Pid)
				if len(creds) > 0 && strings.HasPrefix(creds[0], "Uid 65534") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the process did not drop to uid 65534 in 5s: %v\n%s", creds, out.String())
				}
			}
			if err := p.B.Do(func() error { _, _, err := pace.Send(spec); return err }); err != nil {
				t.Fatal(err)
			}
			creds = threadCreds(t, cmd.Process.Pid)
			err := cmd.Wait()
			text := out.String()
			if err != nil {
				t.Fatalf("livesteer: %v\n%s", err, text)
			}
			want := "Uid 65534 65534 65534 65534, CapPrm 0000000000000000, CapEff 0000000000000000"
			for i, c := range creds {
				if c != want {
					t.Errorf("thread %d of %d during the capture: %s, want %s", i, len(creds), c, want)
				}
			}
			m := reconciled.FindStringSubmatch(text)
			if m == nil || m[1] != m[2] {
				t.Fatalf("the final report does not reconcile:\n%s", text)
			}
			if n, _ := strconv.Atoi(m[2]); n < frames {
				t.Errorf("steered %d frames of the %d sent", n, frames)
			}
			for _, line := range strings.Split(text, "\n") {
				if strings.HasPrefix(line, "livesteer: ") && !dropped.MatchString(line) && !strings.HasPrefix(line, "livesteer: capturing") {
					t.Errorf("livesteer reported an error: %s", line)
				}
			}
			if !dropped.MatchString(text) {
				t.Errorf("no line saying that livesteer dropped its privileges:\n%s", text)
			}
			if mode[0] == "-xdp" && !strings.Contains(text, "redirected_0 ") {
				t.Errorf("no XDP program counters in the report:\n%s", text)
			}
			if xdpAttached(t, p.A) || promiscuity(t, p.A) != base {
				t.Errorf("after the run: XDP program attached %v, promiscuity %d (was %d)", xdpAttached(t, p.A), promiscuity(t, p.A), base)
			}
			for i := range 2 {
				fi, err := os.Stat(filepath.Join(dir, "w-"+strconv.Itoa(i)+".pcap"))
				if err != nil {
					t.Fatal(err)
				}
				if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65534 || fi.Size() <= 24 {
					t.Errorf("-w file %d: owner %d, %d bytes; want 65534 and frames", i, st.Uid, fi.Size())
				}
			}
			t.Logf("%d threads dropped; %s", len(creds), m[0])
		})
	}
}
