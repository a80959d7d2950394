// Package pcapfile is a [steer.Source] that reads capture files: the classic
// pcap format (either byte order, microsecond or nanosecond timestamps, and
// gzip-compressed files) and pcapng.
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
// The frames of one batch live in one arena, a buffer that the records are
// read into directly from the file's read buffer (one copy, no per-frame
// allocation). The batch's Release returns the arena to the reader's free
// list, so in steady state, with batches released, reading allocates
// nothing. A batch that is not released keeps its arena, and the reader
// allocates a new one for the next batch. Frame.Data is capped at its own
// length: appending to it never overwrites the next frame.
//
// A batch ends early when the next record does not fit in the rest of its
// arena (arenas hold about 2 KiB per frame of batch size, at least 64 KiB);
// a record larger than a whole arena grows that arena. A record's captured
// length may not exceed [MaxRecordLen]: a larger value is taken as a
// corrupt file.
//
// # Link types
//
// The steering classifier reads Ethernet. Records of other supported link
// types are turned into Ethernet frames in the arena, in place: the reader
// leaves room before each record for the header it writes, so no second
// copy is made.
//
//   - ETHERNET (1): as is.
//   - LINUX_SLL (113): the 16-byte cooked header becomes a 14-byte Ethernet
//     header, the source MAC taken from the SLL address when it is 6 bytes
//     long, the EtherType from the SLL protocol field (whatever it is: a
//     non-IP protocol keeps its value). Frame.Length is the original length
//     minus 2.
//   - LINUX_SLL2 (276): the same from the 20-byte header (Length minus 6).
//     Its interface index becomes Frame.IfIndex (see below).
//   - RAW (101, and the values 12 and 14 some systems write for it), IPV4
//     (228), IPV6 (229): a 14-byte header is put in front (Length plus 14),
//     with EtherType IPv4 or IPv6 from the link type or, for RAW, the IP
//     version nibble (zero when the record is empty or the nibble is neither
//     4 nor 6).
//   - NULL (0) and LOOP (108), BSD loopback: the 4-byte address family (in
//     the capturing host's byte order for NULL, either is accepted; network
//     order for LOOP) becomes a 14-byte header (Length plus 10): AF_INET (2)
//     gives IPv4, the AF_INET6 values of Linux (10), NetBSD and OpenBSD
//     (24), FreeBSD (28) and Darwin (30) give IPv6, any other family
//     EtherType zero.
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
// gets the zero time). Length is the record's original length, adjusted
// by the link-layer rewrite above. IfIndex is, in order of preference, the
// value given with [WithIfIndex]; the interface index in a LINUX_SLL2
// header; for pcapng, the record's interface ID plus one (IDs count from
// zero within a section, and zero means unknown to the dispatcher); and
// zero for classic pcap. Hash and HashType are left unset (NONE): the
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
// # Why not gopacket's pcapgo
//
// gopacket v1.1.19's pcapgo stores link types as uint8 (LINUX_SLL2, 276,
// reads as 20), allocates a buffer of whatever captured length a pcapng
// block claims before checking it against the block, and panics on some
// malformed pcapng options (a short if_tsoffset, an if_tsresol beyond 64
// bits). It also copies every record into its own buffer, which would make
// a second copy into the arena, and its live-capture half needs a module
// this repository does not depend on. Both formats are small, so this
// package reads them itself; gopacket's layers remain usable on the frames.
package pcapfile
