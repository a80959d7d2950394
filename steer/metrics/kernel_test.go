package metrics_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rpsgo/rps/steer"
)

// TestKernelCounters: two sockets of one name have their kernel counters
// summed, one series per counter under the kernel's name, and lint clean;
// a source without them has none.
func TestKernelCounters(t *testing.T) {
	d := newDispatcher(t, steer.Config{Workers: 3, Dispatch: steer.DispatchDirect}, func(*steer.Packet) {})
	stats := func(n uint64) steer.SourceStats {
		return steer.SourceStats{Name: "afxdp:veth0", Received: 10 * n, Dropped: 2 * n,
			Mode: "native, copy", Kernel: []steer.KernelCounter{{Name: "rx_dropped", Value: n}, {Name: "rx_invalid_descs", Value: 2 * n},
				{Name: "rx_ring_full", Value: 3 * n}, {Name: "rx_fill_ring_empty_descs", Value: 4 * n}}}
	}
	srcs := []steer.Source{
		&countedSource{Source: &steer.SliceSource{}, st: stats(1)},
		&countedSource{Source: &steer.SliceSource{}, st: stats(10)},
		&countedSource{Source: &steer.SliceSource{}, st: steer.SourceStats{Name: "filter", Filtered: 3}},
	}
	if err := d.RunOnWorkers(context.Background(), srcs); err != nil {
		t.Fatal(err)
	}
	closeDispatcher(t, d)
	c := newCollector(t, d)
	want := `
# HELP rps_source_kernel_total The source's other kernel counters, each by the name the kernel gives it (an AF_PACKET socket's tp_freeze_q_cnt, an AF_XDP socket's rx_ring_full, ...).
# TYPE rps_source_kernel_total counter
rps_source_kernel_total{counter="rx_dropped",source="afxdp:veth0"} 11
rps_source_kernel_total{counter="rx_fill_ring_empty_descs",source="afxdp:veth0"} 44
rps_source_kernel_total{counter="rx_invalid_descs",source="afxdp:veth0"} 22
rps_source_kernel_total{counter="rx_ring_full",source="afxdp:veth0"} 33
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "rps_source_kernel_total"); err != nil {
		t.Error(err)
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}
