package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/sample"
	"github.com/rpsgo/rps/internal/synth"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// timedFrame is a frame and its capture time, in seconds from t0.
type timedFrame struct {
	data []byte
	at   float64
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// writeTimed writes frames as a pcap file with their own times.
func writeTimed(t *testing.T, frames []timedFrame) string {
	t.Helper()
	var b bytes.Buffer
	w, err := pcapfile.NewWriter(&b, pcapfile.LinkTypeEthernet, pcapfile.WriterOptions{})
	for i := 0; err == nil && i < len(frames); i++ {
		err = w.WritePacket(t0.Add(time.Duration(frames[i].at*float64(time.Second))), frames[i].data, 0)
	}
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "timed.pcap", b.Bytes())
}

// tcpFrame is synth's TCP flow f, 64 bytes; reply swaps its endpoints.
func tcpFrame(f int, reply bool) []byte {
	b := make([]byte, 64)
	synth.Build(b, f, 1, false)
	if reply {
		ip := b[14:]
		var a [4]byte
		copy(a[:], ip[12:16])
		copy(ip[12:16], ip[16:20])
		copy(ip[16:20], a[:])
		sp, dp := binary.BigEndian.Uint16(ip[20:]), binary.BigEndian.Uint16(ip[22:])
		binary.BigEndian.PutUint16(ip[20:], dp)
		binary.BigEndian.PutUint16(ip[22:], sp)
	}
	return b
}

// rowsBy returns the rows of the flow whose source port is sport, in the
// order of their first frames.
func rowsBy(rows []csvRow, sport string) []csvRow {
	var out []csvRow
	for _, r := range rows {
		if r["sport"] == sport {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b csvRow) int { return strings.Compare(a["first"], b["first"]) })
	return out
}

func summaryCount(t *testing.T, out, what string) uint64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(what) + ` +(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %q line in the summary:\n%s", what, out)
	}
	n, _ := strconv.ParseUint(m[1], 10, 64)
	return n
}

// TestFlowRecordsSplitInTime: records end by capture time, however fast
// the file is read (milliseconds for these 150 s). Flow 0 pauses longer
// than -idle: two records, each ended idle. Flow 1 lasts past -active: a
// record per 60 s. Flow 2 is short: one record, open at the end.
func TestFlowRecordsSplitInTime(t *testing.T) {
	var frames []timedFrame
	for _, s := range []float64{0, 1, 2, 100, 101} {
		frames = append(frames, timedFrame{tcpFrame(0, false), s})
	}
	for s := 0.0; s <= 150; s += 10 {
		frames = append(frames, timedFrame{tcpFrame(1, false), s + 0.5})
	}
	frames = append(frames, timedFrame{tcpFrame(2, false), 140}, timedFrame{tcpFrame(2, false), 150})
	slices.SortStableFunc(frames, func(a, b timedFrame) int { return int(a.at*10) - int(b.at*10) })
	file := writeTimed(t, frames)
	path := filepath.Join(t.TempDir(), "flows.csv")
	out, _, err := runCmd(t, "-r", file, "-workers", "2", "-idle", "30s", "-active", "60s", "-flows", path)
	if err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, path)
	type want struct {
		packets     string
		first, last float64
		ended       string
	}
	check := func(name string, got []csvRow, wants []want) {
		t.Helper()
		if len(got) != len(wants) {
			t.Fatalf("%s: %d records, want %d: %v", name, len(got), len(wants), got)
		}
		for i, w := range wants {
			g := got[i]
			first := t0.Add(time.Duration(w.first * float64(time.Second))).Format(time.RFC3339Nano)
			last := t0.Add(time.Duration(w.last * float64(time.Second))).Format(time.RFC3339Nano)
			if g["packets"] != w.packets || g["first"] != first || g["last"] != last || g["ended"] != w.ended {
				t.Errorf("%s record %d: %s packets, %s to %s, ended %s; want %s, %s to %s, %s",
					name, i, g["packets"], g["first"], g["last"], g["ended"], w.packets, first, last, w.ended)
			}
		}
	}
	sport := func(f int) string { return strconv.Itoa(1024 + f%60000) } // synth's source port
	// Flow 0's second record goes idle at 131 s, before the capture ends:
	// flow 1's frames at 140.5 s end it if they reach its worker, else it
	// is labelled idle at the end.
	check("flow 0", rowsBy(rows, sport(0)), []want{{"3", 0, 2, "idle"}, {"2", 100, 101, "idle"}})
	check("flow 1", rowsBy(rows, sport(1)), []want{
		{"6", 0.5, 50.5, "active"}, {"6", 60.5, 110.5, "active"}, {"4", 120.5, 150.5, "end"}})
	check("flow 2", rowsBy(rows, sport(2)), []want{{"2", 140, 150, "end"}})
	if n := summaryCount(t, out, "flows"); n != uint64(len(rows)) {
		t.Errorf("the summary counts %d flows, the CSV has %d records", n, len(rows))
	}
	if n := summaryCount(t, out, "flow records written"); n != uint64(len(rows)) {
		t.Errorf("the summary says %d records written, the CSV has %d", n, len(rows))
	}
	if idle, active := summaryCount(t, out, "flows ended idle"), summaryCount(t, out, "flows ended active"); idle != 2 || active != 2 {
		t.Errorf("summary: %d ended idle, %d ended active; want 2 and 2", idle, active)
	}
}

// TestFlowTableFull: more flows at once than the tables hold end early,
// each counted and written, and continue in a new record: every frame is
// in a row.
func TestFlowTableFull(t *testing.T) {
	var frames []timedFrame
	for round := range 3 {
		for f := range 10 {
			frames = append(frames, timedFrame{tcpFrame(f, false), float64(round*10+f) / 100})
		}
	}
	file := writeTimed(t, frames)
	path := filepath.Join(t.TempDir(), "flows.csv")
	out, _, err := runCmd(t, "-r", file, "-workers", "1", "-flow-table", "4", "-flows", path)
	if err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, path)
	early, packets := 0, uint64(0)
	for _, r := range rows {
		if r["ended"] == "early" {
			early++
		}
		packets += r.uint(t, "packets")
	}
	// Ten flows in turn through a table of four: every frame but the
	// last four starts a record that the sixth frame after it ends.
	if len(rows) != 30 || early != 26 || packets != 30 {
		t.Errorf("%d records, %d ended early, %d packets; want 30, 26, 30", len(rows), early, packets)
	}
	if n := summaryCount(t, out, "flows ended early"); n != uint64(early) {
		t.Errorf("the summary says %d ended early, the CSV %d", n, early)
	}
	if !strings.Contains(out, "-flow-table 4 flows, 4 a worker") {
		t.Errorf("the summary does not say how large the tables are:\n%s", out)
	}
}

// TestSymmetricConnections: with -symmetric a connection is one record,
// both directions counted, its endpoints named as its first frame named
// them; without, each direction is a record.
func TestSymmetricConnections(t *testing.T) {
	var frames []timedFrame
	for i := range 4 {
		// Connection 0 opens from its client, connection 1 is first seen
		// from its server.
		frames = append(frames, timedFrame{tcpFrame(0, i%2 == 1), float64(i)}, timedFrame{tcpFrame(1, i%2 == 0), float64(i) + 0.5})
	}
	file := writeTimed(t, frames)
	dir := t.TempDir()
	sym, dir2 := filepath.Join(dir, "sym.csv"), filepath.Join(dir, "dir.csv")
	if _, _, err := runCmd(t, "-r", file, "-symmetric", "-workers", "2", "-flows", sym); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCmd(t, "-r", file, "-workers", "2", "-flows", dir2); err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, sym)
	if len(rows) != 2 {
		t.Fatalf("-symmetric: %d records, want one per connection: %v", len(rows), rows)
	}
	first := map[string]steer.FlowKey{}
	var c steer.Classification
	cls, err := steer.NewClassifier(steer.HashConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frames[:2] {
		cls.Classify(f.data, &c)
		first[c.Key.Src.String()+" "+c.Key.Dst.String()] = c.Key
	}
	for _, r := range rows {
		k, ok := first[r["src"]+" "+r["dst"]]
		if !ok || r["sport"] != strconv.Itoa(int(k.SrcPort)) || r["packets"] != "4" {
			t.Errorf("-symmetric record %v: want the endpoints of a connection's first frame and its 4 packets", r)
		}
	}
	if rows := readCSV(t, dir2); len(rows) != 4 {
		t.Errorf("without -symmetric: %d records, want one per direction (4)", len(rows))
	}
}

// TestFlowsPathFirst: a -flows path that cannot be written fails before
// any frame is steered.
func TestFlowsPathFirst(t *testing.T) {
	out, _, err := runCmd(t, "-flows", filepath.Join(t.TempDir(), "no", "such", "dir.csv"))
	if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "-flows") {
		t.Errorf("got %v, want an error naming -flows", err)
	}
	if strings.Contains(out, "Summary") {
		t.Errorf("the capture was steered before the error:\n%s", out)
	}
}

// TestPlainKeys: every key a plainKey holds converts back to itself, and
// only keys with neither VLAN tags nor encapsulations are plain.
func TestPlainKeys(t *testing.T) {
	frames := readFrames(t, sample.Pcap)
	frames = append(frames, readFrames(t, sample.Tunnels)...)
	frames = append(frames, encapFrames()...)
	plain, other := 0, 0
	for _, tunnels := range []steer.TunnelMode{steer.TunnelsOuter, steer.TunnelsInner} {
		cls, err := steer.NewClassifier(steer.HashConfig{Tunnels: tunnels})
		if err != nil {
			t.Fatal(err)
		}
		var c steer.Classification
		for _, f := range frames {
			cls.Classify(f.data, &c)
			k := c.Key
			var pk plainKey
			ok := pk.set(&k)
			if wantPlain := k.NVLAN == 0 && k.NEncap == 0; ok != wantPlain {
				t.Fatalf("key %+v: plain %v, want %v", k, ok, wantPlain)
			}
			if !ok {
				other++
				continue
			}
			plain++
			if back := pk.flowKey(); back != k {
				t.Fatalf("key %+v came back as %+v", k, back)
			}
		}
	}
	if plain < 100 || other < 100 {
		t.Errorf("%d plain keys, %d others: too few to test", plain, other)
	}
}

// TestSharedFlowid: UDP flows between two hosts share one flowid (UDP is
// hashed by its addresses alone by default); forty of them, more than a
// flowtable bucket holds, each keep one record, none crowded out.
func TestSharedFlowid(t *testing.T) {
	var frames []timedFrame
	for round := range 2 {
		for f := range 40 {
			b := make([]byte, 64)
			synth.Build(b, f, uint32(round+1), true)
			copy(b[14+12:], []byte{10, 0, 0, 1, 10, 0, 0, 2}) // one pair of hosts
			frames = append(frames, timedFrame{b, float64(round*40+f) / 10})
		}
	}
	path := filepath.Join(t.TempDir(), "flows.csv")
	out, _, err := runCmd(t, "-r", writeTimed(t, frames), "-workers", "1", "-flows", path)
	if err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, path)
	ids := map[string]bool{}
	for _, r := range rows {
		ids[r["flowid"]] = true
		if r["packets"] != "2" || r["ended"] != "end" {
			t.Errorf("record %v: want both packets of its flow, open at the end", r)
		}
	}
	if len(rows) != 40 || len(ids) != 1 || summaryCount(t, out, "flows ended early") != 0 {
		t.Errorf("%d records of %d flowids, %d ended early; want 40 of one, none early", len(rows), len(ids), summaryCount(t, out, "flows ended early"))
	}
}

// TestDelayLine: frames wait in the delay line until delay later frames,
// the tick or Close add them, in order, and the tick adds them before it
// expires flows, so a flow whose frame is pending is never ended idle.
func TestDelayLine(t *testing.T) {
	var ft flowTable
	buckets := 128
	ft.init(0, flowConfig{capacity: 64, workers: 1, idle: time.Second}, nil, &buckets)
	key := func(f int) steer.FlowKey {
		var c steer.Classification
		cls, _ := steer.NewClassifier(steer.HashConfig{})
		cls.Classify(tcpFrame(f, false), &c)
		return c.Key
	}
	frame := func(f int, at float64) {
		k := key(f)
		ft.count(&k, &steer.Packet{FlowID: uint32(f), WireLen: 64, Timestamp: t0.Add(time.Duration(at * float64(time.Second)))})
	}
	records := func() map[uint32]uint64 {
		m := map[uint32]uint64{}
		if ft.plain != nil {
			for _, r := range ft.plain.All() {
				m[r.flowid] += r.frames
			}
		}
		return m
	}
	// Flow 1 at 0 s, then flow 2 at 5 s: flow 1 is idle by then.
	frame(1, 0)
	frame(1, 0.5)
	frame(2, 5)
	if n := len(records()); n != 0 || ft.queued != 3 {
		t.Fatalf("%d records, %d pending: the frames should wait", n, ft.queued)
	}
	ft.tick()
	if got := records(); got[1] != 0 || got[2] != 1 || ft.ended[endIdle] != 1 || ft.queued != 0 {
		t.Errorf("after the tick: records %v, %d ended idle, %d pending; want flow 1's 2 frames ended idle, flow 2's open", got, ft.ended[endIdle], ft.queued)
	}
	// More frames than the line holds: the oldest go in first.
	for i := range delay + 3 {
		frame(3, 6+float64(i)/100)
	}
	if got := records(); got[3] != 3 || ft.queued != delay {
		t.Errorf("after %d frames: flow 3 has %d in its record, %d pending; want 3 and %d", delay+3, got[3], ft.queued, delay)
	}
	ft.drain()
	if got := records(); got[3] != delay+3 || ft.queued != 0 {
		t.Errorf("after drain: flow 3 has %d, %d pending; want %d and 0", got[3], ft.queued, delay+3)
	}
}
