//go:build !linux

package bpfsteer

// Program is the loaded steering program; on this system it cannot be
// loaded.
type Program struct{}

// New is not supported on this system.
func New(opts Options) (*Program, error) { return nil, ErrNotSupported }

// FD returns -1: there is no program on this system.
func (p *Program) FD() int { return -1 }

// SetTable is not supported on this system.
func (p *Program) SetTable(table []uint32) error { return ErrNotSupported }

// Table is not supported on this system.
func (p *Program) Table() ([]uint32, error) { return nil, ErrNotSupported }

// Sync is not supported on this system.
func (p *Program) Sync() error { return ErrNotSupported }

// GracePeriod is not supported on this system.
func GracePeriod() error { return ErrNotSupported }

// Close does nothing on this system.
func (p *Program) Close() error { return nil }
