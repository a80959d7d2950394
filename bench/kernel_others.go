//go:build !linux

package main

import "runtime"

// kernel returns the system name where uname is not read.
func kernel() string { return runtime.GOOS }
