// Package affinity pins the calling goroutine's OS thread to one CPU, the
// user-space counterpart of FreeBSD's net.isr.bindthreads, and lists the
// CPUs that are online and allowed.
//
// Pinning is Linux-only (sched_setaffinity); elsewhere the functions return
// an error wrapping [ErrNotSupported].
package affinity

import "errors"

// ErrNotSupported is returned where the operating system offers no thread
// affinity call this package can use.
var ErrNotSupported = errors.New("affinity: not supported on this system")
