package flowtable

import (
	"errors"
	"fmt"
	"strings"
)

// Reason says why the table removed a flow by itself, for Config.OnEvict.
type Reason uint8

const (
	// Evicted: the flow made room for a new one, as the least recently
	// seen flow of a full table (or of a crowded bucket).
	Evicted Reason = iota
	// Expired: the flow was not seen for longer than Config.Idle.
	Expired
)

var reasonNames = [...]string{Evicted: "evicted", Expired: "expired"}

// ErrReason reports text that names no [Reason].
var ErrReason = errors.New("unknown reason")

// String returns the reason's name: "evicted" or "expired".
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// MarshalText returns the reason's name; a value that is no Reason is an
// error wrapping [ErrReason].
func (r Reason) MarshalText() ([]byte, error) {
	if int(r) >= len(reasonNames) {
		return nil, fmt.Errorf("flowtable: marshal %v: %w", r, ErrReason)
	}
	return []byte(reasonNames[r]), nil
}

// UnmarshalText sets r from its name, in any case; other text is an error
// wrapping [ErrReason].
func (r *Reason) UnmarshalText(text []byte) error {
	for i, name := range reasonNames {
		if strings.EqualFold(string(text), name) {
			*r = Reason(i)
			return nil
		}
	}
	return fmt.Errorf("flowtable: reason %q: want evicted or expired: %w", text, ErrReason)
}
