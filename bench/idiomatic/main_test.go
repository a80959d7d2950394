package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/synth"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// writeCapture writes n frames of spec's flows as a pcap file, a
// microsecond apart.
func writeCapture(t *testing.T, spec synth.Spec, n int) string {
	t.Helper()
	var b bytes.Buffer
	w, err := pcapfile.NewWriter(&b, pcapfile.LinkTypeEthernet, pcapfile.WriterOptions{})
	for i, f := range synth.Frames(spec, n) {
		if err == nil {
			err = w.WritePacket(time.Unix(1_700_000_000, int64(i)*1000), f, 0)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "synth.pcap")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

var flowsLine = regexp.MustCompile(`(?m)^  flows +(\d+)`)

func flowCount(t *testing.T, who, out string) int {
	t.Helper()
	m := flowsLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("%s printed no flows line:\n%s", who, out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestSameFlowsAsPcapsteer runs the baseline and pcapsteer on one small
// capture: both read every frame and count the same flows, the capture's.
func TestSameFlowsAsPcapsteer(t *testing.T) {
	bin := buildPcapsteer(t)
	for _, spec := range []synth.Spec{{Flows: 300, Seed: 1}, {Flows: 200, UDP: true, Size: 128, Seed: 2}} {
		file := writeCapture(t, spec, 5000)
		var out, errOut bytes.Buffer
		if err := run([]string{"-r", file, "-workers", "2"}, &out, &errOut); err != nil {
			t.Fatalf("idiomatic: %v\n%s", err, errOut.String())
		}
		if got := flowCount(t, "idiomatic", out.String()); got != spec.Flows {
			t.Errorf("idiomatic counts %d flows, the capture has %d", got, spec.Flows)
		}
		if !regexp.MustCompile(`(?m)^  frames handled +5000 +`).MatchString(out.String()) {
			t.Errorf("idiomatic did not handle the 5000 frames:\n%s", out.String())
		}
		ps, err := exec.Command(bin, "-r", file, "-workers", "2").CombinedOutput()
		if err != nil {
			t.Fatalf("pcapsteer: %v\n%s", err, ps)
		}
		if got, want := flowCount(t, "pcapsteer", string(ps)), flowCount(t, "idiomatic", out.String()); got != want {
			t.Errorf("pcapsteer counts %d flows, idiomatic %d", got, want)
		}
	}
}

// buildPcapsteer builds examples/pcapsteer in the test's temporary
// directory, which goes with the test (so each run of -count builds it).
func buildPcapsteer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pcapsteer")
	cmd := exec.Command("go", "build", "-o", bin, "../../examples/pcapsteer")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building pcapsteer: %v\n%s", err, out)
	}
	return bin
}

// TestErrors: a missing file and bad flags are errors, not panics.
func TestErrors(t *testing.T) {
	for _, args := range [][]string{{}, {"-r", filepath.Join(t.TempDir(), "none.pcap")}, {"-r", "x", "-workers", "0"}, {"-r", "x", "extra"}} {
		var out, errOut bytes.Buffer
		if err := run(args, &out, &errOut); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
