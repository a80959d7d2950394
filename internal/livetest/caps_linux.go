//go:build linux

package livetest

import (
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// Capability numbers (include/uapi/linux/capability.h) that the tests
// take away.
const (
	CapNetAdmin = 12
	CapNetRaw   = 13
	CapSysAdmin = 21
	CapBPF      = 39
)

// WithoutCaps runs fn on its OS thread with the thread's effective
// capabilities lacking caps (every one when caps is empty), then gives
// them back, and returns fn's error (or why the capabilities could not be
// set). The kernel checks a thread's own capabilities, so fn sees what a
// process without them would. The permitted set is left alone, which is
// what lets the effective set come back; a thread that could not get
// them back is never reused (it ends with its goroutine, still locked).
// It may run inside netns.NS.Do (after the namespace is entered, which
// needs CAP_SYS_ADMIN).
func WithoutCaps(caps []int, fn func() error) (err error) {
	runtime.LockOSThread()
	restored := false
	defer func() {
		if restored {
			runtime.UnlockOSThread()
		}
	}()
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var old [2]unix.CapUserData
	if err := unix.Capget(&hdr, &old[0]); err != nil {
		restored = true
		return fmt.Errorf("capget: %w", err)
	}
	cut := old
	if len(caps) == 0 {
		cut[0].Effective, cut[1].Effective = 0, 0
	}
	for _, c := range caps {
		cut[c/32].Effective &^= 1 << (c % 32)
	}
	if err := unix.Capset(&hdr, &cut[0]); err != nil {
		restored = true
		return fmt.Errorf("capset: %w", err)
	}
	defer func() {
		if cerr := unix.Capset(&hdr, &old[0]); cerr != nil {
			err = errors.Join(err, fmt.Errorf("capset, giving the capabilities back: %w", cerr))
			return
		}
		restored = true
	}()
	return fn()
}
