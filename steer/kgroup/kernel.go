package kgroup

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/rpsgo/rps/internal/holdback"
	"github.com/rpsgo/rps/steer"
)

// DefaultHoldTimeout is Options.HoldTimeout's default.
const DefaultHoldTimeout = holdback.DefaultHoldTimeout

var (
	// ErrClosed is wrapped by the errors of a Steering used after Close.
	// It wraps net.ErrClosed.
	ErrClosed = fmt.Errorf("kgroup: steering closed: %w", net.ErrClosed)
	// ErrNoGracePeriod is wrapped by the error of a SetTable that changed
	// the kernel's table but could not wait for the grace period after it
	// (Program.Sync failed): the moved buckets' holds then run out of
	// time instead, counted as timeouts.
	ErrNoGracePeriod = holdback.ErrNoGracePeriod
)

// Options tune a [Steering]. The zero value is usable.
type Options struct {
	// Fallback is the socket (worker) that gets the frames the program
	// cannot hash (non-IP such as ARP, malformed headers: user space gives
	// them HashType NONE). User space would place them with the SOURCE
	// policy, by where they came from, which one socket stands for. It
	// must name a socket of the group. Default 0.
	Fallback int
	// PassUnhashed passes the frames the program cannot hash to the kernel
	// stack instead of socket Fallback, for a family whose program takes
	// frames away from the stack (AF_XDP): the host then keeps answering
	// ARP and neighbour discovery. A family whose sockets are taps beside
	// the stack (AF_PACKET) refuses it with steer.ErrConfig.
	PassUnhashed bool
	// HoldTimeout bounds how long SetTable holds the frames of a moved
	// bucket back in its new worker while the old worker drains what its
	// ring held at the switch. Past it the new worker, reading under Run,
	// releases the frames anyway, counted in Stats.HoldTimeouts (their
	// order is then no longer guaranteed). A hold still on twice
	// HoldTimeout after the switch (no worker reading: Run not running)
	// SetTable lifts itself, also counted, so a SetTable returns at most
	// about twice HoldTimeout after its switch even without Run; Close
	// ends its wait at once. Default DefaultHoldTimeout.
	HoldTimeout time.Duration
	// MaxHeld bounds the bytes of frames held back per worker during a
	// table change; past it the hold is lifted early and counted in
	// Stats.HoldOverflows. Default 16 MiB.
	MaxHeld int
}

// Stats are a Steering's counters: its table changes and the kernel
// program's own counters.
type Stats struct {
	TableChanges uint64 // SetTable calls that changed the kernel's table
	// BucketsMoved counts the buckets whose worker the kernel's table
	// changed, over all SetTable calls. (steer.Stats.BucketMoves counts
	// the moves the dispatcher's own selection makes, which a kernel-steered
	// DIRECT dispatcher does not.)
	BucketsMoved uint64
	HeldFrames   uint64 // frames held back in their new worker during a change
	// HoldTimeouts and HoldOverflows count holds lifted before the old
	// worker had drained its ring: the only ways a table change can reorder
	// a flow. Both stay zero in a healthy run.
	HoldTimeouts  uint64
	HoldOverflows uint64
	// Kernel are the program's own counters, under the names the family
	// gives them (Kernel.Counters); empty when it keeps none. After Close
	// they are those Close read last.
	Kernel []steer.KernelCounter
}

// Counter returns the value of the program's counter name, zero when
// there is none.
func (s Stats) Counter(name string) uint64 {
	for _, k := range s.Kernel {
		if k.Name == name {
			return k.Value
		}
	}
	return 0
}

// Kernel is what a socket family implements for a Steering: a group of
// sockets, one per worker, and the kernel program that picks each frame's
// socket. A Steering calls its methods, and its Program's, one at a time,
// never after Close.
type Kernel interface {
	// Sockets returns the group's sockets; worker i reads socket i.
	Sockets() []Socket
	// Attach builds the family's program for the dispatcher's
	// configuration cfg (normalized) and indirection table, with o's
	// Fallback and PassUnhashed, and attaches it: frames flow from then
	// on. It returns the program that steers by the table, or nil when
	// the kernel picks the socket by a rule of its own, which SetTable
	// cannot change. A configuration the program cannot honour is an
	// error wrapping steer.ErrConfig; on any error nothing stays attached.
	Attach(cfg steer.Config, table []int, o Options) (Program, error)
	// StopIntake stops the kernel passing frames to the sockets and
	// returns once none can reach their rings; the sockets stay open. It
	// is idempotent.
	StopIntake() error
	// Counters returns the program's own counters, named by the family;
	// nil when it keeps none.
	Counters() ([]steer.KernelCounter, error)
	// Close detaches the program and frees what Attach made; it does not
	// close the sockets.
	Close() error
}

// Program is a loaded kernel program that steers by an indirection table
// (internal/bpfsteer's socket filter and XDP programs are).
type Program interface {
	// Table returns the table the program steers by: one socket per
	// bucket.
	Table() ([]uint32, error)
	// SetTable replaces the table in one map update: a frame steered after
	// it sees the new table.
	SetTable(table []uint32) error
	// Sync returns after an RCU grace period: every run of the program
	// that began before the call has ended, and with it the delivery of
	// its frame into its socket's ring, counted where Socket.Position
	// counts.
	Sync() error
}

// Socket is one socket of a group as its worker reads it.
type Socket interface {
	steer.LiveSource
	steer.SourceStatser
	// Read is ReadBatch that waits for frames no longer than limit when
	// limit is positive, and that returns the socket's read position
	// after the read: how many frames it has taken from its ring (modulo
	// 2^32), those it dropped or filtered out itself included, in
	// Position's units. It is called by the socket's one reader only. On
	// error b is empty and the position is unchanged.
	Read(ctx context.Context, b *steer.Batch, limit time.Duration) (pos uint32, err error)
	// Position returns how many frames the kernel has placed in the
	// socket's ring (modulo 2^32), counted under the same lock (or in the
	// same order) as it places them, so that a reader whose position
	// reaches it has taken every one of them; ok is false once the socket
	// is closed: it gets no more frames. It may be called from any
	// goroutine.
	Position() (pos uint32, ok bool)
}
