package afxdp

import (
	"time"

	"github.com/rpsgo/rps/internal/holdback"
)

// DefaultHoldTimeout bounds how long Steering.SetTable holds a moved
// bucket's frames back while the bucket's old worker drains its RX ring.
const DefaultHoldTimeout = holdback.DefaultHoldTimeout

// SteeringOptions tune a [Steering]. The zero value is usable: the group
// takes every frame of its queue, and the frames the program cannot hash
// go to socket 0.
type SteeringOptions struct {
	// Fallback is the socket (worker) that gets the frames the program
	// cannot hash (non-IP such as ARP, malformed headers: user space gives
	// them HashType NONE). User space would place them with the SOURCE
	// policy, by the queue they came from: all of a Steering's frames come
	// from one queue, so one socket stands for it. It must name a socket
	// of the group even with PassUnhashed. Default 0.
	Fallback int
	// PassUnhashed passes the frames the program cannot hash to the kernel
	// stack instead of sending them to socket Fallback, counted in
	// SteeringStats.UnhashedPassed: the host keeps answering ARP and
	// neighbour discovery on the interface. Without it the group takes
	// every frame of its queue, as Open's socket does without
	// Config.PassUnhashed, and the host sees none of them.
	PassUnhashed bool
	// HoldTimeout bounds how long SetTable holds the frames of a moved
	// bucket back in its new worker while the old worker drains what its
	// RX ring held at the switch. Past it the new worker, reading under
	// Run, releases the frames anyway, counted in SteeringStats.HoldTimeouts
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

// SteeringStats are a Steering's counters: the glue's (its table changes)
// and the XDP program's, summed over the CPUs. Every frame the program
// sees is counted once in Redirected, UnhashedPassed, NoSocket or
// OtherQueue (Frames).
type SteeringStats struct {
	TableChanges uint64 // SetTable calls that changed the program's table
	BucketsMoved uint64 // buckets whose worker changed, over all SetTable calls
	HeldFrames   uint64 // frames held back in their new worker during a change
	// HoldTimeouts and HoldOverflows count holds lifted before the old
	// worker had drained its ring: the only ways a table change can reorder
	// a flow. Both stay zero in a healthy run.
	HoldTimeouts  uint64
	HoldOverflows uint64

	// Redirected[i] counts the frames the program redirected to socket i:
	// the hashed frames its table sends there, and unless PassUnhashed the
	// unhashed ones for the fallback socket. A redirected frame is the
	// socket's (its Stats.Received once the RX ring is drained).
	Redirected []uint64
	// UnhashedPassed counts the frames the program could not hash that it
	// passed to the kernel stack (with SteeringOptions.PassUnhashed).
	UnhashedPassed uint64
	// UnhashedFallback counts the frames it could not hash that it sent to
	// the fallback socket (without PassUnhashed); each is counted in
	// Redirected too, or in NoSocket.
	UnhashedFallback uint64
	// NoSocket counts frames whose socket's XSKMAP slot was empty (the
	// socket was closed): they were passed to the kernel stack.
	NoSocket uint64
	// OtherQueue counts frames that arrived on another receive queue of
	// the interface than the group's (Config.Queue): the program passes
	// them to the kernel stack unexamined, as the sockets could not take
	// them.
	OtherQueue uint64
}

// Frames is the number of frames the program has seen: every frame the
// interface received, on any queue, while the program was attached.
func (s SteeringStats) Frames() uint64 {
	n := s.UnhashedPassed + s.NoSocket + s.OtherQueue
	for _, r := range s.Redirected {
		n += r
	}
	return n
}
