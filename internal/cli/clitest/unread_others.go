//go:build !linux

package clitest

import "os"

// unread cannot tell how much of a pipe is unread here.
func unread(*os.File) (int, bool) { return 0, false }
