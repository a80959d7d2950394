package steer

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rpsgo/rps/internal/rfstable"
)

// WorkstreamStats is a worker's row of the report, whose headings are
// netstat -Q's (WSID, Len, WMark, Disp'd, QDrops), and its other drops.
type WorkstreamStats struct {
	Worker           int    // the worker's index, as the table, Packet.Worker and SetDesired name it
	CPU              int    // pinned CPU, -1 when unpinned
	QueueLen         int    // frames queued now
	QueuePeak        int    // the most frames ever queued at once
	DirectDispatched uint64 // handled inline by DIRECT dispatch
	HybridDispatched uint64 // handled inline by HYBRID dispatch
	QueueDrops       uint64 // tail drops on a full queue
	StallDrops       uint64 // tail drops at a stalled worker (QueueConfig.StallTimeout)
	Queued           uint64 // frames put on the queue
	Handled          uint64 // frames the handler ran for (inline or queued)
	FlowLimitDrops   uint64 // dropped by the flow limit
	RedispatchDrops  uint64 // re-dispatches dropped (too deep)
	CloseDrops       uint64 // dropped when Close ran out of time
	Panics           uint64 // frames whose handler panicked (not in Handled)
}

// Drops is the sum of every kind of drop on the workstream.
func (w WorkstreamStats) Drops() uint64 {
	return w.QueueDrops + w.StallDrops + w.FlowLimitDrops + w.RedispatchDrops + w.CloseDrops
}

// SourceStats are a source's own counters, shown beside the queue drops so
// that every frame the kernel saw is accounted for; a source's other kernel
// counters are in Kernel, under the kernel's names.
type SourceStats struct {
	Name                         string
	Received                     uint64          // frames the kernel passed to the source, drops included (tp_packets)
	Dropped                      uint64          // frames the kernel lost for lack of room (tp_drops)
	RingUsed, RingPeak, RingSize int             // LiveSource.Backlog now and at most; RingSize 0: unknown
	Filtered                     uint64          // rejected by a filter in user space (steer/filter), never dispatched
	Mode                         string          `json:",omitempty"` // how the source receives, in its words ("generic, copy")
	Kernel                       []KernelCounter `json:",omitempty"` // other kernel counters (tp_freeze_q_cnt, rx_ring_full)
}

// KernelCounter is a source's kernel counter, under the kernel's name.
type KernelCounter struct {
	Name  string
	Value uint64
}

// SourceStatser is a source with its own counters (Stats.Sources).
type SourceStatser interface {
	SourceStats() (SourceStats, error)
}

type sourceStatser = SourceStatser

// addSource registers a source's own counters with the stats.
func (d *Dispatcher) addSource(s SourceStatser) {
	d.mu.Lock()
	d.sources = append(d.sources, s)
	d.mu.Unlock()
}

// Stats is a snapshot of a dispatcher; once it is closed, Frames ==
// Handled() + Dropped() + Panicked(). A worker counts frames handled at
// each batch's end and, when a Stats call asked, after its current frame
// (so a slow batch's progress shows from the next call); a DIRECT input
// as it lets go of its counts.
type Stats struct {
	Config         Config // with defaults filled in; key and functions not in JSON
	KeyFingerprint string // "microsoft", or 8 hex digits of the key's SHA-256, after "random " for a made one

	Frames          uint64 // every frame handed in, re-dispatches included
	Workstreams     []WorkstreamStats
	Reasons         map[Reason]uint64 // frames by classification reason; absent: none
	BucketFrames    []uint64          // hashed frames per bucket
	Table           []int             // the indirection table now
	BucketMoves     uint64            // bucket moves under the no-reorder rule
	FlowMoves       uint64            // RFS flow moves
	Sources         []SourceStats
	TopFlows        []FlowStats       // the flows with most packets (RFS on), largest first
	CallbackPanics  map[string]uint64 `json:",omitempty"` // other callbacks' panics, by PanicInfo.Callback
	CPUFuncRemapped uint64            `json:",omitempty"` // CPUFunc answers out of range, taken modulo Workers
}

// FlowStats is one flow table entry (RFS).
type FlowStats struct {
	FlowID              uint32
	Worker, Desired     int    // where the flow goes now; its consumer's worker, -1 when none
	Packets, Bytes      uint64 // frames and wire bytes of the flow seen by the inputs
	FirstSeen, LastSeen int64  // capture times of its first and latest frame, Unix nanoseconds
}

// Handled sums the workstreams' Handled.
func (s *Stats) Handled() uint64 {
	var n uint64
	for _, w := range s.Workstreams {
		n += w.Handled
	}
	return n
}

// Panicked sums the frames whose handler panicked.
func (s *Stats) Panicked() uint64 {
	var n uint64
	for _, w := range s.Workstreams {
		n += w.Panics
	}
	return n
}

// Dropped sums every drop of every workstream.
func (s *Stats) Dropped() uint64 {
	var n uint64
	for _, w := range s.Workstreams {
		n += w.Drops()
	}
	return n
}

// Stats returns a snapshot without waiting for a handler; after a Close that
// returned nil it is exact.
func (d *Dispatcher) Stats() Stats {
	s := Stats{Config: d.Config(), KeyFingerprint: d.keyName, Table: d.table.snapshot()}
	d.mu.Lock()
	srcs := append([]SourceStatser(nil), d.sources...)
	d.mu.Unlock()
	// The workers' bad checksums first: each frame counted there was
	// counted in an input's frames before, so the inputs' counts, read
	// next, hold it, and ReasonOK, which it leaves, never goes below zero.
	var badChecksums uint64
	for _, w := range d.workers {
		badChecksums += w.badChecksums.Load()
	}
	sum, top := d.sumCounts(true)
	sum.reasons[ReasonBadChecksum] += badChecksums
	s.Frames, s.BucketFrames = sum.frames, sum.bucketFrames
	s.Reasons = map[Reason]uint64{}
	ok := sum.frames
	for i, n := range sum.reasons {
		if n > 0 && Reason(i) != ReasonOK {
			s.Reasons[Reason(i)] = n
			ok -= n
		}
	}
	if ok > 0 {
		s.Reasons[ReasonOK] = ok
	}
	s.BucketMoves, s.FlowMoves = sum.bucketMoves, sum.flowMoves
	s.TopFlows = bestFlows(top)
	for _, w := range d.workers {
		w.wantHandled.Store(true)
		w.mu.Lock()
		ln, wm := w.qlen, w.wmark
		w.mu.Unlock()
		s.Workstreams = append(s.Workstreams, WorkstreamStats{
			Worker: w.index, CPU: w.cpu, QueueLen: ln, QueuePeak: wm,
			DirectDispatched: w.dispatched.Load(), HybridDispatched: w.hdispatched.Load(),
			QueueDrops: w.qdrops.Load(), StallDrops: w.stallDrops.Load(), Queued: w.queued.Load(), Handled: w.handled.Load(),
			FlowLimitDrops: w.flowDrops.Load(), RedispatchDrops: w.redispatchDrops.Load(),
			CloseDrops: w.closeDrops.Load(), Panics: w.panics.Load(),
		})
	}
	for cb := range d.callbackPanics {
		if n := d.callbackPanics[cb].Load(); n > 0 {
			if s.CallbackPanics == nil {
				s.CallbackPanics = map[string]uint64{}
			}
			s.CallbackPanics[callback(cb).String()] = n
		}
	}
	s.CPUFuncRemapped = d.cpuRemapped.Load()
	for _, src := range srcs {
		if ss, err := src.SourceStats(); err == nil {
			s.Sources = append(s.Sources, ss)
		}
	}
	return s
}

// statsWait bounds how long Stats (and the rebalancer) wait for an input
// that is inside Dispatch to publish its counts.
const statsWait = time.Millisecond

// sumCounts returns the counts of every input, open and closed, and with
// top their top flows. An input whose goroutine is inside Dispatch is
// asked to publish a copy as it lets go of its counts, and is waited for
// at most statsWait: past that, its last copy is taken.
func (d *Dispatcher) sumCounts(top bool) (counts, []FlowStats) {
	sum := counts{bucketFrames: make([]uint64, len(d.table.ents))}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.retired.addTo(&sum)
	var flows []FlowStats
	if top {
		flows = slices.Clone(d.retiredTop)
	}
	type waiting struct {
		p    *producer
		last *countsCopy
	}
	var busy []waiting
	for _, p := range d.producers {
		if !p.readCounts(&sum, &flows, top) {
			last := p.pub.Load()
			p.pubWant.Store(true)
			busy = append(busy, waiting{p, last})
		}
	}
	for deadline := time.Now().Add(statsWait); len(busy) > 0; {
		time.Sleep(10 * time.Microsecond)
		over := time.Now().After(deadline)
		busy = slices.DeleteFunc(busy, func(b waiting) bool {
			if b.p.readCounts(&sum, &flows, top) {
				return true
			}
			c := b.p.pub.Load()
			if c == b.last && !over {
				return false
			}
			if c != nil {
				c.addTo(&sum)
				if top {
					flows = append(flows, c.top...)
				}
			}
			return true
		})
	}
	return sum, flows
}

// readCounts adds p's counts (and with top its top flows) to sum, unless
// p's goroutine holds them, and reports whether it did. What it reads it
// also publishes, so that a later Stats that finds p busy reads counts no
// older than these.
func (p *producer) readCounts(sum *counts, flows *[]FlowStats, top bool) bool {
	if !p.mu.TryLock() {
		return false
	}
	c := p.publish(top)
	p.mu.Unlock()
	c.addTo(sum)
	if top {
		*flows = append(*flows, c.top...)
	}
	return true
}

// topFlowsLen is how many flows Stats.TopFlows lists.
const topFlowsLen = 10

// topFlows returns the flows of t with the most packets.
func topFlows(t *rfstable.Table) []FlowStats {
	var top []FlowStats
	for _, e := range t.Top(topFlowsLen, nil) {
		top = append(top, FlowStats{FlowID: e.FlowID, Worker: int(e.Current), Desired: int(e.Desired),
			Packets: e.Packets, Bytes: e.Bytes, FirstSeen: e.FirstSeen, LastSeen: e.LastSeen})
	}
	return top
}

// bestFlows sorts flows by packets, most first, and keeps topFlowsLen.
func bestFlows(top []FlowStats) []FlowStats {
	sort.SliceStable(top, func(i, j int) bool { return top[i].Packets > top[j].Packets })
	return top[:min(len(top), topFlowsLen)]
}

func onOff(b bool) string {
	if b {
		return "enabled"
	}
	return "disabled"
}

// WriteReport writes the snapshot as FreeBSD's `netstat -Q` does, with the
// other drops, the reasons, the sources and the rebalancer's load picture.
func (s *Stats) WriteReport(out io.Writer) error {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintln(&b, "Configuration:")
	fmt.Fprintf(tw, "Setting\t Current\t Limit\t\n")
	c := &s.Config
	q := &c.Queue
	fmt.Fprintf(tw, "Thread count\t %d\t %d\t\n", c.Workers, c.Workers)
	fmt.Fprintf(tw, "Queue limit (drop/wait)\t %d/%d\t %d\t\n", q.limit(false), q.limit(true), MaxQLimit)
	fmt.Fprintf(tw, "Queue overflow\t %s\t n/a\t\n", q.Overflow)
	fmt.Fprintf(tw, "Dispatch policy\t %s\t n/a\t\n", c.Dispatch)
	fmt.Fprintf(tw, "Steering policy\t %s\t n/a\t\n", c.Policy)
	fmt.Fprintf(tw, "Threads bound to CPUs\t %s\t n/a\t\n", onOff(len(c.CPUs) > 0))
	fmt.Fprintf(tw, "Indirection buckets\t %d\t %d\t\n", c.Buckets, maxBuckets)
	fmt.Fprintf(tw, "Hash function\t %s\t n/a\t\n", c.Hash.Algorithm)
	fmt.Fprintf(tw, "Hash key (fingerprint)\t %s\t n/a\t\n", s.KeyFingerprint)
	fmt.Fprintf(tw, "Hash types\t %s\t n/a\t\n", c.Hash.Types)
	fmt.Fprintf(tw, "Symmetric hash\t %s\t n/a\t\n", onOff(c.Hash.Symmetric))
	fmt.Fprintf(tw, "Tunnels hashed by\t %s\t n/a\t\n", c.Hash.Tunnels)
	fmt.Fprintf(tw, "RFS\t %s\t n/a\t\n", onOff(c.RFS.Enabled))
	fmt.Fprintf(tw, "Flow limit\t %s\t n/a\t\n", onOff(q.FlowLimit))
	tw.Flush()
	fmt.Fprintln(&b, "\nWorkstreams:")
	tw = tabwriter.NewWriter(&b, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "WSID\t CPU\t Len\t WMark\t Disp'd\t HDisp'd\t QDrops\t Queued\t Handled\t\n")
	for _, w := range s.Workstreams {
		cpu := "-"
		if w.CPU >= 0 {
			cpu = fmt.Sprint(w.CPU)
		}
		fmt.Fprintf(tw, "%d\t %s\t %d\t %d\t %d\t %d\t %d\t %d\t %d\t\n", w.Worker, cpu, w.QueueLen, w.QueuePeak,
			w.DirectDispatched, w.HybridDispatched, w.QueueDrops, w.Queued, w.Handled)
	}
	tw.Flush()
	fmt.Fprintln(&b, "\nOther drops and panics:")
	tw = tabwriter.NewWriter(&b, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "WSID\t Stalled\t FlowLimit\t Redisp\t Close\t Panicked\t\n")
	for _, w := range s.Workstreams {
		fmt.Fprintf(tw, "%d\t %d\t %d\t %d\t %d\t %d\t\n", w.Worker, w.StallDrops, w.FlowLimitDrops, w.RedispatchDrops, w.CloseDrops, w.Panics)
	}
	tw.Flush()
	if len(s.CallbackPanics) > 0 {
		names := make([]string, 0, len(s.CallbackPanics))
		for name := range s.CallbackPanics {
			names = append(names, name)
		}
		sort.Strings(names)
		b.WriteString("Callback panics (recovered):")
		for _, name := range names {
			fmt.Fprintf(&b, " %s %d", name, s.CallbackPanics[name])
		}
		b.WriteString("\n")
	}
	if s.CPUFuncRemapped > 0 {
		fmt.Fprintf(&b, "CPUFunc answers out of range, taken modulo the workers: %d\n", s.CPUFuncRemapped)
	}
	fmt.Fprintf(&b, "\nFrames: %d in, %d handled, %d dropped, %d panicked; bucket moves %d, flow moves %d\n",
		s.Frames, s.Handled(), s.Dropped(), s.Panicked(), s.BucketMoves, s.FlowMoves)
	fmt.Fprintln(&b, "\nClassification (every frame in):")
	for r := range numReasons {
		if n := s.Reasons[r]; n > 0 {
			fmt.Fprintf(&b, "  %-16s %d\n", r.String(), n)
		}
	}
	for _, src := range s.Sources {
		fmt.Fprintf(&b, "\nSource %s: ", src.Name)
		kernel := src.Received != 0 || src.Dropped != 0 || len(src.Kernel) > 0
		if kernel || src.Filtered == 0 {
			fmt.Fprintf(&b, "kernel received %d, kernel dropped %d", src.Received, src.Dropped)
			if src.Filtered > 0 {
				b.WriteString(", ")
			}
		}
		if src.Filtered > 0 {
			fmt.Fprintf(&b, "filtered %d", src.Filtered)
		}
		if src.RingSize > 0 {
			fmt.Fprintf(&b, "; ring %.0f%% full now, %.0f%% at most", 100*float64(src.RingUsed)/float64(src.RingSize),
				100*float64(src.RingPeak)/float64(src.RingSize))
		}
		if src.Mode != "" {
			fmt.Fprintf(&b, "; %s", src.Mode)
		}
		for i, k := range src.Kernel {
			sep := ", "
			if i == 0 {
				sep = "; "
			}
			fmt.Fprintf(&b, "%s%s %d", sep, k.Name, k.Value)
		}
		b.WriteString("\n")
	}
	if len(s.TopFlows) > 0 {
		fmt.Fprintln(&b, "\nTop flows:")
		for _, f := range s.TopFlows {
			fmt.Fprintf(&b, "  flowid 0x%08x worker %d packets %d bytes %d\n", f.FlowID, f.Worker, f.Packets, f.Bytes)
		}
	}
	if s.Config.Rebalance.Interval > 0 {
		b.WriteString("\n")
		s.writeLoad(&b, s.Config.Rebalance.Threshold)
	}
	_, err := io.WriteString(out, b.String())
	return err
}
