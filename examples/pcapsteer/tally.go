package main

import (
	"cmp"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/capture"
	"github.com/rpsgo/rps/steer"
)

// tally is what the handlers saw: one workerTally per worker, made by
// steer.NewPerWorker in the worker's goroutine and written only there, so
// the hot path takes no lock. The dispatcher hands a flow's frames to one
// worker at a time, so each flow's counts end up in one tally (nothing here
// moves a flow). With -dispatch direct every handler runs in the reading
// goroutine, each tally still with one writer at a time. The tallies are
// read only after Dispatcher.Close, which waits for the workers to finish.
type tally struct {
	workers []*workerTally // workers[i] is worker i's
	buckets int
}

// workerTally is one worker's counts. Each is allocated on its own, so two
// workers never write the same cache line.
type workerTally struct {
	flows   map[steer.FlowKey]*flowCount
	reasons [steer.NumReasons]count
	types   [256]count // by hash.HashType
	total   count
	encaps  *capture.EncapTally // frames by encapsulation
	dump    *capture.WorkerDump // -w: this worker's pcap writer, or nil
}

type count struct{ frames, bytes uint64 }

func (c *count) add(length int) {
	c.frames++
	c.bytes += uint64(length)
}

// flowCount is one flow's row: its flowid and what was counted.
type flowCount struct {
	flowid   uint32
	hashType hash.HashType
	count
}

// newWorkerTally is the per-worker state's constructor (steer.NewPerWorker).
func newWorkerTally(*steer.Worker) *workerTally {
	return &workerTally{flows: make(map[steer.FlowKey]*flowCount)}
}

// handle is the handler: it runs in the goroutine of the worker w belongs to,
// for every frame steered there.
func (w *workerTally) handle(p *steer.Packet) {
	w.total.add(p.Length)
	w.reasons[p.Reason].add(p.Length)
	w.types[p.HashType].add(p.Length)
	k := p.Key() // a flow is its whole key, encapsulations included
	w.encaps.Add(p.Data, &k, p.Length)
	f := w.flows[k]
	if f == nil {
		f = &flowCount{flowid: p.FlowID, hashType: p.HashType}
		w.flows[k] = f
	}
	f.add(p.Length)
	if w.dump != nil {
		w.dump.Write(p)
	}
}

// Tick runs in the worker every second (steer.Ticker): the pcap writer
// writes what it holds.
func (w *workerTally) Tick(now time.Time) {
	if w.dump != nil {
		w.dump.Tick(now)
	}
}

// Close runs in the worker before it exits (io.Closer): the pcap writer
// writes the rest and closes its file. Dispatcher.Close returns its error.
func (w *workerTally) Close() error {
	if w.dump != nil {
		return w.dump.Close()
	}
	return nil
}

// written sums the frames the workers wrote with -w.
func (t *tally) written() uint64 {
	var n uint64
	for _, w := range t.workers {
		if w.dump != nil {
			n += w.dump.Frames()
		}
	}
	return n
}

// tallyCounts are the reader's side of the totals: the records read, those
// the capture filter rejected, those read past -c, and the frames -w wrote.
type tallyCounts struct {
	read, filtered, afterCount, written uint64
	writtenTo                           string
}

// flowRow is one line of the -flows CSV.
type flowRow struct {
	key    steer.FlowKey
	encap  string // key.Encapsulation()
	worker int
	*flowCount
}

// rows merges the workers' flow maps: one row per flow key and worker (a
// key reaches one worker: nothing here moves a flow), the busiest flows
// first.
func (t *tally) rows() []flowRow {
	var rows []flowRow
	for i, w := range t.workers {
		for k, f := range w.flows {
			rows = append(rows, flowRow{key: k, encap: k.Encapsulation(), worker: i, flowCount: f})
		}
	}
	slices.SortFunc(rows, func(a, b flowRow) int {
		return cmp.Or(
			cmp.Compare(b.frames, a.frames),
			cmp.Compare(a.worker, b.worker),
			cmp.Compare(a.flowid, b.flowid),
			a.key.Src.Compare(b.key.Src),
			a.key.Dst.Compare(b.key.Dst),
			cmp.Compare(a.key.SrcPort, b.key.SrcPort),
			cmp.Compare(a.key.DstPort, b.key.DstPort),
			cmp.Compare(a.key.Proto, b.key.Proto),
			boolCompare(a.key.Fragment, b.key.Fragment),
			strings.Compare(a.encap, b.encap),
		)
	})
	return rows
}

func boolCompare(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// flowsHeader is the -flows CSV's header row.
var flowsHeader = []string{"src", "dst", "sport", "dport", "proto", "hashtype", "flowid", "bucket", "worker", "packets", "bytes", "encap"}

// writeFlows writes the -flows CSV. Frames without IP addresses have empty
// src and dst, frames that were not hashed (NONE) an empty bucket, and
// plain frames an empty encap.
func (t *tally) writeFlows(out io.Writer) error {
	cw := csv.NewWriter(out)
	cw.Write(flowsHeader)
	for _, r := range t.rows() {
		var src, dst, bucket string
		if r.key.Src.IsValid() {
			src, dst = r.key.Src.String(), r.key.Dst.String()
		}
		if r.hashType.IsHash() {
			bucket = strconv.FormatUint(uint64(r.flowid)&uint64(t.buckets-1), 10)
		}
		cw.Write([]string{
			src, dst,
			strconv.Itoa(int(r.key.SrcPort)), strconv.Itoa(int(r.key.DstPort)), strconv.Itoa(int(r.key.Proto)),
			r.hashType.String(), fmt.Sprintf("0x%08x", r.flowid), bucket, strconv.Itoa(r.worker),
			strconv.FormatUint(r.frames, 10), strconv.FormatUint(r.bytes, 10), r.encap,
		})
	}
	cw.Flush()
	return cw.Error()
}

// sum adds up the workers' counts.
func (t *tally) sum() (total count, reasons [steer.NumReasons]count, types [256]count, flows int) {
	for _, w := range t.workers {
		total.frames += w.total.frames
		total.bytes += w.total.bytes
		for i := range reasons {
			reasons[i].frames += w.reasons[i].frames
			reasons[i].bytes += w.reasons[i].bytes
		}
		for i := range types {
			types[i].frames += w.types[i].frames
			types[i].bytes += w.types[i].bytes
		}
		flows += len(w.flows)
	}
	return
}

// writeSummary prints what the handlers counted, after the report.
func (t *tally) writeSummary(out io.Writer, st *steer.Stats, c tallyCounts, elapsed time.Duration) error {
	read := c.read
	var b strings.Builder
	total, reasons, types, flows := t.sum()
	rate := ""
	if s := elapsed.Seconds(); s > 0 {
		rate = fmt.Sprintf(", %.0f frames/s", float64(read)/s)
	}
	fmt.Fprintf(&b, "\nSummary (counted by the handlers):\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  frames read\t%d\tin %v%s\n", read, elapsed.Round(time.Microsecond), rate)
	if c.filtered > 0 {
		fmt.Fprintf(tw, "  frames filtered\t%d\t(rejected by the capture filter: not steered)\n", c.filtered)
	}
	if c.afterCount > 0 {
		fmt.Fprintf(tw, "  frames after -c\t%d\t(read past the -c count: not steered)\n", c.afterCount)
	}
	fmt.Fprintf(tw, "  frames handled\t%d\t%d bytes on the wire\n", total.frames, total.bytes)
	fmt.Fprintf(tw, "  frames dropped\t%d\t(queue full, flow limit, re-dispatch, close)\n", st.Dropped())
	fmt.Fprintf(tw, "  flows\t%d\t(flow keys: the tuple hashed and its encapsulations)\n", flows)
	if c.writtenTo != "" {
		fmt.Fprintf(tw, "  frames written\t%d\tto %s\n", c.written, c.writtenTo)
	}
	tw.Flush()

	fmt.Fprintf(&b, "\nFrames by classification reason:\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  reason\tframes\tbytes\tthen\tcause\n")
	for r, c := range reasons {
		if c.frames > 0 {
			cause, then := reasonCause(steer.Reason(r))
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\t%s\n", steer.Reason(r), c.frames, c.bytes, then, cause)
		}
	}
	tw.Flush()

	if _, err := io.WriteString(out, b.String()); err != nil {
		return err
	}
	b.Reset()
	if err := t.encaps().WriteText(out); err != nil {
		return err
	}

	fmt.Fprintf(&b, "\nFrames by hash type (M_HASHTYPE_*):\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for ht, c := range types {
		if c.frames > 0 {
			fmt.Fprintf(tw, "  %s\t%d\t%.1f%%\n", hash.HashType(ht), c.frames, percent(c.frames, total.frames))
		}
	}
	tw.Flush()

	fmt.Fprintf(&b, "\nFrames per worker:\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "worker\tflows\tframes\tbytes\tshare\t\n")
	for i, w := range t.workers {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%.1f%%\t\n", i, len(w.flows), w.total.frames, w.total.bytes, percent(w.total.frames, total.frames))
	}
	tw.Flush()

	ok := "yes"
	if t.check(st, c) != nil {
		ok = "NO"
	}
	fmt.Fprintf(&b, "\nTotals: read %d = ", read)
	if c.filtered > 0 {
		fmt.Fprintf(&b, "filtered %d + ", c.filtered)
	}
	if c.afterCount > 0 {
		fmt.Fprintf(&b, "after -c %d + ", c.afterCount)
	}
	fmt.Fprintf(&b, "handled %d + dropped %d + panicked %d: %s\n", st.Handled(), st.Dropped(), st.Panicked(), ok)
	_, err := io.WriteString(out, b.String())
	return err
}

// encaps merges the workers' counts by encapsulation.
func (t *tally) encaps() *capture.EncapCounts {
	var sum capture.EncapCounts
	for _, w := range t.workers {
		sum.Merge(w.encaps.Counts())
	}
	return &sum
}

// check returns an error unless every frame read was filtered, read past
// -c, handled, dropped or panicked (steer's accounting once closed), the
// handlers saw every frame the workstreams say they handled, and -w wrote
// each of them.
func (t *tally) check(st *steer.Stats, c tallyCounts) error {
	total, _, _, _ := t.sum()
	switch {
	case c.read != c.filtered+c.afterCount+st.Frames:
		return fmt.Errorf("totals do not add up: %d frames read, %d filtered, %d after -c, %d dispatched", c.read, c.filtered, c.afterCount, st.Frames)
	case st.Frames != st.Handled()+st.Dropped()+st.Panicked():
		return fmt.Errorf("totals do not add up: %d frames dispatched, %d handled + %d dropped + %d panicked",
			st.Frames, st.Handled(), st.Dropped(), st.Panicked())
	case total.frames != st.Handled():
		return fmt.Errorf("totals do not add up: handlers saw %d frames, workstreams handled %d", total.frames, st.Handled())
	case c.writtenTo != "" && c.written != total.frames:
		return fmt.Errorf("totals do not add up: %d frames handled, %d written to %s", total.frames, c.written, c.writtenTo)
	}
	return nil
}

func percent(n, of uint64) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}
