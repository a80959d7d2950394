//go:build !linux

package netns

import (
	"context"
	"fmt"
	"os/exec"
	"time"
)

const supported = false

// DefaultTimeout bounds a command run with Exec when its context has no
// deadline.
const DefaultTimeout = 30 * time.Second

// Create returns ErrNotSupported: network namespaces are Linux-only.
func Create(opts Options) (*Pair, error) { return nil, ErrNotSupported }

func (p *Pair) close() error { return nil }

// Command returns a command whose Start fails with ErrNotSupported.
func (ns *NS) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Err = fmt.Errorf("netns: %s: %w", name, ErrNotSupported)
	return cmd
}

// Exec returns ErrNotSupported.
func (ns *NS) Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	return nil, fmt.Errorf("netns: exec %s: %w", name, ErrNotSupported)
}

// LinkCounter returns ErrNotSupported.
func (ns *NS) LinkCounter(ctx context.Context, link, counter string) (uint64, error) {
	return 0, ErrNotSupported
}

// LinkState returns ErrNotSupported.
func (ns *NS) LinkState(ctx context.Context, link string) (LinkState, error) {
	return LinkState{}, ErrNotSupported
}

// Do returns ErrNotSupported.
func (ns *NS) Do(fn func() error) error { return ErrNotSupported }
