package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rpsgo/rps/steer"
)

func TestSummarize(t *testing.T) {
	for _, c := range []struct {
		v             []float64
		min, med, max float64
	}{
		{[]float64{3}, 3, 3, 3},
		{[]float64{4, 1}, 1, 2.5, 4}, // two runs: the mean, not the larger
		{[]float64{5, 1, 3}, 1, 3, 5},
		{[]float64{6, 1, 5, 2}, 1, 3.5, 6},
		{[]float64{1, math.NaN(), 3}, 1, 2, 3},
	} {
		s := summarize(c.v)
		if s.Min != c.min || s.Med != c.med || s.Max != c.max {
			t.Errorf("summarize(%v) = %+v, want %v %v %v", c.v, s, c.min, c.med, c.max)
		}
		for _, v := range c.v {
			if !math.IsNaN(v) && !s.covers(v) {
				t.Errorf("summarize(%v) = %s does not cover the run %v", c.v, s.pm("%.2f"), v)
			}
		}
	}
	if s := summarize(nil); s.N != 0 || s.pm("%.1f") != "-" || s.rng("%.1f") != "-" {
		t.Errorf("summarize(nil) = %+v", s)
	}
	s := summarize([]float64{0.9, 1.0, 1.2})
	if got := s.pm("%.2f"); got != "1.00 ±20%" {
		t.Errorf("pm = %q, want 1.00 ±20%%", got)
	}
	if got := s.rng("%.2f"); got != "1.00 (0.90-1.20)" {
		t.Errorf("rng = %q", got)
	}
}

func TestMannWhitney(t *testing.T) {
	seq := func(lo, n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(lo + i)
		}
		return v
	}
	for _, c := range []struct {
		a, b []float64
		p    float64
	}{
		{seq(1, 3), seq(4, 3), 0.1},       // 2 of the 20 orderings are as extreme
		{seq(1, 6), seq(7, 6), 2.0 / 924}, // benchstat's p=0.002 for 6+6 apart
		{seq(7, 6), seq(1, 6), 2.0 / 924}, // symmetric
		{[]float64{1, 3, 5}, []float64{2, 4, 6}, 0.7},
		{[]float64{1, 1, 1}, []float64{1, 1, 1}, 1},
		{nil, seq(1, 3), 1},
	} {
		if p := mannWhitney(c.a, c.b); math.Abs(p-c.p) > 1e-9 {
			t.Errorf("mannWhitney(%v, %v) = %v, want %v", c.a, c.b, p, c.p)
		}
	}
	// Ties and large samples take the normal approximation: far apart is
	// significant, interleaved is not.
	a, b := seq(1, 40), seq(30, 40)
	a[0], a[1] = 5, 5
	if p := mannWhitney(a, b); p > 1e-6 {
		t.Errorf("40+40 mostly apart with ties: p = %v", p)
	}
	if p := mannWhitney(seq(1, 40), seq(1, 40)); p < 0.9 {
		t.Errorf("40+40 identical: p = %v", p)
	}
}

// TestUCDF checks the exact distribution against counting every ordering.
func TestUCDF(t *testing.T) {
	n1, n2 := 3, 4
	counts := make([]int, n1*n2+1)
	total := 0
	// Every choice of which of the 7 ranks are the first sample's.
	for mask := 0; mask < 1<<(n1+n2); mask++ {
		if popcount(mask) != n1 {
			continue
		}
		u := 0
		for i := 0; i < n1+n2; i++ {
			if mask&(1<<i) == 0 {
				continue
			}
			for j := 0; j < i; j++ {
				if mask&(1<<j) == 0 {
					u++ // an element of the second sample below this one
				}
			}
		}
		counts[u]++
		total++
	}
	cum := 0
	for u := range counts {
		cum += counts[u]
		if got, want := uCDF(n1, n2, u), float64(cum)/float64(total); math.Abs(got-want) > 1e-12 {
			t.Errorf("uCDF(%d, %d, %d) = %v, want %v", n1, n2, u, got, want)
		}
	}
}

func popcount(x int) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// TestCalibration: the iteration count is calibrated once and kept for the
// machine; a flag overrides it; another CPU model calibrates again.
func TestCalibration(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sub", "spin.json")
	c1, err := loadCalibration(file, 0, "cpu A", true)
	if err != nil || c1.Iters <= 0 || c1.Source != "calibrated now" || c1.File != file {
		t.Fatalf("first load: %+v, %v", c1, err)
	}
	if c1.NsPerCall < 300 || c1.NsPerCall > 3000 {
		t.Errorf("a call calibrated to 1 µs costs %.0f ns", c1.NsPerCall)
	}
	// The file holds the count: change it to show that it is read.
	var saved Calibration
	b, _ := os.ReadFile(file)
	if err := json.Unmarshal(b, &saved); err != nil || saved.Iters != c1.Iters || saved.CPU != "cpu A" {
		t.Fatalf("saved %s: %v", b, err)
	}
	saved.Iters = 12345
	b, _ = json.Marshal(saved)
	os.WriteFile(file, b, 0o644)
	if c, err := loadCalibration(file, 0, "cpu A", true); err != nil || c.Iters != 12345 || c.Source != "file" {
		t.Errorf("second load: %+v, %v; want the file's 12345", c, err)
	}
	if c, err := loadCalibration(file, 77, "cpu A", true); err != nil || c.Iters != 77 || c.Source != "flag" {
		t.Errorf("with -spin-iters 77: %+v, %v", c, err)
	}
	if c, err := loadCalibration(file, 0, "cpu B", false); err != nil || c.Iters == 12345 || c.Source != "calibrated now" {
		t.Errorf("another CPU: %+v, %v; want a new calibration", c, err)
	}
	os.WriteFile(file, []byte("{"), 0o644)
	if _, err := loadCalibration(file, 0, "cpu A", true); err == nil {
		t.Error("a corrupt calibration file is not an error")
	}
}

// TestWarnings: a busy machine and a handler whose cost drifted more than
// 5% are flagged; a quiet run is not.
func TestWarnings(t *testing.T) {
	quiet := &Report{Machine: Machine{Cores: 2}, SpinCost: spinDrift{StartNs: 1000, EndNs: 1040},
		Spin: Calibration{NsPerCall: 1010}, Before: load{Sample: 1, Busy: 0.02}, After: load{Sample: 1}}
	if w := warnings(quiet); len(w) != 0 {
		t.Errorf("a quiet run: %q", w)
	}
	for name, mod := range map[string]func(*Report){
		"drift":      func(r *Report) { r.SpinCost.EndNs = 1060 },
		"calibrated": func(r *Report) { r.Spin.NsPerCall = 900 },
		"busy":       func(r *Report) { r.Before.Busy = 0.5 },
		"load":       func(r *Report) { r.After.Load1 = 3 },
		"steal":      func(r *Report) { r.StealRun = 0.05 },
	} {
		r := *quiet
		mod(&r)
		if w := warnings(&r); len(w) != 1 {
			t.Errorf("%s: %q, want one warning", name, w)
		}
	}
}

// TestPinCPUs: never two workers on one CPU; with a CPU to spare, the
// first is left to the source. (The harness once pinned 2 workers both to
// CPU 1 of 2.)
func TestPinCPUs(t *testing.T) {
	n := steer.DefaultWorkers()
	for w := 1; w <= n+1; w++ {
		cpus := pinCPUs(w)
		if cpus == nil {
			if w <= n && pinCPUs(1) != nil {
				t.Errorf("%d workers on %d CPUs: not pinned", w, n)
			}
			continue
		}
		if len(cpus) != w || len(slices.Compact(slices.Sorted(slices.Values(cpus)))) != w {
			t.Errorf("%d workers pinned to %v: want %d distinct CPUs", w, cpus, w)
		}
		if w < n && slices.Contains(cpus, pinCPUs(n)[0]) {
			t.Errorf("%d workers of %d CPUs pinned to %v, the source's CPU among them", w, n, cpus)
		}
	}
	if pinCPUs(n+1) != nil {
		t.Errorf("%d workers on %d CPUs pinned to %v", n+1, n, pinCPUs(n+1))
	}
}

// TestSingleQueueClassifies: the single-queue baseline gives its handler
// the flowid the dispatcher gives the library's, frame by frame: it does
// the same parsing, not an empty loop.
func TestSingleQueueClassifies(t *testing.T) {
	fs := frames64()
	n := 512
	var single, lib []uint32
	runSingleN(fs, func(_ []byte, flow uint32) { single = append(single, flow) }, n)
	runDispatch(t, fs, steer.Config{Workers: 1}, func(p *steer.Packet) { lib = append(lib, p.FlowID) }, n)
	lib = lib[max(len(lib)-n, 0):] // after runDispatch's warm-up
	if len(single) != n || !slices.Equal(single, lib) {
		t.Fatalf("single-queue flowids %v..., the dispatcher's %v...", single[:min(4, len(single))], lib[:min(4, len(lib))])
	}
	if distinct := slices.Compact(slices.Sorted(slices.Values(single))); len(distinct) < 100 {
		t.Fatalf("%d distinct flowids in %d frames of 1024 flows", len(distinct), n)
	}
}

func benchReport() *Report {
	rep := &Report{Machine: Machine{CPU: "cpu", Cores: 2, Commit: "abc"}, Command: "go run ./bench", Count: 3,
		Started: time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)}
	for rep0 := 0; rep0 < 3; rep0++ {
		for _, c := range []struct {
			impl string
			w    int
			mpps float64
		}{{"single", 1, 1.0}, {"ceiling", 2, 1.9}, {"rps", 1, 0.95}, {"rps", 2, 1.8}, {"idiomatic", 2, 1.5}} {
			for _, h := range []string{handlerNone, handlerSpin} {
				r := Result{Experiment: "workers", Impl: c.impl, Source: "mem", Handler: h, FrameSize: 64, Flows: 1024,
					Workers: c.w, Rep: rep0, Mpps: c.mpps + 0.01*float64(rep0), Seconds: 1, Frames: 1e6}
				r.NsPerFrame = 1e3 / r.Mpps
				if library(c.impl) {
					r.Dispatch, r.Policy = "deferred", "rss"
				}
				rep.Results = append(rep.Results, r)
			}
		}
		for i, reb := range []bool{false, true} {
			rep.Results = append(rep.Results, Result{Experiment: "skew", Impl: "rps", Source: "mem", Handler: handlerSpin,
				FrameSize: 64, Flows: 1024, Zipf: 1, Workers: 2, Rebalance: reb, Rep: rep0, Mpps: 1.5, Seconds: 1,
				PerWorker: []uint64{600 - 90*uint64(i), 400 + 90*uint64(i)}, Imbalance: 1.2 - 0.18*float64(i)})
		}
	}
	return rep
}

// TestBenchfmtCompare: the results in Go's benchmark format read back, and
// -compare tells a significant change from none.
func TestBenchfmtCompare(t *testing.T) {
	rep := benchReport()
	var buf bytes.Buffer
	if err := writeBenchfmt(&buf, rep); err != nil {
		t.Fatal(err)
	}
	txt := buf.String()
	for _, want := range []string{"cpu: cpu\n", "commit: abc\n",
		"BenchmarkWorkers/impl=rps/src=mem/handler=spin1us/bytes=64/flows=1024/w=2/mode=deferred-rss\t1000000\t"} {
		if !strings.Contains(txt, want) {
			t.Errorf("the benchmark format lacks %q:\n%s", want, txt)
		}
	}
	s, err := parseBenchfmt(strings.NewReader(txt))
	if err != nil {
		t.Fatal(err)
	}
	name := "BenchmarkWorkers/impl=rps/src=mem/handler=none/bytes=64/flows=1024/w=2/mode=deferred-rss"
	if got := s.vals[name]["x-single"]; len(got) != 3 || math.Abs(got[0]-1.8) > 1e-9 {
		t.Errorf("%s x-single = %v, want 3 paired ratios from 1.8", name, got)
	}
	// The same results against themselves: no change.
	var out bytes.Buffer
	if err := compare(&out, s, s, "old", "new"); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, "impl=") && !strings.Contains(l, " ~ ") {
			t.Errorf("a change between identical results: %s", l)
		}
	}
	// Twice as fast in every one of 6 runs: significant.
	faster := &samples{}
	slow := &samples{}
	for i := 0; i < 6; i++ {
		slow.add("BenchmarkX", "Mpps", 1+0.01*float64(i))
		faster.add("BenchmarkX", "Mpps", 2+0.01*float64(i))
	}
	out.Reset()
	if err := compare(&out, slow, faster, "old", "new"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "+97.56%") || !strings.Contains(out.String(), "p=0.002 (n=6+6)") {
		t.Errorf("a doubling in 6+6 runs:\n%s", out.String())
	}
	if err := compare(&out, slow, &samples{}, "old", "new"); err == nil {
		t.Error("nothing in common is not an error")
	}
	// -compare reads results.json as well as the text format.
	dir := t.TempDir()
	js, tx := filepath.Join(dir, "results.json"), filepath.Join(dir, "results.txt")
	var jb bytes.Buffer
	writeJSON(&jb, rep)
	os.WriteFile(js, jb.Bytes(), 0o644)
	os.WriteFile(tx, []byte(txt), 0o644)
	out.Reset()
	if err := compareFiles(&out, js, tx); err != nil || !strings.Contains(out.String(), "x-single") {
		t.Errorf("results.json against results.txt: %v\n%s", err, out.String())
	}
}

// TestPlots: the plots are drawn at twice gonum's default resolution from
// long enough runs, and the balance plot is left out when the runs lasted
// fewer than minBalancePeriods of the rebalancer. (Drawing is slow under
// the race detector: one handler's plots only.)
func TestPlots(t *testing.T) {
	rep := benchReport()
	rep.Results = slices.DeleteFunc(rep.Results, func(r Result) bool { return r.Handler == handlerSpin && r.Experiment == "workers" })
	dir := t.TempDir()
	files, err := writePlots(dir, rep)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(files, []string{"throughput-none.png", "speedup.png", "balance.png"}) {
		t.Errorf("drew %v", files)
	}
	fh, err := os.Open(filepath.Join(dir, "balance.png"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := png.DecodeConfig(fh)
	fh.Close()
	if err != nil || cfg.Width != 960 || cfg.Height != 653 {
		t.Errorf("balance.png: %dx%d, %v; want 960x653", cfg.Width, cfg.Height, err)
	}
	rep.Results = slices.DeleteFunc(rep.Results, func(r Result) bool { return r.Experiment != "skew" })
	for i := range rep.Results {
		rep.Results[i].Seconds = 0.15
	}
	files, err = writePlots(t.TempDir(), rep)
	if err != nil || len(files) != 0 {
		t.Errorf("plots from runs of 0.15 s: %v, %v", files, err)
	}
}
