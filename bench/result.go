package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"sort"
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
	Rate       int     `json:"offered_pps,omitempty"` // live: trafgen's rate; 0 as fast as it goes
	Rep        int     `json:"rep"`

	Frames         uint64   `json:"frames"`
	Seconds        float64  `json:"seconds"`
	Mpps           float64  `json:"mpps"`
	Gbps           float64  `json:"gbps"` // frame bytes (no preamble, gap or FCS) * 8 / time
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

	// Live runs: what trafgen sent, what of it the handlers never saw
	// (every cause: kernel, dispatcher, veth), and the CPU time per frame
	// handled, of the reader (this process, or tcpdump) and of the whole
	// path (the reader, trafgen and the ksoftirqd threads: the kernel's
	// receive work runs in softirq context, mostly in trafgen's).
	Sent     uint64  `json:"sent,omitempty"`
	Lost     uint64  `json:"lost"`
	SendPPS  float64 `json:"send_pps,omitempty"` // frames trafgen sent a second
	Batches  uint64  `json:"batches,omitempty"`  // non-empty batches the sockets' reads gave
	ReaderNs float64 `json:"reader_cpu_ns_per_frame,omitempty"`
	TotalNs  float64 `json:"total_cpu_ns_per_frame,omitempty"`
	Capture  string  `json:"capture,omitempty"` // AF_XDP: the attach and bind modes and the batch timeout, "native copy batch 100µs"
	Note     string  `json:"note,omitempty"`

	lat *hist // kept for the latency plot, not serialized
}

// Report is everything one invocation measured.
type Report struct {
	Machine Machine   `json:"machine"`
	Command string    `json:"command"`
	Started time.Time `json:"started"`
	Seconds float64   `json:"seconds"`
	Quick   bool      `json:"quick"`
	SpinNs  float64   `json:"spin_ns"` // the spin1us handler's measured time per call at the start
	Notes   []string  `json:"notes"`   // what was skipped and why
	Results []Result  `json:"results"`
}

// finish fills the derived figures of r from the raw counts.
func (r *Result) finish(el time.Duration, before, after usage, lat *hist) {
	r.Seconds = el.Seconds()
	if r.Seconds > 0 {
		r.Mpps = float64(r.Frames) / r.Seconds / 1e6
		r.Gbps = float64(r.Frames) * float64(r.FrameSize) * 8 / r.Seconds / 1e9
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
	"send_pps", "batches", "reader_cpu_ns_per_frame", "total_cpu_ns_per_frame", "capture", "note"}

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
		row := []string{r.Experiment, r.Impl, r.Source, r.Handler, strconv.Itoa(r.FrameSize), strconv.Itoa(r.Flows),
			f(r.Zipf), strconv.Itoa(r.Workers), r.Dispatch, r.Policy, strconv.FormatBool(r.Pinned),
			strconv.FormatBool(r.Rebalance), strconv.Itoa(r.Rep), strconv.FormatUint(r.Frames, 10), f(r.Seconds),
			f(r.Mpps), f(r.Gbps), f(r.NsPerFrame), f(r.UserSec), f(r.SysSec), f(r.CPUShare), f(r.AllocsPerFrame),
			strings.Join(pw, " "), f(r.Imbalance), strconv.FormatUint(r.Drops, 10), strconv.FormatUint(r.KernelDrops, 10),
			strconv.FormatUint(r.LatSamples, 10), f(r.LatP50), f(r.LatP99), f(r.LatP999), f(r.TPS),
			strconv.FormatUint(r.Retrans, 10), strconv.Itoa(r.Rate), strconv.FormatUint(r.Sent, 10),
			strconv.FormatUint(r.Lost, 10), f(r.SendPPS), strconv.FormatUint(r.Batches, 10), f(r.ReaderNs), f(r.TotalNs), r.Capture, r.Note}
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

// medians returns one result per configuration, the repetition with the
// median rate (throughput, or TPS for request/response), in first-seen
// order.
func medians(rs []Result) []Result {
	var order []string
	groups := map[string][]Result{}
	for _, r := range rs {
		k := r.groupKey()
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	out := make([]Result, 0, len(order))
	for _, k := range order {
		g := groups[k]
		sort.SliceStable(g, func(i, j int) bool { return g[i].Mpps+g[i].TPS < g[j].Mpps+g[j].TPS })
		out = append(out, g[len(g)/2])
	}
	return out
}
