package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/rpsgo/rps/internal/cli/clitest"
)

// TestMain lets a test run main() in a child process: RFS_MAIN holds the
// arguments, one a line.
func TestMain(m *testing.M) {
	clitest.RunMain("RFS_MAIN", "rfs", main)
	os.Exit(m.Run())
}

// TestRun runs the example end to end: run checks that consumers' claims
// moved flows, that per-flow state stayed exact across the moves, and that
// the counters add up, and returns an error otherwise.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Phase 3:", "Per-flow state exact (each flow's count in one worker, equal to the frames sent): true", "Workstreams:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestCommandLine: -h prints the usage (with no Flags section: rfs has
// none) and runs no demo; a flag or an argument is a usage error (exit
// status 2).
func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		status int
		stderr string
	}{
		{[]string{"-h"}, 0, "Usage: rfs\n\nShows receive flow steering"},
		{[]string{"-workers", "2"}, 2, "rfs: usage error: flag provided but not defined: -workers\n"},
		{[]string{"extra"}, 2, "rfs: usage error: unexpected argument \"extra\"\n"},
	} {
		res := clitest.Run(t, "RFS_MAIN", tc.args...)
		if res.Status != tc.status || !strings.HasPrefix(res.Stderr, tc.stderr) || res.Stdout != "" ||
			strings.Contains(res.Stderr, "Flags:") {
			t.Errorf("rfs %q: status %d, stdout %q, stderr %q; want %d, nothing, %q...", tc.args, res.Status,
				res.Stdout, res.Stderr, tc.status, tc.stderr)
		}
	}
}
