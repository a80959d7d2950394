//go:build !linux

package afpacket

import (
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/kgroup"
)

// NewSteering returns an error wrapping ErrNotSupported.
func NewSteering(d *steer.Dispatcher, g *Group, o kgroup.Options) (*kgroup.Steering, error) {
	return nil, ErrNotSupported
}
