// Package livesock holds the socket plumbing that the live sources,
// steer/afpacket (a TPACKET_V3 ring) and steer/afxdp (an AF_XDP socket),
// share around their rings; the rings themselves, their release and their
// counters stay with each source.
//
// A [Sock] is a socket descriptor with two eventfds beside it in one poll
// set: one that [Sock.Stop] writes, so that Close wakes a reader blocked in
// poll, and one that the end of the reader's context writes. Every use of
// the descriptor from another goroutine than the reader goes through a
// read lock ([Sock.Do]), and [Sock.Teardown] closes the descriptors under
// the write lock, so that a late context callback or a Stats call never
// touches a descriptor number that was closed and perhaps reused.
//
// A [CopyPool] holds the buffers a source's Copy mode copies each batch
// into, so that the ring's memory goes back to the kernel at once.
//
// [Interface] and [Explain] make the errors of opening a live socket say
// what to change: a missing interface names the network namespace looked
// in and the interfaces there; a refused socket, program or UMEM names
// the privilege (root, or CAP_NET_RAW, CAP_BPF, CAP_NET_ADMIN) or the
// locked-memory limit it lacks, and which of them the process lacks.
//
// Everything here runs when a ring is empty, or once per batch; nothing
// runs per frame but [CopyBuf.Add], which the compiler inlines.
package livesock
