package metrics_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rpsgo/rps/steer"
)

// TestXDPCounters: two AF_XDP sockets of one name have their
// XDP_STATISTICS summed, under the kernel's names, and lint clean.
func TestXDPCounters(t *testing.T) {
	d := newDispatcher(t, steer.Config{Workers: 2, Dispatch: steer.Direct}, func(*steer.Packet) {})
	stats := func(n uint64) steer.SourceStats {
		return steer.SourceStats{Name: "afxdp:veth0", Received: 10 * n, Dropped: 2 * n,
			XDP: &steer.XDPStats{RxDropped: n, RxInvalidDescs: 2 * n, RxRingFull: 3 * n, RxFillRingEmptyDescs: 4 * n, Attach: "native"}}
	}
	srcs := []steer.Source{
		&countedSource{Source: &steer.SliceSource{}, st: stats(1)},
		&countedSource{Source: &steer.SliceSource{}, st: stats(10)},
	}
	if err := d.RunOnWorkers(context.Background(), srcs); err != nil {
		t.Fatal(err)
	}
	closeDispatcher(t, d)
	c := newCollector(t, d)
	want := `
# HELP rps_source_xdp_total An AF_XDP socket's kernel counters (XDP_STATISTICS) by their kernel name: rx_dropped, rx_invalid_descs, rx_ring_full, rx_fill_ring_empty_descs.
# TYPE rps_source_xdp_total counter
rps_source_xdp_total{counter="rx_dropped",source="afxdp:veth0"} 11
rps_source_xdp_total{counter="rx_fill_ring_empty_descs",source="afxdp:veth0"} 44
rps_source_xdp_total{counter="rx_invalid_descs",source="afxdp:veth0"} 22
rps_source_xdp_total{counter="rx_ring_full",source="afxdp:veth0"} 33
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "rps_source_xdp_total"); err != nil {
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
