//go:build !linux

package filter

import (
	"fmt"

	"github.com/rpsgo/rps/steer/filter/internal/bpfc"
)

// checkLinkType leaves live programs to tcpdump where the kernel is not
// Linux's: the built-in compiler writes Linux's live form.
func checkLinkType(ifname string) error {
	return fmt.Errorf("filter: a live program for %s on this system: %w", ifname, bpfc.ErrUnsupported)
}
