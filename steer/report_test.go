package steer

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/rpsgo/rps/internal/affinity"
	"go.uber.org/goleak"
)

// TestReportPinnedWSIDAndCPU: with workers pinned, the report's workstream
// rows carry the worker's index as WSID and the CPU it is pinned to in the
// CPU column, which FreeBSD's netstat -Q fills with the same CPU id twice.
// Pinned in reverse order, the two columns differ where they can.
func TestReportPinnedWSIDAndCPU(t *testing.T) {
	defer goleak.VerifyNone(t)
	if !affinity.Supported() {
		t.Skip("no thread affinity on " + runtime.GOOS)
	}
	cpus, err := affinity.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	cpus = slices.Clone(cpus)
	slices.Reverse(cpus)
	d, err := New(Config{CPUs: cpus}, func(*Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := d.Stats()
	var b strings.Builder
	if err := st.WriteReport(&b); err != nil {
		t.Fatal(err)
	}
	rows := reportRows(b.String(), "Workstreams:")
	if len(rows) != len(cpus) {
		t.Fatalf("%d workstream rows for %d workers:\n%s", len(rows), len(cpus), b.String())
	}
	for i, r := range rows {
		if want := fmt.Sprint(i); r[0] != want || r[1] != fmt.Sprint(cpus[i]) {
			t.Errorf("row %d: WSID %s CPU %s, want WSID %s (the index) and CPU %d", i, r[0], r[1], want, cpus[i])
		}
		if st.Workstreams[i].Worker != i || st.Workstreams[i].CPU != cpus[i] {
			t.Errorf("Workstreams[%d]: WSID %d CPU %d, want %d and %d", i, st.Workstreams[i].Worker, st.Workstreams[i].CPU, i, cpus[i])
		}
	}
}

// reportRows returns the fields of the rows of the report's table that
// follows the line title, its header left out.
func reportRows(report, title string) [][]string {
	var rows [][]string
	in := false
	for line := range strings.Lines(report) {
		f := strings.Fields(line)
		switch {
		case strings.TrimSpace(line) == title:
			in = true
		case in && len(f) == 0:
			return rows
		case in && f[0] != "WSID":
			rows = append(rows, f)
		}
	}
	return rows
}

// TestStockKernelConfig: the Config the docs give for a stock GENERIC
// kernel (one netisr thread, FLOW, DIRECT) handles every frame in the
// dispatching goroutine, counted as Disp'd on the one workstream, as
// netstat -Q shows a GENERIC kernel's traffic.
func TestStockKernelConfig(t *testing.T) {
	defer goleak.VerifyNone(t)
	handled := 0 // the dispatching goroutine's alone, if DIRECT holds
	d, err := New(Config{Workers: 1, Policy: PolicyFlow, Dispatch: DispatchDirect}, func(*Packet) { handled++ })
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	frames := make([]Frame, n)
	for i := range frames {
		frames[i] = Frame{Data: dtFrame(i, 1)}
	}
	in := d.NewInput()
	if err := in.Dispatch(frames, nil); err != nil {
		t.Fatal(err)
	}
	if handled != n {
		t.Errorf("%d of %d frames handled when Dispatch returned: not DIRECT", handled, n)
	}
	in.Close()
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ws := checkAccounting(t, d, n).Workstreams
	if len(ws) != 1 || ws[0].DirectDispatched != n || ws[0].Queued != 0 || ws[0].Handled != n {
		t.Errorf("workstreams %+v: want one, with Disp'd %d and nothing queued", ws, n)
	}
}
