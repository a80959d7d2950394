package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
)

// benchName names r's configuration as a Go benchmark, its parameters as
// key=value parts that benchstat can group by:
// BenchmarkWorkers/impl=rps/src=mem/handler=spin1us/bytes=64/flows=1024/w=2/mode=deferred-rss/pin=no.
func benchName(r *Result) string {
	e := []rune(r.Experiment)
	e[0] = unicode.ToUpper(e[0])
	parts := []string{"Benchmark" + string(e), "impl=" + r.Impl, "src=" + r.Source, "handler=" + r.Handler,
		fmt.Sprintf("bytes=%d", r.FrameSize), fmt.Sprintf("flows=%d", r.Flows)}
	if r.Zipf > 0 {
		parts = append(parts, fmt.Sprintf("zipf=%g", r.Zipf))
	}
	parts = append(parts, fmt.Sprintf("w=%d", r.Workers))
	if r.Dispatch != "" {
		parts = append(parts, "mode="+r.Dispatch+"-"+r.Policy)
	}
	if r.Pinned {
		parts = append(parts, "pin=yes")
	}
	if r.Rebalance {
		parts = append(parts, "rebal=yes")
	}
	if r.Rate > 0 || r.Experiment == expCapture {
		parts = append(parts, "offered="+offered(r.Rate))
	}
	return strings.Join(parts, "/")
}

// metric is one figure of one run in benchstat's format.
type metric struct {
	value float64
	unit  string
}

// benchMetrics are r's figures as benchstat units; base is the run r is
// compared with in the same repetition (nil: none).
func benchMetrics(r, base *Result) []metric {
	var ms []metric
	switch {
	case r.Experiment == "rr":
		ms = append(ms, metric{r.TPS, "tps"})
		if base != nil && base != r && base.TPS > 0 {
			ms = append(ms, metric{r.TPS / base.TPS, "x-1worker"})
		}
		ms = append(ms, metric{r.LatP99 / 1e3, "p99-ms"})
		return ms
	case r.Experiment == expZeroLoss:
		ms = append(ms, metric{r.ZeroLossPPS / 1e3, "zeroloss-kpps"}, metric{r.SendPPS / 1e3, "sendertop-kpps"})
		if base != nil && base != r && base.ZeroLossPPS > 0 {
			ms = append(ms, metric{r.ZeroLossPPS / base.ZeroLossPPS, "x-single"})
		}
		return ms
	case r.Experiment == expCapture:
		return append(ms, metric{r.SendPPS / 1e3, "onwire-kpps"}, metric{r.Mpps * 1e3, "handled-kpps"},
			metric{float64(r.Lost), "lost"}, metric{r.ReaderNs, "reader-ns/frame"}, metric{r.TotalNs, "total-ns/frame"})
	case r.Experiment == "latency" || r.Experiment == expLiveLatency:
		return append(ms, metric{r.LatP50, "p50-µs"}, metric{r.LatP99, "p99-µs"}, metric{r.LatP999, "p99.9-µs"},
			metric{r.Mpps, "Mpps"})
	}
	if r.Frames > 0 {
		ms = append(ms, metric{r.NsPerFrame, "ns/frame"}, metric{r.Mpps, "Mpps"})
	}
	if base != nil && base != r && base.Mpps > 0 {
		ms = append(ms, metric{r.Mpps / base.Mpps, "x-single"})
	}
	ms = append(ms, metric{r.CPUShare, "cpu"})
	if r.Workers > 1 && r.Imbalance > 0 {
		ms = append(ms, metric{r.Imbalance, "imbal"})
	}
	return ms
}

// writeBenchfmt writes every run of rep as a line of Go's benchmark format
// (the frames handled as the iteration count), after configuration lines
// that say where and how, so that benchstat reads it:
//
//	benchstat old/results.txt new/results.txt
func writeBenchfmt(w io.Writer, rep *Report) error {
	bw := bufio.NewWriter(w)
	m := rep.Machine
	fmt.Fprintf(bw, "goos: %s\ngoarch: %s\npkg: github.com/rpsgo/rps/bench\ncpu: %s\n", m.OS, m.Arch, m.CPU)
	fmt.Fprintf(bw, "commit: %s\ncommand: %s\ngo: %s\nspin-iters: %d\nqlimit: %d\n", orNone(m.Commit), rep.Command, m.Go,
		rep.Spin.Iters, rep.QLimit)
	if rep.Quick {
		fmt.Fprintf(bw, "note: a smoke run (-quick)\n")
	}
	gs := groups(rep.Results)
	for _, g := range gs {
		bg := baseline(gs, g)
		for _, r := range g.runs {
			var base *Result
			if bg != nil {
				for _, b := range bg.runs {
					if b.Rep == r.Rep {
						base = b
					}
				}
			}
			fmt.Fprintf(bw, "%s\t%d", benchName(r), max(r.Frames, 1))
			for _, mt := range benchMetrics(r, base) {
				fmt.Fprintf(bw, "\t%s %s", strconv.FormatFloat(mt.value, 'g', 6, 64), mt.unit)
			}
			fmt.Fprintln(bw)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing the benchmark format: %w", err)
	}
	return nil
}

// samples are the values of each benchmark and unit, in the order first
// seen.
type samples struct {
	names []string
	units map[string][]string             // by name, in order
	vals  map[string]map[string][]float64 // name, unit
}

func (s *samples) add(name, unit string, v float64) {
	if s.vals == nil {
		s.vals, s.units = map[string]map[string][]float64{}, map[string][]string{}
	}
	if s.vals[name] == nil {
		s.vals[name] = map[string][]float64{}
		s.names = append(s.names, name)
	}
	if _, ok := s.vals[name][unit]; !ok {
		s.units[name] = append(s.units[name], unit)
	}
	s.vals[name][unit] = append(s.vals[name][unit], v)
}

// parseBenchfmt reads Go's benchmark format: "BenchmarkName N v unit
// [v unit ...]" lines; others are ignored.
func parseBenchfmt(r io.Reader) (*samples, error) {
	s := &samples{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for ln := 1; sc.Scan(); ln++ {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.ParseUint(f[1], 10, 64); err != nil {
			continue
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: value %q: %w", ln, f[i], err)
			}
			s.add(f[0], f[i+1], v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading: %w", err)
	}
	return s, nil
}

// loadSamples reads a results file: results.json (a Report) or anything in
// Go's benchmark format (results.txt, go test -bench output).
func loadSamples(path string) (*samples, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if trimmed := strings.TrimSpace(string(b)); strings.HasPrefix(trimmed, "{") {
		var rep Report
		if err := json.Unmarshal(b, &rep); err != nil {
			return nil, fmt.Errorf("bench: %s: %w", path, err)
		}
		var buf strings.Builder
		if err := writeBenchfmt(&buf, &rep); err != nil {
			return nil, err
		}
		b = []byte(buf.String())
	}
	s, err := parseBenchfmt(strings.NewReader(string(b)))
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", path, err)
	}
	if len(s.names) == 0 {
		return nil, fmt.Errorf("bench: %s: no results in it", path)
	}
	return s, nil
}

// alpha is the significance level of -compare, benchstat's default.
const alpha = 0.05

// compareFiles prints, for every benchmark and unit the two files share,
// the old and the new median with their spread and the change, with the
// p-value of a Mann-Whitney U test, as benchstat does: "~" where the
// change is not significant at alpha.
func compareFiles(w io.Writer, oldPath, newPath string) error {
	olds, err := loadSamples(oldPath)
	if err != nil {
		return err
	}
	news, err := loadSamples(newPath)
	if err != nil {
		return err
	}
	return compare(w, olds, news, oldPath, newPath)
}

func compare(w io.Writer, olds, news *samples, oldName, newName string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "benchmark\tunit\told: %s\tnew: %s\tchange\tp (n)\t\n", oldName, newName)
	shared, few := 0, false
	for _, name := range news.names {
		if olds.vals[name] == nil {
			continue
		}
		for _, unit := range news.units[name] {
			o, ok := olds.vals[name][unit]
			if !ok {
				continue
			}
			nv := news.vals[name][unit]
			so, sn := summarize(o), summarize(nv)
			p := mannWhitney(o, nv)
			change := "~"
			switch {
			case so.Med == 0 && sn.Med == 0:
			case so.Med == 0:
				change = "?"
			case p <= alpha:
				change = fmt.Sprintf("%+.2f%%", 100*(sn.Med-so.Med)/so.Med)
			}
			if len(o) < 6 || len(nv) < 6 {
				few = true
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\tp=%.3f (n=%d+%d)\t\n", strings.TrimPrefix(name, "Benchmark"), unit,
				so.pm("%.4g"), sn.pm("%.4g"), change, p, len(o), len(nv))
			shared++
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if shared == 0 {
		return fmt.Errorf("bench: %s and %s have no benchmark and unit in common", oldName, newName)
	}
	fmt.Fprintf(w, "\nchange: the new median over the old, where a Mann-Whitney U test gives p <= %.2f; ~ where it does not.\n", alpha)
	fmt.Fprintf(w, "±: the largest distance from the median to a run.\n")
	if few {
		fmt.Fprintf(w, "fewer than 6 runs on a side: with so few a change of any size may not reach p <= %.2f.\n", alpha)
	}
	onlyOld := 0
	for _, name := range olds.names {
		if news.vals[name] == nil {
			onlyOld++
		}
	}
	if onlyOld > 0 {
		fmt.Fprintf(w, "%d benchmarks of %s are not in %s.\n", onlyOld, oldName, newName)
	}
	return nil
}
