package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/affinity"
	"github.com/rpsgo/rps/internal/capture"
	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/internal/sample"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/filter"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// TestMain lets a test run main() in a child process, to see its exit
// status: PCAPSTEER_MAIN holds the arguments, separated by newlines.
func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv("PCAPSTEER_MAIN"); ok {
		os.Args = append([]string{"pcapsteer"}, strings.Split(args, "\n")...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runCmd runs the program in-process with args.
func runCmd(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return runCmd2(context.Background(), args...)
}

// frame is one record of a capture: its bytes and its length on the wire.
type frame struct {
	data []byte
	orig int
}

// readFrames reads a capture with pcapfile and copies its frames.
func readFrames(t *testing.T, capture []byte) []frame {
	t.Helper()
	r, err := pcapfile.NewReader(bytes.NewReader(capture))
	if err != nil {
		t.Fatal(err)
	}
	var out []frame
	var b steer.Batch
	for {
		err := r.ReadBatch(context.Background(), &b)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range b.Frames {
			out = append(out, frame{data: slices.Clone(f.Data), orig: f.WireLen})
		}
		b.Release()
	}
}

// writePcap builds a classic pcap file (little-endian, microseconds), a
// frame a second.
func writePcap(link uint32, frames []frame) []byte {
	var b bytes.Buffer
	w, err := pcapfile.NewWriter(&b, pcapfile.LinkType(link), pcapfile.WriterOptions{SnapLen: 65535})
	for i := 0; err == nil && i < len(frames); i++ {
		err = w.WritePacket(time.Unix(1740830400+int64(i), 0), frames[i].data, frames[i].orig)
	}
	if err != nil { // a bytes.Buffer does not fail, nor do these times
		panic(err)
	}
	return b.Bytes()
}

// writePcapNG builds a pcapng file with one Ethernet interface and an
// enhanced packet block per frame.
func writePcapNG(frames []frame) []byte {
	le := binary.LittleEndian
	var b []byte
	block := func(typ uint32, body []byte) {
		for len(body)%4 != 0 {
			body = append(body, 0)
		}
		n := uint32(12 + len(body))
		b = le.AppendUint32(b, typ)
		b = le.AppendUint32(b, n)
		b = append(b, body...)
		b = le.AppendUint32(b, n)
	}
	shb := le.AppendUint32(nil, 0x1a2b3c4d)
	shb = le.AppendUint16(shb, 1)
	shb = le.AppendUint16(shb, 0)
	shb = le.AppendUint64(shb, ^uint64(0)) // section length unknown
	block(0x0a0d0d0a, shb)
	idb := le.AppendUint16(nil, 1) // LINKTYPE_ETHERNET
	idb = le.AppendUint16(idb, 0)
	idb = le.AppendUint32(idb, 65535)
	block(1, idb)
	for i, f := range frames {
		ts := uint64(1740830400+i) * 1e6
		epb := le.AppendUint32(nil, 0) // interface 0
		epb = le.AppendUint32(epb, uint32(ts>>32))
		epb = le.AppendUint32(epb, uint32(ts))
		epb = le.AppendUint32(epb, uint32(len(f.data)))
		epb = le.AppendUint32(epb, uint32(f.orig))
		epb = append(epb, f.data...)
		block(6, epb)
	}
	return b
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

var framesLine = regexp.MustCompile(`(?m)^Frames: (\d+) in, (\d+) handled, (\d+) dropped`)

// reportTotals returns the report's frames in, handled and dropped.
func reportTotals(t *testing.T, out string) (in, handled, dropped uint64) {
	t.Helper()
	m := framesLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no Frames line in the report:\n%s", out)
	}
	n := make([]uint64, 3)
	for i := range n {
		n[i], _ = strconv.ParseUint(m[i+1], 10, 64)
	}
	return n[0], n[1], n[2]
}

func TestSampleDefaultFlags(t *testing.T) {
	out, errOut, err := runCmd(t)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	if errOut != "" {
		t.Errorf("standard error is not a terminal, yet got %q", errOut)
	}
	for _, want := range []string{"Configuration:", "Workstreams:", "Classification (every frame in):", "Frames by classification reason:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`Hash key \(fingerprint\) +random`).MatchString(out) {
		t.Error("the default key is not random")
	}
	records := uint64(len(readFrames(t, sample.Pcap)))
	in, handled, dropped := reportTotals(t, out)
	if in != records || handled+dropped != in || dropped != 0 {
		t.Errorf("report: %d in, %d handled, %d dropped; the sample has %d frames and a replay blocks", in, handled, dropped, records)
	}
	want := fmt.Sprintf("Totals: read %d = handled %d + dropped 0 + panicked 0: yes", records, records)
	if !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}

// csvRow is one -flows row, its fields by column name.
type csvRow map[string]string

func readCSV(t *testing.T, path string) []csvRow {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 || !slices.Equal(recs[0], flowsHeader) {
		t.Fatalf("CSV header %v, want %v", recs[:min(1, len(recs))], flowsHeader)
	}
	var rows []csvRow
	for _, rec := range recs[1:] {
		r := csvRow{}
		for i, name := range recs[0] {
			r[name] = rec[i]
		}
		rows = append(rows, r)
	}
	return rows
}

func (r csvRow) uint(t *testing.T, col string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(r[col], 10, 64)
	if err != nil {
		t.Fatalf("column %s: %v", col, err)
	}
	return n
}

// flowIdent names a row by its flow columns, encapsulation and worker.
func (r csvRow) ident() string {
	return strings.Join([]string{r["src"], r["dst"], r["sport"], r["dport"], r["proto"], r["encap"], r["worker"]}, " ")
}

// expectedRows classifies frames directly, with the Microsoft key, and
// returns the CSV rows the program should write for them, by ident.
func expectedRows(t *testing.T, frames []frame, worker func(c *steer.Classification) int, buckets int) map[string]csvRow {
	t.Helper()
	h, err := hash.NewToeplitz(hash.MicrosoftKey[:])
	if err != nil {
		t.Fatal(err)
	}
	return expectedRowsFor(t, frames, steer.HashConfig{Key: h.Key()}, worker, buckets)
}

// expectedRowsFor is expectedRows for a classifier that hashes as hc says.
func expectedRowsFor(t *testing.T, frames []frame, hc steer.HashConfig, worker func(c *steer.Classification) int, buckets int) map[string]csvRow {
	t.Helper()
	cls, err := steer.NewClassifier(hc)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]csvRow{}
	var c steer.Classification
	for _, f := range frames {
		cls.Classify(f.data, &c)
		k := c.Key
		r := csvRow{"proto": strconv.Itoa(int(k.Proto)), "sport": strconv.Itoa(int(k.SrcPort)), "dport": strconv.Itoa(int(k.DstPort)),
			"hashtype": c.HashType.String(), "flowid": fmt.Sprintf("0x%08x", c.FlowID), "worker": strconv.Itoa(worker(&c)),
			"encap": k.Encapsulation()}
		if k.Src.IsValid() {
			r["src"], r["dst"] = k.Src.String(), k.Dst.String()
		}
		if c.HashType.IsHash() {
			r["bucket"] = strconv.Itoa(int(c.FlowID) & (buckets - 1))
		}
		id := r.ident()
		if old, ok := want[id]; ok {
			if old["flowid"] != r["flowid"] || old["hashtype"] != r["hashtype"] {
				t.Fatalf("flow %s: two frames classified differently (%s %s, %s %s)", id, old["flowid"], old["hashtype"], r["flowid"], r["hashtype"])
			}
			r = old
		}
		p, _ := strconv.ParseUint(r["packets"], 10, 64)
		b, _ := strconv.ParseUint(r["bytes"], 10, 64)
		r["packets"] = strconv.FormatUint(p+1, 10)
		r["bytes"] = strconv.FormatUint(b+uint64(f.orig), 10)
		want[id] = r
	}
	return want
}

// sumRows merges the rows of each ident, adding up their packets and
// bytes: the CSV has no fragment column, so a fragment and an
// unfragmented flow could share one, and a flow split in time (-idle,
// -active, a full table) has a row per record.
func sumRows(t *testing.T, rows []csvRow) map[string]csvRow {
	t.Helper()
	sum := map[string]csvRow{}
	for _, r := range rows {
		id := r.ident()
		if old, ok := sum[id]; ok {
			r = cloneRow(r)
			r["packets"] = strconv.FormatUint(old.uint(t, "packets")+r.uint(t, "packets"), 10)
			r["bytes"] = strconv.FormatUint(old.uint(t, "bytes")+r.uint(t, "bytes"), 10)
		}
		sum[id] = r
	}
	return sum
}

// compareRows checks that got has exactly the rows of want, got's rows of
// one ident summed first (sumRows). Only the columns want has are
// compared: the records' times and endings are checked elsewhere.
func compareRows(t *testing.T, got []csvRow, want map[string]csvRow) {
	t.Helper()
	sum := sumRows(t, got)
	bad := 0
	for id, w := range want {
		g, ok := sum[id]
		if !ok {
			t.Errorf("flow %q (%v) missing from the CSV", id, w)
			bad++
		}
		for _, col := range flowsHeader {
			if _, has := w[col]; !has && col != "src" && col != "dst" && col != "bucket" {
				continue
			}
			if ok && g[col] != w[col] {
				t.Errorf("flow %q: %s = %q, want %q", id, col, g[col], w[col])
				bad++
			}
		}
		if bad > 10 {
			t.Fatal("too many differences")
		}
	}
	for id := range sum {
		if _, ok := want[id]; !ok {
			t.Errorf("CSV has a flow %q the classifier did not produce", id)
		}
	}
}

func cloneRow(r csvRow) csvRow {
	c := csvRow{}
	for k, v := range r {
		c[k] = v
	}
	return c
}

// TestFlowsCSVMatchesClassifier checks the -flows CSV row by row against
// the classifier and the Toeplitz hash run directly, for each policy, and
// for each dispatch mode under the RSS policy.
func TestFlowsCSVMatchesClassifier(t *testing.T) {
	frames := readFrames(t, sample.Pcap)
	var wantFrames, wantBytes uint64
	for _, f := range frames {
		wantFrames++
		wantBytes += uint64(f.orig)
	}
	const workers, buckets = 3, 64 // 3 workers: a modulo that differs from the bucket mask
	// The default indirection table is round robin: table[b] = b % workers.
	// The single input's source id is 0 and a classic pcap has ifindex 0.
	source := func(*steer.Classification) int { return (0 + 0) % workers }
	policies := map[string]func(c *steer.Classification) int{
		"rss": func(c *steer.Classification) int {
			if !c.HashType.IsHash() {
				return source(c)
			}
			return int(c.FlowID&(buckets-1)) % workers
		},
		"flow": func(c *steer.Classification) int {
			if !c.HashType.IsHash() {
				return source(c)
			}
			return int(c.FlowID % workers)
		},
		"source": source,
	}
	cases := []struct{ policy, dispatch string }{
		{"rss", "deferred"}, {"rss", "hybrid"}, {"rss", "direct"}, {"flow", "deferred"}, {"source", "deferred"},
	}
	for _, tc := range cases {
		t.Run(tc.policy+"/"+tc.dispatch, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "flows.csv")
			out, _, err := runCmd(t, "-key", "microsoft", "-policy", tc.policy, "-dispatch", tc.dispatch,
				"-workers", strconv.Itoa(workers), "-buckets", strconv.Itoa(buckets), "-flows", path)
			if err != nil {
				t.Fatal(err)
			}
			rows := readCSV(t, path)
			var packets, byteSum uint64
			noAddr := 0
			for _, r := range rows {
				packets += r.uint(t, "packets")
				byteSum += r.uint(t, "bytes")
				if r["src"] == "" {
					noAddr++
					if r["hashtype"] != "NONE" || r["flowid"] != "0x00000000" || r["bucket"] != "" || r["worker"] != "0" {
						t.Errorf("a row without addresses: %v", r)
					}
				}
			}
			if packets != wantFrames || byteSum != wantBytes {
				t.Errorf("CSV sums: %d packets, %d bytes; the file has %d frames, %d bytes", packets, byteSum, wantFrames, wantBytes)
			}
			want := expectedRows(t, frames, policies[tc.policy], buckets)
			wantNoAddr := 0
			for _, r := range want {
				if r["src"] == "" {
					wantNoAddr++
				}
			}
			// Frames without addresses share a row per key (untagged,
			// and each stack of VLAN tags), all on worker 0.
			if noAddr != wantNoAddr || noAddr < 2 {
				t.Errorf("%d rows without addresses, want %d", noAddr, wantNoAddr)
			}
			compareRows(t, rows, want)
			if in, handled, _ := reportTotals(t, out); in != wantFrames || handled != wantFrames {
				t.Errorf("report: %d in, %d handled, want %d", in, handled, wantFrames)
			}
		})
	}
}

// linkRecord converts an untagged Ethernet frame into a record of another
// link type, or returns false when that link type cannot carry it. The
// header bytes it adds replace the 14 of the Ethernet header.
type linkRecord func(i int, eth []byte) ([]byte, bool)

func ipVersionOK(eth []byte) bool {
	et := binary.BigEndian.Uint16(eth[12:])
	v := eth[14] >> 4
	return et == 0x0800 && v == 4 || et == 0x86dd && v == 6
}

func rawIP(want uint16) linkRecord {
	return func(_ int, eth []byte) ([]byte, bool) {
		et := binary.BigEndian.Uint16(eth[12:])
		if !ipVersionOK(eth) || want != 0 && et != want {
			return nil, false
		}
		return slices.Clone(eth[14:]), true
	}
}

// loopback builds a NULL (host order) or LOOP (network order) record.
func loopback(order binary.AppendByteOrder, inet6 []uint32) linkRecord {
	return func(i int, eth []byte) ([]byte, bool) {
		if !ipVersionOK(eth) {
			return nil, false
		}
		af := uint32(2) // AF_INET
		if binary.BigEndian.Uint16(eth[12:]) == 0x86dd {
			af = inet6[i%len(inet6)]
		}
		return append(order.AppendUint32(nil, af), eth[14:]...), true
	}
}

func sll(_ int, eth []byte) ([]byte, bool) {
	h := make([]byte, 16)
	binary.BigEndian.PutUint16(h[0:], 0) // sent to us
	binary.BigEndian.PutUint16(h[2:], 1) // ARPHRD_ETHER
	binary.BigEndian.PutUint16(h[4:], 6)
	copy(h[6:], eth[6:12])
	copy(h[14:], eth[12:14])
	return append(h, eth[14:]...), true
}

const sll2IfIndex = 3

func sll2(_ int, eth []byte) ([]byte, bool) {
	h := make([]byte, 20)
	copy(h[0:], eth[12:14])
	binary.BigEndian.PutUint32(h[4:], sll2IfIndex)
	binary.BigEndian.PutUint16(h[8:], 1) // ARPHRD_ETHER
	h[10], h[11] = 0, 6
	copy(h[12:], eth[6:12])
	return append(h, eth[14:]...), true
}

// TestLinkTypes steers the sample's untagged frames written in every
// supported link type and checks that each flow gets the flowid, hash type,
// bucket, worker and counts it gets from the Ethernet file of the same
// frames.
func TestLinkTypes(t *testing.T) {
	var untagged []frame
	for _, f := range readFrames(t, sample.Pcap) {
		if len(f.data) <= 14 {
			continue
		}
		switch binary.BigEndian.Uint16(f.data[12:]) {
		case 0x8100, 0x88a8, 0x9100:
			continue
		}
		untagged = append(untagged, f)
	}
	const workers = 2
	cases := []struct {
		name    string
		link    uint32
		conv    linkRecord
		ifIndex int // what the reader reports, which places frames without a hash
		ng      bool
	}{
		{name: "ETHERNET", link: 1, conv: func(_ int, eth []byte) ([]byte, bool) { return eth, true }},
		{name: "LINUX_SLL", link: 113, conv: sll},
		{name: "LINUX_SLL2", link: 276, conv: sll2, ifIndex: sll2IfIndex},
		{name: "RAW", link: 101, conv: rawIP(0)},
		{name: "RAW_12", link: 12, conv: rawIP(0)},
		{name: "IPV4", link: 228, conv: rawIP(0x0800)},
		{name: "IPV6", link: 229, conv: rawIP(0x86dd)},
		{name: "NULL", link: 0, conv: loopback(binary.LittleEndian, []uint32{10, 24, 28, 30})},
		{name: "LOOP", link: 108, conv: loopback(binary.BigEndian, []uint32{24})},
		{name: "pcapng", link: 1, ng: true, ifIndex: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var eth, recs []frame
			for i, f := range untagged {
				data := f.data
				if tc.conv != nil {
					var ok bool
					if data, ok = tc.conv(i, f.data); !ok {
						continue
					}
				}
				eth = append(eth, f)
				recs = append(recs, frame{data: data, orig: f.orig - len(f.data) + len(data)})
			}
			if len(recs) < 100 {
				t.Fatalf("only %d frames to test with", len(recs))
			}
			var capture []byte
			if tc.ng {
				capture = writePcapNG(recs)
			} else {
				capture = writePcap(tc.link, recs)
			}
			file := writeFile(t, "in.pcap", capture)
			base := writeFile(t, "eth.pcap", writePcap(1, eth))
			got := filepath.Join(t.TempDir(), "got.csv")
			want := filepath.Join(t.TempDir(), "want.csv")
			args := []string{"-key", "microsoft", "-workers", strconv.Itoa(workers)}
			out, _, err := runCmd(t, append(args, "-r", file, "-flows", got)...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "link type "+strings.TrimSuffix(tc.name, "_12")) && !tc.ng {
				t.Errorf("the output does not name link type %s:\n%s", tc.name, out[:min(len(out), 200)])
			}
			if _, _, err := runCmd(t, append(args, "-r", base, "-flows", want)...); err != nil {
				t.Fatal(err)
			}
			// Frames without a hash go to (source 0 + ifindex) % workers.
			// The files' frames are a second apart, so flows split in
			// time (-idle): alike in both.
			wantCSV := readCSV(t, want)
			for _, r := range wantCSV {
				if r["hashtype"] == "NONE" {
					r["worker"] = strconv.Itoa(tc.ifIndex % workers)
				}
				delete(r, "first")
				delete(r, "last")
				delete(r, "ended")
			}
			gotRows := readCSV(t, got)
			if len(gotRows) != len(wantCSV) {
				t.Errorf("%d rows, want %d", len(gotRows), len(wantCSV))
			}
			compareRows(t, gotRows, sumRows(t, wantCSV))
		})
	}
}

func TestUnsupportedLinkType(t *testing.T) {
	eth := readFrames(t, sample.Pcap)[:3]
	file := writeFile(t, "wifi.pcap", writePcap(105, eth))
	_, _, err := runCmd(t, "-r", file)
	if !errors.Is(err, pcapfile.ErrLinkType) || !strings.Contains(err.Error(), "IEEE802_11 (105)") {
		t.Fatalf("got error %v, want one naming link type IEEE802_11 (105)", err)
	}

	// The program itself prints it and exits with a non-zero status.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PCAPSTEER_MAIN=-r\n"+file)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("exit: %v, want status 1", err)
	}
	if !strings.Contains(stderr.String(), "pcapsteer: ") || !strings.Contains(stderr.String(), "IEEE802_11") {
		t.Errorf("standard error %q does not name the link type", stderr.String())
	}
}

func TestMainExitStatus(t *testing.T) {
	for _, tc := range []struct {
		args   string
		status int
		stderr string // a prefix of standard error
	}{
		{"-workers\n2", 0, ""},
		{"-h", 0, "Usage: pcapsteer [flags] [filter expression]\n"},
		{"-policy\ncpu", 2, "pcapsteer: usage error: -policy \"cpu\""},
		{"-nosuchflag", 2, "pcapsteer: usage error: flag provided but not defined: -nosuchflag\nRun 'pcapsteer -h' for usage."},
		{"-c\n-1", 2, "pcapsteer: usage error: -c -1 is negative"},
		{"-f\n{ 0x28, 0, 0, 12 },", 2, "pcapsteer: usage error: filter: invalid BPF program: the last instruction"},
		{"-json\n-w\n-", 2, "pcapsteer: usage error: -json, -w - and -flows - all write to standard output"},
		{"-f\nudp\nudp", 2, "pcapsteer: usage error: give the filter once"},
		{"udp\n-c\n5", 2, "pcapsteer: usage error: flag -c after the arguments \"udp -c 5\": flags go first"},
		{"-version", 0, ""},
		{"-r\n/nonexistent/file.pcap", 1, "pcapsteer: open /nonexistent/file.pcap"},
		{"-tunnels\ninner\n-vxlan-ports\n4789,8472\n-hashtypes\nipv4,ipv6\n-hash\nsiphash", 0, ""},
		{"-tunnels\nsideways", 2, "pcapsteer: usage error: invalid value \"sideways\" for flag -tunnels"},
		{"-vxlan-ports\n6081", 2, "pcapsteer: usage error: -vxlan-ports: steer: VXLAN port 6081"},
		{"-vxlan-ports\n4789,,8472", 2, "pcapsteer: usage error: -vxlan-ports: "},
		{"-hashtypes\ntcp_ipv4,tcp_ipv6", 2, "pcapsteer: usage error: -hashtypes: steer: hash types"},
		{"-hashtypes\nippair", 2, "pcapsteer: usage error: invalid value \"ippair\" for flag -hashtypes"},
		{"-hash\nmurmur", 2, "pcapsteer: usage error: invalid value \"murmur\" for flag -hash"},
		{"-hash\nsiphash\n-key\nmicrosoft", 2, "pcapsteer: usage error: -key: microsoft is a Toeplitz key"},
		{"-buckets\n100", 2, "pcapsteer: usage error: starting the dispatcher: steer: "},
		{"-sample\ntunnels", 0, ""},
		{"-sample\nbig", 2, "pcapsteer: usage error: -sample \"big\": want main or tunnels"},
		{"-sample\nmain\n-r\nx.pcap", 2, "pcapsteer: usage error: -r and -sample both name the input"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "PCAPSTEER_MAIN="+tc.args)
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
		if status != tc.status {
			t.Errorf("pcapsteer %q: exit status %d, want %d", tc.args, status, tc.status)
		}
		if !strings.HasPrefix(stderr.String(), tc.stderr) {
			t.Errorf("pcapsteer %q: standard error %q, want it to start with %q", tc.args, stderr.String(), tc.stderr)
		}
		if tc.status != 0 && stdout.Len() > 0 {
			t.Errorf("pcapsteer %q: a usage error printed on standard output: %q", tc.args, stdout.String())
		}
	}
}

// TestFlowsToStdout: with -flows -, standard output holds the CSV alone and
// the report goes to standard error.
func TestFlowsToStdout(t *testing.T) {
	out, errOut, err := runCmd(t, "-key", "microsoft", "-flows", "-")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatalf("standard output is not a CSV: %v\n%s", err, out)
	}
	if len(recs) < 2 || !slices.Equal(recs[0], flowsHeader) {
		t.Fatalf("standard output: %d records, first %v; want the header and the flows", len(recs), recs[:min(1, len(recs))])
	}
	var packets uint64
	for _, r := range recs[1:] {
		n, err := strconv.ParseUint(r[slices.Index(flowsHeader, "packets")], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		packets += n
	}
	if in, handled, _ := reportTotals(t, errOut); in != handled || packets != handled {
		t.Errorf("report on standard error: %d in, %d handled; the CSV counts %d packets", in, handled, packets)
	}
	if !strings.Contains(errOut, "Input: ") || !strings.Contains(errOut, "Totals: ") {
		t.Errorf("standard error lacks the report:\n%s", errOut)
	}
}

// stalledPipe returns a pipe whose reader is standard input for the test
// and whose writer has sent a pcapng header and frames, then sends nothing
// more (it is closed at the end of the test).
func stalledPipe(t *testing.T, frames []frame) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(); r.Close() })
	data := writePcapNG(frames)
	go w.Write(data) // the pipe buffer may be smaller than the data
	return r
}

// TestInterruptStalledPipe reads a pipe that delivers a header and a few
// frames, then nothing: ending the context must stop the reading at once
// and still print the report of the frames read. (A read blocked on a pipe
// ignores the context unless the command makes it return.)
func TestInterruptStalledPipe(t *testing.T) {
	frames := readFrames(t, sample.Pcap)[:30]
	old := os.Stdin
	os.Stdin = stalledPipe(t, frames)
	defer func() { os.Stdin = old }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-r", "-"}, &out, &errOut) }()
	time.Sleep(300 * time.Millisecond) // the 30 frames are read and handled
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("run still reads the stalled pipe 10 s after its context ended")
	}
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Errorf("run: %v, want an interrupted error", err)
	}
	if in, handled, dropped := reportTotals(t, out.String()); in != 30 || handled != 30 {
		t.Errorf("report: %d in, %d handled, %d dropped; want the 30 frames the pipe delivered", in, handled, dropped)
	}
}

// TestInterruptSignal runs the program on a stalled pipe and sends it one
// interrupt, as Ctrl-C does: it must stop reading, print the report and
// exit, not wait for a second interrupt.
func TestInterruptSignal(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGINT to send on Windows")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PCAPSTEER_MAIN=-r\n-")
	cmd.Stdin = stalledPipe(t, readFrames(t, sample.Pcap)[:30])
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The Input line is printed once the header is read, after the signal
	// handler is installed.
	var out bytes.Buffer
	started, eof := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(eof)
		buf := make([]byte, 4096)
		signalled := false
		for {
			n, err := stdout.Read(buf)
			out.Write(buf[:n])
			if !signalled && (bytes.Contains(out.Bytes(), []byte("Input: ")) || err != nil) {
				close(started)
				signalled = true
			}
			if err != nil {
				return
			}
		}
	}()
	<-started
	time.Sleep(500 * time.Millisecond)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-eof: // the program exited
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-eof
		cmd.Wait()
		t.Fatal("one interrupt did not stop the program within 10 s")
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("exit: %v, want status 1 (interrupted)", err)
	}
	if !strings.Contains(stderr.String(), "pcapsteer: interrupted") {
		t.Errorf("standard error %q does not say it was interrupted", stderr.String())
	}
	if in, handled, _ := reportTotals(t, out.String()); in != 30 || handled != 30 {
		t.Errorf("report: %d in, %d handled; want the 30 frames the pipe delivered", in, handled)
	}
}

func TestTrace(t *testing.T) {
	out, _, err := runCmd(t, "-key", "microsoft", "-trace", "5")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "\nTrace "); n != 5 {
		t.Errorf("%d trace blocks, want 5:\n%s", n, out)
	}
	if n := strings.Count(out, "ether_demux:"); n != 5 {
		t.Errorf("%d ether_demux steps, want 5", n)
	}
	if n := strings.Count(out, "  netisr_queue_src: ") + strings.Count(out, "  netisr_dispatch_src: "); n != 5 {
		t.Errorf("%d hand-off steps, want 5", n)
	}

	// A frame that is not classified says why.
	var frames []frame
	for _, f := range readFrames(t, sample.Pcap) {
		if len(f.data) < 14 || binary.BigEndian.Uint16(f.data[12:]) == 0x0806 {
			frames = append(frames, f)
		}
	}
	file := writeFile(t, "odd.pcap", writePcap(1, frames))
	out, _, err = runCmd(t, "-r", file, "-trace", "100")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "\nTrace "); n != len(frames) {
		t.Errorf("%d trace blocks, want %d", n, len(frames))
	}
	for _, want := range []string{"not fully classified (non-ip): not IPv4 or IPv6", "not fully classified (short-ethernet)", "no hash (NONE): SOURCE policy"} {
		if !strings.Contains(out, want) {
			t.Errorf("trace lacks %q:\n%s", want, out)
		}
	}

	out, _, err = runCmd(t)
	if err != nil || strings.Contains(out, "\nTrace ") {
		t.Errorf("without -trace: err %v, trace printed: %v", err, strings.Contains(out, "\nTrace "))
	}
}

func TestKeyFlag(t *testing.T) {
	// Too short for an IPv6 4-tuple (8 bytes), too long, not hex, a typo.
	for _, bad := range []string{"zz", "6d5a56da255b0ec2", "0x" + strings.Repeat("ab", 65), "micro"} {
		if _, _, err := runCmd(t, "-key", bad); !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), "-key") {
			t.Errorf("-key %q: got %v, want a usage error", bad, err)
		}
	}
	// A hex key equal to the Microsoft key gives the Microsoft flowids.
	msHex := fmt.Sprintf("%x", hash.MicrosoftKey[:])
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.csv"), filepath.Join(dir, "b.csv")
	out, _, err := runCmd(t, "-key", "0x"+msHex, "-flows", a)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`Hash key \(fingerprint\) +microsoft `).MatchString(out) {
		t.Errorf("the Microsoft key in hex is not reported as microsoft:\n%s", out)
	}
	if _, _, err := runCmd(t, "-key", "microsoft", "-flows", b); err != nil {
		t.Fatal(err)
	}
	ra, rb := readCSV(t, a), readCSV(t, b)
	if !slices.EqualFunc(ra, rb, func(x, y csvRow) bool { return x.ident() == y.ident() && x["flowid"] == y["flowid"] }) {
		t.Error("the Microsoft key in hex gives other flowids than -key microsoft")
	}
	// Another key of minKeyLen bytes is reported by its fingerprint.
	out, _, err = runCmd(t, "-key", strings.Repeat("5a", capture.MinKeyLen))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`Hash key \(fingerprint\) +[0-9a-f]{8} `).MatchString(out) {
		t.Errorf("a hex key is not reported by its fingerprint:\n%s", out)
	}
}

// TestRandomKeyRepeats: a run with the random key says so, in the text
// and the JSON report, and prints its key; -key with that key repeats the
// run's flowids and workers. A key the user chose gets no such line.
func TestRandomKeyRepeats(t *testing.T) {
	dir := t.TempDir()
	first, again := filepath.Join(dir, "first.csv"), filepath.Join(dir, "again.csv")
	stdout, stderr, err := runCmd(t, "-json", "-workers", "3", "-flows", first)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^Key: random, drawn for this run: .*change from run to run\.\n  To repeat this run: -key ([0-9a-f]+); .*-key microsoft\.$`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no line on the random key:\n%s", stderr)
	}
	var r capture.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	if !r.Config.KeyRandom || r.Config.KeyHex != m[1] {
		t.Errorf("JSON key_random %v, key_hex %q; the text printed %q", r.Config.KeyRandom, r.Config.KeyHex, m[1])
	}
	out, _, err := runCmd(t, "-key", m[1], "-workers", "3", "-flows", again)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "Key: random") {
		t.Errorf("a key given in hex is called random:\n%s", out)
	}
	rows := func(path string) []string { // the workers write their rows in turns: compare them sorted
		var s []string
		for _, r := range readCSV(t, path) {
			s = append(s, r.ident()+" "+r["flowid"]+" "+r["first"])
		}
		slices.Sort(s)
		return s
	}
	if ra, rb := rows(first), rows(again); len(ra) == 0 || !slices.Equal(ra, rb) {
		t.Error("-key with the printed key does not repeat the run's flowids and workers")
	}
	stdout, _, err = runCmd(t, "-json", "-key", "microsoft")
	if err != nil {
		t.Fatal(err)
	}
	r = capture.Report{}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || r.Config.KeyRandom || r.Config.KeyHex != capture.KeyHex(hash.MicrosoftKey[:]) {
		t.Errorf("-key microsoft: key_random %v, key_hex %q, %v", r.Config.KeyRandom, r.Config.KeyHex, err)
	}
}

func TestParseCPUList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		ok   bool
	}{
		{"", nil, true},
		{"0", []int{0}, true},
		{"0,1", []int{0, 1}, true},
		{"0-3", []int{0, 1, 2, 3}, true},
		{"0-2,5,7-8", []int{0, 1, 2, 5, 7, 8}, true},
		{"3-1", nil, false},
		{"a", nil, false},
		{"1,,2", nil, false},
		{"-1", nil, false},
		{"0-", nil, false},
		{"1,1", nil, false},
		{"0-2,2", nil, false},
	} {
		got, err := parseCPUList(tc.in)
		if (err == nil) != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("parseCPUList(%q) = %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
	if _, _, err := runCmd(t, "-cpus", "1-0"); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("-cpus 1-0: %v, want a usage error", err)
	}
}

func TestPinnedWorkers(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("pinning is Linux only")
	}
	cpus, err := affinity.Allowed()
	if err != nil || len(cpus) == 0 {
		t.Skipf("no CPU list: %v", err)
	}
	out, _, err := runCmd(t, "-cpus", strconv.Itoa(cpus[0]))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(fmt.Sprintf(`(?m)^ +0 +%d +0 +\d+ +0 +0 +0 +\d+ +\d+$`, cpus[0]))
	if !regexp.MustCompile(`Threads bound to CPUs +enabled`).MatchString(out) || !row.MatchString(out) {
		t.Errorf("one worker pinned to CPU %d expected in:\n%s", cpus[0], out)
	}
}

func TestHelpListsEveryFlag(t *testing.T) {
	_, errOut, err := runCmd(t, "-h")
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, name := range []string{"r", "sample", "workers", "cpus", "policy", "dispatch", "key", "symmetric", "udp4tuple",
		"hashtypes", "hash", "tunnels", "vxlan-ports", "buckets", "qlimit", "overflow", "rfs", "flows", "flow-table", "idle", "active",
		"trace", "progress", "cpuprofile"} {
		re := regexp.MustCompile(`(?m)^  -` + name + `\b.*\n\s+\S`)
		if !re.MatchString(errOut) {
			t.Errorf("usage does not explain -%s:\n%s", name, errOut)
		}
	}
}

// TestNoBlockAccounting replays without blocking into tiny queues: frames
// may be dropped, but every frame is handled or dropped, and the CSV counts
// exactly the handled ones.
func TestNoBlockAccounting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flows.csv")
	out, _, err := runCmd(t, "-overflow", "drop", "-qlimit", "1", "-workers", "2", "-flows", path)
	if err != nil {
		t.Fatal(err)
	}
	in, handled, dropped := reportTotals(t, out)
	if in != uint64(len(readFrames(t, sample.Pcap))) || handled+dropped != in {
		t.Errorf("%d in, %d handled, %d dropped", in, handled, dropped)
	}
	var packets uint64
	for _, r := range readCSV(t, path) {
		packets += r.uint(t, "packets")
	}
	if packets != handled {
		t.Errorf("CSV counts %d packets, the workers handled %d", packets, handled)
	}
	t.Logf("%d dropped of %d", dropped, in)
}

func TestOptions(t *testing.T) {
	for _, args := range [][]string{
		{"-symmetric", "-udp4tuple", "-rfs"},
		{"-policy", "flow", "-buckets", "16", "-qlimit", "10240"},
		{"-dispatch", "direct", "-workers", "5"},
	} {
		out, _, err := runCmd(t, args...)
		if err != nil {
			t.Errorf("%v: %v", args, err)
			continue
		}
		if in, handled, _ := reportTotals(t, out); in != handled {
			t.Errorf("%v: %d in, %d handled", args, in, handled)
		}
	}
	if out, _, _ := runCmd(t, "-rfs"); !strings.Contains(out, "Top flows:") {
		t.Error("-rfs: no top flows in the report")
	}
	for _, args := range [][]string{
		{"-buckets", "100"}, {"-qlimit", "20000"}, {"-workers", "-1"}, {"-policy", "cpu"}, {"-dispatch", "later"}, {"-overflow", "never"}, {"extra"},
		{"-flow-table", "0"}, {"-flow-table", "1000000000"}, {"-idle", "0s"}, {"-active", "-1s"},
	} {
		if _, _, err := runCmd(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

func TestStandardInput(t *testing.T) {
	frames := readFrames(t, sample.Pcap)[:50]
	f, err := os.Open(writeFile(t, "in.pcapng", writePcapNG(frames)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	old := os.Stdin
	os.Stdin = f
	defer func() { os.Stdin = old }()
	out, _, err := runCmd(t, "-r", "-")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Input: standard input, pcapng") {
		t.Errorf("input not named:\n%s", out)
	}
	if in, handled, _ := reportTotals(t, out); in != 50 || handled != 50 {
		t.Errorf("%d in, %d handled, want 50", in, handled)
	}
}

func TestTruncatedFile(t *testing.T) {
	capture := writePcap(1, readFrames(t, sample.Pcap)[:20])
	file := writeFile(t, "cut.pcap", capture[:len(capture)-5])
	out, _, err := runCmd(t, "-r", file)
	if !errors.Is(err, pcapfile.ErrTruncated) {
		t.Fatalf("got %v, want a truncated-file error", err)
	}
	if in, handled, _ := reportTotals(t, out); in != 19 || handled != 19 {
		t.Errorf("%d in, %d handled; want the 19 whole frames", in, handled)
	}
}

func TestProgress(t *testing.T) {
	line := progressLine(500, 1000, 42, time.Second)
	if !strings.HasPrefix(line, "["+strings.Repeat("=", 15)+strings.Repeat(" ", 15)+"]  50%") || !strings.Contains(line, "42 frames") {
		t.Errorf("progressLine: %q", line)
	}
	if line := progressLine(500, 0, 42, time.Second); !strings.HasPrefix(line, "reading: ") || strings.Contains(line, "%") {
		t.Errorf("progressLine without a size: %q", line)
	}

	in, err := openInput(context.Background(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer in.close()
	var buf bytes.Buffer
	bar := startProgress(&buf, in, time.Millisecond, 0)
	time.Sleep(20 * time.Millisecond)
	bar.stop()
	var nilBar *progress
	nilBar.stop()
	s := buf.String()
	if !strings.HasPrefix(s, "\r[") || !strings.HasSuffix(s, "\r\033[K") {
		t.Errorf("progress output %q: want redrawn lines and an erased bar", s)
	}
	if isTerminal(&buf) {
		t.Error("a buffer is not a terminal")
	}
}

// requireTcpdump skips a test without tcpdump, or fails it when
// STEER_REQUIRE_PRIV=1 (CI installs tcpdump).
func requireTcpdump(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("tcpdump"); err != nil {
		netns.SkipOrFatal(t, "needs tcpdump: "+err.Error())
	}
}

// TestShowProgramMatchesTcpdump: -d prints the program as tcpdump -d
// prints it for an Ethernet capture, line for line.
func TestShowProgramMatchesTcpdump(t *testing.T) {
	requireTcpdump(t)
	for _, expr := range []string{"ip6", "tcp port 80", "udp and host 10.0.0.1", "vlan 100 and udp", "icmp[0] == 8",
		"net 10.0.0.0/8 and portrange 1-100", "tcp[tcpflags] & tcp-syn != 0", "not ip and len <= 64"} {
		want, err := exec.Command("tcpdump", append([]string{"-d", "-y", "EN10MB"}, strings.Fields(expr)...)...).Output()
		if err != nil {
			t.Fatalf("tcpdump -d %s: %v", expr, err)
		}
		out, _, err := runCmd(t, append([]string{"-d"}, strings.Fields(expr)...)...)
		if err != nil || out != string(want) {
			t.Errorf("-d %s: %v\n%s\ntcpdump -d prints:\n%s", expr, err, out, want)
		}
	}
}

// tcpdumpCount returns how many frames of file tcpdump prints for expr.
func tcpdumpCount(t *testing.T, file, expr string) uint64 {
	t.Helper()
	out, err := exec.Command("tcpdump", "-nn", "-q", "-r", file, expr).Output()
	if err != nil {
		t.Fatalf("tcpdump -r %s %s: %v", file, expr, err)
	}
	return uint64(bytes.Count(out, []byte("\n")))
}

var filteredLine = regexp.MustCompile(`(?m)^  frames filtered +(\d+) `)

// filteredCount returns the summary's filtered frames, 0 without the line.
func filteredCount(t *testing.T, out string) uint64 {
	t.Helper()
	m := filteredLine.FindStringSubmatch(out)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseUint(m[1], 10, 64)
	return n
}

// TestFilterMatchesTcpdump: with a capture filter after the flags, the
// frames steered are exactly those tcpdump -r prints for the same
// expression, the others are counted as filtered, and the totals add up.
func TestFilterMatchesTcpdump(t *testing.T) {
	requireTcpdump(t)
	file := writeFile(t, "sample.pcap", sample.Pcap)
	total := uint64(len(readFrames(t, sample.Pcap)))
	for _, expr := range []string{"tcp", "udp and not port 53", "vlan", "ip6", "tcp port 443", "not ip and not ip6", "vlan and udp", "icmp or icmp6"} {
		want := tcpdumpCount(t, file, expr)
		out, _, err := runCmd(t, append([]string{"-r", file, "-workers", "3"}, strings.Fields(expr)...)...)
		if err != nil {
			t.Errorf("%q: %v", expr, err)
			continue
		}
		in, handled, dropped := reportTotals(t, out)
		if in != want || handled != want || dropped != 0 {
			t.Errorf("%q: %d in, %d handled, %d dropped; tcpdump prints %d frames", expr, in, handled, dropped, want)
		}
		if f := filteredCount(t, out); f != total-want {
			t.Errorf("%q: %d filtered, want %d", expr, f, total-want)
		}
		wantTotals := fmt.Sprintf("Totals: read %d = filtered %d + handled %d + dropped 0 + panicked 0: yes", total, total-want, want)
		if want == total {
			wantTotals = fmt.Sprintf("Totals: read %d = handled %d + dropped 0 + panicked 0: yes", total, want)
		}
		if !strings.Contains(out, wantTotals) || !strings.Contains(out, "Filter: "+expr+" (") {
			t.Errorf("%q: output lacks %q or the filter line:\n%s", expr, wantTotals, out)
		}
		if want < total && !strings.Contains(out, fmt.Sprintf("Source filter: filtered %d\n", total-want)) {
			t.Errorf("%q: the report's source line lacks the filtered count", expr)
		}
	}
}

// tcpProgram is `tcpdump -dd tcp`.
const tcpProgram = `{ 0x28, 0, 0, 0x0000000c },
{ 0x15, 0, 2, 0x00000800 },
{ 0x30, 0, 0, 0x00000017 },
{ 0x15, 6, 7, 0x00000006 },
{ 0x15, 0, 6, 0x000086dd },
{ 0x30, 0, 0, 0x00000014 },
{ 0x15, 3, 0, 0x00000006 },
{ 0x15, 0, 3, 0x0000002c },
{ 0x30, 0, 0, 0x00000036 },
{ 0x15, 0, 1, 0x00000006 },
{ 0x6, 0, 0, 0x00040000 },
{ 0x6, 0, 0, 0x00000000 },`

// TestFilterForms: a program as tcpdump -dd prints it and an expression
// need no tcpdump, and -f, -F and the trailing arguments give the same
// run.
func TestFilterForms(t *testing.T) {
	progFile := writeFile(t, "tcp.dd", []byte(tcpProgram))
	var want uint64
	for i, args := range [][]string{{"-f", tcpProgram}, {"-F", progFile}, {tcpProgram}} {
		out, _, err := runCmd(t, append([]string{"-key", "microsoft"}, args...)...)
		if err != nil {
			t.Fatalf("%q: %v", args[0], err)
		}
		_, handled, _ := reportTotals(t, out)
		if i == 0 {
			want = handled
		}
		if handled != want || handled == 0 || handled == uint64(len(readFrames(t, sample.Pcap))) {
			t.Errorf("%q: %d handled (first form: %d)", args[0], handled, want)
		}
	}
	exprFile := writeFile(t, "tcp.txt", []byte("tcp\n"))
	for _, args := range [][]string{{"tcp"}, {"-f", "tcp"}, {"-F", exprFile}} {
		out, _, err := runCmd(t, args...)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if _, handled, _ := reportTotals(t, out); handled != want {
			t.Errorf("%q: %d handled, the program gives %d", args, handled, want)
		}
	}
	// -d prints the program, as tcpdump -d does, and runs nothing.
	out, _, err := runCmd(t, "-d", "-f", tcpProgram)
	if err != nil || !strings.HasPrefix(out, "(000) ldh      [12]\n(001) jeq      #0x800           jt 2\tjf 4\n") || strings.Contains(out, "Workstreams") {
		t.Errorf("-d: %v\n%s", err, out)
	}
	if _, _, err := runCmd(t, "-d"); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("-d without a filter: %v", err)
	}
}

// TestCount: -c N steers exactly N frames (after the filter), stops
// reading, and counts what it read past them.
func TestCount(t *testing.T) {
	total := uint64(len(readFrames(t, sample.Pcap)))
	afterC := regexp.MustCompile(`(?m)^  frames past -c +(\d+) +\(read, not steered: the file is read \d+ frames at a time, and the read that reached -c \d+ brought these too\)$`)
	for _, tc := range []struct {
		args []string
		want uint64
	}{
		{[]string{"-c", "10"}, 10},
		{[]string{"-c", "100", "-workers", "3", "-dispatch", "direct"}, 100},
		{[]string{"-c", "1000000"}, total},
		{[]string{"-c", "7", "-f", tcpProgram}, 7},
	} {
		out, _, err := runCmd(t, tc.args...)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		in, handled, _ := reportTotals(t, out)
		if in != tc.want || handled != tc.want {
			t.Errorf("%q: %d in, %d handled; want %d", tc.args, in, handled, tc.want)
		}
		var after uint64
		if m := afterC.FindStringSubmatch(out); m != nil {
			after, _ = strconv.ParseUint(m[1], 10, 64)
		}
		if tc.want < total && (after == 0 || after >= pcapfile.DefaultBatchSize) {
			t.Errorf("%q: %d frames read past -c; want the rest of the last batch, explained:\n%s", tc.args, after, out)
		}
		totals := regexp.MustCompile(fmt.Sprintf(`(?m)^Totals: read \d+ = (filtered \d+ \+ )?past -c %d \+ handled %d \+`, after, in))
		if after > 0 && !totals.MatchString(out) {
			t.Errorf("%q: no line %q:\n%s", tc.args, totals, out)
		}
		if !strings.Contains(out, ": yes\n") {
			t.Errorf("%q: totals do not add up:\n%s", tc.args, out)
		}
	}
}

// frameCounts counts frames by bytes and wire length: a multiset.
func frameCounts(frames []frame) map[string]int {
	m := map[string]int{}
	for _, f := range frames {
		m[string(f.data)+"/"+strconv.Itoa(f.orig)]++
	}
	return m
}

// TestWrite: -w writes every steered frame, bytes and wire length as read;
// -w with %d writes one file per worker, each flow in one of them, the
// union the same frames; -w - writes the pcap to standard output and the
// report to standard error.
func TestWrite(t *testing.T) {
	all := readFrames(t, sample.Pcap)
	dir := t.TempDir()
	one := filepath.Join(dir, "all.pcap")
	out, _, err := runCmd(t, "-w", one, "-workers", "3")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, fmt.Sprintf("  frames written   %d  to %s", len(all), one)) && !regexp.MustCompile(`frames written +`+strconv.Itoa(len(all))+` +to `).MatchString(out) {
		t.Errorf("no written line:\n%s", out)
	}
	data, err := os.ReadFile(one)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(frameCounts(readFrames(t, data)), frameCounts(all)) {
		t.Error("-w FILE does not hold the frames read")
	}

	pattern := filepath.Join(dir, "w%d.pcap")
	if _, _, err := runCmd(t, "-w", pattern, "-workers", "3", "-key", "microsoft", "-f", tcpProgram); err != nil {
		t.Fatal(err)
	}
	var union []frame
	cls, _ := steer.NewClassifier(steer.HashConfig{Key: hash.MicrosoftKey[:]})
	owner := map[steer.FlowKey]int{}
	for w := 0; w < 3; w++ {
		data, err := os.ReadFile(fmt.Sprintf(pattern, w))
		if err != nil {
			t.Fatal(err)
		}
		frames := readFrames(t, data)
		if len(frames) == 0 {
			t.Errorf("worker %d's file is empty", w)
		}
		var c steer.Classification
		for _, f := range frames {
			cls.Classify(f.data, &c)
			k := c.Key.Flow()
			if o, ok := owner[k]; ok && o != w {
				t.Errorf("flow %v in the files of workers %d and %d", k, o, w)
			}
			owner[k] = w
		}
		union = append(union, frames...)
	}
	p, _ := filter.Parse(tcpProgram)
	var tcp []frame
	for _, f := range all {
		if _, ok := p.Match(f.data); ok {
			tcp = append(tcp, f)
		}
	}
	if !maps.Equal(frameCounts(union), frameCounts(tcp)) {
		t.Errorf("the worker files hold %d frames, not the %d TCP frames", len(union), len(tcp))
	}

	stdout, stderr, err := runCmd(t, "-w", "-")
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(frameCounts(readFrames(t, []byte(stdout))), frameCounts(all)) {
		t.Error("-w - does not write the frames to standard output")
	}
	if in, _, _ := reportTotals(t, stderr); in != uint64(len(all)) {
		t.Errorf("report on standard error: %d in", in)
	}
	if _, _, err := runCmd(t, "-w", filepath.Join(dir, "x-%s.pcap")); err == nil {
		t.Errorf("-w with a %%s verb accepted")
	}
}

// pcapRecords reads a pcap file's header snap length and its records'
// times and bytes, in the file's order.
func pcapRecords(t *testing.T, data []byte) (snap int, times []time.Time, frames [][]byte) {
	t.Helper()
	r, err := pcapfile.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var b steer.Batch
	for {
		err := r.ReadBatch(context.Background(), &b)
		for _, f := range b.Frames {
			times, frames = append(times, f.Timestamp), append(frames, slices.Clone(f.Data))
		}
		if b.Release != nil {
			b.Release()
		}
		if err == io.EOF {
			return r.SnapLen(), times, frames
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestWriteOrderAndSnapLen: -w into one file writes the frames of every
// worker in capture order, to a file or to standard output, with the
// input's snap length (14 bytes more for an input that is not Ethernet,
// whose frames get an Ethernet header) and link type Ethernet.
func TestWriteOrderAndSnapLen(t *testing.T) {
	dir := t.TempDir()
	_, wantTimes, wantFrames := pcapRecords(t, sample.Tunnels) // its times are distinct and sorted
	one := filepath.Join(dir, "one.pcap")
	if _, _, err := runCmd(t, "-sample", "tunnels", "-workers", "3", "-key", "microsoft", "-w", one); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(one)
	if err != nil {
		t.Fatal(err)
	}
	stdout, _, err := runCmd(t, "-sample", "tunnels", "-workers", "3", "-key", "microsoft", "-w", "-")
	if err != nil {
		t.Fatal(err)
	}
	for what, data := range map[string][]byte{one: data, "standard output": []byte(stdout)} {
		snap, times, frames := pcapRecords(t, data)
		if !slices.EqualFunc(times, wantTimes, time.Time.Equal) || !slices.EqualFunc(frames, wantFrames, bytes.Equal) {
			t.Errorf("%s: %d records, not the input's %d in its order", what, len(frames), len(wantFrames))
		}
		if snap != 65535 {
			t.Errorf("%s: snap length %d, want the input's 65535", what, snap)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("files left beside the -w file: %v", ents)
	}

	// Raw IP: the same packets, the snap length 14 bytes more.
	var raw []frame
	for _, f := range readFrames(t, sample.Pcap) {
		if len(f.data) > 34 && binary.BigEndian.Uint16(f.data[12:]) == 0x0800 {
			raw = append(raw, frame{data: f.data[14:], orig: f.orig - 14})
		}
	}
	rawFile := writeFile(t, "raw.pcap", writePcap(101, raw))
	out := filepath.Join(dir, "raw-out.pcap")
	if _, _, err := runCmd(t, "-r", rawFile, "-workers", "2", "-w", out); err != nil {
		t.Fatal(err)
	}
	data, err = os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if snap, times, _ := pcapRecords(t, data); snap != 65535+14 || len(times) != len(raw) || binary.LittleEndian.Uint32(data[20:]) != 1 {
		t.Errorf("raw IP input: snap length %d, %d records, link type %d; want %d, %d, 1 (Ethernet)",
			snap, len(times), binary.LittleEndian.Uint32(data[20:]), 65535+14, len(raw))
	}
}

// TestOutputsBeforeInput: an output path that cannot be written fails at
// once, even while the input, a pipe, has not delivered its header; and a
// run that fails before steering leaves no output file behind.
func TestOutputsBeforeInput(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer r.Close()
	old := os.Stdin
	os.Stdin = r // delivers nothing
	defer func() { os.Stdin = old }()
	missing := filepath.Join(t.TempDir(), "no", "such")
	for _, args := range [][]string{
		{"-flows", filepath.Join(missing, "x.csv")},
		{"-w", filepath.Join(missing, "x.pcap")},
		{"-w", filepath.Join(missing, "x-%d.pcap")},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, _, err := runCmd2(ctx, append([]string{"-r", "-"}, args...)...)
		cancel()
		if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%q: %v, want at once an error naming %s", args, err, args[0])
		}
	}
	dir := t.TempDir()
	flows, dump := filepath.Join(dir, "f.csv"), filepath.Join(dir, "d.pcap")
	if _, _, err := runCmd(t, "-r", filepath.Join(dir, "missing.pcap"), "-flows", flows, "-w", dump); err == nil {
		t.Fatal("a missing input was read")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("a failed run left %v", ents)
	}
}

// TestFailedRunKeepsFiles: a run that fails before it steers (a missing
// input, an input that is no capture, a value the dispatcher refuses)
// leaves the -w and -flows files that existed as they were, and nothing
// beside them. They were cut, and then removed.
func TestFailedRunKeepsFiles(t *testing.T) {
	dir := t.TempDir()
	notPcap := filepath.Join(dir, "not.pcap")
	if err := os.WriteFile(notPcap, []byte("not a capture at all, but long enough"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-r", filepath.Join(dir, "missing.pcap")},
		{"-r", notPcap},
		{"-buckets", "100"},
	} {
		files := map[string]string{"keep.pcap": "an earlier capture", "keep.csv": "earlier,flows\n"}
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(out, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		args = append(args, "-w", filepath.Join(out, "keep.pcap"), "-flows", filepath.Join(out, "keep.csv"))
		if _, _, err := runCmd(t, args...); err == nil {
			t.Fatalf("%q: the run did not fail", args)
		}
		for name, body := range files {
			if b, err := os.ReadFile(filepath.Join(out, name)); err != nil || string(b) != body {
				t.Errorf("%q: %s holds %q (%v), want %q as before", args, name, b, err, body)
			}
		}
		if ents, _ := os.ReadDir(out); len(ents) != len(files) {
			t.Errorf("%q: the run left %v", args, ents)
		}
	}
}

// runCmd2 runs the program in-process with args, until ctx ends.
func runCmd2(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = run(ctx, args, &out, &errOut)
	return out.String(), errOut.String(), err
}

// TestJSON: -json prints one JSON document on standard output, with the
// report's numbers, and the text report on standard error.
func TestJSON(t *testing.T) {
	stdout, stderr, err := runCmd(t, "-json", "-workers", "2", "-policy", "flow", "-c", "500", "-f", tcpProgram)
	if err != nil {
		t.Fatal(err)
	}
	var r capture.Report
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("standard output is not the report: %v\n%s", err, stdout)
	}
	if dec.More() {
		t.Error("more than one JSON document")
	}
	in, handled, _ := reportTotals(t, stderr)
	tot := r.Totals
	if r.Schema != capture.SchemaVersion || r.Command != "pcapsteer" || r.Config.Policy != steer.PolicyFlow || len(r.Workers) != 2 {
		t.Errorf("report header: %+v", r)
	}
	if fr := r.FlowRecords; fr == nil || fr.Records != summaryCount(t, stderr, "flows") || fr.Records == 0 ||
		fr.TableCapacity != defaultFlowTable || fr.IdleSeconds != 60 || fr.ActiveSeconds != 1800 {
		t.Errorf("flow records %+v, the text says %d", fr, summaryCount(t, stderr, "flows"))
	}
	if tot.Steered != 500 || tot.Steered != in || tot.Handled != handled || !tot.Balanced ||
		tot.Read != tot.Filtered+tot.AfterCount+tot.Steered || tot.Filtered == 0 || r.Filter != tcpProgram {
		t.Errorf("totals %+v (text: %d in, %d handled)", tot, in, handled)
	}
	var sum uint64
	for _, n := range r.Reasons {
		sum += n
	}
	if sum != tot.Steered || r.Workers[0].Handled+r.Workers[1].Handled != tot.Handled {
		t.Errorf("reasons add up to %d, workers to %d, of %d", sum, r.Workers[0].Handled+r.Workers[1].Handled, tot.Steered)
	}
	if !strings.Contains(stderr, "Workstreams:") || strings.Contains(stdout, "Workstreams:") {
		t.Error("the text report is not on standard error alone")
	}
	if !strings.Contains(stdout, `"policy": "flow"`) || !strings.Contains(stdout, `"ok": `) {
		t.Errorf("enumerations not by name:\n%s", stdout)
	}
}

// TestJSONQueueLimits: the JSON report gives the queue limits in force,
// the ones the text report shows, defaults and -qlimit alike.
func TestJSONQueueLimits(t *testing.T) {
	limits := regexp.MustCompile(`Queue limit \(drop/wait\) +(\d+)/(\d+) `)
	for _, args := range [][]string{{"-c", "10"}, {"-c", "10", "-qlimit", "1000"}} {
		stdout, stderr, err := runCmd(t, append(args, "-json")...)
		if err != nil {
			t.Fatal(err)
		}
		m := limits.FindStringSubmatch(stderr)
		var r capture.Report
		if err := json.Unmarshal([]byte(stdout), &r); err != nil || m == nil {
			t.Fatalf("%q: %v, or no queue limit in the text:\n%s", args, err, stderr)
		}
		if got := fmt.Sprintf("%d/%d", r.Config.QueueLimitDrop, r.Config.QueueLimitWait); got != m[1]+"/"+m[2] {
			t.Errorf("%q: JSON queue limits %s, the text report %s/%s", args, got, m[1], m[2])
		}
	}
}

func TestVersion(t *testing.T) {
	out, errOut, err := runCmd(t, "-version")
	if err != nil || !strings.HasPrefix(out, "pcapsteer version ") || errOut != "" {
		t.Errorf("-version: %v, %q, %q", err, out, errOut)
	}
}

// TestCPUProfile: -cpuprofile writes a profile go tool pprof reads (gzip
// data), and a path that cannot be created fails before the run.
func TestCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	if _, _, err := runCmd(t, "-cpuprofile", path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("the profile: %d bytes, %v; want gzip data", len(b), err)
	}
	out, _, err := runCmd(t, "-cpuprofile", filepath.Join(t.TempDir(), "no", "cpu.prof"))
	if err == nil || !strings.Contains(err.Error(), "-cpuprofile") || out != "" {
		t.Errorf("an unwritable profile: %v, output %q", err, out)
	}
}

// TestQueueLimitDefault: a replay that waits for room gets replayQLimit
// frames a queue by default, one that drops the library's default, and
// -qlimit overrides both.
func TestQueueLimitDefault(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{
		{nil, replayQLimit},
		{[]string{"-overflow", "wait"}, replayQLimit},
		{[]string{"-overflow", "drop"}, 0},
		{[]string{"-qlimit", "100"}, 100},
		{[]string{"-qlimit", "100", "-overflow", "drop"}, 100},
	} {
		o, err := parseFlags(c.args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if got := queueLimit(o); got != c.want {
			t.Errorf("%q: queue limit %d, want %d", c.args, got, c.want)
		}
	}
	stdout, _, err := runCmd(t, "-c", "10")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d/%d", replayQLimit, replayQLimit); !strings.Contains(stdout, want) {
		t.Errorf("the report does not give the queue limits %s:\n%s", want, stdout)
	}
}
