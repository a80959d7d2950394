package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/internal/cli/clitest"
	"github.com/rpsgo/rps/internal/sample"
	"github.com/rpsgo/rps/internal/synth"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// flowTruth is an independent count of the sample: every frame decoded with
// the classifier directly, in capture order, without the dispatcher.
type flowTruth struct {
	frames  uint64
	bytes   uint64
	packets map[steer.FlowKey]uint64
	times   map[steer.FlowKey][]time.Time
}

func countSample(t *testing.T) *flowTruth {
	t.Helper()
	h, err := hash.NewToeplitz(hash.MicrosoftKey[:])
	if err != nil {
		t.Fatal(err)
	}
	cls, err := steer.NewClassifier(steer.HashConfig{Key: h.Key()})
	if err != nil {
		t.Fatal(err)
	}
	r, err := pcapfile.NewReader(sample.Reader())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tr := &flowTruth{packets: map[steer.FlowKey]uint64{}, times: map[steer.FlowKey][]time.Time{}}
	var b steer.Batch
	var c steer.Classification
	for {
		err := r.ReadBatch(context.Background(), &b)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := range b.Frames {
			f := &b.Frames[i]
			cls.Classify(f.Data, &c)
			k := c.Key.Flow()
			tr.frames++
			tr.bytes += uint64(f.WireLen())
			tr.packets[k]++
			tr.times[k] = append(tr.times[k], f.Timestamp)
		}
		b.Release()
	}
	if tr.frames == 0 {
		t.Fatal("the sample has no frames")
	}
	return tr
}

// runMeter runs the meter and returns its result and every record it
// reported.
func runMeter(t *testing.T, o options) (*result, []record) {
	t.Helper()
	if o.idle == 0 {
		o.idle = 30 * time.Second
	}
	if o.key == "" {
		o.key = "random"
	}
	if o.tick == 0 {
		o.tick = time.Second
	}
	if o.capacity == 0 {
		o.capacity = 1 << 16
	}
	var recs []record
	res, err := run(context.Background(), o, func(r *record) error {
		recs = append(recs, *r) // under the report's lock
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return res, recs
}

// checkCounts compares the records with the independent count: the packets
// of every flow, summed over its records, and the totals.
func checkCounts(t *testing.T, res *result, recs []record, tr *flowTruth) {
	t.Helper()
	got := map[steer.FlowKey]uint64{}
	var frames, bytes uint64
	for _, r := range recs {
		got[r.Key] += r.Packets
		frames += r.Packets
		bytes += r.Bytes
		if r.Last.Before(r.First) {
			t.Errorf("flow %s: last %v before first %v", flowString(r.Key), r.Last, r.First)
		}
	}
	if frames != tr.frames || bytes != tr.bytes {
		t.Errorf("records hold %d frames, %d bytes; the sample has %d frames, %d bytes", frames, bytes, tr.frames, tr.bytes)
	}
	if res.Frames != tr.frames {
		t.Errorf("dispatcher took in %d frames, the sample has %d", res.Frames, tr.frames)
	}
	if res.Records != len(recs) || res.Packets != frames || res.Bytes != bytes {
		t.Errorf("totals: %d records, %d frames, %d bytes; the records reported add up to %d, %d, %d",
			res.Records, res.Packets, res.Bytes, len(recs), frames, bytes)
	}
	if len(got) != len(tr.packets) {
		t.Errorf("%d flows metered, %d in the sample", len(got), len(tr.packets))
	}
	bad := 0
	for k, n := range tr.packets {
		if got[k] != n {
			if bad++; bad <= 5 {
				t.Errorf("flow %s: metered %d packets, the sample has %d", flowString(k), got[k], n)
			}
		}
	}
}

func TestTotalsAndPerFlowCounts(t *testing.T) {
	tr := countSample(t)
	for _, workers := range []int{1, 2, 3} {
		res, recs := runMeter(t, options{workers: workers})
		checkCounts(t, res, recs, tr)
		if res.Moves != 0 || res.MovedIn != 0 {
			t.Errorf("%d workers without -rotate: %d moves, %d records moved", workers, res.Moves, res.MovedIn)
		}
	}
}

// TestSymmetric: with -symmetric a connection is one record, both
// directions counted in it, named in the direction of its first frame.
func TestSymmetric(t *testing.T) {
	tr := countSample(t)
	conns := map[steer.FlowKey]uint64{}
	firstDir := map[steer.FlowKey]steer.FlowKey{} // the direction of each connection's first frame
	firstAt := map[steer.FlowKey]time.Time{}
	tie := map[steer.FlowKey]bool{} // both directions start at one time: either may come first
	for k, n := range tr.packets {
		c, _ := k.Canonical()
		conns[c] += n
		switch at, ok := firstAt[c]; {
		case !ok || tr.times[k][0].Before(at):
			firstAt[c], firstDir[c], tie[c] = tr.times[k][0], k, false
		case tr.times[k][0].Equal(at):
			tie[c] = true
		}
	}
	if len(conns) >= len(tr.packets) {
		t.Fatalf("the sample has %d flows in %d connections: no connection seen both ways", len(tr.packets), len(conns))
	}
	res, recs := runMeter(t, options{workers: 3, sym: true, idle: time.Hour})
	if res.Records != len(conns) {
		t.Errorf("%d records, want one per connection: %d", res.Records, len(conns))
	}
	for _, r := range recs {
		if r.Packets != conns[r.Key] {
			t.Errorf("connection %s: %d packets, want %d", flowString(r.Key), r.Packets, conns[r.Key])
		}
		if f := r.flow(); !tie[r.Key] && f != firstDir[r.Key] {
			t.Errorf("connection %s is named %s, its first frame %s", flowString(r.Key), flowString(f), flowString(firstDir[r.Key]))
		}
	}
	// The sample's connections open from the lower address: a shard
	// shows one that opens from the higher.
	rep, ended := collector()
	sh, err := newShard(0, time.Hour, 16, rep)
	if err != nil {
		t.Fatal(err)
	}
	sh.sym = true
	server := steer.FlowKey{Proto: 6, Src: netip.MustParseAddr("192.0.2.9"), Dst: netip.MustParseAddr("10.0.0.1"), SrcPort: 80, DstPort: 40000}
	client := server
	client.Src, client.Dst, client.SrcPort, client.DstPort = server.Dst, server.Src, server.DstPort, server.SrcPort
	sh.count(server, 7, hash.RSSTCPIPv4, time.Unix(1, 0), 60)
	sh.count(client, 7, hash.RSSTCPIPv4, time.Unix(2, 0), 60)
	sh.endOpen(time.Unix(2, 0))
	if len(*ended) != 1 || (*ended)[0].Packets != 2 || (*ended)[0].Key != client || (*ended)[0].flow() != server {
		t.Errorf("records %+v: want one of 2 packets, keyed by the canonical key, named as its first frame", *ended)
	}
}

// TestStateFollowsMovedFlows reprograms the table every 300 frames: the flows
// change worker many times, and their records must follow them, or a flow
// would be counted in two records on two workers (or lose packets).
func TestStateFollowsMovedFlows(t *testing.T) {
	tr := countSample(t)
	res, recs := runMeter(t, options{workers: 3, rotate: 300, idle: time.Hour})
	checkCounts(t, res, recs, tr)
	if res.Moves == 0 || res.MovedIn == 0 {
		t.Fatalf("-rotate 300: %d bucket moves, %d records handed over; want both > 0", res.Moves, res.MovedIn)
	}
	// With an idle timeout longer than the capture, every flow is one record.
	if len(recs) != len(tr.packets) {
		t.Errorf("%d records for %d flows: a flow was split across workers", len(recs), len(tr.packets))
	}
}

// TestExpiry uses a small -idle: a flow's records must be exactly the runs of
// its frames separated by gaps longer than -idle, and a record ends idle
// unless it is still active at the end of the capture.
func TestExpiry(t *testing.T) {
	tr := countSample(t)
	const idle = 500 * time.Millisecond
	var end time.Time
	for _, ts := range tr.times {
		if last := ts[len(ts)-1]; last.After(end) {
			end = last
		}
	}
	type want struct{ records, idle int }
	wants := map[steer.FlowKey]want{}
	totalIdle := 0
	for k, ts := range tr.times {
		w := want{records: 1}
		for i := 1; i < len(ts); i++ {
			if ts[i].Sub(ts[i-1]) > idle {
				w.records++
				w.idle++
			}
		}
		if end.Sub(ts[len(ts)-1]) > idle {
			w.idle++
		}
		wants[k] = w
		totalIdle += w.idle
	}
	if totalIdle == 0 {
		t.Fatal("the sample has no idle gap; the test cannot fail")
	}
	for _, tick := range []time.Duration{time.Millisecond, time.Hour} {
		res, recs := runMeter(t, options{workers: 2, idle: idle, tick: tick})
		checkCounts(t, res, recs, tr)
		got := map[steer.FlowKey]want{}
		for _, r := range recs {
			g := got[r.Key]
			g.records++
			if r.Idle {
				g.idle++
			}
			got[r.Key] = g
		}
		bad := 0
		for k, w := range wants {
			if got[k] != w {
				if bad++; bad <= 5 {
					t.Errorf("tick %v, flow %s: %d records (%d ended idle), want %d (%d)",
						tick, flowString(k), got[k].records, got[k].idle, w.records, w.idle)
				}
			}
		}
		t.Logf("tick %v: %d records, %d ticks expired flows", tick, len(recs), res.TickExpiry)
	}
}

// collector is a report that keeps every record it receives, for tests of
// a shard alone.
func collector() (*report, *[]record) {
	var recs []record
	return newReport(0, func(r *record) error {
		recs = append(recs, *r)
		return nil
	}), &recs
}

// TestShardExpire checks the tick's expiry directly, without timing.
func TestShardExpire(t *testing.T) {
	rep, ended := collector()
	s, err := newShard(0, time.Second, 16, rep)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	k1 := steer.FlowKey{Proto: 6, SrcPort: 1}
	k2 := steer.FlowKey{Proto: 6, SrcPort: 2}
	s.count(k1, 0, hash.None, t0, 100)
	s.count(k2, 0, hash.None, t0.Add(1500*time.Millisecond), 60)
	// A frame of k1 after a gap longer than the timeout starts a new record
	// in the handler, tick or no tick.
	s.count(k1, 0, hash.None, t0.Add(1100*time.Millisecond), 100)
	s.count(k1, 0, hash.None, t0.Add(1200*time.Millisecond), 100)
	if len(s.ended) != 1 || s.ended[0].Key != k1 || s.ended[0].Packets != 1 || !s.ended[0].Idle {
		t.Fatalf("after the gap: ended %v; want k1's first record (1 packet, idle)", s.ended)
	}
	if r := s.flows.Get(0, k1); r == nil || r.Packets != 2 || r.Bytes != 200 || !r.First.Equal(t0.Add(1100*time.Millisecond)) {
		t.Fatalf("k1's second record: %+v", r)
	}
	// The clock is now 1.5 s; with k2 at 1.5 s and k1 last at 1.2 s, nothing
	// is idle for more than 1 s. The tick hands the ended record over.
	s.Tick(time.Now())
	if len(*ended) != 1 || len(s.ended) != 0 || s.ticks != 0 {
		t.Fatalf("nothing idle yet, but %d reported, %d held, %d expiring ticks", len(*ended), len(s.ended), s.ticks)
	}
	// A frame of k2 at 2.3 s moves the clock: k1 (1.2 s) is idle, k2 is not.
	s.count(k2, 0, hash.None, t0.Add(2300*time.Millisecond), 60)
	s.Tick(time.Now())
	if len(*ended) != 2 || (*ended)[1].Key != k1 || s.flows.Get(0, k2) == nil || s.flows.Get(0, k1) != nil || s.ticks != 1 {
		t.Fatalf("reported %v, %d open, %d ticks; want k1 ended and k2 open", *ended, s.flows.Len(), s.ticks)
	}
	if rep.records != 2 || rep.packets != 3 || rep.idle != 2 {
		t.Errorf("report totals: %d records, %d packets, %d idle; want 2, 3, 2", rep.records, rep.packets, rep.idle)
	}
}

// floodKey is flow i of a flood: synth's UDP flow 0 but from 10.x.y.z, x.y.z
// being i.
func floodKey(i int) steer.FlowKey {
	return steer.FlowKey{Proto: 17, Src: netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}),
		Dst: netip.AddrFrom4([4]byte{192, 168, 0, 0}), SrcPort: 1024, DstPort: 80}
}

// floodIndex is floodKey's inverse, or -1 for a key no flood flow has.
func floodIndex(k steer.FlowKey) int {
	a := k.Src.As4()
	if !k.Src.Is4() || a[0] != 10 || k.Proto != 17 || k.SrcPort != 1024 || k.DstPort != 80 {
		return -1
	}
	return int(a[1])<<16 | int(a[2])<<8 | int(a[3])
}

// onceEach checks that every flow of a flood of n is reported in exactly
// one record of one packet: a bit per flow, so that the check itself holds
// no record.
type onceEach struct {
	seen  []uint64
	n     int
	count int
	bad   []string
}

func newOnceEach(n int) *onceEach { return &onceEach{seen: make([]uint64, (n+63)/64), n: n} }

func (o *onceEach) add(r *record) error {
	i := floodIndex(r.Key)
	switch {
	case i < 0 || i >= o.n:
		o.bad = append(o.bad, "a record of a flow the flood does not have: "+flowString(r.Key))
	case o.seen[i/64]&(1<<(i%64)) != 0:
		o.bad = append(o.bad, "flow reported twice: "+flowString(r.Key))
	case r.Packets != 1:
		o.bad = append(o.bad, fmt.Sprintf("flow %s: %d packets, want 1", flowString(r.Key), r.Packets))
	default:
		o.seen[i/64] |= 1 << (i % 64)
		o.count++
	}
	if len(o.bad) > 5 {
		o.bad = o.bad[:5]
	}
	return nil
}

func (o *onceEach) check(t *testing.T) {
	t.Helper()
	for _, b := range o.bad {
		t.Error(b)
	}
	if o.count != o.n {
		t.Errorf("%d of the %d flows reported", o.count, o.n)
	}
}

// TestFlood: a flood of distinct flows beyond -capacity keeps the worker's
// table at its capacity and its buffer of ended records at flushEvery; the
// records past it end early, evicted, go to the report as they end, and
// every flow is reported exactly once.
func TestFlood(t *testing.T) {
	const capacity, flows = 64, 5000
	once := newOnceEach(flows)
	rep := newReport(3, once.add)
	s, err := newShard(0, time.Hour, capacity, rep)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range flows {
		s.count(floodKey(i), uint32(i)*2654435761, hash.RSSIPv4, t0.Add(time.Duration(i)), 60)
		if s.flows.Len() > capacity || len(s.ended) >= flushEvery {
			t.Fatalf("after %d flows the worker holds %d open and %d ended records; want at most %d and %d",
				i+1, s.flows.Len(), len(s.ended), capacity, flushEvery-1)
		}
	}
	if s.evicted != flows-capacity || rep.records+len(s.ended) != flows-capacity || s.flows.Len() != capacity {
		t.Errorf("%d evicted, %d ended, %d open; want %d, %d, %d", s.evicted, rep.records+len(s.ended), s.flows.Len(),
			flows-capacity, flows-capacity, capacity)
	}
	s.endOpen(t0.Add(flows))
	once.check(t)
	if len(rep.best) != 3 || rep.best[0].Key != floodKey(0) || rep.best[2].Key != floodKey(2) {
		t.Errorf("top 3: %v; want the flood's first three flows (one packet each, the earliest)", rep.best)
	}
	if _, err := run(context.Background(), options{idle: time.Second, key: "random", tick: time.Second}, nil); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("-capacity 0: %v, want a usage error", err)
	}
}

// floodSource delivers one frame for each of n distinct flows (floodKey),
// built on the fly into a few reused buffers, so that the source's own
// memory stays small whatever n is.
type floodSource struct {
	n, next int
	free    chan *[steer.BatchSize][64]byte
	t0      time.Time
}

func newFloodSource(n int) *floodSource {
	s := &floodSource{n: n, free: make(chan *[steer.BatchSize][64]byte, 16), t0: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
	for range cap(s.free) {
		s.free <- new([steer.BatchSize][64]byte)
	}
	return s
}

func (s *floodSource) ReadBatch(ctx context.Context, b *steer.Batch) error {
	if s.next == s.n {
		return io.EOF
	}
	var buf *[steer.BatchSize][64]byte
	select {
	case buf = <-s.free:
	case <-ctx.Done():
		return ctx.Err()
	}
	for j := 0; j < len(buf) && s.next < s.n; j++ {
		f := buf[j][:]
		synth.Build(f, 0, 1, true)
		k := floodKey(s.next)
		a := k.Src.As4()
		copy(f[14+12:], a[:])
		b.Frames = append(b.Frames, steer.Frame{Data: f, Timestamp: s.t0.Add(time.Duration(s.next) * time.Microsecond)})
		s.next++
	}
	b.Release = func() { s.free <- buf }
	return nil
}

func (s *floodSource) Close() error { return nil }

// TestFloodMemoryBounded sends a flood of distinct flows through the
// dispatcher with a small -capacity: the live heap must not grow with the
// number of flows (a record kept per flow until the end made it grow by
// about 200 bytes a flow), and every flow is still reported exactly once.
func TestFloodMemoryBounded(t *testing.T) {
	const flows = 400_000
	const bound = 16 << 20 // generous: the state itself is well under 1 MB
	once := newOnceEach(flows)
	o := options{workers: 2, idle: time.Hour, tick: 10 * time.Millisecond, key: "random", capacity: 256, top: 5}
	var res *result
	var err error
	grew := clitest.HeapGrowth(func() { res, err = meter(context.Background(), o, newFloodSource(flows), once.add) })
	if err != nil {
		t.Fatal(err)
	}
	once.check(t)
	if res.Records != flows || res.Packets != uint64(flows) || res.Evicted != flows-2*256 {
		t.Errorf("%d records of %d frames, %d evicted; want %d, %d, %d", res.Records, res.Packets, res.Evicted, flows, flows, flows-2*256)
	}
	t.Logf("%d flows: the live heap grew by %.1f MB at its peak", flows, float64(grew)/(1<<20))
	if grew > bound {
		t.Errorf("%d flows with -capacity 256: the live heap grew by %.1f MB, more than %d MB", flows, float64(grew)/(1<<20), bound>>20)
	}
}

func TestOutput(t *testing.T) {
	tr := countSample(t)
	res, _ := runMeter(t, options{workers: 2, top: 3})
	var b bytes.Buffer
	if err := res.write(&b, 3); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.HasPrefix(out, fmt.Sprintf("%d frames, %d bytes, ", tr.frames, tr.bytes)) || strings.Count(out, "\n") != 1+1+1+3 {
		t.Errorf("output:\n%s", out)
	}
}

func TestBadOptions(t *testing.T) {
	for _, o := range []options{
		{idle: 0, key: "random", tick: time.Second, capacity: 16},
		{idle: time.Second, key: "nope", tick: time.Second, capacity: 16},
		{idle: time.Second, key: "random", tick: time.Second, rotate: -1, capacity: 16},
		{idle: time.Second, key: "random", tick: time.Second, workers: -1, capacity: 16},
		{idle: time.Second, key: "random", tick: 0, capacity: 16},
		{idle: time.Second, key: "random", tick: time.Second, capacity: -1},
	} {
		if _, err := run(context.Background(), o, nil); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("run(%+v): %v; want a usage error", o, err)
		}
	}
	o := options{idle: time.Second, key: "random", tick: time.Second, capacity: 16, file: "/nonexistent/trace.pcap"}
	if _, err := run(context.Background(), o, nil); err == nil || errors.Is(err, cli.ErrUsage) {
		t.Errorf("run(%+v): %v; want an error that is not a usage error", o, err)
	}
}

// TestWorkersDefault: with -workers 0 the meter runs steer.DefaultWorkers()
// workers and meters every frame, whatever GOMAXPROCS says (a slice sized by
// GOMAXPROCS once lost the frames of the workers past it).
func TestWorkersDefault(t *testing.T) {
	tr := countSample(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	res, recs := runMeter(t, options{})
	if res.Workers != steer.DefaultWorkers() {
		t.Errorf("%d workers, want steer.DefaultWorkers() = %d", res.Workers, steer.DefaultWorkers())
	}
	checkCounts(t, res, recs, tr)
}

// TestCommandLine runs the command as main does: -h prints the usage and
// meters nothing, a bad flag is a usage error, and the output goes to
// standard output.
func TestCommandLine(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := runMain(context.Background(), []string{"-h"}, &out, &errOut); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v, want flag.ErrHelp", err)
	}
	if out.Len() != 0 || !strings.HasPrefix(errOut.String(), "Usage: flowmeter [flags]\n") ||
		!strings.Contains(errOut.String(), "steer.DefaultWorkers()") {
		t.Errorf("-h: standard output %q, standard error %q", out.String(), errOut.String())
	}
	for _, args := range [][]string{{"-idle", "0"}, {"-nosuchflag"}, {"extra"}, {"-key", "nope"}} {
		out.Reset()
		errOut.Reset()
		if err := runMain(context.Background(), args, &out, &errOut); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
		if out.Len() != 0 || errOut.Len() != 0 {
			t.Errorf("%q: printed %q and %q; the error is for cli.Exit to print", args, out.String(), errOut.String())
		}
	}
	out.Reset()
	if err := runMain(context.Background(), []string{"-top", "2", "-workers", "2"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), " flow records ") {
		t.Errorf("standard output lacks the totals:\n%s", out.String())
	}
}

// TestRecordsCSV: -records - writes every record as a CSV row to standard
// output, with the totals on standard error; the rows add up to the sample,
// and a small -capacity shows evicted records among them.
func TestRecordsCSV(t *testing.T) {
	tr := countSample(t)
	var out, errOut bytes.Buffer
	if err := runMain(context.Background(), []string{"-records", "-", "-workers", "2", "-capacity", "8", "-idle", "1s"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&out).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) < 2 || strings.Join(rows[0], ",") != strings.Join(recordsHeader, ",") {
		t.Fatalf("CSV: %d rows, header %q", len(rows), rows[0])
	}
	var packets uint64
	states := map[string]int{}
	for _, row := range rows[1:] {
		n, err := strconv.ParseUint(row[8], 10, 64)
		if err != nil {
			t.Fatalf("row %q: packets: %v", row, err)
		}
		packets += n
		states[row[12]]++
	}
	var records, idle, active int
	if _, err := fmt.Sscanf(errOut.String(), "%d frames, %d bytes, %d flow records (%d ended idle, %d active", new(int), new(int), &records, &idle, &active); err != nil {
		t.Fatalf("standard error lacks the totals: %v\n%s", err, errOut.String())
	}
	if packets != tr.frames || len(rows)-1 != records || states["idle"] != idle || states["active"]+states["evicted"] != active ||
		states["evicted"] == 0 || len(states) != 3 {
		t.Errorf("%d rows of %d packets, states %v; the totals say %d records (%d idle, %d active), the sample %d frames",
			len(rows)-1, packets, states, records, idle, active, tr.frames)
	}
}
