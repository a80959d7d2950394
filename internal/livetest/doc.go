// Package livetest is for tests only: the helpers that the tests of the
// live sources (steer/afpacket, steer/afxdp, the kernel-steered group of
// steer/kgroup, internal/xsk) share. They read a source from a goroutine
// (Read, Drain); send traffic inside the namespaces of internal/netns,
// UDP floods with trafgen and sequence-numbered flows and ARP requests
// from one CPU, in order (SeqTraffic, SendFrom); wait for counters to
// settle; read what the host's stack saw (IPInReceives, Neighbour) and
// whether a link carries an XDP program; count the process's descriptors,
// socket mappings and goroutines (leak checks); run the rounds of a close
// stress (close while a reader reads, while it waits, and while handlers
// hold batches that they release after Close, their bytes checked); and
// run code on a thread without some capabilities (WithoutCaps), as a
// process that is not root would.
//
// Each helper reports through the testing.TB it is given; those that may
// run on a goroutine of their own say so and use Errorf.
package livetest
