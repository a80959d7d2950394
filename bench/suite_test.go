package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/pcapfile"
)

func TestHistBuckets(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 100000; i++ {
		v := rng.Uint64() >> rng.IntN(64)
		idx := histIndex(v)
		if idx < 0 || idx >= histBuckets {
			t.Fatalf("histIndex(%d) = %d, out of [0, %d)", v, idx, histBuckets)
		}
		lo, w := histLower(idx)
		if v < lo || v-lo >= w {
			t.Fatalf("value %d in bucket %d = [%d, %d+%d)", v, idx, lo, lo, w)
		}
		if lo >= histExact && float64(w)/float64(lo) > 1.0/histSub+1e-12 {
			t.Fatalf("bucket %d is %d wide at %d: more than 1/%d", idx, w, lo, histSub)
		}
	}
	if histIndex(math.MaxUint64) != histBuckets-1 {
		t.Fatalf("the largest value is in bucket %d, want the last, %d", histIndex(math.MaxUint64), histBuckets-1)
	}
}

func TestHistQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var a, b hist
	var all []time.Duration
	for i := 0; i < 50000; i++ {
		// Log-uniform from 10 ns to 10 ms.
		d := time.Duration(math.Exp(math.Log(10) + rng.Float64()*math.Log(1e6)))
		all = append(all, d)
		if i%2 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	a.Merge(&b)
	if a.Count() != uint64(len(all)) {
		t.Fatalf("count %d after merge, want %d", a.Count(), len(all))
	}
	slices.Sort(all)
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999, 1} {
		want := all[int(q*float64(len(all)-1))]
		got := a.Quantile(q)
		if rel := math.Abs(float64(got-want)) / float64(want); rel > 1.0/histSub {
			t.Errorf("quantile %g = %v, exact %v: off by %.1f%%", q, got, want, 100*rel)
		}
	}
	var empty hist
	if empty.Quantile(0.5) != 0 {
		t.Errorf("quantile of an empty histogram = %v, want 0", empty.Quantile(0.5))
	}
	var neg hist
	neg.Record(-time.Second)
	if neg.Quantile(1) != 0 {
		t.Errorf("a negative duration is recorded as %v, want 0", neg.Quantile(1))
	}
}

func testResults() []Result {
	return []Result{
		{Experiment: "workers", Impl: "single", Source: "mem", Handler: "none", FrameSize: 64, Flows: 1024, Workers: 1,
			Frames: 1000, Mpps: 10, PerWorker: []uint64{1000}, Note: `a "quoted", note`},
		{Experiment: "workers", Impl: "rps", Source: "mem", Handler: "none", FrameSize: 64, Flows: 1024, Workers: 2,
			Dispatch: "deferred", Policy: "rss", Frames: 1000, Mpps: 15, PerWorker: []uint64{400, 600}, Imbalance: 1.2},
	}
}

func TestWriteCSV(t *testing.T) {
	var buf bytes.Buffer
	rs := testResults()
	if err := writeCSV(&buf, rs); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatalf("reading back: %v", err)
	}
	if len(rows) != len(rs)+1 {
		t.Fatalf("%d rows, want a header and %d", len(rows), len(rs))
	}
	col := func(name string) int {
		i := slices.Index(rows[0], name)
		if i < 0 {
			t.Fatalf("no column %q in %v", name, rows[0])
		}
		return i
	}
	for i, r := range rs {
		row := rows[i+1]
		if len(row) != len(csvHeader) {
			t.Fatalf("row %d has %d fields, want %d", i, len(row), len(csvHeader))
		}
		if row[col("impl")] != r.Impl || row[col("note")] != r.Note {
			t.Errorf("row %d: impl %q note %q, want %q %q", i, row[col("impl")], row[col("note")], r.Impl, r.Note)
		}
	}
	if got := rows[2][col("per_worker")]; got != "400 600" {
		t.Errorf("per_worker = %q, want %q", got, "400 600")
	}
}

func TestWriteJSON(t *testing.T) {
	rep := &Report{Machine: machine(), Command: "go run ./bench -quick", Results: testResults(), Notes: []string{"n"}}
	var buf bytes.Buffer
	if err := writeJSON(&buf, rep); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatalf("decoding: %v", err)
	}
	if back.Command != rep.Command || len(back.Results) != 2 || back.Results[1].Mpps != 15 ||
		!slices.Equal(back.Results[1].PerWorker, []uint64{400, 600}) || back.Machine.Cores != rep.Machine.Cores {
		t.Errorf("round trip lost data: %+v", back)
	}
}

func TestGroupsAndBaseline(t *testing.T) {
	rs := testResults()
	for i, m := range []float64{30, 20, 25} {
		r := rs[1]
		r.Mpps, r.Rep = m, i+1
		rs = append(rs, r)
		b := rs[0]
		b.Mpps, b.Rep = 10*float64(i+2), i+1
		rs = append(rs, b)
	}
	gs := groups(rs)
	if len(gs) != 2 {
		t.Fatalf("%d groups, want 2", len(gs))
	}
	// An even count: the median is the mean of the middle two, not the
	// upper one.
	if s := gs[1].sum(mpps); s.Med != 22.5 || s.Min != 15 || s.Max != 30 || s.N != 4 {
		t.Errorf("rps runs 15, 30, 20, 25: summary %+v, want median 22.5 of 15..30", s)
	}
	b := baseline(gs, gs[1])
	if b == nil || b.first().Impl != "single" {
		t.Fatalf("baseline of the rps runs = %+v, want the single runs", b)
	}
	// Paired by repetition: 15/10, 30/20, 20/30, 25/40.
	if s := gs[1].ratio(b, mpps); s.N != 4 || s.Min != 0.625 || s.Max != 1.5 || s.Med != (1.5+2.0/3)/2 {
		t.Errorf("paired ratios %+v, want 4 of 0.625..1.5, median %v", s, (1.5+2.0/3)/2)
	}
}

// TestQuickInMemory runs the -quick in-memory subset with tiny runs, end
// to end: the runs, the tables and the files; runs this short draw no
// plot, and say so.
func TestQuickInMemory(t *testing.T) {
	o := options{quick: true, count: 2, warm: 5 * time.Millisecond, dur: 10 * time.Millisecond, exps: "workers,skew",
		out: t.TempDir(), spinIters: 50, loadSample: time.Millisecond}
	var stdout, progress bytes.Buffer
	rep, err := runAll(context.Background(), o, &stdout, &progress)
	if err != nil {
		t.Fatalf("runAll: %v\n%s", err, progress.String())
	}
	ws := workerCounts()
	// workers: 2 handlers x (single, a ceiling per count above 1, rps and
	// idiomatic per count); skew: single and rps with and without the
	// rebalancer.
	want := 2 * (2*(1+len(ws)-1+2*len(ws)) + 3)
	if len(rep.Results) != want {
		t.Fatalf("%d results, want %d\n%s", len(rep.Results), want, progress.String())
	}
	for _, r := range rep.Results {
		if r.Note != "" {
			t.Errorf("%s/%s w=%d: %s", r.Experiment, r.Impl, r.Workers, r.Note)
		}
		var sum uint64
		for _, v := range r.PerWorker {
			sum += v
		}
		if r.Frames == 0 || sum != r.Frames || len(r.PerWorker) != r.Workers {
			t.Errorf("%s/%s w=%d: %d frames, per worker %v", r.Experiment, r.Impl, r.Workers, r.Frames, r.PerWorker)
		}
		if r.Mpps <= 0 || r.Seconds < o.dur.Seconds() || r.WarmSec != o.warm.Seconds() {
			t.Errorf("%s/%s w=%d: %v Mpps in %v s after %v s", r.Experiment, r.Impl, r.Workers, r.Mpps, r.Seconds, r.WarmSec)
		}
	}
	out := stdout.String()
	for _, s := range []string{"== workers", "== skew", "idiomatic", "machine:", "A SMOKE RUN", "commit", "load: before",
		"handler spin1us: 50 iterations (flag", "queues: ", "flags ",
		// Each table says what its baselines and columns are.
		"idiomatic: the usual Go pipeline: gopacket's DecodingLayerParser, NetworkFlow and TransportFlow FastHash, and one channel send per frame",
		"single: the single-queue baseline: one goroutine reads the same source", "rps: this library", "ceiling: w single-queue baselines at once",
		"x single Mpps over the single-queue baseline's", "imbal frames of the busiest worker over the mean per worker"} {
		if !strings.Contains(out, s) {
			t.Errorf("the output lacks %q:\n%s", s, out)
		}
	}
	if slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool {
		return strings.HasPrefix(strings.TrimSpace(l), "impl") && strings.Contains(l, "Gbit/s")
	}) {
		t.Errorf("the in-memory tables give Gbit/s for runs that touch no payload:\n%s", out)
	}
	if err := writeAll(rep, o); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"results.csv", "results.json", "results.txt"} {
		if fi, err := os.Stat(filepath.Join(o.out, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if pngs, _ := filepath.Glob(filepath.Join(o.out, "*.png")); len(pngs) != 0 {
		t.Errorf("runs of %v drew plots %v", o.dur, pngs)
	}
	if !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "not drawn: runs shorter than") }) {
		t.Errorf("no note says why the plots were not drawn: %q", rep.Notes)
	}
}

// TestQuickStaysInMemory: -quick runs in-memory experiments only, as its
// documentation says, even as root with the live tools installed (it once
// ran the live and request/response experiments there).
func TestQuickStaysInMemory(t *testing.T) {
	s := &suite{o: options{quick: true, count: 1}}
	cs := s.cases()
	if len(cs) == 0 {
		t.Fatal("no cases")
	}
	exps := map[string]bool{}
	for _, c := range cs {
		exps[c.Experiment] = true
		if c.Source != "mem" {
			t.Errorf("-quick runs %s from source %s", c.Name(), c.Source)
		}
	}
	if !exps["workers"] || !exps["skew"] || len(exps) != 2 {
		t.Errorf("-quick runs the experiments %v, want workers and skew", exps)
	}
	if jobs := s.rrJobs(); len(jobs) != 0 {
		t.Errorf("-quick runs %d request/response jobs, first %q", len(jobs), jobs[0].name)
	}
	if len(s.notes) != 0 {
		t.Errorf("-quick looked at experiments it does not run: %q", s.notes)
	}

	// Asked for by name, what -quick does not run is noted, not run.
	s = &suite{o: options{quick: true, count: 1, exps: "live,rr,workers"}}
	for _, c := range s.cases() {
		if c.Source != "mem" {
			t.Errorf("-quick -exp live,rr,workers runs %s", c.Name())
		}
	}
	if len(s.rrJobs()) != 0 || len(s.notes) != 2 || !strings.Contains(s.notes[0], "live: not run with -quick") {
		t.Errorf("-quick -exp live,rr,workers: notes %q", s.notes)
	}
}

// TestCasesBaselines: every experiment that gives a ratio to the
// single-queue baseline runs that baseline, labelled single, and the
// library with one worker is never it.
func TestCasesBaselines(t *testing.T) {
	s := &suite{o: options{count: 1, exps: "workers,sizes,modes,skew,pcap,latency", warm: time.Millisecond, dur: time.Millisecond}}
	cs := s.cases()
	var rs []Result
	for _, c := range cs {
		rs = append(rs, c.result(0))
	}
	gs := groups(rs)
	for _, g := range gs {
		r := g.first()
		b := baseline(gs, g)
		if b == nil {
			t.Errorf("%s %s w=%d: no single-queue baseline", r.Experiment, r.Impl, r.Workers)
			continue
		}
		if b.first().Impl != "single" || library(b.first().Impl) {
			t.Errorf("%s %s w=%d: baseline %s", r.Experiment, r.Impl, r.Workers, b.first().Impl)
		}
	}
}

func TestParseFlags(t *testing.T) {
	var errOut bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, &errOut); !errors.Is(err, flag.ErrHelp) ||
		!strings.HasPrefix(errOut.String(), "Usage: bench [flags]\n") || !strings.Contains(errOut.String(), "in memory only") {
		t.Errorf("-h: %v\n%s", err, errOut.String())
	}
	for _, args := range [][]string{{"-count", "-1"}, {"-duration", "-1s"}, {"-exp", "workers,nope"}, {"-qlimit", "-1"},
		{"extra"}, {"-x"}, {"-compare", "a"}, {"-compare", "a", "b", "c"}, {"-spin-iters", "-3"}} {
		if _, err := parseFlags(args, io.Discard); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
	o, err := parseFlags([]string{"-quick", "-exp", "workers,skew"}, io.Discard)
	if err != nil || !o.quick || o.exps != "workers,skew" || o.count != 3 || benchQLimit != 0 ||
		o.dur != 250*time.Millisecond || o.warm != 100*time.Millisecond {
		t.Errorf("-quick -exp workers,skew: %+v, qlimit %d, %v", o, benchQLimit, err)
	}
	o, err = parseFlags(nil, io.Discard)
	if err != nil || o.count != 6 || o.dur != time.Second || o.warm != 200*time.Millisecond {
		t.Errorf("no flags: %+v, %v; want 6 runs of 1s after 200ms", o, err)
	}
	o, err = parseFlags([]string{"-compare", "old.json", "new.json"}, io.Discard)
	if err != nil || o.compare != "old.json" || o.compareNew != "new.json" {
		t.Errorf("-compare old.json new.json: %+v, %v", o, err)
	}
}

// TestWritePcap reads back the capture the file runs use: every frame, one
// microsecond apart from the start time.
func TestWritePcap(t *testing.T) {
	frames := [][]byte{bytes.Repeat([]byte{1}, 64), bytes.Repeat([]byte{2}, 64), bytes.Repeat([]byte{3}, 70)}
	start := time.Unix(1_700_000_000, 0)
	var buf bytes.Buffer
	if err := writePcap(&buf, frames, start); err != nil {
		t.Fatal(err)
	}
	r, err := pcapfile.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var b steer.Batch
	if err := r.ReadBatch(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if len(b.Frames) != len(frames) {
		t.Fatalf("read %d frames, want %d", len(b.Frames), len(frames))
	}
	for i, f := range b.Frames {
		if !bytes.Equal(f.Data, frames[i]) || !f.Timestamp.Equal(start.Add(time.Duration(i)*time.Microsecond)) {
			t.Errorf("frame %d: %x at %v", i, f.Data, f.Timestamp)
		}
	}
	b.Release()
}

// TestMain lets the test binary be the live experiment's sender too, as
// the bench binary is (see senderMain): the live tests start it again.
func TestMain(m *testing.M) {
	if os.Getenv(senderEnv) != "" {
		os.Exit(senderMain(os.Args[1:], os.Stderr))
	}
	os.Exit(m.Run())
}
