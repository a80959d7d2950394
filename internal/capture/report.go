package capture

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/steer"
)

// SchemaVersion names the layout of Report, its "schema" field. It changes
// only when a field is renamed, changes meaning or goes away; fields may be
// added without a change.
const SchemaVersion = "rps-report/3"

// Report is the document -json prints on standard output: a run's final
// steer.Stats with stable, snake_case field names, and the command's own
// counters. Every field is always present (zero, false, empty list or
// empty object when it does not apply) unless marked omitted when empty.
// Enumerations (policy, dispatch, overflow, reason names) are their text
// names, as the steer types' MarshalText gives them, and read back with
// UnmarshalText.
type Report struct {
	// Schema is SchemaVersion.
	Schema string `json:"schema"`
	// Command and Version name the program ("pcapsteer", "livesteer") and
	// its build, as -version prints it.
	Command string `json:"command"`
	Version string `json:"version"`
	// Input is what was read: a capture file's name, "standard input",
	// the embedded sample, or the live interface.
	Input string `json:"input"`
	// Filter is the capture filter's text, empty without one.
	Filter string `json:"filter"`
	// Interrupted is true when the run was stopped (Ctrl-C, SIGTERM) before
	// its input ended; the counts then cover what was read until then.
	Interrupted bool `json:"interrupted"`
	// ElapsedSeconds is the time from the first read to the end of the
	// drain.
	ElapsedSeconds float64 `json:"elapsed_seconds"`

	Config  Config   `json:"config"`
	Totals  Totals   `json:"totals"`
	Workers []Worker `json:"workers"`
	// Reasons counts the steered frames by classification reason, every
	// reason present, by name ("ok", "non-ip", "short-ipv4", ...).
	Reasons map[steer.Reason]uint64 `json:"reasons"`
	// Encapsulations counts the handled frames by the encapsulations the
	// classifier walked.
	Encapsulations Encapsulations `json:"encapsulations"`
	// BucketFrames counts hashed frames per indirection-table bucket, and
	// Table is the table at the end: entry b is bucket b's worker.
	BucketFrames []uint64 `json:"bucket_frames"`
	Table        []int    `json:"table"`
	// Sources are the sources' own counters, one per socket for a fanout
	// group.
	Sources []Source `json:"sources"`
	// TopFlows are the flows with most packets, when RFS kept a table.
	TopFlows []Flow `json:"top_flows"`
	// CallbackPanics counts recovered panics of callbacks other than the
	// handler, by callback (steer.Stats.CallbackPanics).
	CallbackPanics map[string]uint64 `json:"callback_panics,omitempty"`
	// Live holds what only a live capture has; omitted for files.
	Live *Live `json:"live,omitempty"`
	// FlowRecords counts the flow records of a command that keeps them
	// (pcapsteer); omitted otherwise.
	FlowRecords *FlowRecords `json:"flow_records,omitempty"`
}

// FlowRecords counts a command's flow records: each a flow's frames from
// its first until the flow ended, by idle or active timeout in capture
// time, early for lack of room in a full table, or with the capture.
// Records = Idle + Active + Early + those open when the capture ended.
type FlowRecords struct {
	Records uint64 `json:"records"`
	Idle    uint64 `json:"idle"`
	Active  uint64 `json:"active"`
	Early   uint64 `json:"early"`
	// Written is the records written as CSV rows (-flows).
	Written uint64 `json:"written"`
	// TableCapacity is the flows the workers' tables hold at once, in
	// all; IdleSeconds and ActiveSeconds the timeouts (0: no active
	// timeout).
	TableCapacity int     `json:"table_capacity"`
	IdleSeconds   float64 `json:"idle_seconds"`
	ActiveSeconds float64 `json:"active_seconds"`
}

// Config is the dispatcher's configuration, defaults filled in.
type Config struct {
	Workers  int                `json:"workers"`
	CPUs     []int              `json:"cpus"` // empty: unpinned
	Policy   steer.Policy       `json:"policy"`
	Dispatch steer.DispatchMode `json:"dispatch"`
	Buckets  int                `json:"buckets"`
	// Key is the Toeplitz key's fingerprint ("microsoft", "random
	// 1a2b3c4d"). KeyRandom says whether the key was drawn at random for
	// the run (-key random, the default): the flowids, buckets and workers
	// of another run then differ. KeyHex is the key itself in hex, as -key
	// takes it back to repeat the run, from a command that replays a file
	// (pcapsteer); omitted by a live capture, whose random key stays its
	// own.
	Key       string `json:"key"`
	KeyRandom bool   `json:"key_random"`
	KeyHex    string `json:"key_hex,omitempty"`
	Symmetric bool   `json:"symmetric"`
	// Hash is the hash function, "toeplitz" or "siphash".
	Hash hash.Algorithm `json:"hash"`
	// HashTypes is the set of RSS hash types in use, their names joined
	// by commas ("ipv4,tcp_ipv4,ipv6,tcp_ipv6"); UDP4Tuple says whether
	// both UDP types are in it.
	HashTypes hash.Types `json:"hash_types"`
	UDP4Tuple bool       `json:"udp_4tuple"`
	// Tunnels is "outer" (tunnelled frames hashed by their outer header)
	// or "inner" (tunnels opened, the innermost flow hashed), and
	// VXLANPorts the UDP ports taken for VXLAN.
	Tunnels    steer.TunnelMode `json:"tunnels"`
	VXLANPorts []uint16         `json:"vxlan_ports"`
	// Fragments is "tuple" (every fragment hashed by its addresses) or
	// "follow" (a datagram's fragments sent after its first).
	Fragments steer.FragmentMode `json:"fragments"`
	// QueueLimitDrop and QueueLimitWait are each worker's queue limit in
	// frames as in force, the text report's "Queue limit (drop/wait)":
	// for an input that drops on a full queue (a live source under
	// overflow auto, any under drop) and for one that waits (a file under
	// auto, any under wait). A limit set (-qlimit) is both; unset, they
	// are steer.DefaultQLimit and steer.DefaultWaitQLimit.
	QueueLimitDrop int            `json:"queue_limit_drop"`
	QueueLimitWait int            `json:"queue_limit_wait"`
	Overflow       steer.Overflow `json:"overflow"`
	FlowLimit      bool           `json:"flow_limit"`
	RFS            bool           `json:"rfs"`
	// VerifyChecksums says whether the workers verified checksums
	// (steer.Config.VerifyChecksums).
	VerifyChecksums bool `json:"verify_checksums"`
	// RebalanceSeconds is the rebalancer's interval, zero when off.
	RebalanceSeconds float64 `json:"rebalance_seconds"`
}

// Totals are the counts that add up. For a file: read == filtered +
// after_count + steered; for a live capture: kernel_received == steered +
// kernel_dropped + filtered + after_count (a kernel filter's rejects are
// counted nowhere; filtered is an AF_XDP capture's user-space filter). In
// both, steered == handled + dropped + panicked, captured == handled +
// panicked, and dropped is the sum of drops.
type Totals struct {
	// Read is the frames the source delivered: the records read from a
	// file, the frames read from the rings.
	Read uint64 `json:"read"`
	// Filtered is the frames a user-space capture filter rejected.
	Filtered uint64 `json:"filtered"`
	// AfterCount is the frames read past -c N and not steered.
	AfterCount uint64 `json:"after_count"`
	// Steered is every frame handed to the dispatcher (steer.Stats.Frames).
	Steered uint64 `json:"steered"`
	// Captured is the frames the handlers got, as tcpdump's "packets
	// captured" counts the packets handed to the program: handled and
	// panicked.
	Captured uint64 `json:"captured"`
	Handled  uint64 `json:"handled"`
	// Dropped is the frames lost in user space, after the source and
	// before a handler; Drops says why.
	Dropped  uint64 `json:"dropped"`
	Drops    Drops  `json:"drops"`
	Panicked uint64 `json:"panicked"`
	// KernelReceived and KernelDropped sum the sockets' counters
	// (tp_packets, tp_drops); zero for files.
	KernelReceived uint64 `json:"kernel_received"`
	KernelDropped  uint64 `json:"kernel_dropped"`
	// BucketMoves and FlowMoves are steer.Stats's: indirection-table
	// buckets and RFS flows moved between workers under the no-reorder
	// rule (Live.WorkerChanges counts something else).
	BucketMoves uint64 `json:"bucket_moves"`
	FlowMoves   uint64 `json:"flow_moves"`
	// Written is the frames written with -w.
	Written uint64 `json:"written"`
	// Balanced says whether the sums above hold.
	Balanced bool `json:"balanced"`
}

// Worker is one workstream, netstat -Q's row and the other drops.
type Worker struct {
	ID               int    `json:"id"`
	CPU              int    `json:"cpu"` // -1: unpinned
	QueueLen         int    `json:"queue_len"`
	Watermark        int    `json:"watermark"`
	Dispatched       uint64 `json:"dispatched"`        // handled inline (DIRECT)
	HybridDispatched uint64 `json:"hybrid_dispatched"` // handled inline (HYBRID)
	Queued           uint64 `json:"queued"`
	Handled          uint64 `json:"handled"`
	QueueDrops       uint64 `json:"queue_drops"`
	StallDrops       uint64 `json:"stall_drops"`
	FlowLimitDrops   uint64 `json:"flow_limit_drops"`
	RedispatchDrops  uint64 `json:"redispatch_drops"`
	CloseDrops       uint64 `json:"close_drops"`
	Panics           uint64 `json:"panics"`
}

// Source is a source's own counters (steer.SourceStats).
type Source struct {
	Name           string `json:"name"`
	KernelReceived uint64 `json:"kernel_received"`
	KernelDropped  uint64 `json:"kernel_dropped"`
	Filtered       uint64 `json:"filtered"`
	// RingUsed and RingPeak are the kernel ring's occupancy now and at
	// most, as fractions of it (0 to 1); absent when the source cannot tell.
	RingUsed *float64 `json:"ring_used,omitempty"`
	RingPeak *float64 `json:"ring_peak,omitempty"`
	// Mode is how the source receives, in its own words (an AF_XDP
	// socket's "native, copy"); empty when it says nothing.
	Mode string `json:"mode"`
	// Kernel is the source's other kernel counters by the kernel's names
	// ("tp_freeze_q_cnt", "rx_ring_full", ...); empty when it has none.
	Kernel map[string]uint64 `json:"kernel"`
}

// Flow is one of the top flows.
type Flow struct {
	FlowID  uint32 `json:"flowid"`
	Worker  int    `json:"worker"`
	Desired int    `json:"desired"`
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

// Encapsulations counts the handled frames by the shims and tunnels the
// classifier walked (steer.FlowKey's outer VLAN tags and Encaps). The
// kinds are named as steer.EncapKind names them, and these names are
// stable: "vlan" (an outer tag or a tag of an inner Ethernet frame),
// "mpls", "pw" (a pseudowire control word), "pppoe", "vxlan", "geneve",
// "gre", "erspan1", "erspan2", "erspan3", "gtpu", "ipip".
type Encapsulations struct {
	// Plain is the frames with no encapsulation: no VLAN tag, shim or
	// tunnel, opened or not.
	Plain uint64 `json:"plain"`
	// Kinds counts, for every kind, the frames that carry it: a frame
	// counts once under each kind it carries, however often, so the
	// counts may add up to more than the frames. With tunnels "outer" no
	// tunnel is walked, so only the shims and VLAN tags are counted.
	Kinds map[steer.EncapKind]uint64 `json:"kinds"`
	// Stacks counts the frames by their whole stack of kinds, outermost
	// first, joined by "+" ("vlan+vxlan", "mpls", "gre+ipip"), and
	// "plain" for none: the stacks seen, which add up to the handled
	// frames. With tunnels "outer" a frame that carries a tunnel is
	// counted under the stack tunnels "inner" would walk, though its
	// tunnels were not opened (the text report marks such a stack "not
	// opened").
	Stacks map[string]uint64 `json:"stacks"`
	// Decapsulated is the frames hashed by a flow inside at least one
	// tunnel (tunnels "inner").
	Decapsulated uint64 `json:"decapsulated"`
	// NotDecapsulated is the frames, with tunnels "outer", that carry a
	// tunnel with a flow inside and were hashed by their outer header:
	// what tunnels "inner" would spread. NotDecapsulatedKinds counts them
	// by their outermost tunnel's kind, every tunnel kind present.
	NotDecapsulated      uint64                     `json:"not_decapsulated"`
	NotDecapsulatedKinds map[steer.EncapKind]uint64 `json:"not_decapsulated_kinds"`
}

// Live is what a live capture adds.
type Live struct {
	Interface string `json:"interface"`
	// Fanout is "none" (one socket) or the fanout mode's name.
	Fanout string `json:"fanout"`
	// KeepsFlows says whether the mode keeps a flow on one worker.
	KeepsFlows bool `json:"keeps_flows"`
	// WorkerChanges counts how often a flow's frame was handled by another
	// worker than its previous frame, over HashedFrames.
	WorkerChanges uint64 `json:"worker_changes"`
	HashedFrames  uint64 `json:"hashed_frames"`
	SnapLen       int    `json:"snaplen"`
	Promiscuous   bool   `json:"promiscuous"`
	// Socket is the socket family read: "af_packet" (a tap beside the
	// kernel stack) or "af_xdp" (the sockets take the frames).
	Socket string `json:"socket"`
	// XDP is how the AF_XDP sockets are fed; absent for AF_PACKET.
	XDP *LiveXDP `json:"xdp,omitempty"`
	// Steering are a kernel-steered group's counters (kgroup.Stats: its
	// table changes, held frames and the program's own counters, such as
	// host_passed), by name; absent when user space steers.
	Steering map[string]uint64 `json:"steering,omitempty"`
}

// LiveXDP is an AF_XDP capture's queue and modes.
type LiveXDP struct {
	// Queue is the NIC receive queue the sockets are bound to.
	Queue int `json:"queue"`
	// Attach is the XDP program's attach mode: "native" (the driver runs
	// it) or "generic" (the kernel runs it on an skb).
	Attach string `json:"attach"`
	// ZeroCopy says whether the driver writes frames straight into the
	// UMEM; false is copy mode.
	ZeroCopy bool `json:"zero_copy"`
}

// NewReport fills a report from a closed dispatcher's stats; the command
// fills in the rest (Input, Filter, Totals.Read, Encapsulations from its
// handlers' EncapCounts, ...).
func NewReport(command string, st *steer.Stats) *Report {
	c := &st.Config
	r := &Report{
		Schema:  SchemaVersion,
		Command: command,
		Version: Version(),
		Config: Config{
			Workers: c.Workers, CPUs: append([]int{}, c.CPUs...), Policy: c.Policy, Dispatch: c.Dispatch,
			Buckets: c.Buckets, Key: st.KeyFingerprint, Symmetric: c.Hash.Symmetric,
			Hash: c.Hash.Algorithm, HashTypes: c.Hash.Types, UDP4Tuple: c.Hash.UDP4Tuple,
			Tunnels: c.Hash.Tunnels, VXLANPorts: append([]uint16{}, c.Hash.VXLANPorts...), Fragments: c.Hash.Fragments,
			QueueLimitDrop: queueLimit(c.Queue, steer.DefaultQLimit), QueueLimitWait: queueLimit(c.Queue, steer.DefaultWaitQLimit),
			Overflow: c.Queue.Overflow, FlowLimit: c.Queue.FlowLimit,
			RFS: c.RFS.Enabled, RebalanceSeconds: c.Rebalance.Interval.Seconds(), VerifyChecksums: c.VerifyChecksums,
		},
		Totals: Totals{
			Steered: st.Frames, Captured: st.Handled() + st.Panicked(), Handled: st.Handled(),
			Dropped: st.Dropped(), Drops: DropsOf(st), Panicked: st.Panicked(),
			BucketMoves: st.BucketMoves, FlowMoves: st.FlowMoves,
		},
		Workers:        []Worker{},
		Encapsulations: newEncapsulations(),
		Reasons:        map[steer.Reason]uint64{},
		BucketFrames:   append([]uint64{}, st.BucketFrames...),
		Table:          append([]int{}, st.Table...),
		Sources:        []Source{},
		TopFlows:       []Flow{},
	}
	for _, w := range st.Workstreams {
		r.Workers = append(r.Workers, Worker{
			ID: w.Worker, CPU: w.CPU, QueueLen: w.QueueLen, Watermark: w.QueuePeak,
			Dispatched: w.DirectDispatched, HybridDispatched: w.HybridDispatched, Queued: w.Queued, Handled: w.Handled,
			QueueDrops: w.QueueDrops, StallDrops: w.StallDrops, FlowLimitDrops: w.FlowLimitDrops, RedispatchDrops: w.RedispatchDrops,
			CloseDrops: w.CloseDrops, Panics: w.Panics,
		})
	}
	for reason := steer.Reason(0); reason.String() != "unknown"; reason++ { // every reason, 0 included
		r.Reasons[reason] = st.Reasons[reason]
	}
	for _, s := range st.Sources {
		src := Source{Name: s.Name, KernelReceived: s.Received, KernelDropped: s.Dropped, Filtered: s.Filtered,
			Mode: s.Mode, Kernel: map[string]uint64{}}
		if s.RingSize > 0 {
			used, peak := float64(s.RingUsed)/float64(s.RingSize), float64(s.RingPeak)/float64(s.RingSize)
			src.RingUsed, src.RingPeak = &used, &peak
		}
		for _, k := range s.Kernel {
			src.Kernel[k.Name] += k.Value
		}
		r.Sources = append(r.Sources, src)
		r.Totals.KernelReceived += s.Received
		r.Totals.KernelDropped += s.Dropped
		r.Totals.Filtered += s.Filtered
	}
	r.CallbackPanics = st.CallbackPanics
	for _, f := range st.TopFlows {
		r.TopFlows = append(r.TopFlows, Flow{FlowID: f.FlowID, Worker: f.Worker, Desired: f.Desired, Packets: f.Packets, Bytes: f.Bytes})
	}
	return r
}

// queueLimit is the queue limit in force under q for an input whose
// default is def.
func queueLimit(q steer.QueueConfig, def int) int {
	if q.Limit > 0 {
		return q.Limit
	}
	return def
}

// Write writes the report as one JSON document and a newline.
func (r *Report) Write(w io.Writer) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("capture: encoding the report: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("capture: writing the report: %w", err)
	}
	return nil
}
