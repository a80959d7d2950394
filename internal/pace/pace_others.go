//go:build !linux

package pace

import "time"

// Send returns ErrNotSupported: AF_PACKET is Linux's.
func Send(s Spec) (sent int, elapsed time.Duration, err error) {
	if err := s.Check(); err != nil {
		return 0, 0, err
	}
	return 0, 0, ErrNotSupported
}
