//go:build !linux

package afxdp

import (
	"context"

	"github.com/rpsgo/rps/steer"
)

// Steering steers a Group in XDP by the dispatcher's hash; it exists only
// on Linux.
type Steering struct{}

// NewSteering returns an error wrapping ErrNotSupported.
func NewSteering(d *steer.Dispatcher, g *Group, opts SteeringOptions) (*Steering, error) {
	return nil, ErrNotSupported
}

// RunGroup returns an error wrapping ErrNotSupported.
func RunGroup(ctx context.Context, d *steer.Dispatcher, g *Group) error { return ErrNotSupported }

// Run returns ErrNotSupported.
func (st *Steering) Run(ctx context.Context) error { return ErrNotSupported }

// Sources returns nil.
func (st *Steering) Sources() []steer.Source { return nil }

// Group returns nil.
func (st *Steering) Group() *Group { return nil }

// KernelTable returns ErrNotSupported.
func (st *Steering) KernelTable() ([]int, error) { return nil, ErrNotSupported }

// Stats returns zero counters.
func (st *Steering) Stats() SteeringStats { return SteeringStats{} }

// SetTable returns ErrNotSupported.
func (st *Steering) SetTable(ctx context.Context, table []int) error { return ErrNotSupported }

// StopIntake returns ErrNotSupported.
func (st *Steering) StopIntake() error { return ErrNotSupported }

// Close returns nil.
func (st *Steering) Close() error { return nil }
