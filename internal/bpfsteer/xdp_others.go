//go:build !linux

package bpfsteer

import "github.com/cilium/ebpf"

// XDP is the loaded XDP steering program; on this system it cannot be
// loaded.
type XDP struct{}

// NewXDP is not supported on this system.
func NewXDP(opts Options, sockets int) (*XDP, error) { return nil, ErrNotSupported }

// Program returns nil: there is no program on this system.
func (x *XDP) Program() *ebpf.Program { return nil }

// Sockets returns 0 on this system.
func (x *XDP) Sockets() int { return 0 }

// SetSocket is not supported on this system.
func (x *XDP) SetSocket(i, fd int) error { return ErrNotSupported }

// ClearSocket is not supported on this system.
func (x *XDP) ClearSocket(i int) error { return ErrNotSupported }

// SetTable is not supported on this system.
func (x *XDP) SetTable(table []uint32) error { return ErrNotSupported }

// Table is not supported on this system.
func (x *XDP) Table() ([]uint32, error) { return nil, ErrNotSupported }

// Sync is not supported on this system.
func (x *XDP) Sync() error { return ErrNotSupported }

// Counters is not supported on this system.
func (x *XDP) Counters() (XDPCounters, error) { return XDPCounters{}, ErrNotSupported }

// Close does nothing on this system.
func (x *XDP) Close() error { return nil }
