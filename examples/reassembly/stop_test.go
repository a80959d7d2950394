package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/internal/cli/clitest"
	"github.com/rpsgo/rps/internal/sample"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// TestMain lets a test run main in a child process: REASSEMBLY_MAIN holds
// the arguments, one a line.
func TestMain(m *testing.M) {
	clitest.RunMain("REASSEMBLY_MAIN", "reassembly", main)
	os.Exit(m.Run())
}

// summary reads the connection count and payload bytes of the summary line.
func summary(t *testing.T, out string) (conns, payload int) {
	t.Helper()
	i := strings.Index(out, " TCP connections (")
	j := strings.LastIndexByte(out[:max(i, 0)], '\n')
	if i < 0 {
		t.Fatalf("no summary line in %q", out)
	}
	if _, err := fmt.Sscanf(out[j+1:], "%d TCP connections (%d with both directions on one worker), %d payload bytes",
		&conns, new(int), &payload); err != nil {
		t.Fatalf("summary line: %v in %q", err, out[j+1:])
	}
	return conns, payload
}

// TestTruncated: a capture cut short prints the connections of the frames
// before the cut, then fails with the error (status 1, not a usage error).
func TestTruncated(t *testing.T) {
	cut := sample.Pcap[:len(sample.Pcap)/2]
	tr := decodeCapture(t, cut)
	name := filepath.Join(t.TempDir(), "cut.pcap")
	if err := os.WriteFile(name, cut, 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	err := runMain(context.Background(), []string{"-r", name, "-workers", "2"}, &out, &errOut)
	if !errors.Is(err, pcapfile.ErrTruncated) || errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), name) {
		t.Errorf("error %v; want one naming %s and wrapping pcapfile.ErrTruncated", err, name)
	}
	if conns, payload := summary(t, out.String()); conns != len(tr.conns) || payload != tr.bytes {
		t.Errorf("%d connections, %d payload bytes; the frames before the cut hold %d, %d", conns, payload, len(tr.conns), tr.bytes)
	}
}

// TestInterruptSignal: one SIGINT while the command reads a pipe that has
// stalled stops it; it prints the connections of every frame read, then
// exits with status 1 saying it was interrupted.
func TestInterruptSignal(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGINT to send on Windows")
	}
	cut := sample.Pcap[:len(sample.Pcap)/2]
	tr := decodeCapture(t, cut)
	res := clitest.Interrupt(t, "REASSEMBLY_MAIN", []string{"-r", "-", "-workers", "2", "-n", "0"}, cut)
	if res.Status != 1 || !strings.HasPrefix(res.Stderr, "reassembly: interrupted; ") {
		t.Errorf("status %d, standard error %q; want 1 and \"reassembly: interrupted; ...\"", res.Status, res.Stderr)
	}
	conns, payload := summary(t, res.Stdout)
	if conns != len(tr.conns) || payload != tr.bytes || strings.Count(res.Stdout, " <> ") != conns {
		t.Errorf("%d connections (%d printed), %d payload bytes; the pipe delivered %d, %d",
			conns, strings.Count(res.Stdout, " <> "), payload, len(tr.conns), tr.bytes)
	}
}

// TestLibraryRejects: a flag's value that the library rejects is a usage
// error (status 2), as one the command rejects itself.
func TestLibraryRejects(t *testing.T) {
	var out, errOut bytes.Buffer
	err := runMain(context.Background(), []string{"-workers", "70000"}, &out, &errOut)
	if !errors.Is(err, cli.ErrUsage) || !errors.Is(err, steer.ErrConfig) {
		t.Errorf("-workers 70000: %v; want a usage error wrapping steer.ErrConfig", err)
	}
	if res := clitest.Run(t, "REASSEMBLY_MAIN", "-workers", "70000"); res.Status != 2 ||
		!strings.HasPrefix(res.Stderr, "reassembly: usage error: starting the dispatcher: ") || res.Stdout != "" {
		t.Errorf("-workers 70000: status %d, standard output %q, standard error %q; want 2, nothing, a usage error",
			res.Status, res.Stdout, res.Stderr)
	}
}
