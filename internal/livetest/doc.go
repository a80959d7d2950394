// Package livetest is for tests only: the helpers that the tests of the
// live sources, steer/afpacket and steer/afxdp, share. They read a source
// from a goroutine, send UDP frames with trafgen inside the namespaces of
// internal/netns, wait for counters to settle, count the process's
// descriptors, socket mappings and goroutines (leak checks), and run the
// rounds of a
// close stress: close while a reader reads, while it waits, and while
// handlers hold batches that they release after Close.
//
// Each helper reports through the testing.TB it is given; those that may
// run on a goroutine of their own say so and use Errorf.
package livetest
