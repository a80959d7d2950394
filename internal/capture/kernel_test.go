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

// TestSummary: tcpdump's counts say what tcpdump means by them. A run
// that lost frames in user space says so, by reason, instead of counting
// them as captured (it once printed the frames steered as captured), and
// the JSON report's totals agree.
func TestSummary(t *testing.T) {
	st := steer.Stats{Frames: 20006, Workstreams: []steer.WorkstreamStats{
		{Handled: 4000, QueueDrops: 5000, Panics: 1},
		{Handled: 5572, QueueDrops: 5421, StallDrops: 10, CloseDrops: 2},
	}}
	var b bytes.Buffer
	if err := WriteSummary(&b, &st, LiveCounts{Received: 20106, Dropped: 90, Filtered: 10}); err != nil {
		t.Fatal(err)
	}
	want := "9573 packets captured\n20096 packets received by filter\n90 packets dropped by kernel\n" +
		"10433 packets dropped in user space (queue 10421, stall 10, close 2)\n"
	if b.String() != want {
		t.Errorf("summary\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	if err := WriteSummary(&b, &steer.Stats{}, LiveCounts{AfterCount: 3}); err != nil {
		t.Fatal(err)
	}
	if want := "0 packets captured\n0 packets received by filter\n0 packets dropped by kernel\n" +
		"0 packets dropped in user space\n3 packets read past -c, not steered\n"; b.String() != want {
		t.Errorf("summary\n%s\nwant\n%s", b.String(), want)
	}
	r := NewReport("test", &st)
	if tot := r.Totals; tot.Captured != 9573 || tot.Dropped != 10433 || tot.Drops != (Drops{Queue: 10421, Stall: 10, Close: 2}) ||
		tot.Captured+tot.Dropped != tot.Steered {
		t.Errorf("JSON totals %+v", tot)
	}
}
