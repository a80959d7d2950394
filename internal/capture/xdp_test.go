package capture

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rpsgo/rps/steer"
)

// xdpSource is a slice with an AF_XDP socket's counters.
type xdpSource struct {
	steer.SliceSource
	st steer.SourceStats
}

func (s *xdpSource) SourceStats() (steer.SourceStats, error) { return s.st, nil }

// TestReportXDP: an AF_XDP socket's XDP_STATISTICS and mode reach both
// the netstat -Q text report and the JSON report, under their kernel names.
func TestReportXDP(t *testing.T) {
	src := &xdpSource{SliceSource: steer.SliceSource{Frames: flowFrames(10)}, st: steer.SourceStats{
		Name: "xsk0", Received: 14, Dropped: 4,
		XDP: &steer.XDPStats{RxDropped: 1, RxInvalidDescs: 2, RxRingFull: 3, RxFillRingEmptyDescs: 5, Attach: "native"},
	}}
	d, err := steer.New(steer.Config{Workers: 2}, func(*steer.Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Run(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	d.Close(context.Background())
	st := d.Stats()
	var text bytes.Buffer
	if err := st.WriteReport(&text); err != nil {
		t.Fatal(err)
	}
	want := "Source xsk0: kernel received 14, kernel dropped 4, queue freezes 0; xdp native copy: rx_dropped 1, rx_invalid_descs 2, rx_ring_full 3, rx_fill_ring_empty_descs 5"
	if !strings.Contains(text.String(), want) {
		t.Errorf("text report lacks %q:\n%s", want, text.String())
	}
	var b bytes.Buffer
	if err := NewReport("test", &st).Write(&b); err != nil {
		t.Fatal(err)
	}
	var r struct {
		Sources []struct {
			Name string         `json:"name"`
			XDP  map[string]any `json:"xdp"`
		} `json:"sources"`
	}
	if err := json.Unmarshal(b.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Sources) != 1 {
		t.Fatalf("sources %+v", r.Sources)
	}
	x := r.Sources[0].XDP
	if x["attach"] != "native" || x["zero_copy"] != false || x["rx_dropped"] != float64(1) || x["rx_invalid_descs"] != float64(2) ||
		x["rx_ring_full"] != float64(3) || x["rx_fill_ring_empty_descs"] != float64(5) {
		t.Errorf("JSON xdp counters %v", x)
	}
}
