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

// TestMain lets a test run main in a child process: FLOWMETER_MAIN holds
// the arguments, one a line.
func TestMain(m *testing.M) {
	clitest.RunMain("FLOWMETER_MAIN", "flowmeter", main)
	os.Exit(m.Run())
}

// cutSample returns the first half of the sample capture, cut inside a
// record, and the number of whole frames before the cut.
func cutSample(t *testing.T) ([]byte, uint64) {
	t.Helper()
	cut := sample.Pcap[:len(sample.Pcap)/2]
	r, err := pcapfile.NewReader(bytes.NewReader(cut))
	if err != nil {
		t.Fatal(err)
	}
	var b steer.Batch
	for {
		err := r.ReadBatch(context.Background(), &b)
		if b.Release != nil {
			b.Release()
		}
		if errors.Is(err, pcapfile.ErrTruncated) {
			break
		}
		if err != nil {
			t.Fatalf("reading the cut sample: %v, want ErrTruncated", err)
		}
	}
	if r.Stats().Records == 0 {
		t.Fatal("no whole frame before the cut")
	}
	return cut, r.Stats().Records
}

// totalFrames reads the frame count of the totals line.
func totalFrames(t *testing.T, out string) uint64 {
	t.Helper()
	var n uint64
	if _, err := fmt.Sscanf(out, "%d frames, ", &n); err != nil {
		t.Fatalf("no totals line in %q", out)
	}
	return n
}

// TestTruncated: a capture cut short prints the totals of the frames
// before the cut, then fails with the error (status 1, not a usage error).
func TestTruncated(t *testing.T) {
	cut, frames := cutSample(t)
	name := filepath.Join(t.TempDir(), "cut.pcap")
	if err := os.WriteFile(name, cut, 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	err := runMain(context.Background(), []string{"-r", name, "-workers", "2"}, &out, &errOut)
	if !errors.Is(err, pcapfile.ErrTruncated) || errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), name) {
		t.Errorf("error %v; want one naming %s and wrapping pcapfile.ErrTruncated", err, name)
	}
	if got := totalFrames(t, out.String()); got != frames {
		t.Errorf("the totals count %d frames; the %d before the cut were read", got, frames)
	}
}

// TestInterruptSignal: one SIGINT while the command reads a pipe that has
// stalled stops it; it prints the totals of every frame read, then exits
// with status 1 saying it was interrupted.
func TestInterruptSignal(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGINT to send on Windows")
	}
	cut, frames := cutSample(t)
	res := clitest.Interrupt(t, "FLOWMETER_MAIN", []string{"-r", "-", "-workers", "2"}, cut)
	if res.Status != 1 || !strings.HasPrefix(res.Stderr, "flowmeter: interrupted; ") {
		t.Errorf("status %d, standard error %q; want 1 and \"flowmeter: interrupted; ...\"", res.Status, res.Stderr)
	}
	if got := totalFrames(t, res.Stdout); got != frames {
		t.Errorf("the totals count %d frames; the pipe delivered %d whole ones", got, frames)
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
	if res := clitest.Run(t, "FLOWMETER_MAIN", "-workers", "70000"); res.Status != 2 ||
		!strings.HasPrefix(res.Stderr, "flowmeter: usage error: starting the dispatcher: ") || res.Stdout != "" {
		t.Errorf("-workers 70000: status %d, standard output %q, standard error %q; want 2, nothing, a usage error",
			res.Status, res.Stdout, res.Stderr)
	}
}
