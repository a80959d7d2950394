//go:build !amd64

package flowtable

import "unsafe"

// prefetch does nothing where the package has no prefetch instruction.
func prefetch(unsafe.Pointer) {}
