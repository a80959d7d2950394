//go:build !linux

package affinity

import "runtime"

// Pin is not supported on this system.
func Pin(cpu int) error { return ErrNotSupported }

// Current is not supported on this system.
func Current() ([]int, error) { return nil, ErrNotSupported }

// Allowed returns every CPU Go sees, 0 to runtime.NumCPU()-1, since this
// system offers no affinity mask to read.
func Allowed() ([]int, error) {
	cpus := make([]int, runtime.NumCPU())
	for i := range cpus {
		cpus[i] = i
	}
	return cpus, nil
}

// Supported reports whether Pin can work here.
func Supported() bool { return false }
