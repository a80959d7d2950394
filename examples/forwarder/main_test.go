package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/internal/cli/clitest"
)

// TestMain lets a test run main in a child process: FORWARDER_MAIN holds
// the arguments, one a line.
func TestMain(m *testing.M) {
	clitest.RunMain("FORWARDER_MAIN", "forwarder", main)
	os.Exit(m.Run())
}

// TestParseFlags: -h prints the usage, a missing interface, the same
// interface twice or a bad flag is a usage error, and the flags fill
// Options.
func TestParseFlags(t *testing.T) {
	var errOut bytes.Buffer
	if _, _, err := parseFlags([]string{"-h"}, &errOut); !errors.Is(err, flag.ErrHelp) ||
		!strings.HasPrefix(errOut.String(), "Usage: forwarder -in IFACE -out IFACE [flags]\n") ||
		!strings.Contains(errOut.String(), "steer.DefaultWorkers()") {
		t.Errorf("-h: %v\n%s", err, errOut.String())
	}
	for _, args := range [][]string{{}, {"-in", "a"}, {"-in", "a", "-out", "b", "-workers", "-1"}, {"-in", "a", "-out", "b", "extra"}, {"-x"},
		{"-in", "a", "-out", "a"}} {
		if _, _, err := parseFlags(args, io.Discard); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
	o, stats, err := parseFlags([]string{"-in", "a", "-out", "b", "-workers", "3", "-oneway", "-stats", "-xdp"}, io.Discard)
	if err != nil || o.In != "a" || o.Out != "b" || o.Workers != 3 || !o.OneWay || !stats || !o.XDP {
		t.Errorf("parsed %+v, stats %v, %v", o, stats, err)
	}
}
