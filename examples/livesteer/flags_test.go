package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/rpsgo/rps/internal/cli"
)

// TestMain lets a test run main() in a child process, to see its exit
// status and its signal handling: LIVESTEER_MAIN holds the arguments,
// separated by newlines.
func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv("LIVESTEER_MAIN"); ok {
		os.Args = append([]string{"livesteer"}, strings.Split(args, "\n")...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestParseFlags: -h prints the usage, a missing -i or a bad value is a
// usage error, and the defaults are the library's (0 workers, 0 qlimit).
func TestParseFlags(t *testing.T) {
	var errOut bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, &errOut); !errors.Is(err, flag.ErrHelp) ||
		!strings.HasPrefix(errOut.String(), "Usage: livesteer -i IFACE [flags] [filter expression]\n") ||
		!strings.Contains(errOut.String(), "steer.DefaultWorkers()") {
		t.Errorf("-h: %v\n%s", err, errOut.String())
	}
	for _, args := range [][]string{{}, {"-i", "eth0", "-fanout", "nope"}, {"-i", "eth0", "-policy", "nope"},
		{"-i", "eth0", "-dispatch", "later"}, {"-i", "eth0", "-key", "nope"}, {"-i", "eth0", "-qlimit", "20000"},
		{"-i", "eth0", "-workers", "-1"}, {"-i", "eth0", "tcp", "-c", "5"}, {"-i", "eth0", "-c", "-1"},
		{"-i", "eth0", "-s", "-1"}, {"-i", "eth0", "-json", "-w", "-"}, {"-i", "eth0", "-f", "tcp", "udp"}} {
		if _, err := parseFlags(args, io.Discard); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
	o, err := parseFlags([]string{"-i", "eth0", "-fanout", "ebpf"}, io.Discard)
	if err != nil || o.iface != "eth0" || o.workers != 0 || o.qlimit != 0 || o.fanout != "ebpf" || o.noPromisc || o.filter != "" {
		t.Errorf("parsed %+v, %v", o, err)
	}
	o, err = parseFlags([]string{"-i", "eth0", "-c", "5", "-s", "96", "-p", "-w", "x-%d.pcap", "tcp", "port", "80"}, io.Discard)
	if err != nil || o.count != 5 || o.snaplen != 96 || !o.noPromisc || o.write != "x-%d.pcap" || o.filter != "tcp port 80" {
		t.Errorf("parsed %+v, %v", o, err)
	}
	// -version needs no interface.
	if o, err := parseFlags([]string{"-version"}, io.Discard); err != nil || !o.version {
		t.Errorf("-version: %+v, %v", o, err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), options{version: true}, &out, io.Discard); err != nil || !strings.HasPrefix(out.String(), "livesteer version ") {
		t.Errorf("run -version: %v, %q", err, out.String())
	}
}
