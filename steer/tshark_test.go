package steer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/synth"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// The tests here hold the classifier, with tunnels opened, to the packet
// tshark decodes: each frame must be hashed by the innermost IP header
// tshark finds in it. tshark is run with the tunnel ports the classifier
// is given (VXLAN on 4789 and 8472) and with ipv6.tso_support on, which
// takes an IPv6 payload length of zero for the frame, as the classifier
// (and tcpdump) do; its IPv4 counterpart, ip.tso_support, is on by
// default. An IP header that tshark decodes inside an ICMP error is the
// quoted packet, not a tunnel's: the walk stops at ICMP.
//
// tshark also needs telling which MPLS labels carry a pseudowire's
// Ethernet frame after a control word: it guesses an Ethernet frame
// without one, and reads the control word as MAC address bytes. The
// classifier takes a payload whose first nibble is 0 for a control word,
// as RFC 4385 has it.

// tsharkVXLANPorts are the VXLAN ports both sides use.
var tsharkVXLANPorts = []uint16{steer.VXLANPort, 8472}

// tsharkPseudowires are the MPLS labels of synth's pseudowires.
var tsharkPseudowires = []int{200, 2000}

// requireTshark returns tshark's path, or skips the test without it,
// except under STEER_REQUIRE_PRIV=1 (CI), where its absence fails it.
func requireTshark(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("tshark")
	if err != nil {
		if os.Getenv("STEER_REQUIRE_PRIV") == "1" {
			t.Fatalf("tshark is not installed (apt-get install tshark): %v", err)
		}
		t.Skipf("tshark is not installed: %v", err)
	}
	return path
}

// ipPair is an IP header's source and destination.
type ipPair struct{ src, dst netip.Addr }

// tsharkInnermost returns, for each frame of a capture, the addresses of
// the innermost IP header tshark decodes, or the zero pair when it
// decodes none.
func tsharkInnermost(t *testing.T, tshark, path string) []ipPair {
	t.Helper()
	args := []string{"-n", "-r", path, "-o", "ipv6.tso_support:TRUE"}
	for _, p := range tsharkVXLANPorts {
		args = append(args, "-d", fmt.Sprintf("udp.port==%d,vxlan", p))
	}
	for _, l := range tsharkPseudowires {
		args = append(args, "-d", fmt.Sprintf("mpls.label==%d,pwethcw", l))
	}
	args = append(args, "-T", "fields", "-E", "separator=|", "-E", "occurrence=a", "-E", "aggregator=,",
		"-e", "frame.protocols", "-e", "ip.src", "-e", "ip.dst", "-e", "ipv6.src", "-e", "ipv6.dst")
	out, err := exec.Command(tshark, args...).Output()
	if err != nil {
		t.Fatalf("tshark %s: %v", path, err)
	}
	var pairs []ipPair
	for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 5 {
			t.Fatalf("tshark %s: line %q", path, line)
		}
		var n4, n6 int
		last := ""
	walk:
		for _, p := range strings.Split(f[0], ":") {
			switch p {
			case "ip":
				n4++
			case "ipv6":
				n6++
			case "icmp", "icmpv6":
				break walk
			default:
				continue
			}
			last = p
		}
		var pair ipPair
		switch last {
		case "ip":
			pair = nth(f[1], f[2], n4)
		case "ipv6":
			pair = nth(f[3], f[4], n6)
		}
		pairs = append(pairs, pair)
	}
	return pairs
}

// nth is the n-th source and destination of tshark's comma-separated
// lists of them, or the zero pair when the lists are shorter.
func nth(srcs, dsts string, n int) ipPair {
	s, d := strings.Split(srcs, ","), strings.Split(dsts, ",")
	if len(s) < n || len(d) < n {
		return ipPair{}
	}
	src, err1 := netip.ParseAddr(s[n-1])
	dst, err2 := netip.ParseAddr(d[n-1])
	if err1 != nil || err2 != nil {
		return ipPair{}
	}
	return ipPair{src, dst}
}

// innermost is the agreement over one capture: the frames tshark finds
// an IP header in, those the classifier hashes by that header's
// addresses, and a line for each of the others.
type innermost struct {
	ip, agree int
	misses    []string
}

// compareInnermost classifies every frame of a capture with c and
// compares it with tshark's innermost IP header.
func compareInnermost(t *testing.T, tshark string, c *steer.Classifier, path string) innermost {
	t.Helper()
	want := tsharkInnermost(t, tshark, path)
	r, err := pcapfile.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var res innermost
	var cl steer.Classification
	i := 0
	for {
		var b steer.Batch
		err := r.ReadBatch(context.Background(), &b)
		for _, f := range b.Frames {
			c.Classify(f.Data, &cl)
			if i < len(want) && want[i].src.IsValid() {
				res.ip++
				if cl.HashType != hash.None && cl.Key.Src == want[i].src && cl.Key.Dst == want[i].dst {
					res.agree++
				} else {
					res.misses = append(res.misses, fmt.Sprintf("%s frame %d: tshark %v > %v, classifier %v > %v (%v, %v, %q)",
						filepath.Base(path), i+1, want[i].src, want[i].dst, cl.Key.Src, cl.Key.Dst, cl.HashType, cl.Reason, cl.Key.Encapsulation()))
				}
			}
			i++
		}
		if b.Release != nil {
			b.Release()
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	if i != len(want) {
		t.Fatalf("%s: %d frames, tshark decoded %d", path, i, len(want))
	}
	return res
}

func innerClassifier(t *testing.T) *steer.Classifier {
	t.Helper()
	c, err := steer.NewClassifier(steer.HashConfig{Tunnels: steer.TunnelsInner, VXLANPorts: tsharkVXLANPorts})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestTsharkInnermost: every frame of a capture of each encapsulation the
// classifier walks (synth's cases, with flows over IPv4 and IPv6,
// and its packets over 64 KiB, BIG TCP's and jumbograms, cut by the snap
// length as a capture cuts them), and of tcpdump's captures of GRE with
// Cisco MetaData and of MPLS over UDP (testdata/tcpdump), is hashed by
// the innermost IP header tshark decodes.
func TestTsharkInnermost(t *testing.T) {
	tshark := requireTshark(t)
	flows := []synth.Flow{
		{Src: netip.MustParseAddr("10.1.2.3"), Dst: netip.MustParseAddr("10.4.5.6"), SrcPort: 40000, DstPort: 80},
		{Src: netip.MustParseAddr("10.1.2.3"), Dst: netip.MustParseAddr("10.4.5.7"), SrcPort: 4000, DstPort: 9000, UDP: true},
		{Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2"), SrcPort: 5000, DstPort: 443},
		{Src: netip.MustParseAddr("fd00::3"), Dst: netip.MustParseAddr("fd00::4"), SrcPort: 5001, DstPort: 9001, UDP: true},
	}
	build := func(cases []synth.Case) [][]byte {
		var frames [][]byte
		for _, c := range cases {
			for _, f := range flows {
				frames = append(frames, c.Build(f))
			}
		}
		return frames
	}
	dir := t.TempDir()
	var paths []string
	for _, file := range []struct {
		name  string
		cases []synth.Case
		snap  int
	}{{"encap.pcap", synth.Cases, 0}, {"big.pcap", synth.BigCases, 256}} {
		p := filepath.Join(dir, file.name)
		var b bytes.Buffer
		w, err := pcapfile.NewWriter(&b, pcapfile.LinkTypeEthernet, pcapfile.WriterOptions{SnapLen: file.snap})
		if err == nil {
			err = synth.WriteAll(w, synth.Packets(build(file.cases)))
		}
		if err == nil {
			err = os.WriteFile(p, b.Bytes(), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	tcpdump, err := filepath.Glob("testdata/tcpdump/*.pcap")
	if err != nil || len(tcpdump) == 0 {
		t.Fatalf("tcpdump's captures: %v %v", tcpdump, err)
	}
	c := innerClassifier(t)
	for _, p := range append(paths, tcpdump...) {
		res := compareInnermost(t, tshark, c, p)
		t.Logf("%s: %d of %d frames with an IP header", filepath.Base(p), res.agree, res.ip)
		if res.ip == 0 {
			t.Errorf("%s: tshark decoded no IP header", p)
		}
		for _, m := range res.misses {
			t.Error(m)
		}
	}
}

// tcpdumpTunnelCaptures names the captures of tcpdump's test suite that
// hold the tunnels the classifier opens: those whose names name one.
var tcpdumpTunnelCaptures = regexp.MustCompile(`(erspan|geneve|vxlan|gre|mpls-over-udp).*\.pcap$`)

// TestTsharkTcpdumpSuite measures the agreement over the tunnel captures
// of tcpdump's test suite, the directory STEER_TCPDUMP_TESTS names (a
// checkout's tests/): the share of their frames with an IP header that
// the classifier hashes by the innermost one tshark decodes. It is a
// measurement, skipped without the directory; it fails below 97%.
func TestTsharkTcpdumpSuite(t *testing.T) {
	dir := os.Getenv("STEER_TCPDUMP_TESTS")
	if dir == "" {
		t.Skip("STEER_TCPDUMP_TESTS does not name tcpdump's tests/ directory")
	}
	tshark := requireTshark(t)
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := innerClassifier(t)
	var total innermost
	var files []string
	for _, e := range names {
		if !tcpdumpTunnelCaptures.MatchString(e.Name()) {
			continue
		}
		files = append(files, e.Name())
		res := compareInnermost(t, tshark, c, filepath.Join(dir, e.Name()))
		total.ip += res.ip
		total.agree += res.agree
		total.misses = append(total.misses, res.misses...)
	}
	slices.Sort(files)
	for _, m := range total.misses {
		t.Log(m)
	}
	pct := 100 * float64(total.agree) / float64(max(total.ip, 1))
	t.Logf("%d captures (%s): %d of %d frames with an IP header (%.1f%%) hashed by the innermost one tshark decodes",
		len(files), strings.Join(files, " "), total.agree, total.ip, pct)
	if pct < 97 {
		t.Errorf("%.1f%% agree, want at least 97%%", pct)
	}
}
