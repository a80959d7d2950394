package steer

import (
	"fmt"
	"io"
	"strings"
)

// Decision is a trace record of one frame's steering (Config.Trace), valid
// during the call; WriteTo prints every step in the kernels' terms.
type Decision struct {
	Frame   *Frame
	Class   *Classification
	Bucket  uint32 // flowid & (buckets-1)
	Worker  int    // the worker chosen
	Inline  bool   // handled in the dispatching goroutine (DIRECT, HYBRID)
	Dropped bool   // dropped by the flow limit before the hand-off
	Moved   bool   // the bucket or flow moved worker with this frame

	inputID        int          // the id of the input that dispatched it
	keyFingerprint string       // Stats.KeyFingerprint
	policy         Policy       // the policy in force
	dispatch       DispatchMode // the dispatch mode in force
	workers        int          // the number of workers
	mask           uint32       // buckets-1
	tableWorker    int          // the indirection table's entry for Bucket (RSS)
	cpu            int          // the worker's CPU, -1 when unpinned
	fallback       bool         // no hash: the SOURCE policy placed the frame
	rfs            bool         // the flow has an RFS entry
	desired        int          // the consumer's worker from SetDesired, -1 when none

	// A move under the last_qtail rule, of the bucket (RSS) or of the flow
	// (RFS): moving says one was wanted, Moved that it happened now; head
	// and lastTail are the old worker's queue head and the position of this
	// input's last frame of the bucket or flow there.
	moving           bool
	moveFrom, moveTo int
	head, lastTail   uint64
}

// WriteTo prints the decision in FreeBSD's and Linux's terms.
func (dc *Decision) WriteTo(out io.Writer) (int64, error) {
	var b strings.Builder
	c := dc.Class
	k := &c.Key
	fmt.Fprintf(&b, "frame: %d bytes (wire %d), source %d, ifindex %d\n", len(dc.Frame.Data), dc.Frame.wireLen(), dc.inputID, dc.Frame.IfIndex)
	vl := "none"
	if k.NVLAN > 0 {
		vl = fmt.Sprint(k.VLANs[:k.NVLAN])
	}
	fmt.Fprintf(&b, "  ether_demux: ethertype 0x%04x, vlans %s", c.EtherType, vl)
	if k.Src.IsValid() {
		fmt.Fprintf(&b, ", %s > %s, proto %d, ports %d > %d, fragment %v", k.Src, k.Dst, k.Proto, k.SrcPort, k.DstPort, k.Fragment)
	}
	fmt.Fprintf(&b, ", reason %s\n", c.Reason)
	if k.NEncap > 0 {
		fmt.Fprintf(&b, "  layers walked: %s; the tuple is %d tunnel(s) deep\n", k.Encapsulation(), k.Depth)
	}
	if t := c.Tuple(); len(t) > 0 {
		fmt.Fprintf(&b, "  toeplitz input (%d bytes): %x\n  key: %s\n", len(t), t, dc.keyFingerprint)
	} else if c.HashType.IsHash() {
		fmt.Fprintf(&b, "  hash supplied by the source\n")
	}
	fmt.Fprintf(&b, "  flowid 0x%08x, hash type %s\n", c.FlowID, c.HashType)
	// FreeBSD's DIRECT dispatch runs the handler on the current CPU
	// without calling netisr_select_cpuid; the library still selects a
	// worker, whose state the handler gets and whose counters it updates.
	sel := "netisr_select_cpuid"
	if dc.dispatch == DispatchDirect {
		sel += " (FreeBSD's DIRECT selects no CPU; here a worker is selected for its per-worker state and counters)"
	}
	switch {
	case dc.fallback:
		fmt.Fprintf(&b, "  %s: no hash, SOURCE policy (source %d + ifindex %d) %% %d workers = worker %d\n",
			sel, dc.inputID, dc.Frame.IfIndex, dc.workers, dc.Worker)
	case dc.policy == PolicyRSS:
		fmt.Fprintf(&b, "  %s: policy rss (%s, rss_hash2cpuid): bucket = 0x%08x & 0x%x = %d, table[%d] = worker %d\n",
			sel, m2cpuid(k), c.FlowID, dc.mask, dc.Bucket, dc.Bucket, dc.tableWorker)
	case dc.policy == PolicyFlow && dc.workers > 0:
		fmt.Fprintf(&b, "  %s: policy flow (netisr_default_flow2cpu): 0x%08x %% %d workers = worker %d\n",
			sel, c.FlowID, dc.workers, c.FlowID%uint32(dc.workers))
	default:
		fmt.Fprintf(&b, "  %s: policy %s\n", sel, dc.policy)
	}
	if dc.rfs {
		if dc.desired >= 0 {
			fmt.Fprintf(&b, "  rfs: desired worker %d (rps_sock_flow_table)\n", dc.desired)
		} else {
			fmt.Fprintf(&b, "  rfs: no desired worker recorded\n")
		}
	}
	if dc.moving {
		if dc.Moved {
			fmt.Fprintf(&b, "  move %d -> %d allowed: worker %d head %d >= last_qtail %d\n", dc.moveFrom, dc.moveTo, dc.moveFrom, dc.head, dc.lastTail)
		} else {
			fmt.Fprintf(&b, "  move %d -> %d held: worker %d head %d < last_qtail %d, frames of this flow still queued there\n", dc.moveFrom, dc.moveTo, dc.moveFrom, dc.head, dc.lastTail)
		}
	}
	cpu := "unpinned"
	if dc.cpu >= 0 {
		cpu = fmt.Sprintf("CPU %d", dc.cpu)
	}
	switch {
	case dc.Dropped:
		fmt.Fprintf(&b, "  netisr_queue_src: worker %d (%s), dropped by the flow limit\n", dc.Worker, cpu)
	case dc.Inline:
		fmt.Fprintf(&b, "  netisr_dispatch_src: handled inline, accounted to worker %d (%s)\n", dc.Worker, cpu)
	default:
		fmt.Fprintf(&b, "  netisr_queue_src: queued to worker %d (%s)\n", dc.Worker, cpu)
	}
	n, err := io.WriteString(out, b.String())
	return int64(n), err
}

// m2cpuid names the function FreeBSD's RSS CPU policy calls for a frame of
// this key: the IP handlers' rss_soft_m2cpuid_v4 or _v6 (which hash in
// software when the NIC's hash does not fit the configuration), or, for a
// frame that is not IP, ether_nh's rss_m2cpuid (which takes the hash as
// given).
func m2cpuid(k *FlowKey) string {
	switch {
	case k.Src.Is4():
		return "rss_soft_m2cpuid_v4"
	case k.Src.Is6():
		return "rss_soft_m2cpuid_v6"
	}
	return "rss_m2cpuid"
}

// The trace is a recorder per step: each step that has something to say
// writes it into the producer's Decision (p.tr, nil while Config.Trace is
// unset, so the steps pay one nil check), and handOff, the last step,
// hands it to Config.Trace.

// traceSelect starts the record of a frame at step 3.
func (p *producer) traceSelect(f *Frame, c *Classification, bucket uint32) {
	d := p.d
	*p.tr = Decision{Frame: f, Class: c, inputID: p.source, keyFingerprint: d.keyName, policy: d.cfg.Policy,
		dispatch: d.cfg.Dispatch, workers: len(d.workers), Bucket: bucket, mask: d.table.mask, tableWorker: int(d.table.ents[bucket].Load()), desired: -1,
		fallback: !c.HashType.IsHash()}
}

// traceMove records a move under the no-reorder rule.
func (p *producer) traceMove(from, to int, head, lastTail uint64, moved bool) {
	p.tr.moving, p.tr.moveFrom, p.tr.moveTo, p.tr.head, p.tr.lastTail = true, from, to, head, lastTail
	p.tr.Moved = moved
}

// traceHandOff records step 4 and hands the decision over.
func (p *producer) traceHandOff(w int, inline, dropped, rfs bool) {
	p.tr.Worker, p.tr.cpu, p.tr.Inline, p.tr.Dropped, p.tr.rfs = w, p.d.workers[w].cpu, inline, dropped, rfs
	p.d.guard(cbTrace, w, func() { p.d.cfg.Trace(p.tr) })
}
