package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func newTestFlags(out *bytes.Buffer) (*flag.FlagSet, *int) {
	fs := NewFlagSet("demo", "[flags]", "Demonstrates the conventions.", out)
	n := fs.Int("n", 1, "a `number`")
	return fs, n
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		help      bool
		usage     bool
		wantN     int
		wantPrint bool // the usage is printed
	}{
		{args: nil, wantN: 1},
		{args: []string{"-n", "3"}, wantN: 3},
		{args: []string{"-h"}, help: true, wantPrint: true},
		{args: []string{"-help"}, help: true, wantPrint: true},
		{args: []string{"-x"}, usage: true},
		{args: []string{"-n", "many"}, usage: true},
		{args: []string{"stray"}, usage: true},
	} {
		var out bytes.Buffer
		fs, n := newTestFlags(&out)
		err := Parse(fs, tc.args)
		switch {
		case tc.help && !errors.Is(err, flag.ErrHelp):
			t.Errorf("%q: %v, want flag.ErrHelp", tc.args, err)
		case tc.usage && !errors.Is(err, ErrUsage):
			t.Errorf("%q: %v, want a usage error", tc.args, err)
		case !tc.help && !tc.usage && (err != nil || *n != tc.wantN):
			t.Errorf("%q: n %d, %v; want %d, nil", tc.args, *n, err, tc.wantN)
		}
		printed := strings.HasPrefix(out.String(), "Usage: demo [flags]\n\nDemonstrates the conventions.\n\nFlags:\n  -n number")
		if printed != tc.wantPrint || !printed && out.Len() > 0 {
			t.Errorf("%q: printed %q", tc.args, out.String())
		}
	}
}

func TestParseWithArgs(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		rest  []string
		wantN int
		usage bool
	}{
		{args: nil, wantN: 1},
		{args: []string{"-n", "3", "tcp", "port", "80"}, rest: []string{"tcp", "port", "80"}, wantN: 3},
		{args: []string{"--", "-n"}, rest: []string{"-n"}, wantN: 1},
		{args: []string{"tcp", "-n", "3"}, usage: true},
		{args: []string{"tcp", "--n=3"}, usage: true},
		{args: []string{"-x"}, usage: true},
	} {
		var out bytes.Buffer
		fs, n := newTestFlags(&out)
		rest, err := ParseWithArgs(fs, tc.args)
		switch {
		case tc.usage:
			if !errors.Is(err, ErrUsage) {
				t.Errorf("%q: %v, want a usage error", tc.args, err)
			}
		case err != nil || *n != tc.wantN || strings.Join(rest, " ") != strings.Join(tc.rest, " "):
			t.Errorf("%q: n %d, rest %q, %v; want %d, %q", tc.args, *n, rest, err, tc.wantN, tc.rest)
		}
		if out.Len() > 0 {
			t.Errorf("%q: printed %q", tc.args, out.String())
		}
	}
	var out bytes.Buffer
	fs, _ := newTestFlags(&out)
	if _, err := ParseWithArgs(fs, []string{"-h"}); !errors.Is(err, flag.ErrHelp) || out.Len() == 0 {
		t.Errorf("-h: %v, printed %q", err, out.String())
	}
	fs, _ = newTestFlags(&out)
	if _, err := ParseWithArgs(fs, []string{"port", "-n", "2"}); err == nil || !strings.Contains(err.Error(), "flags go first") {
		t.Errorf("a flag after the arguments: %v", err)
	}
}

func TestReport(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
		out  string
	}{
		{nil, 0, ""},
		{flag.ErrHelp, 0, ""},
		{Usagef("-i is required"), 2, "demo: usage error: -i is required\nRun 'demo -h' for usage.\n"},
		{errors.New("no such file"), 1, "demo: no such file\n"},
	} {
		var b bytes.Buffer
		if code := report(&b, "demo", tc.err); code != tc.code || b.String() != tc.out {
			t.Errorf("report(%v) = %d, %q; want %d, %q", tc.err, code, b.String(), tc.code, tc.out)
		}
	}
}

// TestExit runs Exit in a child process and checks its status and output.
func TestExit(t *testing.T) {
	if msg, ok := os.LookupEnv("CLI_EXIT"); ok {
		var err error
		switch msg {
		case "usage":
			err = Usagef("bad")
		case "fail":
			err = errors.New("failed")
		}
		Exit("demo", err)
		os.Exit(0)
	}
	for arg, want := range map[string]struct {
		code   int
		stderr string
	}{
		"none":  {0, ""},
		"usage": {2, "demo: usage error: bad\nRun 'demo -h' for usage.\n"},
		"fail":  {1, "demo: failed\n"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestExit$")
		cmd.Env = append(os.Environ(), "CLI_EXIT="+arg)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != want.code || stderr.String() != want.stderr {
			t.Errorf("Exit for %s: status %d, stderr %q; want %d, %q", arg, code, stderr.String(), want.code, want.stderr)
		}
	}
}

// TestUsageWithoutFlags: the usage of a command with no flags has no empty
// Flags section.
func TestUsageWithoutFlags(t *testing.T) {
	var out bytes.Buffer
	fs := NewFlagSet("demo", "", "Takes no flags.", &out)
	if err := Parse(fs, []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v, want flag.ErrHelp", err)
	}
	if want := "Usage: demo\n\nTakes no flags.\n"; out.String() != want {
		t.Errorf("usage %q, want %q", out.String(), want)
	}
}

// TestUsageError: an error a library returned for a flag's value becomes a
// usage error (exit status 2) that still wraps the library's sentinel.
func TestUsageError(t *testing.T) {
	if UsageError(nil) != nil {
		t.Error("UsageError(nil) is not nil")
	}
	errLib := errors.New("invalid configuration")
	err := UsageError(fmt.Errorf("starting: 3 buckets: %w", errLib))
	if !errors.Is(err, ErrUsage) || !errors.Is(err, errLib) {
		t.Errorf("%v: wraps ErrUsage %v, the library's error %v; want both", err,
			errors.Is(err, ErrUsage), errors.Is(err, errLib))
	}
	var b bytes.Buffer
	want := "demo: usage error: starting: 3 buckets: invalid configuration\nRun 'demo -h' for usage.\n"
	if code := report(&b, "demo", err); code != 2 || b.String() != want {
		t.Errorf("report = %d, %q; want 2, %q", code, b.String(), want)
	}
	if u := Usagef("-n 0"); UsageError(u) != u {
		t.Errorf("UsageError(%v) = %v; want it unchanged", u, UsageError(u))
	}
}
