package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Result is one run: one configuration over one set of frames.
type Result struct {
	Experiment string  `json:"experiment"` // workers, sizes, modes, skew, pcap, live, rr
	Impl       string  `json:"impl"`       // rps, single, idiomatic, fanout-hash, ...
	Source     string  `json:"source"`     // mem, pcap, afpacket, fanout
	Handler    string  `json:"handler"`    // none, spin1us, stateful, work20us
	FrameSize  int     `json:"frame_size"`
	Flows      int     `json:"flows"`
	Zipf       float64 `json:"zipf,omitempty"`
	Workers    int     `json:"workers"`
	Dispatch   string  `json:"dispatch,omitempty"`
	Policy     string  `json:"policy,omitempty"`
	Pinned     bool    `json:"pinned"`
	Rebalance  bool    `json:"rebalance"`
	Rate       int     `json:"offered_pps,omitempty"` // live and latency: the rate offered; 0 as fast as it goes
	Rep        int     `json:"rep"`
	QLimit     int     `json:"qlimit,omitempty"`   // the library's queue limit in force
	CPUs       []int   `json:"cpus,omitempty"`     // the CPUs the workers were pinned to, one each
	WarmSec    float64 `json:"warm_sec,omitempty"` // the warm-up before the measured time, not counted

	Frames         uint64   `json:"frames"`  // handled in the measured time
	Seconds        float64  `json:"seconds"` // the measured time
	Mpps           float64  `json:"mpps"`
	Gbps           float64  `json:"gbps,omitempty"` // live: frame bytes (no preamble, gap or FCS) * 8 / time
	NsPerFrame     float64  `json:"ns_per_frame"`
	UserSec        float64  `json:"user_sec"`
	SysSec         float64  `json:"sys_sec"`
	CPUShare       float64  `json:"cpu_share"` // (user+sys)/wall: 1.0 is one core busy
	AllocsPerFrame float64  `json:"allocs_per_frame"`
	PerWorker      []uint64 `json:"per_worker"`
	Imbalance      float64  `json:"imbalance"` // max/mean of PerWorker
	Drops          uint64   `json:"drops"`
	KernelDrops    uint64   `json:"kernel_drops"`
	LatSamples     uint64   `json:"lat_samples"`
	LatP50         float64  `json:"lat_p50_us"`
	LatP99         float64  `json:"lat_p99_us"`
	LatP999        float64  `json:"lat_p999_us"`
	TPS            float64  `json:"tps,omitempty"`     // request/response: transactions per second
	Retrans        uint64   `json:"retrans,omitempty"` // request/response: TCP RetransSegs delta

	// Live runs: what the sender sent, what of it the handlers never saw
	// (every cause: kernel, dispatcher, veth), and the CPU time per frame
	// handled, of the reader (this process, or tcpdump) and of the whole
	// path (the reader, the sender and the ksoftirqd threads: the kernel's
	// receive work runs in softirq context, mostly in the sender's).
	Sent     uint64  `json:"sent,omitempty"`
	Lost     uint64  `json:"lost"`
	SendPPS  float64 `json:"send_pps,omitempty"` // frames sent a second on the wire (veth counter)
	Batches  uint64  `json:"batches,omitempty"`  // non-empty batches the sockets' reads gave
	ReaderNs float64 `json:"reader_cpu_ns_per_frame,omitempty"`
	TotalNs  float64 `json:"total_cpu_ns_per_frame,omitempty"`
	Capture  string  `json:"capture,omitempty"` // AF_XDP: the attach and bind modes and the batch timeout, "native copy batch 100µs"
	// SenderCPU is the CPU the sender was pinned to (-1: none); Flag is
	// "sender-limited" for a run that measured the sender: it did not
	// reach the offered rate, or nothing was lost at its top rate.
	SenderCPU int    `json:"sender_cpu,omitempty"`
	Flag      string `json:"flag,omitempty"`
	// ZeroLossPPS is a zero-loss search's result: the highest offered
	// rate at which no frame was lost (RFC 2544's throughput); Trials the
	// trials it took.
	ZeroLossPPS float64 `json:"zero_loss_pps,omitempty"`
	Trials      int     `json:"trials,omitempty"`
	Note        string  `json:"note,omitempty"`

	lat *hist // kept for the latency plot, not serialized
}

// Report is everything one invocation measured.
type Report struct {
	Machine Machine   `json:"machine"`
	Command string    `json:"command"`
	Started time.Time `json:"started"`
	Seconds float64   `json:"seconds"`
	Quick   bool      `json:"quick"`
	Count   int       `json:"count"`      // repetitions of each configuration
	Warmup  float64   `json:"warmup_s"`   // in memory and from a file: the warm-up of each run, not counted
	Measure float64   `json:"duration_s"` // in memory and from a file: the measured time of each run
	QLimit  int       `json:"qlimit"`     // the queue limit of the inputs that wait

	// Spin is the spin1us handler's calibration; SpinCost its cost
	// measured at the start and at the end of the invocation.
	Spin     Calibration `json:"spin"`
	SpinCost spinDrift   `json:"spin_cost"`
	// ClassifyNs is the library's classifier alone on the in-memory
	// frames, a frame (classifyCost).
	ClassifyNs float64 `json:"classify_ns"`

	// Before and After are the machine's load sampled just before the
	// first run and just after the last; StealRun is the share of CPU time
	// the hypervisor took over all the runs.
	Before   load    `json:"load_before"`
	After    load    `json:"load_after"`
	StealRun float64 `json:"steal_run"`

	Warnings []string `json:"warnings"` // what makes the figures doubtful
	Notes    []string `json:"notes"`    // what was skipped and why
	Results  []Result `json:"results"`
}

// finish fills the derived figures of r from the raw counts.
func (r *Result) finish(el time.Duration, before, after usage, lat *hist) {
	r.Seconds = el.Seconds()
	if r.Seconds > 0 {
		r.Mpps = float64(r.Frames) / r.Seconds / 1e6
	}
	if r.Frames > 0 {
		r.NsPerFrame = float64(el.Nanoseconds()) / float64(r.Frames)
		r.AllocsPerFrame = float64(after.mallocs-before.mallocs) / float64(r.Frames)
	}
	r.UserSec = (after.user - before.user).Seconds()
	r.SysSec = (after.sys - before.sys).Seconds()
	if w := after.wall.Sub(before.wall).Seconds(); w > 0 {
		r.CPUShare = (r.UserSec + r.SysSec) / w
	}
	r.Imbalance = imbalance(r.PerWorker)
	r.setLatency(lat)
}

// setLatency sets r's latency figures from lat, when it has values.
func (r *Result) setLatency(lat *hist) {
	if lat != nil && lat.Count() > 0 {
		r.lat = lat
		r.LatSamples = lat.Count()
		r.LatP50 = lat.Quantile(0.50).Seconds() * 1e6
		r.LatP99 = lat.Quantile(0.99).Seconds() * 1e6
		r.LatP999 = lat.Quantile(0.999).Seconds() * 1e6
	}
}

// imbalance is max/mean of the per-worker counts, 1 when perfectly even.
func imbalance(c []uint64) float64 {
	if len(c) == 0 {
		return 0
	}
	var sum, mx uint64
	for _, v := range c {
		sum += v
		mx = max(mx, v)
	}
	if sum == 0 {
		return 0
	}
	return float64(mx) * float64(len(c)) / float64(sum)
}

var csvHeader = []string{"experiment", "impl", "source", "handler", "frame_size", "flows", "zipf", "workers",
	"dispatch", "policy", "pinned", "rebalance", "rep", "frames", "seconds", "mpps", "gbps", "ns_per_frame",
	"user_sec", "sys_sec", "cpu_share", "allocs_per_frame", "per_worker", "imbalance", "drops", "kernel_drops",
	"lat_samples", "lat_p50_us", "lat_p99_us", "lat_p999_us", "tps", "retrans", "offered_pps", "sent", "lost",
	"send_pps", "batches", "reader_cpu_ns_per_frame", "total_cpu_ns_per_frame", "capture", "qlimit", "cpus", "warm_sec", "sender_cpu", "flag", "zero_loss_pps", "trials", "note"}

// writeCSV writes a header and one row per result. The machine and the
// command line are in the JSON written beside it.
func writeCSV(w io.Writer, rs []Result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return fmt.Errorf("writing CSV: %w", err)
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	for _, r := range rs {
		pw := make([]string, len(r.PerWorker))
		for i, v := range r.PerWorker {
			pw[i] = strconv.FormatUint(v, 10)
		}
		cpus := make([]string, len(r.CPUs))
		for i, v := range r.CPUs {
			cpus[i] = strconv.Itoa(v)
		}
		row := []string{r.Experiment, r.Impl, r.Source, r.Handler, strconv.Itoa(r.FrameSize), strconv.Itoa(r.Flows),
			f(r.Zipf), strconv.Itoa(r.Workers), r.Dispatch, r.Policy, strconv.FormatBool(r.Pinned),
			strconv.FormatBool(r.Rebalance), strconv.Itoa(r.Rep), strconv.FormatUint(r.Frames, 10), f(r.Seconds),
			f(r.Mpps), f(r.Gbps), f(r.NsPerFrame), f(r.UserSec), f(r.SysSec), f(r.CPUShare), f(r.AllocsPerFrame),
			strings.Join(pw, " "), f(r.Imbalance), strconv.FormatUint(r.Drops, 10), strconv.FormatUint(r.KernelDrops, 10),
			strconv.FormatUint(r.LatSamples, 10), f(r.LatP50), f(r.LatP99), f(r.LatP999), f(r.TPS),
			strconv.FormatUint(r.Retrans, 10), strconv.Itoa(r.Rate), strconv.FormatUint(r.Sent, 10),
			strconv.FormatUint(r.Lost, 10), f(r.SendPPS), strconv.FormatUint(r.Batches, 10), f(r.ReaderNs), f(r.TotalNs), r.Capture,
			strconv.Itoa(r.QLimit), strings.Join(cpus, " "), f(r.WarmSec), strconv.Itoa(r.SenderCPU), r.Flag,
			f(r.ZeroLossPPS), strconv.Itoa(r.Trials), r.Note}
		if err := cw.Write(row); err != nil {
			return fmt.Errorf("writing CSV: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("writing CSV: %w", err)
	}
	return nil
}

// writeJSON writes the whole report, indented.
func writeJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}

// groupKey identifies the repetitions of one configuration.
func (r *Result) groupKey() string {
	return fmt.Sprintf("%s|%s|%s|%s|%d|%d|%g|%d|%s|%s|%v|%v|%d", r.Experiment, r.Impl, r.Source, r.Handler,
		r.FrameSize, r.Flows, r.Zipf, r.Workers, r.Dispatch, r.Policy, r.Pinned, r.Rebalance, r.Rate)
}

// group is the repetitions of one configuration, in the order they ran.
type group struct {
	runs []*Result
}

// first is the group's first run, for the fields every run shares.
func (g *group) first() *Result { return g.runs[0] }

// sum summarizes figure f over the group's runs.
func (g *group) sum(f func(*Result) float64) summary {
	v := make([]float64, len(g.runs))
	for i, r := range g.runs {
		v[i] = f(r)
	}
	return summarize(v)
}

// ratio summarizes f(run)/f(base's run of the same repetition) over the
// repetitions both have: the ratios are paired, so that a drift of the
// machine between repetitions moves both sides of each.
func (g *group) ratio(base *group, f func(*Result) float64) summary {
	var v []float64
	for _, r := range g.runs {
		for _, b := range base.runs {
			if b.Rep == r.Rep && f(b) != 0 {
				v = append(v, f(r)/f(b))
			}
		}
	}
	return summarize(v)
}

// groups gathers rs by configuration, in first-seen order.
func groups(rs []Result) []*group {
	var out []*group
	idx := map[string]*group{}
	for i := range rs {
		k := rs[i].groupKey()
		g := idx[k]
		if g == nil {
			g = &group{}
			idx[k] = g
			out = append(out, g)
		}
		g.runs = append(g.runs, &rs[i])
	}
	return out
}

func mpps(r *Result) float64   { return r.Mpps }
func nsPer(r *Result) float64  { return r.NsPerFrame }
func cpuOf(r *Result) float64  { return r.CPUShare }
func imbal(r *Result) float64  { return r.Imbalance }
func allocs(r *Result) float64 { return r.AllocsPerFrame }
func tps(r *Result) float64    { return r.TPS }
