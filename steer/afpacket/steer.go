package afpacket

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rpsgo/rps/internal/bpfsteer"
	"github.com/rpsgo/rps/steer"
)

// DefaultHoldTimeout bounds how long Steering.SetTable holds a moved
// bucket's frames back while the bucket's old worker drains its ring.
const DefaultHoldTimeout = time.Second

// SteeringOptions tune a [Steering]. The zero value is usable.
type SteeringOptions struct {
	// Fallback is the socket (worker) that gets, in FanoutEBPF mode, the
	// frames the program cannot hash (non-IP, malformed headers): user
	// space would place them with the SOURCE policy, which the kernel cannot
	// know. Default 0.
	Fallback int
	// HoldTimeout bounds how long SetTable holds the frames of a moved
	// bucket back in its new worker while the old worker drains what its
	// ring held at the switch. Past it the new worker, reading under Run,
	// releases the frames anyway, counted in SteeringStats.HoldTimeouts
	// (their order is then no longer guaranteed). A hold still on twice
	// HoldTimeout after the switch (no worker reading: Run not running)
	// SetTable lifts itself, also counted, so a SetTable returns at most
	// about twice HoldTimeout after its switch even without Run; Close ends
	// its wait at once. Default DefaultHoldTimeout.
	HoldTimeout time.Duration
	// MaxHeld bounds the bytes of frames held back per worker during a
	// table change; past it the hold is lifted early and counted in
	// SteeringStats.HoldOverflows. Default 16 MiB.
	MaxHeld int
}

// programOptions is the steering program's configuration for a
// dispatcher's cfg (normalized) and table (bpfsteer.DispatcherOptions, the
// rules afxdp's XDP program shares), or an error wrapping ErrConfig that
// says what to change when the program cannot steer as the classifier
// does.
func programOptions(cfg steer.Config, table []int, fallback int) (bpfsteer.Options, error) {
	o, err := bpfsteer.DispatcherOptions(cfg, table, bpfsteer.Options{Fallback: uint32(fallback)})
	if err != nil {
		return o, programError(err)
	}
	return o, nil
}

func toU32(t []int) []uint32 { return bpfsteer.WorkerTable(t) }

// programError wraps ErrConfig around the program's refusals of its
// options; other errors (the kernel's) it wraps as they are.
func programError(err error) error {
	if bpfsteer.IsOptionsError(err) {
		return fmt.Errorf("%w: the eBPF program cannot steer as the dispatcher's classifier does (change the configuration as said, or use another fanout mode): %w", ErrConfig, err)
	}
	return fmt.Errorf("afpacket: building the steering program: %w", err)
}

// SteeringStats are the glue's own counters.
type SteeringStats struct {
	Mode         FanoutMode
	TableChanges uint64 // SetTable calls that changed the kernel's table
	BucketsMoved uint64 // buckets whose worker changed, over all SetTable calls
	HeldFrames   uint64 // frames held back in their new worker during a change
	// HoldTimeouts and HoldOverflows count holds lifted before the old
	// worker had drained its ring: the only ways a table change can reorder
	// a flow. Both stay zero in a healthy run.
	HoldTimeouts  uint64
	HoldOverflows uint64
}

// FlowMoves counts how often a flow changes worker: a frame handled by
// another worker than the flow's previous frame. In the fanout modes that
// do not keep a flow on one socket (LB, RND, ROLLOVER, and CPU or QM when
// the receiving CPU or queue changes) every move may reorder the flow,
// because the two workers run at once; in HASH and EBPF mode the count
// stays zero while the table is stable. Wrap the dispatcher's handler with
// Handler to count:
//
//	fm := afpacket.NewFlowMoves(workers, 0)
//	d, err := steer.New(cfg, fm.Handler(h))
//
// Flows are told apart by flowid (FlowID & (slots-1) picks a slot, the
// rest of the flowid tags it), so two flows sharing a slot overwrite each
// other's record and a move between them is missed: the count is a lower
// bound. Frames without a hash are not counted.
type FlowMoves struct {
	slots []atomic.Uint64 // tag<<32 | worker+1
	mask  uint32
	moves []paddedCounter
	seen  []paddedCounter
}

type paddedCounter struct {
	n atomic.Uint64
	_ [56]byte
}

// NewFlowMoves returns a counter for workers workers with slots flow slots
// (a power of two; zero or less means 65536).
func NewFlowMoves(workers, slots int) *FlowMoves {
	if slots <= 0 || slots&(slots-1) != 0 {
		slots = 1 << 16
	}
	workers = max(workers, 1)
	return &FlowMoves{
		slots: make([]atomic.Uint64, slots),
		mask:  uint32(slots - 1),
		moves: make([]paddedCounter, workers),
		seen:  make([]paddedCounter, workers),
	}
}

// Handler returns h wrapped so that every hashed frame is counted.
func (m *FlowMoves) Handler(h steer.Handler) steer.Handler {
	return func(p *steer.Packet) {
		m.Observe(p.FlowID, p.HashType.IsHash(), p.Worker)
		h(p)
	}
}

// Observe records that worker handled a frame of flowid (hashed says
// whether flowid is a hash at all).
func (m *FlowMoves) Observe(flowid uint32, hashed bool, worker int) {
	if !hashed || worker < 0 {
		return
	}
	c := worker % len(m.moves)
	m.seen[c].n.Add(1)
	v := uint64(flowid)<<32 | uint64(worker+1)
	old := m.slots[flowid&m.mask].Swap(v)
	if old != 0 && old>>32 == uint64(flowid) && old != v {
		m.moves[c].n.Add(1)
	}
}

// Moves returns the number of flow moves counted so far.
func (m *FlowMoves) Moves() uint64 {
	var n uint64
	for i := range m.moves {
		n += m.moves[i].n.Load()
	}
	return n
}

// Frames returns the number of hashed frames observed.
func (m *FlowMoves) Frames() uint64 {
	var n uint64
	for i := range m.seen {
		n += m.seen[i].n.Load()
	}
	return n
}

// KeepsFlows reports whether the kernel keeps every frame of a flow on one
// socket in this mode by construction: true for FanoutHash and FanoutEBPF
// (the latter while the table does not change, and across changes made
// with Steering.SetTable), false for the others.
func (m FanoutMode) KeepsFlows() bool { return m == FanoutHash || m == FanoutEBPF }

// ParseFanoutMode parses a mode name as String prints it ("hash", "lb",
// "cpu", "rollover", "rnd", "qm", "ebpf").
func ParseFanoutMode(s string) (FanoutMode, error) {
	for m, n := range fanoutModeNames {
		if n == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown fanout mode %q (want hash, lb, cpu, rollover, rnd, qm or ebpf)", ErrConfig, s)
}
