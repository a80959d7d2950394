package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/capture"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// tally is what the handlers saw: one workerTally per worker, made by
// steer.NewPerWorker in the worker's goroutine and written only there, so
// the hot path takes no lock. The dispatcher hands a flow's frames to one
// worker at a time, so each flow's record is in one worker's table (nothing
// here moves a flow). With -dispatch direct every handler runs in the
// reading goroutine, each tally still with one writer at a time. The
// tallies are read only after Dispatcher.Close, which waits for the
// workers to finish.
type tally struct {
	workers []*workerTally // workers[i] is worker i's
	buckets int
	flowCfg flowConfig
	out     *flowWriter // -flows, or nil
}

// workerTally is one worker's counts. Each is allocated on its own, so two
// workers never write the same cache line.
type workerTally struct {
	index   int
	reasons [256]count // by steer.Reason
	types   [256]count // by hash.HashType
	total   count
	encaps  *capture.EncapTally // frames by encapsulation
	dump    *capture.WorkerDump // -w: this worker's pcap writer, or nil
	flowTable
}

type count struct{ frames, bytes uint64 }

func (c *count) add(length int) {
	c.frames++
	c.bytes += uint64(length)
}

// newWorkerTally is the per-worker state's constructor (steer.NewPerWorker).
func newWorkerTally(w *steer.Worker, cfg flowConfig, out *flowWriter, buckets *int) *workerTally {
	t := &workerTally{index: w.Index()}
	t.flowTable.init(w.Index(), cfg, out, buckets)
	return t
}

// handle is the handler: it runs in the goroutine of the worker w belongs to,
// for every frame steered there.
func (w *workerTally) handle(p *steer.Packet) {
	w.total.add(p.WireLen)
	w.reasons[p.Reason].add(p.WireLen)
	w.types[p.HashType].add(p.WireLen)
	k := p.Key() // a flow is its whole key, encapsulations included
	w.encaps.Add(p.Data, &k, p.WireLen)
	w.count(&k, p)
	if w.dump != nil {
		w.dump.Write(p)
	}
}

// Tick runs in the worker every second (steer.Ticker): the flows idle by
// the worker's capture clock end, the records ended so far go to the
// -flows file, and the pcap writer writes what it holds.
func (w *workerTally) Tick(now time.Time) {
	w.flowTable.tick()
	if w.dump != nil {
		w.dump.Tick(now)
	}
}

// Close runs in the worker before it exits (io.Closer): the frames still
// in the delay line are added, the records ended so far go to the -flows
// file, and the pcap writer writes the rest and
// closes its file. Dispatcher.Close returns their errors. The flows still
// open are ended after Close (tally.endOpen), worker by worker.
func (w *workerTally) Close() error {
	w.flowTable.drain()
	w.flowTable.flush()
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
// the capture filter rejected, those read past -c (the rest of the read
// that reached it), and the frames -w wrote.
type tallyCounts struct {
	read, filtered, afterCount, written uint64
	writtenTo                           string
	count                               int64 // -c N, 0 for none
}

// endOpen ends the records still open when the capture ended, worker
// after worker, after Dispatcher.Close.
func (t *tally) endOpen() {
	var end time.Time
	for _, w := range t.workers {
		if w.clock.After(end) {
			end = w.clock
		}
	}
	for _, w := range t.workers {
		w.endOpen(end)
	}
}

// ended sums the records the workers ended, by why.
func (t *tally) ended() (by [numEndings]uint64, records uint64) {
	for _, w := range t.workers {
		for i, n := range w.ended {
			by[i] += n
			records += n
		}
	}
	return by, records
}

// sum adds up the workers' counts.
func (t *tally) sum() (total count, reasons [256]count, types [256]count) {
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
	}
	return
}

// writeSummary prints what the handlers counted, after the report.
func (t *tally) writeSummary(out io.Writer, st *steer.Stats, c tallyCounts, elapsed time.Duration) error {
	read := c.read
	var b strings.Builder
	total, reasons, types := t.sum()
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
		fmt.Fprintf(tw, "  frames past -c\t%d\t(read, not steered: the file is read %d frames at a time, and the read that reached -c %d brought these too)\n",
			c.afterCount, pcapfile.DefaultBatchSize, c.count)
	}
	fmt.Fprintf(tw, "  frames handled\t%d\t%d bytes on the wire\n", total.frames, total.bytes)
	fmt.Fprintf(tw, "  frames dropped\t%d\t(queue full, stalled, flow limit, re-dispatch, close)\n", st.Dropped())
	t.writeFlowLines(tw)
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
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%.1f%%\t\n", i, w.records(), w.total.frames, w.total.bytes, percent(w.total.frames, total.frames))
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
		fmt.Fprintf(&b, "past -c %d + ", c.afterCount)
	}
	fmt.Fprintf(&b, "handled %d + dropped %d + panicked %d: %s\n", st.Handled(), st.Dropped(), st.Panicked(), ok)
	_, err := io.WriteString(out, b.String())
	return err
}

// writeFlowLines writes the summary's lines about the flow records.
func (t *tally) writeFlowLines(tw io.Writer) {
	by, records := t.ended()
	what := "flow key"
	if t.flowCfg.symmetric {
		what = "connection (-symmetric: both directions of a flow key)"
	}
	fmt.Fprintf(tw, "  flows\t%d\t(flow records: the frames of one %s until it ended)\n", records, what)
	if n := by[endIdle]; n > 0 {
		fmt.Fprintf(tw, "  flows ended idle\t%d\t(no frame for -idle %v of capture time)\n", n, t.flowCfg.idle)
	}
	if n := by[endActive]; n > 0 {
		fmt.Fprintf(tw, "  flows ended active\t%d\t(lasted -active %v: each continued in a new record)\n", n, t.flowCfg.active)
	}
	fmt.Fprintf(tw, "  flows ended early\t%d\t(for lack of room: the tables hold -flow-table %d flows, %d a worker; each continued in a new record)\n",
		by[endEarly], t.flowCfg.capacity, t.flowCfg.perWorker())
	if t.out != nil {
		fmt.Fprintf(tw, "  flow records written\t%d\tto %s\n", t.out.rows, t.out.name)
	}
}

// flowReport is the JSON report's count of the flow records.
func (t *tally) flowReport() *capture.FlowRecords {
	by, records := t.ended()
	r := &capture.FlowRecords{Records: records, Idle: by[endIdle], Active: by[endActive], Early: by[endEarly],
		TableCapacity: t.flowCfg.capacity, IdleSeconds: t.flowCfg.idle.Seconds(), ActiveSeconds: t.flowCfg.active.Seconds()}
	if t.out != nil {
		r.Written = t.out.rows
	}
	return r
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
	total, _, _ := t.sum()
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
