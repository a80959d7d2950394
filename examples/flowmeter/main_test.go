package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/internal/sample"
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

func runMeter(t *testing.T, o options) *result {
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
	res, err := run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// checkCounts compares the records with the independent count: the packets
// of every flow, summed over its records, and the totals.
func checkCounts(t *testing.T, res *result, tr *flowTruth) {
	t.Helper()
	got := map[steer.FlowKey]uint64{}
	var frames, bytes uint64
	for _, r := range res.Records {
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
		res := runMeter(t, options{workers: workers})
		checkCounts(t, res, tr)
		if res.Moves != 0 || res.MovedIn != 0 {
			t.Errorf("%d workers without -rotate: %d moves, %d records moved", workers, res.Moves, res.MovedIn)
		}
	}
}

// TestStateFollowsMovedFlows reprograms the table every 300 frames: the flows
// change worker many times, and their records must follow them, or a flow
// would be counted in two records on two workers (or lose packets).
func TestStateFollowsMovedFlows(t *testing.T) {
	tr := countSample(t)
	res := runMeter(t, options{workers: 3, rotate: 300, idle: time.Hour})
	checkCounts(t, res, tr)
	if res.Moves == 0 || res.MovedIn == 0 {
		t.Fatalf("-rotate 300: %d bucket moves, %d records handed over; want both > 0", res.Moves, res.MovedIn)
	}
	// With an idle timeout longer than the capture, every flow is one record.
	if len(res.Records) != len(tr.packets) {
		t.Errorf("%d records for %d flows: a flow was split across workers", len(res.Records), len(tr.packets))
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
		res := runMeter(t, options{workers: 2, idle: idle, tick: tick})
		checkCounts(t, res, tr)
		got := map[steer.FlowKey]want{}
		for _, r := range res.Records {
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
		t.Logf("tick %v: %d records, %d ticks expired flows", tick, len(res.Records), res.TickExpiry)
	}
}

// TestShardExpire checks the tick's expiry directly, without timing.
func TestShardExpire(t *testing.T) {
	s, err := newShard(0, time.Second, 16)
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
	// is idle for more than 1 s.
	s.Tick(time.Now())
	if len(s.ended) != 1 || s.ticks != 0 {
		t.Fatalf("nothing idle yet, but %d ended, %d expiring ticks", len(s.ended), s.ticks)
	}
	// A frame of k2 at 2.3 s moves the clock: k1 (1.2 s) is idle, k2 is not.
	s.count(k2, 0, hash.None, t0.Add(2300*time.Millisecond), 60)
	s.Tick(time.Now())
	if len(s.ended) != 2 || s.ended[1].Key != k1 || s.flows.Get(0, k2) == nil || s.flows.Get(0, k1) != nil || s.ticks != 1 {
		t.Fatalf("ended %v, %d open, %d ticks; want k1 ended and k2 open", s.ended, s.flows.Len(), s.ticks)
	}
}

// TestFlood: a flood of distinct flows beyond -capacity keeps each
// worker's table at its capacity; the records past it end early, evicted,
// and every frame is still counted in exactly one record.
func TestFlood(t *testing.T) {
	const capacity, flows = 64, 5000
	s, err := newShard(0, time.Hour, capacity)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range flows {
		k := steer.FlowKey{Proto: 17, SrcPort: uint16(i), DstPort: uint16(i >> 16)}
		s.count(k, uint32(i)*2654435761, hash.RSSIPv4, t0.Add(time.Duration(i)), 60)
		if s.flows.Len() > capacity {
			t.Fatalf("after %d flows the table holds %d, more than its capacity %d", i+1, s.flows.Len(), capacity)
		}
	}
	if s.evicted != flows-capacity || len(s.ended) != flows-capacity || s.flows.Len() != capacity {
		t.Errorf("%d evicted, %d ended, %d open; want %d, %d, %d", s.evicted, len(s.ended), s.flows.Len(),
			flows-capacity, flows-capacity, capacity)
	}
	if _, err := run(context.Background(), options{idle: time.Second, key: "random", tick: time.Second}); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("-capacity 0: %v, want a usage error", err)
	}
}

func TestOutput(t *testing.T) {
	tr := countSample(t)
	res := runMeter(t, options{workers: 2, top: 3})
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
		if _, err := run(context.Background(), o); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("run(%+v): %v; want a usage error", o, err)
		}
	}
	o := options{idle: time.Second, key: "random", tick: time.Second, capacity: 16, file: "/nonexistent/trace.pcap"}
	if _, err := run(context.Background(), o); err == nil || errors.Is(err, cli.ErrUsage) {
		t.Errorf("run(%+v): %v; want an error that is not a usage error", o, err)
	}
}

// TestWorkersDefault: with -workers 0 the meter runs steer.DefaultWorkers()
// workers and meters every frame, whatever GOMAXPROCS says (a slice sized by
// GOMAXPROCS once lost the frames of the workers past it).
func TestWorkersDefault(t *testing.T) {
	tr := countSample(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	res := runMeter(t, options{})
	if res.Workers != steer.DefaultWorkers() {
		t.Errorf("%d workers, want steer.DefaultWorkers() = %d", res.Workers, steer.DefaultWorkers())
	}
	checkCounts(t, res, tr)
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
