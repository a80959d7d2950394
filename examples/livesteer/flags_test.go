package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/rpsgo/rps/internal/cli"
)

// TestParseFlags: -h prints the usage, a missing -i or a bad value is a
// usage error, and the defaults are the library's (0 workers, 0 qlimit).
func TestParseFlags(t *testing.T) {
	var errOut bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, &errOut); !errors.Is(err, flag.ErrHelp) ||
		!strings.HasPrefix(errOut.String(), "Usage: livesteer -i IFACE [flags]\n") ||
		!strings.Contains(errOut.String(), "steer.DefaultWorkers()") {
		t.Errorf("-h: %v\n%s", err, errOut.String())
	}
	for _, args := range [][]string{{}, {"-i", "eth0", "-fanout", "nope"}, {"-i", "eth0", "-policy", "nope"},
		{"-i", "eth0", "-dispatch", "later"}, {"-i", "eth0", "-key", "nope"}, {"-i", "eth0", "-qlimit", "20000"},
		{"-i", "eth0", "-workers", "-1"}, {"-i", "eth0", "extra"}} {
		if _, err := parseFlags(args, io.Discard); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
	o, err := parseFlags([]string{"-i", "eth0", "-fanout", "ebpf"}, io.Discard)
	if err != nil || o.iface != "eth0" || o.workers != 0 || o.qlimit != 0 || o.fanout != "ebpf" {
		t.Errorf("parsed %+v, %v", o, err)
	}
}
