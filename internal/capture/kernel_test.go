package capture

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rpsgo/rps/steer"
)

// countedSource is a slice with a socket's counters.
type countedSource struct {
	steer.SliceSource
	st steer.SourceStats
}

func (s *countedSource) SourceStats() (steer.SourceStats, error) { return s.st, nil }

// TestReportKernelCounters: a source's mode and kernel counters reach both
// the netstat -Q text report and the JSON report, under their kernel
// names, whatever the source.
func TestReportKernelCounters(t *testing.T) {
	src := &countedSource{SliceSource: steer.SliceSource{Frames: flowFrames(10)}, st: steer.SourceStats{
		Name: "xsk0", Received: 14, Dropped: 4, Mode: "native, copy",
		Kernel: []steer.KernelCounter{{Name: "rx_dropped", Value: 1}, {Name: "rx_invalid_descs", Value: 2},
			{Name: "rx_ring_full", Value: 3}, {Name: "rx_fill_ring_empty_descs", Value: 5}},
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
	want := "Source xsk0: kernel received 14, kernel dropped 4; native, copy; rx_dropped 1, rx_invalid_descs 2, rx_ring_full 3, rx_fill_ring_empty_descs 5"
	if !strings.Contains(text.String(), want) {
		t.Errorf("text report lacks %q:\n%s", want, text.String())
	}
	var b bytes.Buffer
	if err := NewReport("test", &st).Write(&b); err != nil {
		t.Fatal(err)
	}
	var r struct {
		Sources []struct {
			Name   string            `json:"name"`
			Mode   string            `json:"mode"`
			Kernel map[string]uint64 `json:"kernel"`
		} `json:"sources"`
	}
	if err := json.Unmarshal(b.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Sources) != 1 {
		t.Fatalf("sources %+v", r.Sources)
	}
	x := r.Sources[0]
	if x.Mode != "native, copy" || x.Kernel["rx_dropped"] != 1 || x.Kernel["rx_invalid_descs"] != 2 ||
		x.Kernel["rx_ring_full"] != 3 || x.Kernel["rx_fill_ring_empty_descs"] != 5 || len(x.Kernel) != 4 {
		t.Errorf("JSON source %+v", x)
	}
}
