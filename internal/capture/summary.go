package capture

import (
	"fmt"
	"io"
	"strings"

	"github.com/rpsgo/rps/steer"
)

// Drops are the frames a run lost in user space, after its source and
// before a handler, by reason, named as steer/metrics names the reasons of
// rps_worker_dropped_total.
type Drops struct {
	Queue      uint64 `json:"queue"`      // a full queue (netstat -Q QDrops)
	Stall      uint64 `json:"stall"`      // a stalled worker's full queue, from a live source
	FlowLimit  uint64 `json:"flow_limit"` // the flow limit
	Redispatch uint64 `json:"redispatch"` // re-dispatches nested too deep
	Close      uint64 `json:"close"`      // Close ran out of time
}

// DropsOf sums the workstreams' drops of st by reason.
func DropsOf(st *steer.Stats) Drops {
	var d Drops
	for _, w := range st.Workstreams {
		d.Queue += w.QueueDrops
		d.Stall += w.StallDrops
		d.FlowLimit += w.FlowLimitDrops
		d.Redispatch += w.RedispatchDrops
		d.Close += w.CloseDrops
	}
	return d
}

// Total is the sum of the drops.
func (d Drops) Total() uint64 { return d.Queue + d.Stall + d.FlowLimit + d.Redispatch + d.Close }

// String names the reasons with drops and their counts ("queue 10433,
// close 2"), or returns "" when there are none.
func (d Drops) String() string {
	var parts []string
	for _, r := range []struct {
		name string
		n    uint64
	}{{"queue", d.Queue}, {"stall", d.Stall}, {"flow limit", d.FlowLimit}, {"redispatch", d.Redispatch}, {"close", d.Close}} {
		if r.n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", r.name, r.n))
		}
	}
	return strings.Join(parts, ", ")
}

// LiveCounts are what a live capture's sockets counted, for WriteSummary.
type LiveCounts struct {
	// Received is the frames the kernel passed to the sockets, Dropped
	// those it dropped for lack of ring space.
	Received, Dropped uint64
	// Filtered is the frames a capture filter run in user space rejected.
	Filtered uint64
	// AfterCount is the frames read past -c and not steered.
	AfterCount uint64
}

// WriteSummary writes the counts tcpdump prints when it stops, meaning
// what tcpdump means by them: captured is the frames the handlers got
// (handled or panicked), received by filter the frames that passed the
// capture filter, dropped by kernel those the kernel found no ring space
// for; then the frames lost in user space, by reason (queue: a full
// queue's tail; stall: a stalled worker's; flow limit; redispatch; close),
// and those read past -c, which tcpdump would not have read.
func WriteSummary(w io.Writer, st *steer.Stats, c LiveCounts) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d packets captured\n", st.Handled()+st.Panicked())
	fmt.Fprintf(&b, "%d packets received by filter\n", c.Received-c.Filtered)
	fmt.Fprintf(&b, "%d packets dropped by kernel\n", c.Dropped)
	d := DropsOf(st)
	fmt.Fprintf(&b, "%d packets dropped in user space", d.Total())
	if d.Total() > 0 {
		fmt.Fprintf(&b, " (%s)", d)
	}
	b.WriteString("\n")
	if c.AfterCount > 0 {
		fmt.Fprintf(&b, "%d packets read past -c, not steered\n", c.AfterCount)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
