package affinity

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// Pin locks the calling goroutine to its OS thread (runtime.LockOSThread) and
// restricts that thread to cpu. The goroutine stays locked; a worker that
// pins itself keeps its thread for life.
func Pin(cpu int) error {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("affinity: pin thread to CPU %d: %w", cpu, err)
	}
	return nil
}

// Current returns the CPUs the calling thread may run on.
func Current() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("affinity: read thread affinity: %w", err)
	}
	return setCPUs(&set), nil
}

// startSet is the process's affinity mask when it started, before any
// worker pinned a thread: a pinned goroutine that exits can leave its mask
// on a thread Go keeps (the main thread among them), so the mask read later
// may be narrower than what the process was given.
var startSet, startErr = func() (unix.CPUSet, error) {
	var set unix.CPUSet
	err := unix.SchedGetaffinity(0, &set)
	return set, err
}()

// Allowed returns the CPUs this process may use: online and in its
// affinity mask when it started (what a cpuset or taskset left it).
func Allowed() ([]int, error) {
	if startErr != nil {
		return nil, fmt.Errorf("affinity: read process affinity: %w", startErr)
	}
	return setCPUs(&startSet), nil
}

func setCPUs(set *unix.CPUSet) []int {
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// Supported reports whether Pin can work here.
func Supported() bool { return true }
