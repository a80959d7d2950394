// Package xsk holds the parts of an AF_XDP socket (XSK) that are not the
// receive path's: the rings the kernel shares with user space and the
// UMEM, which steer/afxdp receives through, and a [Sender], a socket that
// transmits, which examples/forwarder uses (it is no part of the library's
// API: a capture library receives).
//
// # Rings
//
// A [Ring] is one of the four rings of an AF_XDP socket: a producer and a
// consumer index, a flags word and a power-of-two array. Each index has
// one writer. The reader of an index loads it with an acquire load
// (atomic.LoadUint32) before it touches the entries it covers; the writer
// stores it with a release store (atomic.StoreUint32) after it wrote the
// entries (a producer) or finished reading them (a consumer); the kernel's
// side (net/xdp/xsk_queue.h) pairs its barriers with these.
//
// # UMEM
//
// A [UMEM] is the area the kernel writes frames into, registered on one
// socket (its owner, XDP_UMEM_REG), with its FILL and COMPLETION rings.
// The sockets of a group, and a Sender on the same device and queue, share
// it (XDP_SHARED_UMEM): the kernel allows one UMEM per device and queue.
// Its FILL ring has one producer at a time ([UMEM.Give] holds a lock).
// [NewUMEM] can set chunks aside that the FILL ring never gets, for a
// Sender sharing the UMEM; [SharedSender] finds the UMEM through its
// owner's descriptor.
//
// # Sending
//
// [OpenSender] opens a socket that only sends, on one queue, with a UMEM
// of its own, a TX ring and the COMPLETION ring; it needs no XDP program.
// Send copies each frame into a free chunk, writes the TX descriptors
// (address and length) and then publishes the TX producer index with a
// release store. The kernel gives a chunk back on the COMPLETION ring when
// it is done with the frame, and Send, after an acquire load of that
// ring's producer index, puts it back on its free list: the chunks
// recycle, and the caller's bytes may be reused as soon as Send returns.
// Send calls are serialised, so that each ring has one user-space side.
//
// A copy-mode socket transmits only inside sendto (or poll): Send kicks
// the kernel with a non-blocking sendto (it refuses a blocking one) until
// it has taken every frame off the ring, at most 32 per call unless the
// kernel takes a larger budget (XDP_MAX_TX_SKB_BUDGET, Linux 6.17, which
// OpenSender sets to the ring size where it can). A zero-copy driver
// transmits on its own, and sets XDP_RING_NEED_WAKEUP in the TX ring's
// flags when it wants a kick; Send kicks it only then. In copy mode the
// kernel completes a frame when the skb it built is freed: once the device
// has taken it, or a qdisc below (a bridge port's, say) has sent it on.
//
// When every chunk is in flight or the ring is full, Send waits, reaping
// completions and kicking, for up to SenderConfig.Wait (DefaultSendWait),
// then drops the rest of its frames and counts them (SenderStats.Dropped).
// The bounded wait absorbs a burst that the device clears quickly, and a
// device that stays full drops at the sender, as a NIC's full ring would,
// instead of holding a forwarder's workers for ever. Close wakes a waiting
// Send, which returns ErrClosed.
//
// OpenSender cannot bind a queue that a receiving socket holds (EBUSY). A
// port that receives and sends on one queue shares the receiving socket's
// UMEM instead: steer/afxdp's Config.SendFrames sets chunks of its UMEM
// aside, and SharedSender binds a Sender to the same queue with
// XDP_SHARED_UMEM that sends from those chunks. The kernel completes its
// frames on the UMEM's COMPLETION ring, which only the Sender reads, and
// the received frames stay in the other chunks. OpenSender's queue number
// is, in copy mode, also the TX queue the frames leave by, which must
// exist: Send returns an error when the kernel takes nothing. In zero-copy
// mode the driver feeds the queue's receive ring from the FILL ring, which
// OpenSender's Sender leaves empty, so frames arriving on that queue are
// lost: give such a Sender a queue that receives nothing, or bind it in
// copy mode. Frames the kernel still holds after Close (in a qdisc) keep
// the socket, and so the queue, until they are sent or dropped.
package xsk
