package steer

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rpsgo/rps/hash"
	"go.uber.org/goleak"
)

// traceOne dispatches one frame through a dispatcher configured by cfg and
// returns its trace and the frame's flowid.
func traceOne(t *testing.T, cfg Config, frame []byte) (string, uint32) {
	t.Helper()
	var b strings.Builder
	var flowid uint32
	cfg.Trace = func(dc *Decision) {
		flowid = dc.Class.FlowID
		dc.WriteTo(&b)
	}
	cfg.Hash.Key = hash.MicrosoftKey[:]
	d, err := New(cfg, func(*Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	in := d.NewInput()
	if err := in.Dispatch([]Frame{{Data: frame}}, nil); err != nil {
		t.Fatal(err)
	}
	in.Close()
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return b.String(), flowid
}

// TestTraceDirectSelects: FreeBSD's DIRECT dispatch never calls
// netisr_select_cpuid; the trace's selection line says that the library
// selects a worker anyway, and why.
func TestTraceDirectSelects(t *testing.T) {
	defer goleak.VerifyNone(t)
	out, _ := traceOne(t, Config{Workers: 2, Dispatch: DispatchDirect}, dtFrame(1, 1))
	line := traceLine(out, "netisr_select_cpuid")
	if !strings.Contains(line, "DIRECT selects no CPU") || !strings.Contains(line, "per-worker state") {
		t.Errorf("DIRECT trace does not say on the selection line that FreeBSD selects nothing:\n%s", out)
	}
	out, _ = traceOne(t, Config{Workers: 2}, dtFrame(1, 1))
	if strings.Contains(out, "DIRECT") {
		t.Errorf("DEFERRED trace speaks of DIRECT:\n%s", out)
	}
}

// TestTraceFlowPolicyResult: under the FLOW policy the trace prints the
// modulo and its result.
func TestTraceFlowPolicyResult(t *testing.T) {
	defer goleak.VerifyNone(t)
	out, flowid := traceOne(t, Config{Workers: 3, Policy: PolicyFlow}, dtFrame(1, 1))
	want := fmt.Sprintf("0x%08x %% 3 workers = worker %d", flowid, flowid%3)
	if !strings.Contains(traceLine(out, "netisr_select_cpuid"), want) {
		t.Errorf("FLOW trace lacks %q:\n%s", want, out)
	}
}

// TestTraceNamesM2cpuid: the RSS CPU policy of FreeBSD's IP handlers is
// rss_soft_m2cpuid_v4 (ip_nh) or _v6 (ip6_nh); rss_m2cpuid is ether_nh's.
func TestTraceNamesM2cpuid(t *testing.T) {
	defer goleak.VerifyNone(t)
	out, _ := traceOne(t, Config{Workers: 2}, dtFrame(1, 1))
	if !strings.Contains(traceLine(out, "netisr_select_cpuid"), "policy rss (rss_soft_m2cpuid_v4, rss_hash2cpuid)") {
		t.Errorf("IPv4 trace does not name rss_soft_m2cpuid_v4:\n%s", out)
	}
}

// traceLine returns the first line of out that contains s.
func traceLine(out, s string) string {
	for line := range strings.Lines(out) {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}
