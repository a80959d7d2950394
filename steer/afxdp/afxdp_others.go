//go:build !linux

package afxdp

import (
	"context"
	"fmt"
	"syscall"

	"github.com/rpsgo/rps/steer"
)

// Source is an AF_XDP socket; it exists only on Linux.
type Source struct{}

// Open returns an error wrapping ErrNotSupported: AF_XDP is Linux-only.
func Open(ifname string, cfg Config) (*Source, error) {
	if _, err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("afxdp: open %q: %w", ifname, ErrNotSupported)
}

// Info returns the zero Info.
func (s *Source) Info() Info { return Info{} }

// Config returns the zero Config.
func (s *Source) Config() Config { return Config{} }

// Live reports true, as on Linux.
func (s *Source) Live() bool { return true }

// Backlog reports 0, 0.
func (s *Source) Backlog() (used, size int) { return 0, 0 }

// ReadBatch returns ErrNotSupported.
func (s *Source) ReadBatch(ctx context.Context, b *steer.Batch) error { return ErrNotSupported }

// StopIntake returns ErrNotSupported.
func (s *Source) StopIntake() error { return ErrNotSupported }

// Close returns nil.
func (s *Source) Close() error { return nil }

// Stats returns ErrNotSupported.
func (s *Source) Stats() (Stats, error) { return Stats{}, ErrNotSupported }

// SourceStats returns ErrNotSupported.
func (s *Source) SourceStats() (steer.SourceStats, error) {
	return steer.SourceStats{}, ErrNotSupported
}

// SyscallConn returns ErrNotSupported.
func (s *Source) SyscallConn() (syscall.RawConn, error) { return nil, ErrNotSupported }

// Group is sockets sharing one UMEM; it exists only on Linux.
type Group struct{}

// OpenGroup returns an error wrapping ErrNotSupported.
func OpenGroup(ifname string, n int, cfg Config) (*Group, error) {
	if _, err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	if err := validateGroup(n); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("afxdp: group on %q: %w", ifname, ErrNotSupported)
}

// Len returns 0.
func (g *Group) Len() int { return 0 }

// Source returns nil.
func (g *Group) Source(i int) *Source { return nil }

// Sources returns nil.
func (g *Group) Sources() []*Source { return nil }

// Info returns the zero Info.
func (g *Group) Info() Info { return Info{} }

// Stats returns ErrNotSupported.
func (g *Group) Stats() (Stats, error) { return Stats{}, ErrNotSupported }

// Close returns nil.
func (g *Group) Close() error { return nil }

var (
	_ steer.LiveSource    = (*Source)(nil)
	_ steer.SourceStatser = (*Source)(nil)
)
