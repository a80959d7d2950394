package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/internal/sample"
)

// TestSample runs the command over the embedded sample and checks the
// report's totals against what the sample holds, and that no flow was
// decoded by two workers.
func TestSample(t *testing.T) {
	var out bytes.Buffer
	if err := runMain(context.Background(), []string{"-workers", "3"}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	var all, last string
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "all ") {
			all = l
		}
		if strings.HasPrefix(l, "source:") {
			last = l
		}
	}
	f := strings.Fields(all)
	if len(f) != 8 || f[1] != "4623" {
		t.Fatalf("no total line for the sample's 4623 frames:\n%s", out.String())
	}
	// The flows column: distinct flows over all workers equal the sum of
	// the workers' own counts when each flow stayed on one worker.
	sum := 0
	for _, l := range lines[1:4] {
		w := strings.Fields(l)
		if len(w) != 8 {
			t.Fatalf("worker line %q", l)
		}
		sum += atoi(t, w[7])
	}
	if sum != atoi(t, f[7]) || sum == 0 {
		t.Errorf("workers saw %d flows in all, %s distinct: a flow was decoded by two workers", sum, f[7])
	}
	if last != "source: 4623 packets read in 73 batches (0 read timeouts); dispatcher: 4623 frames, 4623 handled, 0 dropped" {
		t.Errorf("source line %q", last)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("%q is not a count", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// TestFiles reads the sample from a file, as pcap and as a file that is
// not a capture.
func TestFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "sample.pcap")
	bad := filepath.Join(dir, "bad.pcap")
	if err := os.WriteFile(good, sample.Pcap, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("not a capture file at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runMain(context.Background(), []string{"-r", good}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "source: 4623 packets") {
		t.Errorf("report:\n%s", out.String())
	}
	if err := runMain(context.Background(), []string{"-r", bad}, &out); err == nil || errors.Is(err, cli.ErrUsage) {
		t.Errorf("a file that is not a capture: %v", err)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{"extra"},
		{"-workers", "-1"},
		{"-r", "x.pcap", "-i", "eth0"},
		{"-f", "tcp"},
		{"-s", "0"},
		{"-duration", "-1s"},
	} {
		err := runMain(context.Background(), args, new(bytes.Buffer))
		if !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
	if err := runMain(context.Background(), []string{"-h"}, new(bytes.Buffer)); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
}
