package capture

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/filter"
	"github.com/rpsgo/rps/steer/pcapfile"
)

func TestFilterFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f.txt")
	if err := os.WriteFile(file, []byte("  udp port 53\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flags []string
		args  []string
		want  string
		usage bool
	}{
		{nil, nil, "", false},
		{nil, []string{"tcp", "port", "80"}, "tcp port 80", false},
		{[]string{"-f", " tcp port 80 "}, nil, "tcp port 80", false},
		{[]string{"-F", file}, nil, "udp port 53", false},
		{[]string{"-f", "tcp"}, []string{"udp"}, "", true},
		{[]string{"-f", "tcp", "-F", file}, nil, "", true},
		{[]string{"-F", filepath.Join(t.TempDir(), "missing")}, nil, "", true},
	} {
		var f FilterFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f.Register(fs)
		if err := fs.Parse(tc.flags); err != nil {
			t.Fatal(err)
		}
		got, err := f.Text(tc.args)
		if tc.usage != errors.Is(err, cli.ErrUsage) || (!tc.usage && (err != nil || got != tc.want)) {
			t.Errorf("%q %q: %q, %v; want %q (usage error %v)", tc.flags, tc.args, got, err, tc.want, tc.usage)
		}
	}
}

func TestFilterError(t *testing.T) {
	_, perr := filter.Parse("{ 0x28, 0, 0, 12 },")
	_, cerr := filter.Compile(filter.Options{Tcpdump: "rps-no-such-tcpdump"}, "ip protochain 6")
	if err := FilterError(perr); !errors.Is(err, cli.ErrUsage) || !errors.Is(err, filter.ErrProgram) {
		t.Errorf("a bad program: %v, want a usage error", err)
	}
	if err := FilterError(cerr); errors.Is(err, cli.ErrUsage) || !errors.Is(err, filter.ErrNoCompiler) {
		t.Errorf("no tcpdump: %v, want an error that is not a usage error", err)
	}
}

// releasing is a source of n one-byte frames in batches of size, each
// batch's release counted.
type releasing struct {
	n, size, out int
	batches      int
	released     *int
	mu           *sync.Mutex
}

func (s *releasing) ReadBatch(ctx context.Context, b *steer.Batch) error {
	b.Frames, b.Release = b.Frames[:0], nil
	if s.out >= s.n {
		return io.EOF
	}
	for ; len(b.Frames) < s.size && s.out < s.n; s.out++ {
		b.Frames = append(b.Frames, steer.Frame{Data: []byte{byte(s.out)}})
	}
	s.batches++
	b.Release = func() { s.mu.Lock(); *s.released++; s.mu.Unlock() }
	return nil
}

func (s *releasing) Close() error { return nil }

func drainSource(t *testing.T, src steer.Source) (frames int, err error) {
	t.Helper()
	var b steer.Batch
	for {
		err := src.ReadBatch(context.Background(), &b)
		frames += len(b.Frames)
		if b.Release != nil {
			b.Release()
		}
		if err != nil {
			return frames, err
		}
	}
}

// TestLimit: -c over a file stops reading once the limit is passed on;
// over several live sources at once it passes on exactly N in all, and
// drains the rest, counted.
func TestLimit(t *testing.T) {
	var mu sync.Mutex
	released := 0
	l, err := NewLimit(100)
	if err != nil {
		t.Fatal(err)
	}
	src := &releasing{n: 1000, size: 64, released: &released, mu: &mu}
	n, err := drainSource(t, l.Source(src, false))
	if n != 100 || err != io.EOF {
		t.Errorf("passed %d, %v; want 100 then io.EOF", n, err)
	}
	if src.out != 128 || l.Over() != 28 || released != src.batches {
		t.Errorf("read %d, over %d, %d of %d batches released; want 2 batches read (128), 28 over, all released", src.out, l.Over(), released, src.batches)
	}
	select {
	case <-l.Reached():
	default:
		t.Error("Reached not closed")
	}

	l, _ = NewLimit(1000)
	released = 0
	var wg sync.WaitGroup
	counts := make([]int, 4)
	srcs := make([]*releasing, 4)
	for i := range srcs {
		srcs[i] = &releasing{n: 500, size: 7, released: &released, mu: &mu}
		wg.Add(1)
		go func() {
			defer wg.Done()
			counts[i], _ = drainSource(t, l.Source(srcs[i], true))
		}()
	}
	wg.Wait()
	sum, batches := 0, 0
	for i, c := range counts {
		sum += c
		batches += srcs[i].batches
		if srcs[i].out != 500 {
			t.Errorf("drain: source %d read %d of 500", i, srcs[i].out)
		}
	}
	if sum != 1000 || l.Over() != 1000 || released != batches {
		t.Errorf("drain: passed %d, over %d, released %d of %d batches; want 1000, 1000, all", sum, l.Over(), released, batches)
	}
	if _, err := NewLimit(0); err == nil {
		t.Error("NewLimit(0) succeeded")
	}
}

func TestLimitPassesThrough(t *testing.T) {
	l, _ := NewLimit(5)
	s := l.Source(&steer.SliceSource{}, true)
	if s.(steer.LiveSource).Live() {
		t.Error("a slice is not live")
	}
	if _, err := s.(steer.SourceStatser).SourceStats(); err == nil {
		t.Error("a slice keeps no counters, yet SourceStats succeeded")
	}
	fs, err := filter.NewSource(&steer.SliceSource{}, mustParse(t, "{ 0x6, 0, 0, 0x40000 }"))
	if err != nil {
		t.Fatal(err)
	}
	if st, err := l.Source(fs, false).(steer.SourceStatser).SourceStats(); err != nil || st.Name != "filter" {
		t.Errorf("SourceStats through the limit: %+v, %v", st, err)
	}
}

func mustParse(t *testing.T, text string) *filter.Program {
	t.Helper()
	p, err := filter.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// udpFrame is an Ethernet IPv4 UDP frame from port sport, 60 bytes.
func udpFrame(sport uint16, seq byte) []byte {
	b := make([]byte, 60)
	b[12], b[13] = 0x08, 0x00
	ip := b[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], 46)
	copy(ip[12:], []byte{10, 0, 0, 1})
	copy(ip[16:], []byte{10, 0, 0, 2})
	binary.BigEndian.PutUint16(ip[20:], sport)
	binary.BigEndian.PutUint16(ip[22:], 9)
	b[59] = seq
	return b
}

// dumpState is a per-worker state as the commands have it.
type dumpState struct{ *WorkerDump }

// steerInto runs frames through a dispatcher of workers workers that
// writes them to d.
func steerInto(t *testing.T, d *Dump, workers int, frames []steer.Frame) steer.Stats {
	t.Helper()
	disp, _, err := steer.NewPerWorker(steer.Config{Workers: workers, Hash: steer.HashConfig{UDP4Tuple: true}},
		func(w *steer.Worker) *dumpState { return &dumpState{d.Worker(w.Index())} },
		func(s *dumpState, p *steer.Packet) { s.Write(p) })
	if err != nil {
		t.Fatal(err)
	}
	if err := disp.Run(context.Background(), &steer.SliceSource{Frames: frames, BatchLen: 16}); err != nil {
		t.Fatal(err)
	}
	if err := disp.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return disp.Stats()
}

type record struct {
	data []byte
	wire int
	ts   time.Time
}

func readPcap(t *testing.T, path string) []record {
	t.Helper()
	r, err := pcapfile.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.LinkType() != pcapfile.LinkTypeEthernet {
		t.Errorf("%s: link type %v", path, r.LinkType())
	}
	var out []record
	var b steer.Batch
	for {
		err := r.ReadBatch(context.Background(), &b)
		for _, f := range b.Frames {
			out = append(out, record{slices.Clone(f.Data), f.WireLen, f.Timestamp})
		}
		if b.Release != nil {
			b.Release()
		}
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
}

// flowFrames makes n frames of 16 UDP flows, each flow's frames numbered
// in its last byte, with microsecond timestamps.
func flowFrames(n int) []steer.Frame {
	base := time.Unix(1740830400, 0)
	frames := make([]steer.Frame, n)
	for i := range frames {
		frames[i] = steer.Frame{Data: udpFrame(uint16(1000+i%16), byte(i/16)), WireLen: 64, Timestamp: base.Add(time.Duration(i) * time.Microsecond)}
	}
	return frames
}

// checkFlowOrder checks every flow's frames are in order in recs, and
// returns the flows seen.
func checkFlowOrder(t *testing.T, recs []record) map[uint16]int {
	t.Helper()
	next := map[uint16]int{}
	for _, r := range recs {
		sport := binary.BigEndian.Uint16(r.data[34:])
		if int(r.data[59]) != next[sport] {
			t.Fatalf("flow %d: frame %d where %d was next", sport, r.data[59], next[sport])
		}
		next[sport]++
		if r.wire != 64 || len(r.data) != 60 {
			t.Fatalf("record of %d bytes, wire %d; want 60, 64", len(r.data), r.wire)
		}
	}
	return next
}

func TestDumpOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.pcap")
	d, err := OpenDump(path, DumpOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	frames := flowFrames(16 * 200)
	steerInto(t, d, 3, frames)
	recs := readPcap(t, path)
	if len(recs) != len(frames) {
		t.Fatalf("%d records, want %d", len(recs), len(frames))
	}
	if flows := checkFlowOrder(t, recs); len(flows) != 16 {
		t.Errorf("%d flows", len(flows))
	}
	got := map[int64]bool{}
	for _, r := range recs {
		got[r.ts.UnixNano()] = true
	}
	for _, f := range frames {
		if !got[f.Timestamp.UnixNano()] {
			t.Fatalf("no record with time %v", f.Timestamp)
		}
	}
}

// TestDumpTimeOrder: with TimeOrder, the one file holds the frames of
// every worker in the order of their capture times, which is the input's
// order here, with the snap length set after OpenDump in its header, and
// no spool is left beside it; to standard output alike.
func TestDumpTimeOrder(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ordered.pcap")
	d, err := OpenDump(path, DumpOptions{TimeOrder: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.SetSnapLen(1500)
	frames := flowFrames(16 * 200)
	steerInto(t, d, 3, frames)
	check := func(what string, recs []record) {
		t.Helper()
		if len(recs) != len(frames) {
			t.Fatalf("%s: %d records, want %d", what, len(recs), len(frames))
		}
		for i, r := range recs {
			if !r.ts.Equal(frames[i].Timestamp) || !bytes.Equal(r.data, frames[i].Data) {
				t.Fatalf("%s: record %d is frame %v, not the input's %d (%v)", what, i, r.ts, i, frames[i].Timestamp)
			}
		}
	}
	check(path, readPcap(t, path))
	hdr, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if snap := binary.LittleEndian.Uint32(hdr[16:]); snap != 1500 {
		t.Errorf("snap length %d in the header, want 1500", snap)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files beside the dump, want it alone: %v", len(ents), ents)
	}

	var out bytes.Buffer
	d, err = OpenDump("-", DumpOptions{TimeOrder: true}, &out)
	if err != nil {
		t.Fatal(err)
	}
	steerInto(t, d, 2, frames)
	std := filepath.Join(dir, "stdout.pcap")
	if err := os.WriteFile(std, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	check("standard output", readPcap(t, std))
}

// TestDumpClosedPipe: a -w path that is a pipe whose reader has gone
// (tcpdump -w /dev/stdout | head) fails the writes rather than blocking
// them: the dump opens its file write-only, so it is no reader itself.
func TestDumpClosedPipe(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("names the pipe through /proc/self/fd")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	d, err := OpenDump(fmt.Sprintf("/proc/self/fd/%d", w.Fd()), DumpOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	done := make(chan error, 1)
	go func() {
		wd := d.Worker(0)
		p := steer.Packet{Data: udpFrame(1, 0), WireLen: 60}
		for range 4000 { // 300 KB, more than a pipe holds
			wd.Write(&p)
		}
		err := wd.Close()
		d.Close()
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("writing into a pipe with no reader succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("writing into a pipe with no reader still blocks after 10 s")
	}
}

// TestDumpAbort: a dump aborted before anything was steered leaves no
// file behind.
func TestDumpAbort(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"one.pcap", "w-%d.pcap"} {
		d, err := OpenDump(filepath.Join(dir, name), DumpOptions{TimeOrder: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		d.Abort()
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("files left: %v", ents)
	}
}

func TestDumpPerWorker(t *testing.T) {
	dir := t.TempDir()
	d, err := OpenDump(filepath.Join(dir, "w-%02d.pcap"), DumpOptions{SnapLen: 128}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !d.PerWorker() || d.Name(3) != filepath.Join(dir, "w-03.pcap") {
		t.Errorf("PerWorker %v, Name(3) %q", d.PerWorker(), d.Name(3))
	}
	frames := flowFrames(16 * 100)
	st := steerInto(t, d, 3, frames)
	owner := map[uint16]int{}
	total := 0
	for w := 0; w < 3; w++ {
		recs := readPcap(t, d.Name(w))
		if uint64(len(recs)) != st.Workstreams[w].Handled {
			t.Errorf("worker %d: %d records, handled %d", w, len(recs), st.Workstreams[w].Handled)
		}
		total += len(recs)
		for sport := range checkFlowOrder(t, recs) {
			if o, ok := owner[sport]; ok {
				t.Errorf("flow %d in the files of workers %d and %d", sport, o, w)
			}
			owner[sport] = w
		}
		hdr, err := os.ReadFile(d.Name(w))
		if err != nil {
			t.Fatal(err)
		}
		if binary.LittleEndian.Uint32(hdr[16:]) != 128 {
			t.Errorf("snap length %d in the header, want 128", binary.LittleEndian.Uint32(hdr[16:]))
		}
	}
	if total != len(frames) || len(owner) != 16 {
		t.Errorf("%d records over the files, %d flows; want %d, 16", total, len(owner), len(frames))
	}
}

// TestDumpVLAN: a tag the source delivered out of band goes back into the
// record's bytes, and a tag already in the bytes is left alone.
func TestDumpVLAN(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vlan.pcap")
	d, err := OpenDump(path, DumpOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	plain := udpFrame(1, 0)
	inBand := append(append(append([]byte{}, plain[:12]...), 0x81, 0x00, 0x00, 0x07), plain[12:]...)
	steerInto(t, d, 1, []steer.Frame{
		{Data: plain, VLAN: 100, HasVLAN: true, WireLen: 64},
		{Data: inBand},
		{Data: plain},
	})
	recs := readPcap(t, path)
	if len(recs) != 3 {
		t.Fatalf("%d records", len(recs))
	}
	want0 := append(append(append([]byte{}, plain[:12]...), 0x81, 0x00, 0x00, 100), plain[12:]...)
	if !bytes.Equal(recs[0].data, want0) || recs[0].wire != 68 {
		t.Errorf("out-of-band tag: record % x (wire %d), want % x (68)", recs[0].data, recs[0].wire, want0)
	}
	if !bytes.Equal(recs[1].data, inBand) || !bytes.Equal(recs[2].data, plain) {
		t.Error("a frame without an out-of-band tag was changed")
	}
}

// TestDumpSnapLenAndTimes: a frame longer than the snap length is cut to
// it (its tag put back first), keeping its wire length, as tcpdump -s
// writes; a frame without a capture time, or with one the format cannot
// hold, is written at 1970 rather than failing the dump.
func TestDumpSnapLenAndTimes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "snap.pcap")
	d, err := OpenDump(path, DumpOptions{SnapLen: 40}, nil)
	if err != nil {
		t.Fatal(err)
	}
	plain := udpFrame(1, 0)
	t0 := time.Unix(1740830400, 5000)
	steerInto(t, d, 1, []steer.Frame{
		{Data: plain, Timestamp: t0},
		{Data: plain, VLAN: 100, HasVLAN: true, Timestamp: t0},
		{Data: plain[:30], WireLen: 64},
		{Data: plain, Timestamp: time.Unix(1<<33, 0)},
	})
	recs := readPcap(t, path)
	if len(recs) != 4 {
		t.Fatalf("%d records", len(recs))
	}
	tagged := append(append(append([]byte{}, plain[:12]...), 0x81, 0x00, 0x00, 100), plain[12:]...)
	for i, want := range []record{
		{plain[:40], len(plain), t0},
		{tagged[:40], len(plain) + 4, t0},
		{plain[:30], 64, time.Unix(0, 0)},
		{plain[:40], len(plain), time.Unix(0, 0)},
	} {
		if r := recs[i]; !bytes.Equal(r.data, want.data) || r.wire != want.wire || !r.ts.Equal(want.ts) {
			t.Errorf("record %d: % x (wire %d) at %v, want % x (%d) at %v", i, r.data, r.wire, r.ts, want.data, want.wire, want.ts)
		}
	}
}

func TestDumpStdoutAndNames(t *testing.T) {
	var out bytes.Buffer
	d, err := OpenDump("-", DumpOptions{}, &out)
	if err != nil {
		t.Fatal(err)
	}
	steerInto(t, d, 2, flowFrames(100))
	path := filepath.Join(t.TempDir(), "stdout.pcap")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if n := len(readPcap(t, path)); n != 100 {
		t.Errorf("standard output holds %d records", n)
	}
	for _, bad := range []string{"out-%s.pcap", "a-%d-%d.pcap", "x%"} {
		if _, err := OpenDump(filepath.Join(t.TempDir(), bad), DumpOptions{}, nil); err == nil {
			t.Errorf("OpenDump(%q) succeeded", bad)
		}
	}
	if _, err := OpenDump(filepath.Join(t.TempDir(), "no", "such", "dir-%d.pcap"), DumpOptions{}, nil); err == nil {
		t.Error("a pattern in a missing directory opened")
	}
	d, err = OpenDump(filepath.Join(t.TempDir(), "100%%-%d.pcap"), DumpOptions{}, nil)
	if err != nil || !strings.HasSuffix(d.Name(1), "100%-1.pcap") {
		t.Errorf("%%%% in a pattern: %v, %q", err, d.Name(1))
	} else {
		d.Close()
	}
}

// TestDumpTick: a tick writes what a worker holds.
func TestDumpTick(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tick.pcap")
	d, err := OpenDump(path, DumpOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := d.Worker(0)
	if err := d.Commit(); err != nil { // as a live capture does once it runs
		t.Fatal(err)
	}
	disp, err := steer.New(steer.Config{Workers: 1, Dispatch: steer.DispatchDirect}, func(p *steer.Packet) { w.Write(p) })
	if err != nil {
		t.Fatal(err)
	}
	in := disp.NewInput()
	if err := in.Dispatch([]steer.Frame{{Data: udpFrame(1, 0)}}, nil); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Size() != 24 {
		t.Errorf("%d bytes before the tick, want the 24-byte header", fi.Size())
	}
	w.Tick(time.Now())
	if fi, _ := os.Stat(path); fi.Size() != 24+16+60 {
		t.Errorf("%d bytes after the tick, want one record", fi.Size())
	}
	in.Close()
	disp.Close(context.Background())
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

// reportKeys lists every field name of the JSON report, dotted by nesting:
// renaming one breaks scripts, so it breaks this test first.
var reportKeys = []string{
	"bucket_frames", "command", "config", "config.buckets", "config.cpus", "config.dispatch", "config.flow_limit", "config.fragments",
	"config.hash", "config.hash_types", "config.key", "config.key_random", "config.overflow", "config.policy", "config.queue_limit_drop", "config.queue_limit_wait",
	"config.rebalance_seconds", "config.rfs", "config.symmetric", "config.tunnels", "config.udp_4tuple",
	"config.verify_checksums", "config.vxlan_ports", "config.workers", "elapsed_seconds", "encapsulations", "encapsulations.decapsulated",
	"encapsulations.kinds", "encapsulations.not_decapsulated", "encapsulations.not_decapsulated_kinds",
	"encapsulations.plain", "encapsulations.stacks", "filter", "input", "interrupted",
	"live", "live.fanout", "live.hashed_frames", "live.interface", "live.keeps_flows", "live.promiscuous", "live.snaplen",
	"live.socket", "live.worker_changes", "live.xdp", "live.xdp.attach", "live.xdp.queue", "live.xdp.zero_copy", "reasons", "schema", "sources", "sources.filtered", "sources.kernel", "sources.kernel_dropped",
	"sources.kernel_received", "sources.mode", "sources.name", "table", "top_flows", "top_flows.bytes",
	"top_flows.desired", "top_flows.flowid", "top_flows.packets", "top_flows.worker", "totals", "totals.after_count",
	"totals.balanced", "totals.bucket_moves", "totals.captured", "totals.dropped", "totals.drops", "totals.drops.close", "totals.drops.flow_limit", "totals.drops.queue", "totals.drops.redispatch", "totals.drops.stall", "totals.filtered", "totals.flow_moves",
	"totals.handled", "totals.kernel_dropped", "totals.kernel_received", "totals.panicked", "totals.read",
	"totals.steered", "totals.written", "version", "workers", "workers.close_drops", "workers.cpu",
	"workers.dispatched", "workers.flow_limit_drops", "workers.handled",
	"workers.hybrid_dispatched", "workers.id", "workers.panics", "workers.queue_drops", "workers.queue_len",
	"workers.queued", "workers.redispatch_drops", "workers.stall_drops", "workers.watermark",
}

// byName are the report's objects keyed by enumeration names rather than
// field names.
var byName = map[string]bool{"reasons": true, "encapsulations.kinds": true, "encapsulations.stacks": true,
	"encapsulations.not_decapsulated_kinds": true}

func collectKeys(prefix string, v any, into map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if byName[prefix] {
				continue // keyed by names, checked apart
			}
			name := k
			if prefix != "" {
				name = prefix + "." + k
			}
			into[name] = true
			collectKeys(name, x, into)
		}
	case []any:
		for _, x := range v {
			collectKeys(prefix, x, into)
		}
	}
}

// TestReportJSON: the report of a real run encodes with the documented
// field names and the enumerations' names, and reads back unchanged.
func TestReportJSON(t *testing.T) {
	frames := flowFrames(1000)
	shortIP := make([]byte, 15)
	shortIP[12], shortIP[14] = 0x08, 0x45
	frames = append(frames, steer.Frame{Data: []byte{1, 2, 3}}, steer.Frame{Data: shortIP})
	d, err := steer.New(steer.Config{Workers: 2, Policy: steer.PolicyFlow, Dispatch: steer.DispatchHybrid, RFS: steer.RFSConfig{Enabled: true},
		Queue: steer.QueueConfig{Overflow: steer.OverflowWait}}, func(*steer.Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	// ldh [12]; ret #262144: the 3-byte frame is filtered.
	prog := mustParse(t, "{ 0x28, 0, 0, 12 }, { 0x6, 0, 0, 0x40000 }")
	src, err := filter.NewSource(&steer.SliceSource{Frames: frames}, prog)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Run(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	d.Close(context.Background())
	st := d.Stats()
	if len(st.Sources) != 1 {
		t.Fatalf("sources %+v", st.Sources)
	}
	r := NewReport("test", &st)
	r.Input, r.Filter, r.ElapsedSeconds = "memory", "udp", 1.5
	r.Encapsulations = countCases(t, steer.HashConfig{}).Report()
	r.Totals.Read = uint64(len(frames))
	r.Live = &Live{Interface: "veth0", Fanout: "ebpf", KeepsFlows: true, Socket: "af_xdp", XDP: &LiveXDP{Queue: 1, Attach: "generic"}}
	var b bytes.Buffer
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(b.Bytes(), &generic); err != nil {
		t.Fatalf("not one JSON document: %v\n%s", err, b.String())
	}
	keys := map[string]bool{}
	collectKeys("", generic, keys)
	var got []string
	for k := range keys {
		got = append(got, k)
	}
	sort.Strings(got)
	if !slices.Equal(got, reportKeys) {
		t.Errorf("JSON field names changed:\n got %q\nwant %q", got, reportKeys)
	}
	cfg := generic["config"].(map[string]any)
	if cfg["policy"] != "flow" || cfg["dispatch"] != "hybrid" || cfg["overflow"] != "wait" {
		t.Errorf("enumerations not encoded by name: %v %v %v", cfg["policy"], cfg["dispatch"], cfg["overflow"])
	}
	reasons := generic["reasons"].(map[string]any)
	if len(reasons) != int(steer.ReasonBadChecksum)+1 || reasons["ok"] != float64(1000) || reasons["short-ipv4"] != float64(1) {
		t.Errorf("reasons %v: want every reason by name", reasons)
	}
	if tot := generic["totals"].(map[string]any); tot["filtered"] != float64(1) || tot["steered"] != float64(1001) {
		t.Errorf("totals %v: want 1 filtered, 1001 steered", tot)
	}
	cfg = generic["config"].(map[string]any)
	if cfg["hash"] != "toeplitz" || cfg["hash_types"] != "ipv4,tcp_ipv4,ipv6,tcp_ipv6" || cfg["tunnels"] != "outer" ||
		fmt.Sprint(cfg["vxlan_ports"]) != "[4789]" {
		t.Errorf("hash configuration: %v %v %v %v", cfg["hash"], cfg["hash_types"], cfg["tunnels"], cfg["vxlan_ports"])
	}
	enc := generic["encapsulations"].(map[string]any)
	kinds := enc["kinds"].(map[string]any)
	closed := enc["not_decapsulated_kinds"].(map[string]any)
	for _, name := range []string{"vlan", "mpls", "pw", "pppoe", "vxlan", "geneve", "gre", "erspan1", "erspan2", "erspan3", "gtpu", "ipip", "cmd", "mplsudp"} {
		if _, ok := kinds[name]; !ok {
			t.Errorf("encapsulations.kinds lacks %q: %v", name, kinds)
		}
		var k steer.EncapKind
		k.UnmarshalText([]byte(name))
		if _, ok := closed[name]; ok != k.Tunnel() {
			t.Errorf("encapsulations.not_decapsulated_kinds: %q present %v, want it for tunnels only", name, ok)
		}
	}
	if len(kinds) != 14 || kinds["mpls"] != float64(4) || enc["stacks"].(map[string]any)["mpls+pw+vlan"] != float64(1) || closed["gre"] != float64(9) {
		t.Errorf("encapsulations %v", enc)
	}
	if len(generic["top_flows"].([]any)) == 0 {
		t.Error("RFS on, yet no top flows")
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, r) {
		t.Errorf("the report does not read back unchanged:\n got %+v\nwant %+v", back, *r)
	}
	if back.Schema != SchemaVersion || back.Config.Policy != steer.PolicyFlow || back.Reasons[steer.ReasonShortIPv4] != 1 {
		t.Errorf("read back: %+v", back)
	}
}

func TestVersion(t *testing.T) {
	var b bytes.Buffer
	if err := WriteVersion(&b, "demo"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "demo version ") || !strings.HasPrefix(lines[1], "go1.") {
		t.Errorf("version output %q", b.String())
	}
}
