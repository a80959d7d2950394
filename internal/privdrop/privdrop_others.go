//go:build !linux

package privdrop

// Drop returns ErrNotSupported.
func Drop(Target) (Dropped, error) { return Dropped{}, ErrNotSupported }

// Check returns ErrNotSupported.
func Check(Target) (int, error) { return 0, ErrNotSupported }
