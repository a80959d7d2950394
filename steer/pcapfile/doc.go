// Package pcapfile is a [steer.Source] that reads capture files: the classic
// pcap format (either byte order, microsecond or nanosecond timestamps, and
// gzip-compressed files) and pcapng. It also writes classic pcap files.
//
// # Reading
//
// [Open] opens a file by name ("-" is standard input) and [NewReader] reads
// any [io.Reader]. [Reader.ReadBatch] fills a [steer.Batch] with up to the
// batch size of frames ([WithBatchSize], 64 by default) and returns [io.EOF]
// after the last one:
//
//	r, err := pcapfile.Open("trace.pcap")
//	if err != nil { ... }
//	defer r.Close()
//	var b steer.Batch
//	for {
//		err := r.ReadBatch(ctx, &b)
//		if err == io.EOF { break }
//		if err != nil { ... }
//		for _, f := range b.Frames { ... }
//		if b.Release != nil { b.Release() }
//	}
//
// # Memory
//
// The reader reads the file in chunks of 256 KiB and parses the records in
// place: a frame's Data is a view into its chunk, so a record's bytes are
// copied once, by the read (or, for gzip input, by the decompressor), and
// not again. A batch holds the chunks its frames are in, one or, when its
// records straddle a chunk's end, a few; its Release lets them go, and a
// chunk that no batch holds any more is reused. The reader never waits for
// a chunk: when none is free it allocates one, so the memory in use
// follows what the consumer holds (a batch that is never released keeps
// its chunks), and the reader keeps at most four free chunks. With
// batches released, reading allocates nothing in steady state. Frame.Data
// is capped at its own length: appending to it never overwrites the next
// frame.
//
// A batch is full (the batch size of frames) unless the file ends or an
// error is found. A record that does not fit in the rest of a chunk is
// carried, with whatever of it is already read, to the start of the next
// one; a record larger than a chunk gets a chunk of its own size. A
// record's captured length may not exceed [MaxRecordLen]: a larger value
// is taken as a corrupt file.
//
// # Link types
//
// The steering classifier reads Ethernet. Records of other supported link
// types are turned into Ethernet frames in place: the Ethernet header is
// written over the record's own link-layer header or over the bytes of
// the file before the record (its record or block header), so no second
// copy is made.
//
//   - ETHERNET (1): as is.
//   - LINUX_SLL (113): the 16-byte cooked header becomes a 14-byte Ethernet
//     header, the source MAC taken from the SLL address when it is 6 bytes
//     long, the EtherType from the SLL protocol field (whatever it is: a
//     non-IP protocol keeps its value). Frame.WireLen is the original length
//     minus 2.
//   - LINUX_SLL2 (276): the same from the 20-byte header (WireLen minus 6).
//     Its interface index becomes Frame.IfIndex (see below).
//   - RAW (101, and the values 12 and 14 some systems write for it), IPV4
//     (228), IPV6 (229): a 14-byte header is put in front (WireLen plus 14),
//     with EtherType IPv4 or IPv6 from the link type or, for RAW, the IP
//     version nibble (zero when the record is empty or the nibble is neither
//     4 nor 6).
//   - NULL (0) and LOOP (108), BSD loopback: the 4-byte address family (in
//     the capturing host's byte order for NULL, either is accepted; network
//     order for LOOP) becomes a 14-byte header (WireLen plus 10): AF_INET (2)
//     gives IPv4, the AF_INET6 values of Linux (10), NetBSD and OpenBSD
//     (24), FreeBSD (28) and Darwin (30) give IPv6, any other family
//     EtherType zero.
//   - PPP (9) and PPP_HDLC (50): the PPP header (the HDLC-like framing ff
//     03 when present, then the protocol, two bytes or, compressed, one)
//     becomes a 14-byte header (WireLen plus 14 minus the PPP header's
//     length) whose EtherType the protocol gives: IPv4 (0x0021), IPv6
//     (0x0057), MPLS unicast and multicast (0x0281, 0x0283) theirs, any
//     other protocol (LCP, IPCP, ...) 0x880b, PPP's own EtherType, which
//     the classifier takes as non-IP. A PPP_HDLC record that starts with a
//     Cisco HDLC header (0f or 8f, a control byte, an EtherType) gets that
//     EtherType (WireLen plus 10).
//
// Synthesized headers have zero MAC addresses unless stated otherwise. A
// record too short to hold its link-layer header is delivered with empty
// Data (and counted in [Stats].Runts), so that the dispatcher counts it as a
// truncated frame rather than the reader hiding it.
//
// Any other link type is an error wrapping [ErrLinkType] that names it,
// such as "pcapfile: link type IEEE802_11 (105) is not supported". In a
// pcapng file every interface has its own link type and records are
// converted by their interface: [Open] fails when the first interface's
// link type is unsupported, and reading fails at the first record of a
// later interface whose link type is unsupported.
//
// # Frame fields
//
// Timestamp is the record's time, in UTC (pcapng's if_tsresol and
// if_tsoffset are honoured; a pcapng simple packet block has no time and
// gets the zero time). WireLen is the record's original length, adjusted
// by the link-layer rewrite above. IfIndex is, in order of preference, the
// value given with [WithIfIndex]; the interface index in a LINUX_SLL2
// header; for pcapng, the record's interface ID plus one (IDs count from
// zero within a section, and zero means unknown to the dispatcher); and
// zero for classic pcap. FlowID and HashType are left unset (NONE): the
// dispatcher computes the software hash. VLAN tags stay in the frame bytes.
//
// # Errors
//
// A record whose captured bytes end before the record does (a file cut off
// while it was being written) is an error wrapping [ErrTruncated], after the
// frames before it have been delivered; a caller that prefers tcpdump's
// leniency can treat it as the end of the file. A gzip'd file cut short
// is ErrTruncated too, in its gzip header and trailer as in its data.
// Any other inconsistency (bad magic, block lengths that disagree, an
// unknown interface ID, a captured length over [MaxRecordLen], more than
// [MaxInterfaces] interface description blocks in a pcapng section, a gzip
// stream whose header, data or checksum is wrong) wraps [ErrFormat].
// Errors name the record (counting from 1) where they happened. Bad input
// never panics.
//
// # Writing
//
// [NewWriter] writes a classic pcap file (little-endian, microsecond or
// nanosecond timestamps, any link type) and [Writer.WritePacket] a packet
// at a time, so that a program can write what it steers, or a test the
// capture it needs; [Writer.AppendPacket] builds a record without writing
// it, for a program that batches records or writes one file from several
// goroutines. [Reader.SnapLen] gives the snap length of a file read, to
// pass on to the one written.
//
// # Why not gopacket's pcapgo
//
// gopacket v1.1.19's pcapgo stores link types as uint8 (LINUX_SLL2, 276,
// reads as 20), allocates a buffer of whatever captured length a pcapng
// block claims before checking it against the block, and panics on some
// malformed pcapng options (a short if_tsoffset, an if_tsresol beyond 64
// bits). It also reads every record into a buffer of its own, which the
// next read overwrites, so a batch would need a second copy, and its
// live-capture half needs a module
// this repository does not depend on. Both formats are small, so this
// package reads them itself; gopacket's layers remain usable on the frames.
package pcapfile
