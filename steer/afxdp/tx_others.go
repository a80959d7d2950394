//go:build !linux

package afxdp

import "fmt"

// Sender is an AF_XDP socket for sending; it exists only on Linux.
type Sender struct{}

// OpenSender returns an error wrapping ErrNotSupported: AF_XDP is
// Linux-only.
func OpenSender(ifname string, cfg SenderConfig) (*Sender, error) {
	if _, err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("afxdp: sender on %q: %w", ifname, ErrNotSupported)
}

// Info returns the zero Info.
func (s *Sender) Info() Info { return Info{} }

// Config returns the zero SenderConfig.
func (s *Sender) Config() SenderConfig { return SenderConfig{} }

// Send returns ErrNotSupported.
func (s *Sender) Send(frames [][]byte) (int, error) { return 0, ErrNotSupported }

// Flush returns ErrNotSupported.
func (s *Sender) Flush() error { return ErrNotSupported }

// Stats returns ErrNotSupported.
func (s *Sender) Stats() (SenderStats, error) { return SenderStats{}, ErrNotSupported }

// Close returns nil.
func (s *Sender) Close() error { return nil }

// NewSender returns ErrNotSupported.
func (src *Source) NewSender(cfg SenderConfig) (*Sender, error) { return nil, ErrNotSupported }
