//go:build unix

package main

import (
	"syscall"
	"time"
)

// cpuTimes returns the user and system CPU time of this process
// (getrusage RUSAGE_SELF), children excluded.
func cpuTimes() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}
