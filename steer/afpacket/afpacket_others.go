//go:build !linux

package afpacket

import (
	"context"
	"fmt"
	"syscall"

	"github.com/rpsgo/rps/steer"
)

// SockFilter is one classic BPF instruction (struct sock_filter).
type SockFilter struct {
	Code uint16
	Jt   uint8
	Jf   uint8
	K    uint32
}

// Source is a TPACKET_V3 receive ring; it exists only on Linux.
type Source struct{}

// Open returns an error wrapping ErrNotSupported: AF_PACKET is Linux-only.
func Open(ifname string, cfg Config) (*Source, error) {
	if _, err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("afpacket: open %q: %w", ifname, ErrNotSupported)
}

// Live reports true, as on Linux.
func (s *Source) Live() bool { return true }

// Backlog reports 0, 0.
func (s *Source) Backlog() (used, size int) { return 0, 0 }

// ReadBatch returns ErrNotSupported.
func (s *Source) ReadBatch(ctx context.Context, b *steer.Batch) error { return ErrNotSupported }

// Close returns nil.
func (s *Source) Close() error { return nil }

// Stats returns ErrNotSupported.
func (s *Source) Stats() (Stats, error) { return Stats{}, ErrNotSupported }

// SourceStats returns ErrNotSupported.
func (s *Source) SourceStats() (steer.SourceStats, error) {
	return steer.SourceStats{}, ErrNotSupported
}

// Interface returns 0.
func (s *Source) Interface() int { return 0 }

// Config returns the zero Config.
func (s *Source) Config() Config { return Config{} }

// SyscallConn returns ErrNotSupported.
func (s *Source) SyscallConn() (syscall.RawConn, error) { return nil, ErrNotSupported }

// Group is a fanout group; it exists only on Linux.
type Group struct{}

// OpenGroup returns an error wrapping ErrNotSupported.
func OpenGroup(ifname string, n int, cfg Config, mode FanoutMode, flags FanoutFlag) (*Group, error) {
	if err := validateFanout(n, mode, flags); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("afpacket: fanout group on %q: %w", ifname, ErrNotSupported)
}

// SetEBPF returns ErrNotSupported.
func (g *Group) SetEBPF(progFD int) error { return ErrNotSupported }

// ID returns 0.
func (g *Group) ID() uint16 { return 0 }

// Mode returns FanoutHash.
func (g *Group) Mode() FanoutMode { return FanoutHash }

// Flags returns 0.
func (g *Group) Flags() FanoutFlag { return 0 }

// Len returns 0.
func (g *Group) Len() int { return 0 }

// Source returns nil.
func (g *Group) Source(i int) *Source { return nil }

// Sources returns nil.
func (g *Group) Sources() []*Source { return nil }

// Stats returns ErrNotSupported.
func (g *Group) Stats() (Stats, error) { return Stats{}, ErrNotSupported }

// Close returns nil.
func (g *Group) Close() error { return nil }

var _ steer.Source = (*Source)(nil)
