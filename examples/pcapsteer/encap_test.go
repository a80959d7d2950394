package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/capture"
	"github.com/rpsgo/rps/internal/sample"
	"github.com/rpsgo/rps/internal/synth"
	"github.com/rpsgo/rps/steer"
)

// The VXLAN capture of the spread tests: 400 frames between two VXLAN
// endpoints, seven in eight of them VXLAN carrying 64 TCP flows.
const vxlanFrames, vxlanFlows = 400, 64

// vxlanCapture writes the VXLAN capture to a file and returns its name.
func vxlanCapture(t *testing.T) string {
	t.Helper()
	return writeFile(t, "vxlan.pcap", pcapOf(synth.VXLANCapture(vxlanFrames, vxlanFlows, 1)))
}

// pcapOf writes frames as a pcap file (writePcap's).
func pcapOf(frames [][]byte) []byte {
	fs := make([]frame, len(frames))
	for i, f := range frames {
		fs[i] = frame{data: f, orig: len(f)}
	}
	return writePcap(1, fs)
}

// encapFrames is a capture of every encapsulation: each case carrying
// four flows, TCP and UDP over IPv4 and IPv6, three frames each.
func encapFrames() []frame {
	flows := []synth.Flow{
		{Src: netip.MustParseAddr("10.1.2.3"), Dst: netip.MustParseAddr("10.4.5.6"), SrcPort: 40000, DstPort: 80},
		{Src: netip.MustParseAddr("10.1.2.4"), Dst: netip.MustParseAddr("10.4.5.6"), SrcPort: 40001, DstPort: 443},
		{Src: netip.MustParseAddr("10.1.2.3"), Dst: netip.MustParseAddr("10.4.5.7"), SrcPort: 4000, DstPort: 9000, UDP: true},
		{Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2"), SrcPort: 5000, DstPort: 9001, UDP: true},
	}
	var frames []frame
	for range 3 {
		for _, c := range synth.Cases {
			for _, f := range flows {
				b := c.Build(f)
				frames = append(frames, frame{data: b, orig: len(b)})
			}
		}
	}
	return frames
}

// TestFlowsCSVEncapsulations checks the -flows CSV row by row against the
// classifier run directly over a capture of every encapsulation, with
// tunnels opened and closed and with the other hash flags: the tuple
// columns are the flow hashed (the inner one when decapsulated), encap the
// encapsulations walked, and there is one row per flow key.
func TestFlowsCSVEncapsulations(t *testing.T) {
	frames := encapFrames()
	file := writeFile(t, "encap.pcap", writePcap(1, frames))
	const workers, buckets = 3, 64
	ports := []uint16{4789, 8472}
	sipKey := strings.Repeat("a5", hash.SipHashKeyLen)
	sip, _ := capture.ParseKey(sipKey, hash.AlgorithmSipHash)
	for _, tc := range []struct {
		name string
		args []string
		hc   steer.HashConfig
	}{
		{"outer", nil, steer.HashConfig{Key: hash.MicrosoftKey[:]}},
		{"inner", []string{"-tunnels", "inner", "-vxlan-ports", synth.VXLANPorts},
			steer.HashConfig{Key: hash.MicrosoftKey[:], Tunnels: steer.TunnelsInner, VXLANPorts: ports}},
		{"inner-udp4tuple-symmetric", []string{"-tunnels", "inner", "-vxlan-ports", synth.VXLANPorts, "-udp4tuple", "-symmetric"},
			steer.HashConfig{Key: hash.MicrosoftKey[:], Tunnels: steer.TunnelsInner, VXLANPorts: ports, UDP4Tuple: true, Symmetric: true}},
		{"inner-ippair", []string{"-tunnels", "inner", "-hashtypes", "ipv4,ipv6"},
			steer.HashConfig{Key: hash.MicrosoftKey[:], Tunnels: steer.TunnelsInner, Types: hash.TypeIPv4 | hash.TypeIPv6}},
		{"inner-siphash", []string{"-tunnels", "inner", "-hash", "siphash", "-hashtypes", "ipv4,tcp_ipv4,udp_ipv4,ipv6,tcp_ipv6,udp_ipv6"},
			steer.HashConfig{Algorithm: hash.AlgorithmSipHash, Key: sip, Tunnels: steer.TunnelsInner, Types: hash.AllTypes}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "microsoft"
			if tc.hc.Algorithm == hash.AlgorithmSipHash {
				key = sipKey
			}
			path := filepath.Join(t.TempDir(), "flows.csv")
			// The file's frames are a second apart: a long idle timeout
			// keeps each flow key one record.
			args := append([]string{"-r", file, "-key", key, "-workers", strconv.Itoa(workers), "-buckets", strconv.Itoa(buckets), "-flows", path, "-idle", "24h"}, tc.args...)
			out, _, err := runCmd(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			worker := func(c *steer.Classification) int { return int(c.FlowID&(buckets-1)) % workers }
			want := expectedRowsFor(t, frames, tc.hc, worker, buckets)
			rows := readCSV(t, path)
			if len(rows) != len(want) {
				t.Errorf("%d rows, want %d: one per flow key", len(rows), len(want))
			}
			compareRows(t, rows, want)
			// The tuple is the inner flow exactly where a tunnel was opened.
			inner := 0
			for _, r := range rows {
				if strings.HasPrefix(r["src"], "10.1.2.") || strings.HasPrefix(r["src"], "fd00::") {
					inner++
				}
			}
			// Four flows in each encapsulation opened (two cases may
			// have one: IP in IPv4 and in IPv6).
			opened := map[string]bool{}
			for _, c := range synth.Cases {
				legacy := c.Name == "vxlan-legacy-port" && tc.hc.VXLANPorts == nil
				if !c.Tunnel || tc.hc.Tunnels == steer.TunnelsInner && !legacy {
					opened[c.Inner] = true
				}
			}
			if wantInner := 4 * len(opened); inner != wantInner {
				t.Errorf("%d rows hash the inner flow, want %d", inner, wantInner)
			}
			if !strings.Contains(out, "Hash: "+capture.HashSummary(tc.hc)) {
				t.Errorf("the output does not say how it hashes (%s):\n%s", capture.HashSummary(tc.hc), out[:min(len(out), 300)])
			}
		})
	}
}

// TestFlowsCSVTunnelsSample: the CSV of the embedded tunnels capture, its
// odd frames included (ARP in VXLAN, cut VXLAN headers, GTP-U echoes, an
// outer fragment, PPPoE discovery and LCP), against the classifier, with
// tunnels opened and closed.
func TestFlowsCSVTunnelsSample(t *testing.T) {
	frames := readFrames(t, sample.Tunnels)
	const workers, buckets = 3, 64
	for _, tunnels := range []steer.TunnelMode{steer.TunnelsOuter, steer.TunnelsInner} {
		t.Run(tunnels.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "flows.csv")
			if _, _, err := runCmd(t, "-sample", "tunnels", "-tunnels", tunnels.String(), "-key", "microsoft",
				"-workers", strconv.Itoa(workers), "-buckets", strconv.Itoa(buckets), "-flows", path); err != nil {
				t.Fatal(err)
			}
			worker := func(c *steer.Classification) int {
				if !c.HashType.IsHash() {
					return 0 // SOURCE: input 0, ifindex 0
				}
				return int(c.FlowID&(buckets-1)) % workers
			}
			want := expectedRowsFor(t, frames, steer.HashConfig{Key: hash.MicrosoftKey[:], Tunnels: tunnels}, worker, buckets)
			rows := readCSV(t, path)
			if len(rows) != len(want) {
				t.Errorf("%d rows, want %d: one per flow key", len(rows), len(want))
			}
			compareRows(t, rows, want)
		})
	}
}

// TestEncapCSVColumn: the encap column names the encapsulations outermost
// first in the forms the issue shows.
func TestEncapCSVColumn(t *testing.T) {
	file := writeFile(t, "encap.pcap", writePcap(1, encapFrames()))
	path := filepath.Join(t.TempDir(), "flows.csv")
	if _, _, err := runCmd(t, "-r", file, "-tunnels", "inner", "-vxlan-ports", synth.VXLANPorts, "-flows", path); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range readCSV(t, path) {
		seen[r["encap"]] = true
	}
	for _, c := range synth.Cases {
		if !seen[c.Inner] {
			t.Errorf("no row with encap %q (case %s)", c.Inner, c.Name)
		}
	}
	for _, want := range []string{"vlan:7+vxlan:42", "mpls:1600", "gre:key=9+ipip", ""} {
		if !seen[want] {
			t.Errorf("no row with encap %q", want)
		}
	}
}

var hintLine = regexp.MustCompile(`(?m)^Hint: (\d+) of (\d+) frames .* are tunnelled \(([^)]*)\) and were hashed by their outer headers: -tunnels inner would spread them by their inner flows\.$`)

// TestTunnelHint: with tunnels closed, a run that saw tunnelled frames
// says in one line how many and which flag spreads them; with them opened,
// or without tunnels, it says nothing of the kind.
func TestTunnelHint(t *testing.T) {
	frames := encapFrames()
	file := writeFile(t, "encap.pcap", writePcap(1, frames))
	out, _, err := runCmd(t, "-r", file, "-vxlan-ports", synth.VXLANPorts)
	if err != nil {
		t.Fatal(err)
	}
	m := hintLine.FindAllStringSubmatch(out, -1)
	tunnelled := 0
	for _, c := range synth.Cases {
		if c.Tunnel {
			tunnelled += 12
		}
	}
	if len(m) != 1 || m[0][1] != strconv.Itoa(tunnelled) || m[0][2] != strconv.Itoa(len(frames)) || strings.Count(out, "Hint:") != 1 {
		t.Fatalf("hint lines %q, want one saying %d of %d:\n%s", m, tunnelled, len(frames), out)
	}
	if !strings.Contains(m[0][3], "vxlan 48") || !strings.Contains(m[0][3], "gtpu 36") {
		t.Errorf("hint kinds %q", m[0][3])
	}
	// Without -vxlan-ports the frames to 8472 are no tunnel.
	out, _, err = runCmd(t, "-r", file)
	if err != nil {
		t.Fatal(err)
	}
	if m := hintLine.FindStringSubmatch(out); m == nil || m[1] != strconv.Itoa(tunnelled-12) {
		t.Errorf("default VXLAN port: hint %q, want %d frames", m, tunnelled-12)
	}
	// The sample has a hint exactly when it has tunnelled frames.
	cls, err := steer.NewClassifier(steer.HashConfig{Tunnels: steer.TunnelsInner})
	if err != nil {
		t.Fatal(err)
	}
	sampleTunnels := false
	for _, f := range readFrames(t, sample.Pcap) {
		var c steer.Classification
		cls.Classify(f.data, &c)
		sampleTunnels = sampleTunnels || c.Key.Depth > 0
	}
	for _, tc := range []struct {
		args []string
		hint bool
	}{{[]string{"-r", file, "-tunnels", "inner"}, false}, {nil, sampleTunnels}, {[]string{"-tunnels", "inner"}, false}} {
		out, _, err := runCmd(t, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		if hint := hintLine.MatchString(out); hint != tc.hint || strings.Count(out, "Hint:") != strings.Count(out, "\nHint: ") {
			t.Errorf("%q: hint %v, want %v:\n%s", tc.args, hint, tc.hint, out)
		}
		args := tc.args
		if !strings.Contains(out, "Frames handled, by encapsulation (outermost first; -tunnels ") {
			t.Errorf("%q: no encapsulation table", args)
		}
	}
}

// workerShares returns the report's per-worker shares of the frames, in
// percent.
func workerShares(t *testing.T, out string) []float64 {
	t.Helper()
	i := strings.Index(out, "\nFrames per worker:\n")
	if i < 0 {
		t.Fatalf("no per-worker table:\n%s", out)
	}
	var shares []float64
	for _, line := range strings.Split(out[i:], "\n")[3:] {
		f := strings.Fields(line)
		if len(f) != 5 || !strings.HasSuffix(f[4], "%") {
			break
		}
		v, err := strconv.ParseFloat(strings.TrimSuffix(f[4], "%"), 64)
		if err != nil {
			t.Fatal(err)
		}
		shares = append(shares, v)
	}
	return shares
}

// TestVXLANSpread: between two tunnel endpoints, -tunnels outer puts every
// VXLAN frame on one worker (UDP hashes by its addresses, as in FreeBSD),
// and -tunnels inner spreads them over all workers by their inner flows.
func TestVXLANSpread(t *testing.T) {
	const workers = 4
	vxlanFile := vxlanCapture(t)
	for _, tunnels := range []string{"outer", "inner"} {
		t.Run(tunnels, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "flows.csv")
			out, _, err := runCmd(t, "-r", vxlanFile, "-key", "microsoft", "-workers", strconv.Itoa(workers), "-tunnels", tunnels, "-flows", path)
			if err != nil {
				t.Fatal(err)
			}
			vxlanOn := map[string]uint64{} // worker: VXLAN frames
			var vxlan uint64
			for _, r := range readCSV(t, path) {
				isVXLAN := r["dport"] == "4789" || r["encap"] == "vxlan:42"
				if isVXLAN {
					vxlanOn[r["worker"]] += r.uint(t, "packets")
					vxlan += r.uint(t, "packets")
				}
				if tunnels == "inner" && r["dport"] == "4789" {
					t.Errorf("a VXLAN frame hashed by its outer header: %v", r)
				}
			}
			if vxlan != vxlanFrames*7/8 {
				t.Errorf("%d VXLAN frames, want %d", vxlan, vxlanFrames*7/8)
			}
			shares := workerShares(t, out)
			if len(shares) != workers {
				t.Fatalf("shares %v", shares)
			}
			t.Logf("-tunnels %s: per-worker shares %v", tunnels, shares)
			switch tunnels {
			case "outer":
				if len(vxlanOn) != 1 {
					t.Errorf("VXLAN frames on workers %v, want one", vxlanOn)
				}
				if !hintLine.MatchString(out) {
					t.Errorf("no hint:\n%s", out)
				}
			case "inner":
				if len(vxlanOn) != workers {
					t.Errorf("VXLAN frames on workers %v, want all %d", vxlanOn, workers)
				}
				for i, s := range shares {
					if s < 10 || s > 40 {
						t.Errorf("worker %d has %.1f%% of the frames: not spread", i, s)
					}
				}
			}
		})
	}
}

// TestTraceLayers: -trace prints the layers walked, the outer header and
// the tunnel with tunnels opened, and with them closed what opening them
// would hash.
func TestTraceLayers(t *testing.T) {
	vxlanFile := vxlanCapture(t)
	out, _, err := runCmd(t, "-r", vxlanFile, "-key", "microsoft", "-tunnels", "inner", "-trace", "1")
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`  headers, outermost first:
    ethernet
    ipv4 192\.0\.2\.1 > 192\.0\.2\.2, proto 17, ports \d+ > 4789 \(the outer header\)
    vxlan:42
    ipv4 10\.0\.\d+\.\d+ > 10\.0\.200\.\d, proto 6, ports \d+ > 80: hashed \(RSS_TCP_IPV4\)
`)
	if !want.MatchString(out) {
		t.Errorf("trace with -tunnels inner:\n%s", out)
	}
	out, _, err = runCmd(t, "-r", vxlanFile, "-key", "microsoft", "-trace", "1")
	if err != nil {
		t.Fatal(err)
	}
	want = regexp.MustCompile(`    ipv4 192\.0\.2\.1 > 192\.0\.2\.2, proto 17, ports \d+ > 4789: hashed \(RSS_IPV4\)
  tunnel not opened \(-tunnels outer\): -tunnels inner would hash ipv4 10\.0\.\d+\.\d+ > 10\.0\.200\.\d, proto 6, ports \d+ > 80, encapsulation vxlan:42 \(flowid 0x[0-9a-f]{8}, RSS_TCP_IPV4\)
`)
	if !want.MatchString(out) {
		t.Errorf("trace with -tunnels outer:\n%s", out)
	}
}

// TestLayers: the layers of every encapsulation, nested tunnels and a
// tunnel whose inside was not hashed included.
func TestLayers(t *testing.T) {
	f := synth.Flow{Src: netip.MustParseAddr("10.1.2.3"), Dst: netip.MustParseAddr("10.4.5.6"), SrcPort: 40000, DstPort: 80}
	inner, err := steer.NewClassifier(steer.HashConfig{Tunnels: steer.TunnelsInner})
	if err != nil {
		t.Fatal(err)
	}
	outer, err := steer.NewClassifier(steer.HashConfig{})
	if err != nil {
		t.Fatal(err)
	}
	const hashed = "ipv4 10.1.2.3 > 10.4.5.6, proto 6, ports 40000 > 80: hashed (RSS_TCP_IPV4)"
	want := map[string][]string{
		"plain": {"ethernet", hashed},
		"qinq":  {"ethernet, vlan 100, vlan 7", hashed},
		"vlan-vxlan-gre": {"ethernet, vlan 7", "ipv4 192.0.2.1 > 192.0.2.2, proto 17, ports 50005 > 4789 (the outer header)", "vxlan:42",
			"ip (inside tunnel 1, not in the flow key)", "gre:key=9", hashed},
		"mpls-pw":   {"ethernet", "mpls:2000", "pw", "vlan:5", hashed},
		"mpls-gtpu": {"ethernet", "mpls:300", "ipv4 192.0.2.1 > 192.0.2.2, proto 17, ports 2152 > 2152 (the outer header)", "gtpu:99", hashed},
	}
	for _, c := range synth.Cases {
		w, ok := want[c.Name]
		if !ok {
			continue
		}
		frame := c.Build(f)
		var in, out steer.Classification
		inner.Classify(frame, &in)
		outer.Classify(frame, &out)
		if got := layers(&in, &out.Key); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("%s:\n got %q\nwant %q", c.Name, got, w)
		}
	}
	// ARP inside VXLAN: the tunnel is entered, the outer header hashed.
	var arp []byte
	for _, c := range synth.Cases {
		if c.Name == "vxlan" {
			arp = c.Build(f)
		}
	}
	at := bytes.LastIndex(arp, []byte{0x08, 0x00, 0x45}) // the inner EtherType
	arp[at+1] = 0x06
	var in steer.Classification
	inner.Classify(arp, &in)
	got := layers(&in, nil)
	w := []string{"ethernet, vlan 7", "ipv4 192.0.2.1 > 192.0.2.2, proto 17, ports 50000 > 4789: hashed (RSS_IPV4)",
		"vxlan:42 (entered; what it carries was not hashed)"}
	if in.Reason != steer.ReasonTunnelNonIP || fmt.Sprint(got) != fmt.Sprint(w) {
		t.Errorf("ARP in VXLAN (%s):\n got %q\nwant %q", in.Reason, got, w)
	}
}

// TestEncapJSON: the JSON report has the per-encapsulation counts and the
// hash configuration.
func TestEncapJSON(t *testing.T) {
	vxlanFile := vxlanCapture(t)
	for _, tunnels := range []string{"outer", "inner"} {
		stdout, _, err := runCmd(t, "-r", vxlanFile, "-json", "-tunnels", tunnels, "-hashtypes", "ipv4,ipv6,tcp_ipv4,tcp_ipv6")
		if err != nil {
			t.Fatal(err)
		}
		var r capture.Report
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatal(err)
		}
		e, vx := r.Encapsulations, uint64(vxlanFrames*7/8)
		if r.Config.Tunnels.String() != tunnels || r.Config.HashTypes != hash.DefaultTypes || r.Config.Hash != hash.AlgorithmToeplitz {
			t.Errorf("-tunnels %s: config %+v", tunnels, r.Config)
		}
		if tunnels == "inner" && (e.Kinds[steer.EncapVXLAN] != vx || e.Stacks["vxlan"] != vx || e.Decapsulated != vx || e.NotDecapsulated != 0 ||
			e.Plain != vxlanFrames-vx) {
			t.Errorf("-tunnels inner: %+v", e)
		}
		if tunnels == "outer" && (e.Kinds[steer.EncapVXLAN] != 0 || e.NotDecapsulated != vx || e.NotDecapsulatedKinds[steer.EncapVXLAN] != vx ||
			e.Plain != vxlanFrames-vx || e.Stacks["plain"] != vxlanFrames-vx || e.Stacks["vxlan"] != vx) { // tunnelled is not plain
			t.Errorf("-tunnels outer: %+v", e)
		}
	}
}

// TestHashFlagErrors: the hash flags' bad values and combinations are
// usage errors, and so is a value the library refuses at New.
func TestHashFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-tunnels", "both"}, {"-vxlan-ports", "6081"}, {"-vxlan-ports", "x"}, {"-hashtypes", "tcp_ipv4"},
		{"-hashtypes", "ippair"}, {"-hash", "crc"}, {"-hash", "siphash", "-key", "microsoft"},
		{"-hash", "siphash", "-key", strings.Repeat("ab", 40)}, {"-key", strings.Repeat("ab", 16)},
	} {
		if _, _, err := runCmd(t, args...); err == nil || !strings.Contains(err.Error(), "usage error") {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}

// TestDocExample: the runs the package documentation shows print what it
// says they print.
func TestDocExample(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	const cmd = "//\t$ go run ./examples/pcapsteer "
	runs := 0
	lines := strings.Split(string(src), "\n")
	for i, line := range lines {
		if !strings.HasPrefix(line, cmd) {
			continue
		}
		runs++
		args := strings.Fields(strings.TrimPrefix(line, cmd))
		out, _, err := runCmd(t, args...)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		for _, want := range lines[i+1:] {
			want, ok := strings.CutPrefix(want, "//\t")
			if !ok || strings.HasPrefix(want, "$ ") {
				break
			}
			if want != "..." && !strings.Contains(out, want+"\n") {
				t.Errorf("%q: the output lacks the documented line %q:\n%s", args, want, out)
			}
		}
	}
	if runs != 2 {
		t.Errorf("%d documented runs, want 2", runs)
	}
}

// TestSampleFlag: -sample tunnels reads the embedded tunnels capture,
// -sample main (or nothing) the main one.
func TestSampleFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		name string
		data []byte
	}{
		{nil, sample.Name, sample.Pcap},
		{[]string{"-sample", "main"}, sample.Name, sample.Pcap},
		{[]string{"-sample", "tunnels"}, sample.TunnelsName, sample.Tunnels},
	} {
		out, _, err := runCmd(t, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		in, _, _ := reportTotals(t, out)
		if n := uint64(len(readFrames(t, tc.data))); !strings.HasPrefix(out, "Input: "+tc.name+" (embedded sample)") || in != n {
			t.Errorf("%q: %d frames in, want %d of %s:\n%s", tc.args, in, n, tc.name, out[:min(len(out), 200)])
		}
	}
}

// splitFlows runs the program over a capture with args and returns how
// many address pairs its -flows rows put on more than one worker, out of
// how many, and the JSON report's reasons.
func splitFlows(t *testing.T, capture string, args ...string) (split, pairs int, reasons map[string]any) {
	t.Helper()
	csvPath := filepath.Join(t.TempDir(), "flows.csv")
	out, _, err := runCmd(t, append([]string{"-r", capture, "-flows", csvPath, "-json"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	workers := map[[2]string]map[string]bool{}
	for _, r := range readCSV(t, csvPath) {
		pair := [2]string{r["src"], r["dst"]}
		if workers[pair] == nil {
			workers[pair] = map[string]bool{}
		}
		workers[pair][r["worker"]] = true
	}
	for _, ws := range workers {
		if len(ws) > 1 {
			split++
		}
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("JSON report: %v", err)
	}
	return split, len(workers), rep["reasons"].(map[string]any)
}

// TestFragmentsFollow: over 240 UDP flows, one per address pair, half over
// IPv6, whose datagrams are sometimes cut into 2 to 4 fragments, three
// workers with UDP's 4-tuple split many flows across workers with
// -fragments tuple (the default: a datagram's later fragments hashed by
// their addresses) and none with -fragments follow, which counts no
// orphan, since every first fragment comes first.
func TestFragmentsFollow(t *testing.T) {
	capture := writeFile(t, "frag.pcap", pcapOf(synth.FragmentedUDP(240, 1)))
	common := []string{"-workers", "3", "-udp4tuple", "-key", "microsoft"}
	split, pairs, _ := splitFlows(t, capture, common...)
	t.Logf("-fragments tuple: %d of %d flows split across workers (%.0f%%)", split, pairs, 100*float64(split)/float64(pairs))
	if pairs != 240 || split < pairs/3 {
		t.Errorf("-fragments tuple: %d of %d flows split; want 240 flows, at least a third split", split, pairs)
	}
	if s, _, _ := splitFlows(t, capture, append(common, "-fragments", "tuple")...); s != split {
		t.Errorf("-fragments tuple split %d flows, the default %d", s, split)
	}
	split, pairs, reasons := splitFlows(t, capture, append(common, "-fragments", "follow")...)
	t.Logf("-fragments follow: %d of %d flows split across workers", split, pairs)
	if pairs != 240 || split != 0 || reasons["orphan-fragment"] != float64(0) {
		t.Errorf("-fragments follow: %d of %d flows split, %v orphans; want none of 240", split, pairs, reasons["orphan-fragment"])
	}
}
