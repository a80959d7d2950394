package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain lets a test run main() in a child process: RFS_MAIN holds the
// arguments, separated by newlines.
func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv("RFS_MAIN"); ok {
		os.Args = append([]string{"rfs"}, strings.Split(args, "\n")...)
		main()
		os.Exit(0)
	}
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
		args   string
		status int
		stderr string
	}{
		{"-h", 0, "Usage: rfs\n\nShows receive flow steering"},
		{"-workers\n2", 2, "rfs: usage error: flag provided but not defined: -workers\n"},
		{"extra", 2, "rfs: usage error: unexpected argument \"extra\"\n"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "RFS_MAIN="+tc.args)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		status := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			status = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if status != tc.status || !strings.HasPrefix(stderr.String(), tc.stderr) || stdout.Len() != 0 ||
			strings.Contains(stderr.String(), "Flags:") {
			t.Errorf("rfs %q: status %d, stdout %q, stderr %q; want %d, nothing, %q...", tc.args, status,
				stdout.String(), stderr.String(), tc.status, tc.stderr)
		}
	}
}
