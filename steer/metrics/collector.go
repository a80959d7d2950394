package metrics

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rpsgo/rps/steer"
)

// DefaultNamespace is the prefix of every metric name unless WithNamespace
// says otherwise: rps_frames_total, rps_worker_handled_total, ...
const DefaultNamespace = "rps"

// The variable labels. A constant label of the same name would clash with
// them, so WithConstLabels refuses these names.
const (
	labelWorker = "worker"
	labelCPU    = "cpu"
	labelMode   = "mode"
	labelReason = "reason"
	labelSource = "source"
	// labelCounter names a source's kernel counter, as the kernel names it
	// (steer.KernelCounter).
	labelCounter = "counter"
	// labelCallback names a user callback, as steer.PanicInfo does.
	labelCallback = "callback"
)

// Option configures a Collector.
type Option func(*settings)

type settings struct {
	namespace string
	labels    prometheus.Labels
}

// WithNamespace sets the prefix of every metric name (default
// DefaultNamespace). Empty means no prefix: frames_total, ... A namespace
// must match [a-zA-Z_][a-zA-Z0-9_]*.
func WithNamespace(ns string) Option {
	return func(s *settings) { s.namespace = ns }
}

// WithConstLabels adds labels with fixed values to every metric, to tell
// several dispatchers of one process apart (WithConstLabels(prometheus.Labels{
// "dispatcher": "ingress"})). The names worker, cpu, mode, reason and source are
// the collector's own and are refused.
func WithConstLabels(l prometheus.Labels) Option {
	return func(s *settings) {
		s.labels = make(prometheus.Labels, len(l))
		for k, v := range l {
			s.labels[k] = v
		}
	}
}

// nameRE is what this package accepts as a namespace or a label name: the
// classic exposition format's character set, which every Prometheus
// version and every scraper reads. Colons are left to recording rules.
var nameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// Collector is a prometheus.Collector over one dispatcher. Each Collect
// takes one d.Stats() snapshot and reports it; the metrics are listed in
// the package documentation. It is safe for concurrent use, and may be
// registered with several registries.
type Collector struct {
	d *steer.Dispatcher

	frames, bucketMoves, flowMoves, classified  *prometheus.Desc
	handled, queued, inline, dropped            *prometheus.Desc
	panicked, callbackPanics, qlen, wmark, info *prometheus.Desc
	sourceReceived, sourceDropped, sourceKernel *prometheus.Desc
	sourceFiltered                              *prometheus.Desc
	descs                                       []*prometheus.Desc

	// mu guards sources: for each source name, the highest totals reported
	// so far (see collectSources).
	mu      sync.Mutex
	sources map[string]*sourceRow
}

// sourceRow is one source name's counters: the highest totals reported.
type sourceRow struct {
	received, dropped, filtered uint64
	kernel                      map[string]uint64 // by counter name
}

// NewCollector returns a collector over d. It fails for a nil dispatcher,
// an invalid namespace and invalid or clashing constant labels.
func NewCollector(d *steer.Dispatcher, opts ...Option) (*Collector, error) {
	if d == nil {
		return nil, errors.New("metrics: the dispatcher is nil")
	}
	s := settings{namespace: DefaultNamespace}
	for _, o := range opts {
		o(&s)
	}
	if s.namespace != "" && !nameRE.MatchString(s.namespace) {
		return nil, fmt.Errorf("metrics: namespace %q: want letters, digits and underscores, not starting with a digit", s.namespace)
	}
	for name := range s.labels {
		switch {
		case !nameRE.MatchString(name) || len(name) >= 2 && name[:2] == "__":
			return nil, fmt.Errorf("metrics: constant label %q: want letters, digits and underscores, "+
				"not starting with a digit or with __", name)
		case name == labelWorker || name == labelCPU || name == labelMode || name == labelReason || name == labelSource || name == labelCounter ||
			name == labelCallback:
			return nil, fmt.Errorf("metrics: constant label %q is one of the collector's own labels "+
				"(worker, cpu, mode, reason, source, counter, callback): choose another name", name)
		}
	}
	c := &Collector{d: d, sources: map[string]*sourceRow{}}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		dc := prometheus.NewDesc(prometheus.BuildFQName(s.namespace, "", name), help, labels, s.labels)
		c.descs = append(c.descs, dc)
		return dc
	}
	c.frames = desc("frames_total",
		"Frames handed to the dispatcher, re-dispatches included.")
	c.handled = desc("worker_handled_total",
		"Frames the handler ran for on the workstream, inline or queued (netstat -Q Handled).", labelWorker)
	c.queued = desc("worker_queued_total",
		"Frames put on the workstream's queue (netstat -Q Queued).", labelWorker)
	c.inline = desc("worker_inline_dispatched_total",
		"Frames dispatched to the workstream's handler inline, in the dispatching goroutine, "+
			"by dispatch mode (netstat -Q Disp'd for direct, HDisp'd for hybrid).", labelWorker, labelMode)
	c.dropped = desc("worker_dropped_total",
		"Frames dropped on the workstream, by reason: queue (a full queue, netstat -Q QDrops), "+
			"stall (a live source's frames at the full queue of a stalled worker), "+
			"flow_limit, redispatch (nested too deep), close (Close ran out of time).", labelWorker, labelReason)
	c.panicked = desc("worker_panicked_total",
		"Frames whose handler panicked on the workstream (recovered; not in handled).", labelWorker)
	c.callbackPanics = desc("callback_panics_total",
		"Panics recovered in user callbacks other than the handler, by callback "+
			"(Tick, MoveOut, MoveIn, Close, Trace, CPUFunc, release).", labelCallback)
	c.qlen = desc("worker_queue_length",
		"Frames on the workstream's queue now (netstat -Q Len).", labelWorker)
	c.wmark = desc("worker_queue_watermark",
		"The most frames the workstream's queue has held at once (netstat -Q WMark).", labelWorker)
	c.info = desc("worker_info",
		"One series per workstream, always 1; cpu is the CPU it is pinned to, empty when unpinned.",
		labelWorker, labelCPU)
	c.classified = desc("classified_total",
		"Frames by classification reason: ok, non-ip, or why the classifier stopped short.", labelReason)
	c.bucketMoves = desc("bucket_moves_total",
		"Indirection-table bucket moves made under the no-reorder rule.")
	c.flowMoves = desc("flow_moves_total",
		"RFS flow moves made under the no-reorder rule.")
	c.sourceReceived = desc("source_received_total",
		"Frames the kernel passed to the source's socket, its drops included (tp_packets).", labelSource)
	c.sourceDropped = desc("source_dropped_total",
		"Frames the kernel dropped for lack of ring space (tp_drops).", labelSource)
	c.sourceFiltered = desc("source_filtered_total",
		"Frames a capture filter run in user space rejected before the dispatcher (neither handled nor dropped).",
		labelSource)
	c.sourceKernel = desc("source_kernel_total",
		"The source's other kernel counters, each by the name the kernel gives it "+
			"(an AF_PACKET socket's tp_freeze_q_cnt, an AF_XDP socket's rx_ring_full, ...).", labelSource, labelCounter)
	return c, nil
}

// Describe implements prometheus.Collector: every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, dc := range c.descs {
		ch <- dc
	}
}

// The drop reasons of rps_worker_dropped_total.
const (
	dropQueue      = "queue"
	dropStall      = "stall"
	dropFlowLimit  = "flow_limit"
	dropRedispatch = "redispatch"
	dropClose      = "close"
)

// Collect implements prometheus.Collector: one d.Stats() snapshot.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.d.Stats()
	counter := func(dc *prometheus.Desc, v uint64, labels ...string) {
		emit(ch, dc, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(dc *prometheus.Desc, v float64, labels ...string) {
		emit(ch, dc, prometheus.GaugeValue, v, labels...)
	}
	counter(c.frames, st.Frames)
	for _, w := range st.Workstreams {
		id := strconv.Itoa(w.Worker)
		counter(c.handled, w.Handled, id)
		counter(c.queued, w.Queued, id)
		counter(c.inline, w.DirectDispatched, id, steer.DispatchDirect.String())
		counter(c.inline, w.HybridDispatched, id, steer.DispatchHybrid.String())
		counter(c.dropped, w.QueueDrops, id, dropQueue)
		counter(c.dropped, w.StallDrops, id, dropStall)
		counter(c.dropped, w.FlowLimitDrops, id, dropFlowLimit)
		counter(c.dropped, w.RedispatchDrops, id, dropRedispatch)
		counter(c.dropped, w.CloseDrops, id, dropClose)
		counter(c.panicked, w.Panics, id)
		gauge(c.qlen, float64(w.QueueLen), id)
		gauge(c.wmark, float64(w.QueuePeak), id)
		cpu := ""
		if w.CPU >= 0 {
			cpu = strconv.Itoa(w.CPU)
		}
		gauge(c.info, 1, id, cpu)
	}
	for r := steer.Reason(0); r.String() != "unknown"; r++ { // every reason, 0 included
		counter(c.classified, st.Reasons[r], r.String())
	}
	for name, n := range st.CallbackPanics {
		counter(c.callbackPanics, n, name)
	}
	counter(c.bucketMoves, st.BucketMoves)
	counter(c.flowMoves, st.FlowMoves)
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, row := range c.collectSources(st.Sources) {
		counter(c.sourceReceived, row.received, name)
		counter(c.sourceDropped, row.dropped, name)
		counter(c.sourceFiltered, row.filtered, name)
		for k, v := range row.kernel {
			counter(c.sourceKernel, v, name, k)
		}
	}
}

// collectSources folds a snapshot's sources into one row per name, each a
// counter that never goes down, and returns the rows; c.mu is held.
//
// Sources are labelled by name, and several share one: the sockets of a
// fanout group on one interface are all "afpacket:IFNAME". Their counters
// are summed, since the dispatcher's stats do not say which worker reads
// which. A source whose counters could not be read is left out of that
// snapshot, which would make a sum go down, or a series vanish, for one
// scrape; so the collector reports, per name and counter, the highest
// total it has seen. The dispatcher never forgets a source, so every name
// once reported stays.
func (c *Collector) collectSources(now []steer.SourceStats) map[string]*sourceRow {
	sums := map[string]*sourceRow{}
	for _, s := range now {
		sum := sums[s.Name]
		if sum == nil {
			sum = &sourceRow{kernel: map[string]uint64{}}
			sums[s.Name] = sum
		}
		sum.received += s.Received
		sum.dropped += s.Dropped
		sum.filtered += s.Filtered
		for _, k := range s.Kernel {
			sum.kernel[k.Name] += k.Value
		}
	}
	for name, sum := range sums {
		high := c.sources[name]
		if high == nil {
			high = &sourceRow{kernel: map[string]uint64{}}
			c.sources[name] = high
		}
		high.received = max(high.received, sum.received)
		high.dropped = max(high.dropped, sum.dropped)
		high.filtered = max(high.filtered, sum.filtered)
		for k, v := range sum.kernel {
			high.kernel[k] = max(high.kernel[k], v)
		}
	}
	return c.sources
}

// emit sends one metric, or an invalid metric carrying the error, which
// the registry reports, rather than panic.
func emit(ch chan<- prometheus.Metric, dc *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
	m, err := prometheus.NewConstMetric(dc, t, v, labels...)
	if err != nil {
		m = prometheus.NewInvalidMetric(dc, fmt.Errorf("metrics: %w", err))
	}
	ch <- m
}
