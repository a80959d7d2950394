package metrics_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/metrics"
)

// sampleFrames is the number of frames in the sample capture.
const sampleFrames = 4623

// TestCollectorMatchesStats steers the sample capture under several
// configurations, with panics, bucket and flow moves and sources with
// counters of their own, and checks that every series the collector reports is the
// closed dispatcher's Stats, that nothing else is reported, that the
// counters add up, and that the metrics pass client_golang's lint.
func TestCollectorMatchesStats(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  steer.Config
	}{
		{"deferred", steer.Config{Workers: 3}},
		{"direct", steer.Config{Workers: 2, Dispatch: steer.DispatchDirect}},
		{"hybrid-rfs-flowlimit", steer.Config{Workers: 2, Dispatch: steer.DispatchHybrid,
			RFS: steer.RFSConfig{Enabled: true}, Queue: steer.QueueConfig{FlowLimit: true}}},
		{"pinned", steer.Config{Workers: 1, CPUs: []int{0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.cfg.CPUs) > 0 {
				// Pinning needs Linux and CPU 0 in the affinity mask.
				d, err := steer.New(tc.cfg, func(*steer.Packet) {})
				if err != nil {
					t.Skipf("cannot pin: %v", err)
				}
				d.Close(context.Background())
			}
			var d *steer.Dispatcher
			d = newDispatcher(t, tc.cfg, func(p *steer.Packet) {
				if tc.cfg.RFS.Enabled && p.HashType.IsHash() && p.FlowID%5 == 0 {
					d.SetDesired(p.FlowID, (p.Worker+1)%d.Workers()) // a flow move
				}
				if p.Reason.Malformed() {
					panic("malformed")
				}
			})
			runSample(t, d, "ring:a", steer.SourceStats{Received: 10, Dropped: 2, Kernel: freezes(1)})
			moveBuckets(t, d)
			runSample(t, d, "ring:a", steer.SourceStats{Received: 5, Dropped: 1})
			runSample(t, d, "ring:b", steer.SourceStats{Received: 7, Dropped: 0, Kernel: freezes(3), Filtered: 4})
			closeDispatcher(t, d)
			c := newCollector(t, d)

			st := d.Stats()
			// The run exercises the counters it checks.
			switch {
			case st.Panicked() == 0:
				t.Error("no handler panicked")
			case d.Workers() > 1 && st.BucketMoves == 0:
				t.Error("no bucket moved")
			case tc.cfg.RFS.Enabled && st.FlowMoves == 0:
				t.Error("no flow moved")
			case tc.cfg.Dispatch == steer.DispatchDirect && st.Workstreams[0].DirectDispatched == 0:
				t.Error("nothing dispatched inline")
			}
			got := series(gather(t, c), "rps_")
			compare(t, got, expected(st, "rps", nil))

			if got := got[`rps_frames_total{}`]; got != 4*sampleFrames {
				t.Errorf("rps_frames_total = %v, want %d", got, 4*sampleFrames)
			}
			var outcomes float64
			for k, v := range got {
				if strings.HasPrefix(k, "rps_worker_handled_total{") || strings.HasPrefix(k, "rps_worker_dropped_total{") ||
					strings.HasPrefix(k, "rps_worker_panicked_total{") {
					outcomes += v
				}
			}
			if outcomes != 4*sampleFrames {
				t.Errorf("handled + dropped + panicked = %v, want rps_frames_total = %d", outcomes, 4*sampleFrames)
			}
			if got[`rps_source_received_total{source="ring:a"}`] != 15 {
				t.Errorf("the two sources named ring:a are not summed: %v", got)
			}

			problems, err := testutil.CollectAndLint(c)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Errorf("lint: %s: %s", p.Metric, p.Text)
			}
		})
	}
}

// TestCollectAndCompare checks the exposition itself, in the text format,
// for a small hand-built run on one worker whose every count is known:
// names, types, labels and values.
func TestCollectAndCompare(t *testing.T) {
	d := newDispatcher(t, steer.Config{Workers: 1, Hash: steer.HashConfig{Key: hash.MicrosoftKey[:]}}, func(*steer.Packet) {})
	arp := make([]byte, 42)
	arp[12], arp[13] = 0x08, 0x06
	frames := []steer.Frame{{Data: arp}, {Data: arp}, {Data: arp}, {Data: make([]byte, 5)}, {Data: make([]byte, 9)}}
	src := &countedSource{Source: &steer.SliceSource{Frames: frames},
		st: steer.SourceStats{Name: "afpacket:veth0", Received: 6, Dropped: 1, Filtered: 2}}
	if err := d.Run(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	closeDispatcher(t, d)
	c := newCollector(t, d, metrics.WithConstLabels(prometheus.Labels{"dispatcher": "test"}))

	want := `
# HELP rps_frames_total Frames handed to the dispatcher, re-dispatches included.
# TYPE rps_frames_total counter
rps_frames_total{dispatcher="test"} 5
# HELP rps_source_dropped_total Frames the kernel dropped for lack of ring space (tp_drops).
# TYPE rps_source_dropped_total counter
rps_source_dropped_total{dispatcher="test",source="afpacket:veth0"} 1
# HELP rps_source_filtered_total Frames a capture filter run in user space rejected before the dispatcher (neither handled nor dropped).
# TYPE rps_source_filtered_total counter
rps_source_filtered_total{dispatcher="test",source="afpacket:veth0"} 2
# HELP rps_source_received_total Frames the kernel passed to the source's socket, its drops included (tp_packets).
# TYPE rps_source_received_total counter
rps_source_received_total{dispatcher="test",source="afpacket:veth0"} 6
# HELP rps_worker_dropped_total Frames dropped on the workstream, by reason: queue (a full queue, netstat -Q QDrops), stall (a live source's frames at the full queue of a stalled worker), flow_limit, redispatch (nested too deep), close (Close ran out of time).
# TYPE rps_worker_dropped_total counter
rps_worker_dropped_total{dispatcher="test",reason="close",worker="0"} 0
rps_worker_dropped_total{dispatcher="test",reason="flow_limit",worker="0"} 0
rps_worker_dropped_total{dispatcher="test",reason="queue",worker="0"} 0
rps_worker_dropped_total{dispatcher="test",reason="redispatch",worker="0"} 0
rps_worker_dropped_total{dispatcher="test",reason="stall",worker="0"} 0
# HELP rps_worker_handled_total Frames the handler ran for on the workstream, inline or queued (netstat -Q Handled).
# TYPE rps_worker_handled_total counter
rps_worker_handled_total{dispatcher="test",worker="0"} 5
# HELP rps_worker_inline_dispatched_total Frames dispatched to the workstream's handler inline, in the dispatching goroutine, by dispatch mode (netstat -Q Disp'd for direct, HDisp'd for hybrid).
# TYPE rps_worker_inline_dispatched_total counter
rps_worker_inline_dispatched_total{dispatcher="test",mode="direct",worker="0"} 0
rps_worker_inline_dispatched_total{dispatcher="test",mode="hybrid",worker="0"} 0
# HELP rps_worker_info One series per workstream, always 1; cpu is the CPU it is pinned to, empty when unpinned.
# TYPE rps_worker_info gauge
rps_worker_info{cpu="",dispatcher="test",worker="0"} 1
# HELP rps_worker_queue_length Frames on the workstream's queue now (netstat -Q Len).
# TYPE rps_worker_queue_length gauge
rps_worker_queue_length{dispatcher="test",worker="0"} 0
# HELP rps_worker_queued_total Frames put on the workstream's queue (netstat -Q Queued).
# TYPE rps_worker_queued_total counter
rps_worker_queued_total{dispatcher="test",worker="0"} 5
`
	want += "# HELP rps_classified_total Frames by classification reason: ok, non-ip, or why the classifier stopped short.\n" +
		"# TYPE rps_classified_total counter\n"
	reasons := 0 // every reason has a series, zero or not
	for r := steer.Reason(0); r != steer.ReasonBadChecksum+1; r++ {
		n := map[steer.Reason]int{steer.ReasonNonIP: 3, steer.ReasonShortEthernet: 2}[r]
		want += fmt.Sprintf("rps_classified_total{dispatcher=\"test\",reason=%q} %d\n", r, n)
		reasons++
	}
	// The watermark depends on how far the worker fell behind; the other
	// tests check it against Stats.
	names := []string{"rps_classified_total", "rps_frames_total", "rps_source_dropped_total", "rps_source_filtered_total",
		"rps_source_received_total", "rps_worker_dropped_total", "rps_worker_handled_total",
		"rps_worker_inline_dispatched_total", "rps_worker_info", "rps_worker_queue_length", "rps_worker_queued_total"}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if n, want := testutil.CollectAndCount(c), 19+reasons; n != want {
		t.Errorf("%d series, want %d (frames, 13 for the worker, 2 moves, 3 for the source (no kernel counters) and the reasons; no callback panicked)", n, want)
	}
}

// TestOptions checks that WithNamespace renames every metric and that
// WithConstLabels labels every series, and that collectors told apart so
// register side by side in one registry.
func TestOptions(t *testing.T) {
	d := newDispatcher(t, steer.Config{Workers: 2}, func(*steer.Packet) {})
	runSample(t, d, "ring", steer.SourceStats{Received: 1})
	closeDispatcher(t, d)
	reg := prometheus.NewPedanticRegistry()
	for _, opts := range [][]metrics.Option{
		{metrics.WithNamespace("ingress")},
		{metrics.WithConstLabels(prometheus.Labels{"dispatcher": "a"})},
		{metrics.WithConstLabels(prometheus.Labels{"dispatcher": "b"})},
	} {
		if err := reg.Register(newCollector(t, d, opts...)); err != nil {
			t.Fatal(err)
		}
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	st := d.Stats()
	got := series(fams, "")
	want := expected(st, "ingress", nil)
	for _, name := range []string{"a", "b"} {
		for k, v := range expected(st, "rps", map[string]string{"dispatcher": name}) {
			want[k] = v
		}
	}
	compare(t, got, want)

	c := newCollector(t, d, metrics.WithNamespace(""))
	if n := testutil.CollectAndCount(c, "frames_total"); n != 1 {
		t.Errorf("with no namespace, %d series named frames_total, want 1", n)
	}
}

// TestNewCollectorErrors checks that bad input is an error, not a panic
// and not a collector that fails at registration.
func TestNewCollectorErrors(t *testing.T) {
	d := newDispatcher(t, steer.Config{Workers: 1}, func(*steer.Packet) {})
	for _, tc := range []struct {
		name string
		d    *steer.Dispatcher
		opts []metrics.Option
		want string
	}{
		{"nil dispatcher", nil, nil, "dispatcher is nil"},
		{"dash in namespace", d, []metrics.Option{metrics.WithNamespace("rps-x")}, `namespace "rps-x"`},
		{"digit first", d, []metrics.Option{metrics.WithNamespace("1rps")}, `namespace "1rps"`},
		{"own label", d, []metrics.Option{metrics.WithConstLabels(prometheus.Labels{"worker": "1"})}, "collector's own labels"},
		{"reserved label", d, []metrics.Option{metrics.WithConstLabels(prometheus.Labels{"__x": "1"})}, `label "__x"`},
		{"bad label", d, []metrics.Option{metrics.WithConstLabels(prometheus.Labels{"a-b": "1"})}, `label "a-b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := metrics.NewCollector(tc.d, tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "metrics: ") {
				t.Fatalf("NewCollector = %v, %v; want an error containing %q", c, err, tc.want)
			}
			if h, err := metrics.Handler(tc.d, tc.opts...); err == nil {
				t.Fatalf("Handler = %v, nil; want the error", h)
			}
		})
	}
}

// TestSourceCountersNeverGoDown checks that a source whose counters cannot
// be read at one scrape, and is therefore missing from that Stats, keeps
// its last totals rather than lowering its name's sum or vanishing.
func TestSourceCountersNeverGoDown(t *testing.T) {
	const name = "afpacket:eth0"
	d := newDispatcher(t, steer.Config{Workers: 1}, func(*steer.Packet) {})
	a := runSample(t, d, name, steer.SourceStats{Received: 100, Dropped: 10, Kernel: freezes(1), Filtered: 4})
	b := runSample(t, d, name, steer.SourceStats{Received: 50, Dropped: 5, Kernel: freezes(2), Filtered: 1})
	c := newCollector(t, d)
	check := func(when string, want steer.SourceStats) {
		t.Helper()
		got := series(gather(t, c), "rps_source_")
		all := expected(steer.Stats{Sources: []steer.SourceStats{want}}, "rps", nil)
		maps.DeleteFunc(all, func(k string, _ float64) bool { return !strings.HasPrefix(k, "rps_source_") })
		compare(t, got, all)
		if t.Failed() {
			t.Fatalf("%s: the source's series are not %+v", when, want)
		}
	}
	check("both read", steer.SourceStats{Name: name, Received: 150, Dropped: 15, Kernel: freezes(3), Filtered: 5})
	b.set(steer.SourceStats{Name: name, Received: 60, Dropped: 5, Kernel: freezes(2), Filtered: 1}, true)
	check("one unreadable", steer.SourceStats{Name: name, Received: 150, Dropped: 15, Kernel: freezes(3), Filtered: 5})
	a.set(steer.SourceStats{Name: name, Received: 100, Dropped: 10, Kernel: freezes(1), Filtered: 4}, true)
	check("both unreadable", steer.SourceStats{Name: name, Received: 150, Dropped: 15, Kernel: freezes(3), Filtered: 5})
	a.set(steer.SourceStats{Name: name, Received: 120, Dropped: 10, Kernel: freezes(1), Filtered: 4}, false)
	b.set(steer.SourceStats{Name: name, Received: 60, Dropped: 7, Kernel: freezes(2), Filtered: 3}, false)
	check("both read again", steer.SourceStats{Name: name, Received: 180, Dropped: 17, Kernel: freezes(3), Filtered: 7})
}
