//go:build !unix

package main

import "time"

// cpuTimes is not measured on this system; CPU columns stay zero.
func cpuTimes() (user, sys time.Duration) { return 0, 0 }
