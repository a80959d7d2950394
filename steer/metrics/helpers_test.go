package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/rpsgo/rps/internal/sample"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/metrics"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// countedSource is a source with counters of its own (steer.SourceStatser),
// as a live ring has; the test sets them, and can make reading them fail.
type countedSource struct {
	steer.Source
	mu   sync.Mutex
	st   steer.SourceStats
	fail bool
}

func (s *countedSource) SourceStats() (steer.SourceStats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return steer.SourceStats{}, errors.New("counters unreadable")
	}
	return s.st, nil
}

func (s *countedSource) set(st steer.SourceStats, fail bool) {
	s.mu.Lock()
	s.st, s.fail = st, fail
	s.mu.Unlock()
}

// newDispatcher starts a dispatcher that is closed when the test ends.
func newDispatcher(t testing.TB, cfg steer.Config, h steer.Handler) *steer.Dispatcher {
	t.Helper()
	if cfg.OnPanic == nil {
		cfg.OnPanic = func(steer.PanicInfo) {}
	}
	d, err := steer.New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	return d
}

// runSample steers the sample capture through d, as a source with its own
// counters named name, and returns that source.
func runSample(t testing.TB, d *steer.Dispatcher, name string, st steer.SourceStats) *countedSource {
	t.Helper()
	r, err := pcapfile.NewReader(sample.Reader())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	st.Name = name
	src := &countedSource{Source: r, st: st}
	if err := d.Run(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	return src
}

// closeDispatcher closes d, so that its counters are exact.
func closeDispatcher(t testing.TB, d *steer.Dispatcher) {
	t.Helper()
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// series flattens metric families into name{label="value",...} -> value,
// labels sorted, for the families whose name starts with prefix. Both a
// registry's Gather and a parsed scrape give families.
func series(fams []*dto.MetricFamily, prefix string) map[string]float64 {
	out := map[string]float64{}
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), prefix) {
			continue
		}
		for _, m := range f.GetMetric() {
			var v float64
			switch {
			case m.Counter != nil:
				v = m.GetCounter().GetValue()
			case m.Gauge != nil:
				v = m.GetGauge().GetValue()
			case m.Untyped != nil:
				v = m.GetUntyped().GetValue()
			}
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			out[key(f.GetName(), labels)] = v
		}
	}
	return out
}

// key is the series name{k="v",...} with the labels sorted.
func key(name string, labels map[string]string) string {
	var ls []string
	for k, v := range labels {
		if v != "" { // an empty label is no label
			ls = append(ls, fmt.Sprintf("%s=%q", k, v))
		}
	}
	sort.Strings(ls)
	return name + "{" + strings.Join(ls, ",") + "}"
}

// expected is what the collector should report for st, restated from
// Stats field by field (sources summed by name), with ns as the namespace
// and extra as constant labels on every series.
func expected(st steer.Stats, ns string, extra map[string]string) map[string]float64 {
	out := map[string]float64{}
	put := func(name string, v float64, kv ...string) {
		labels := map[string]string{}
		for k, v := range extra {
			labels[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			labels[kv[i]] = kv[i+1]
		}
		out[key(ns+"_"+name, labels)] = v
	}
	put("frames_total", float64(st.Frames))
	for _, w := range st.Workstreams {
		id := strconv.Itoa(w.Worker)
		put("worker_handled_total", float64(w.Handled), "worker", id)
		put("worker_queued_total", float64(w.Queued), "worker", id)
		put("worker_inline_dispatched_total", float64(w.DirectDispatched), "worker", id, "mode", "direct")
		put("worker_inline_dispatched_total", float64(w.HybridDispatched), "worker", id, "mode", "hybrid")
		put("worker_dropped_total", float64(w.QueueDrops), "worker", id, "reason", "queue")
		put("worker_dropped_total", float64(w.StallDrops), "worker", id, "reason", "stall")
		put("worker_dropped_total", float64(w.FlowLimitDrops), "worker", id, "reason", "flow_limit")
		put("worker_dropped_total", float64(w.RedispatchDrops), "worker", id, "reason", "redispatch")
		put("worker_dropped_total", float64(w.CloseDrops), "worker", id, "reason", "close")
		put("worker_panicked_total", float64(w.Panics), "worker", id)
		put("worker_queue_length", float64(w.QueueLen), "worker", id)
		put("worker_queue_watermark", float64(w.QueuePeak), "worker", id)
		cpu := ""
		if w.CPU >= 0 {
			cpu = strconv.Itoa(w.CPU)
		}
		put("worker_info", 1, "worker", id, "cpu", cpu)
	}
	for r := steer.Reason(0); r != steer.ReasonBadChecksum+1; r++ {
		put("classified_total", float64(st.Reasons[r]), "reason", r.String())
	}
	for name, n := range st.CallbackPanics {
		put("callback_panics_total", float64(n), "callback", name)
	}
	put("bucket_moves_total", float64(st.BucketMoves))
	put("flow_moves_total", float64(st.FlowMoves))
	sums := map[string]steer.SourceStats{}
	kernel := map[[2]string]uint64{}
	for _, s := range st.Sources {
		sum := sums[s.Name]
		sum.Received += s.Received
		sum.Dropped += s.Dropped
		sum.Filtered += s.Filtered
		sums[s.Name] = sum
		for _, k := range s.Kernel {
			kernel[[2]string{s.Name, k.Name}] += k.Value
		}
	}
	for name, s := range sums {
		put("source_received_total", float64(s.Received), "source", name)
		put("source_dropped_total", float64(s.Dropped), "source", name)
		put("source_filtered_total", float64(s.Filtered), "source", name)
	}
	for k, v := range kernel {
		put("source_kernel_total", float64(v), "counter", k[1], "source", k[0])
	}
	return out
}

// compare fails the test unless got and want hold the same series with the
// same values.
func compare(t testing.TB, got, want map[string]float64) {
	t.Helper()
	for k, v := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("missing %s (want %v)", k, v)
		case g != v:
			t.Errorf("%s = %v, want %v", k, g, v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected %s = %v", k, v)
		}
	}
}

// gather registers c alone with a pedantic registry (which also checks
// that everything collected was described) and gathers it.
func gather(t testing.TB, c prometheus.Collector) []*dto.MetricFamily {
	t.Helper()
	fams, err := gatherErr(c)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// gatherErr is gather for a goroutine other than the test's.
func gatherErr(c prometheus.Collector) ([]*dto.MetricFamily, error) {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	return reg.Gather()
}

// newCollector is metrics.NewCollector, failing the test on error.
func newCollector(t testing.TB, d *steer.Dispatcher, opts ...metrics.Option) *metrics.Collector {
	t.Helper()
	c, err := metrics.NewCollector(d, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// moveBuckets steers the sample capture through an input of its own,
// reprogramming the indirection table halfway (every bucket to the next
// worker), so that buckets move under the no-reorder rule.
func moveBuckets(t testing.TB, d *steer.Dispatcher) {
	t.Helper()
	frames := loadSample(t)
	in := d.NewInput()
	defer in.Close()
	half := len(frames) / 2
	if err := in.Dispatch(frames[:half], nil); err != nil {
		t.Fatal(err)
	}
	table := d.Table()
	for b := range table {
		table[b] = (table[b] + 1) % d.Workers()
	}
	if err := d.SetTable(table); err != nil {
		t.Fatal(err)
	}
	if err := in.Dispatch(frames[half:], nil); err != nil {
		t.Fatal(err)
	}
}

// loadSample returns the sample capture's frames, copied out of the reader.
func loadSample(t testing.TB) []steer.Frame {
	t.Helper()
	r, err := pcapfile.NewReader(sample.Reader())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var frames []steer.Frame
	for {
		var b steer.Batch
		err := r.ReadBatch(context.Background(), &b)
		if err == io.EOF {
			return frames
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range b.Frames {
			f.Data = append([]byte(nil), f.Data...)
			frames = append(frames, f)
		}
		if b.Release != nil {
			b.Release()
		}
	}
}

// freezes is an AF_PACKET socket's kernel counters with n queue freezes.
func freezes(n uint64) []steer.KernelCounter {
	return []steer.KernelCounter{{Name: "tp_freeze_q_cnt", Value: n}}
}
