package clitest

import (
	"os"

	"golang.org/x/sys/unix"
)

// unread returns how many bytes the pipe r holds, not yet read.
func unread(r *os.File) (int, bool) {
	n, err := unix.IoctlGetInt(int(r.Fd()), unix.TIOCINQ) // FIONREAD
	return n, err == nil
}
