// Package gopacketsrc turns a gopacket packet data source into a
// [steer.Source], so that a Go program that already captures with gopacket
// (github.com/google/gopacket) can steer what it captures: a gopacket/pcap
// handle (libpcap, with its BPF filters and every capture device it
// supports), a PF_RING ring, gopacket's afpacket TPacket, a pcapgo reader,
// or any [gopacket.PacketDataSource] or [gopacket.ZeroCopyPacketDataSource]
// of the program's own.
//
// The package imports gopacket's core only, never gopacket/pcap,
// gopacket/pfring or gopacket/afpacket, which need cgo: it builds with
// CGO_ENABLED=0, and the program that opens the capture pays for cgo.
//
//	h, err := pcap.OpenLive("eth0", 65535, true, 100*time.Millisecond)
//	if err != nil { ... }
//	defer h.Close()
//	if err := h.SetBPFFilter("tcp port 443"); err != nil { ... }
//	src, err := gopacketsrc.New(h, pcapfile.LinkType(h.LinkType()), gopacketsrc.WithLive())
//	if err != nil { ... }
//	err = d.Run(ctx, src)
//
// # Link types
//
// New takes the link type of the packets (tcpdump's LINKTYPE_* value, as
// [pcapfile.LinkType]; a gopacket handle's LinkType method gives it as
// layers.LinkType, which converts). The dispatcher reads Ethernet frames:
// packets of the other link types pcapfile reads (Linux cooked capture v1
// and v2, raw IP, BSD loopback, PPP) are rewritten into Ethernet in the arena
// by pcapfile's own rewrite ([pcapfile.LinkType.ToEthernet]), so the two
// sources give the same frames: the same headers, the same length
// adjustments, the LINUX_SLL2 interface index as Frame.IfIndex (unless
// [WithIfIndex] says otherwise), and a packet too short for its link-layer
// header delivered with empty Data and counted in [Stats].Runts. Any other
// link type makes New return an error wrapping [pcapfile.ErrLinkType].
// Note that layers.LinkType has 8 bits: gopacket reports LINUX_SLL2 (276)
// as 20, so pass pcapfile.LinkTypeLinuxSLL2 for such a capture.
//
// # Batches
//
// ReadBatch reads packets one by one from the packet source and fills a
// [steer.Batch] with up to the batch size of frames ([WithBatchSize],
// [DefaultBatchSize] by default). A batch ends early when the packet
// source's read timeout expires, when it returns an error or io.EOF, when
// ctx ends or Close is called (both checked between packets), or when the
// next packet does not fit in the rest of the batch's arena (see below).
//
// # Memory
//
// A zero-copy packet source's buffer is valid only until its next read, so
// the adapter copies each packet once, as it reads it, into an arena of its
// own that holds the batch's frames; gopacket hands no buffer out for
// longer, so this is the one copy a steered frame gets. The batch's Release
// gives the arena back, and so, with batches released, the adapter
// allocates nothing in steady state: no allocation per frame and none per
// batch. A batch that is never released keeps its arena, and the adapter
// allocates a new one. Release must be called exactly once per batch (the
// dispatcher does, once every frame is handled or dropped); a second call
// panics, as it would let two batches share a buffer. Frame.Data is capped
// at its own length: appending to it never overwrites the next frame.
//
// New reads a source that implements both interfaces (all of gopacket's
// do) through ZeroCopyReadPacketData; a plain PacketDataSource allocates
// each packet itself, and the adapter still copies it into the arena.
// Arenas hold about 2 KiB per frame of batch size, at least 64 KiB; a
// packet that does not fit in the rest of one is kept for the next batch,
// a packet larger than a whole arena gets an arena of its size, and a
// packet longer than [MaxPacketLen] is cut to it.
//
// # Frame fields
//
// Each packet's [gopacket.CaptureInfo] becomes the frame's metadata:
//
//   - Data: the captured bytes (CaptureInfo.CaptureLength of them, as the
//     data slice has them). An empty packet gives a frame with empty Data,
//     which the dispatcher counts as too short rather than the adapter
//     hiding it.
//   - Timestamp: CaptureInfo.Timestamp, in UTC (the zero time stays zero).
//   - WireLen: CaptureInfo.Length, the length on the wire, which exceeds
//     len(Data) for a packet cut by the snap length; a length of zero
//     (unknown) or below the captured length gives the captured length.
//   - IfIndex: the value given with [WithIfIndex], else
//     CaptureInfo.InterfaceIndex (zero, unknown, when negative). A pcapgo
//     pcapng reader gives its interface IDs, which count from zero.
//   - VLAN and HasVLAN: from a gopacket/afpacket AncillaryVLAN in
//     CaptureInfo.AncillaryData, the VLAN id the kernel took out of the
//     frame (tp_vlan_tci). A value outside 0..4095 is ignored and counted
//     in [Stats].BadVLAN.
//   - FlowID and HashType stay unset (NONE): the dispatcher computes the
//     software hash.
//
// # Errors, timeouts and the end
//
// When the packet source returns io.EOF, ReadBatch delivers the frames
// before it and then returns io.EOF, unwrapped, without reading the packet
// source again. Any other error ends the batch; the next call returns it,
// wrapped with the packet's number, and the call after that reads the
// packet source again (a dispatcher's Run stops at the first error).
//
// An error by which the packet source says its read timeout expired with
// no packet ends the batch, which may be empty, with a nil error, and is
// counted in [Stats].Timeouts. By default that is an error with a Timeout
// method that returns true, gopacket/pcap's NextErrorTimeoutExpired,
// gopacket/pfring's NextNoPacketNonblocking and gopacket/afpacket's
// ErrTimeout; [WithTimeoutError] replaces the test.
//
// # Interrupting a blocked read
//
// A packet source's read blocks until a packet arrives or its timeout
// expires, and neither ctx nor Close can cut it short: the adapter checks
// them between packets and before each batch. Give a live packet source a
// read timeout, and cancelling ctx (or Close) takes effect within that
// timeout:
//
//   - gopacket/pcap: the timeout argument of pcap.OpenLive, or
//     InactiveHandle.SetTimeout. Closing the handle from another goroutine
//     also ends a read, which returns io.EOF at its next timeout. With
//     pcap.BlockForever a read, and so Handle.Close, waits for a packet.
//   - gopacket/afpacket: afpacket.OptPollTimeout. Close the TPacket only
//     once the dispatcher has stopped reading it: its Close unmaps the ring
//     without waiting for a read in progress.
//   - Any other source: a timeout of its own, whose error WithTimeoutError
//     recognises.
//
// Close marks the adapter closed and leaves the packet source to its owner,
// as the packet source is the one that knows how to stop.
//
// # Live sources
//
// A live capture drops in the kernel when it is not read in time, so
// holding its reader back when a worker queue is full would only move the
// drops. [WithLive] says the packet source is one: the Source then says so
// through [steer.LiveSource], and the dispatcher drops at the queue tail
// instead (under steer.OverflowAuto). [WithSourceStats] passes the packet
// source's own counters, such as pcap's received and dropped, on to the
// dispatcher's [steer.Stats].
//
// # Decoding with gopacket in the workers
//
// The other direction needs no adapter: a worker's [steer.Packet].Data is
// a frame, which a gopacket.DecodingLayerParser decodes in place, with no
// copy (and, for most frames, no allocation: gopacket allocates for its
// errors and for some options). A parser is not safe for concurrent use,
// so each worker keeps its own, as per-worker state from
// [steer.NewPerWorker]; see the example.
package gopacketsrc
