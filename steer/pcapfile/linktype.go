package pcapfile

import (
	"encoding/binary"
	"fmt"
)

// LinkType is a capture file's link-layer header type (tcpdump's LINKTYPE_*
// values, as stored in a pcap file header or a pcapng interface description
// block). It is wider than gopacket's layers.LinkType, which cannot hold
// LINUX_SLL2 (276).
type LinkType uint32

// The link types this package reads, and a few common ones it names in
// errors.
const (
	LinkTypeNull       LinkType = 0   // LINKTYPE_NULL: BSD loopback, host-order address family
	LinkTypeEthernet   LinkType = 1   // LINKTYPE_ETHERNET
	LinkTypeRawAlt12   LinkType = 12  // DLT_RAW as some systems write it: raw IP
	LinkTypeRawAlt14   LinkType = 14  // DLT_RAW as some systems write it: raw IP
	LinkTypePPP        LinkType = 9   // LINKTYPE_PPP: PPP, with or without HDLC-like framing (ff 03)
	LinkTypePPPHDLC    LinkType = 50  // LINKTYPE_PPP_HDLC: PPP in HDLC-like framing, or Cisco HDLC
	LinkTypeRaw        LinkType = 101 // LINKTYPE_RAW: raw IPv4 or IPv6
	LinkTypeIEEE802_11 LinkType = 105 // LINKTYPE_IEEE802_11 (not supported)
	LinkTypeLoop       LinkType = 108 // LINKTYPE_LOOP: OpenBSD loopback, network-order address family
	LinkTypeLinuxSLL   LinkType = 113 // LINKTYPE_LINUX_SLL: Linux cooked capture v1
	LinkTypeIPv4       LinkType = 228 // LINKTYPE_IPV4: raw IPv4
	LinkTypeIPv6       LinkType = 229 // LINKTYPE_IPV6: raw IPv6
	LinkTypeLinuxSLL2  LinkType = 276 // LINKTYPE_LINUX_SLL2: Linux cooked capture v2
)

var linkTypeNames = map[LinkType]string{
	0: "NULL", 1: "ETHERNET", 3: "AX25", 6: "IEEE802_5", 7: "ARCNET_BSD", 8: "SLIP",
	9: "PPP", 10: "FDDI", 12: "RAW", 14: "RAW", 50: "PPP_HDLC", 51: "PPP_ETHER",
	100: "ATM_RFC1483", 101: "RAW", 104: "C_HDLC", 105: "IEEE802_11", 107: "FRELAY",
	108: "LOOP", 113: "LINUX_SLL", 114: "LTALK", 117: "PFLOG", 119: "IEEE802_11_PRISM",
	122: "IP_OVER_FC", 127: "IEEE802_11_RADIOTAP", 187: "BLUETOOTH_HCI_H4",
	189: "USB_LINUX", 195: "IEEE802_15_4_WITHFCS", 220: "USB_LINUX_MMAPPED",
	228: "IPV4", 229: "IPV6", 253: "NETLINK", 276: "LINUX_SLL2",
}

// String returns tcpdump's name for the link type without the LINKTYPE_
// prefix, or "UNKNOWN".
func (lt LinkType) String() string {
	if s, ok := linkTypeNames[lt]; ok {
		return s
	}
	return "UNKNOWN"
}

// Supported reports whether the reader can turn records of this link type
// into Ethernet frames.
func (lt LinkType) Supported() bool {
	switch lt {
	case LinkTypeEthernet, LinkTypeLinuxSLL, LinkTypeLinuxSLL2, LinkTypeRaw, LinkTypeRawAlt12,
		LinkTypeRawAlt14, LinkTypeIPv4, LinkTypeIPv6, LinkTypeNull, LinkTypeLoop, LinkTypePPP, LinkTypePPPHDLC:
		return true
	}
	return false
}

// LinkTypeError is the error for a link type the reader does not support.
// It matches [ErrLinkType] with errors.Is.
type LinkTypeError struct {
	LinkType LinkType
	// Interface is the pcapng interface ID whose link type it is, or -1 for
	// a classic pcap file.
	Interface int
}

// Error names the link type, such as "pcapfile: link type IEEE802_11 (105)
// is not supported".
func (e *LinkTypeError) Error() string {
	s := fmt.Sprintf("pcapfile: link type %s (%d) is not supported", e.LinkType, uint32(e.LinkType))
	if e.Interface >= 0 {
		s += fmt.Sprintf(" (pcapng interface %d)", e.Interface)
	}
	return s
}

// Is reports whether target is [ErrLinkType].
func (e *LinkTypeError) Is(target error) bool { return target == ErrLinkType }

const (
	ethHeaderLen  = 14
	sllHeaderLen  = 16
	sll2HeaderLen = 20
	loopHeaderLen = 4

	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86dd
	etherTypePPP  = 0x880b // a PPP frame of a protocol with no EtherType of its own

	pppAddress    = 0xff // HDLC-like framing: the all-stations address
	pppControl    = 0x03 // and the unnumbered-information control byte
	ciscoUnicast  = 0x0f // Cisco HDLC's address bytes
	ciscoMulti    = 0x8f
	ciscoHeaderLn = 4 // address, control, EtherType
)

// headroom is how many bytes the reader leaves free before a record of this
// link type, so that rewrite can put an Ethernet header in front of it.
func (lt LinkType) headroom() int {
	switch lt {
	case LinkTypeEthernet:
		return 0
	case LinkTypeRaw, LinkTypeRawAlt12, LinkTypeRawAlt14, LinkTypeIPv4, LinkTypeIPv6, LinkTypePPP, LinkTypePPPHDLC:
		return ethHeaderLen
	case LinkTypeNull, LinkTypeLoop:
		return ethHeaderLen - loopHeaderLen
	}
	return 0
}

// rewrite turns a record into an Ethernet frame in place. region holds
// lt.headroom() free bytes followed by the record's captured bytes, and is
// capped at its length. It
// returns the frame (capped at its length), the change in length the
// rewrite made (to apply to the original length), and the interface index
// a LINUX_SLL2 header carries (zero otherwise). runt is set when the record
// is too short for its link-layer header; frame is then empty.
func rewrite(lt LinkType, region []byte) (frame []byte, delta, ifIndex int, runt bool) {
	if lt == LinkTypeEthernet { // the common case, inlined
		return region, 0, 0, false
	}
	return rewriteOther(lt, region)
}

// rewriteOther is rewrite for the link types other than Ethernet.
func rewriteOther(lt LinkType, region []byte) (frame []byte, delta, ifIndex int, runt bool) {
	h := lt.headroom()
	rec := region[h:]
	switch lt {
	case LinkTypeRaw, LinkTypeRawAlt12, LinkTypeRawAlt14, LinkTypeIPv4, LinkTypeIPv6:
		var et uint16
		switch {
		case lt == LinkTypeIPv4:
			et = etherTypeIPv4
		case lt == LinkTypeIPv6:
			et = etherTypeIPv6
		case len(rec) > 0 && rec[0]>>4 == 4:
			et = etherTypeIPv4
		case len(rec) > 0 && rec[0]>>4 == 6:
			et = etherTypeIPv6
		}
		putEthHeader(region[:ethHeaderLen], et)
		return region[:len(region):len(region)], ethHeaderLen, 0, false

	case LinkTypeNull, LinkTypeLoop:
		if len(rec) < loopHeaderLen {
			return region[:0:0], 0, 0, true
		}
		af := binary.BigEndian.Uint32(rec)
		if lt == LinkTypeNull {
			// The capturing host's byte order: families are small numbers,
			// so a value with high bits set was written little-endian.
			if le := binary.LittleEndian.Uint32(rec); le <= 0xffff {
				af = le
			}
		}
		putEthHeader(region[:ethHeaderLen], addressFamilyEtherType(af))
		return region[:len(region):len(region)], ethHeaderLen - loopHeaderLen, 0, false

	case LinkTypePPP, LinkTypePPPHDLC:
		et, hl, ok := pppHeader(lt, rec)
		if !ok {
			return region[:0:0], 0, 0, true
		}
		// The Ethernet header goes where the PPP header ends, over it and
		// the headroom: hl is at least 1.
		start := h + hl - ethHeaderLen
		putEthHeader(region[start:start+ethHeaderLen], et)
		f := region[start:]
		return f[:len(f):len(f)], ethHeaderLen - hl, 0, false

	case LinkTypeLinuxSLL:
		// packet type(2) ARPHRD(2) address length(2) address(8) protocol(2)
		if len(rec) < sllHeaderLen {
			return rec[:0:0], 0, 0, true
		}
		// The protocol already sits where the EtherType goes (bytes 14-15);
		// the Ethernet header starts at byte 2.
		if binary.BigEndian.Uint16(rec[4:6]) == 6 {
			copy(rec[8:14], rec[6:12])
		} else {
			clear(rec[8:14])
		}
		clear(rec[2:8])
		f := rec[2:]
		return f[:len(f):len(f)], ethHeaderLen - sllHeaderLen, 0, false

	case LinkTypeLinuxSLL2:
		// protocol(2) reserved(2) ifindex(4) ARPHRD(2) packet type(1)
		// address length(1) address(8)
		if len(rec) < sll2HeaderLen {
			return rec[:0:0], 0, 0, true
		}
		ifIndex = int(binary.BigEndian.Uint32(rec[4:8]))
		// The Ethernet header starts at byte 6: its source MAC is the
		// address, already in place at bytes 12-17.
		if rec[11] != 6 {
			clear(rec[12:18])
		}
		rec[18], rec[19] = rec[0], rec[1]
		clear(rec[6:12])
		f := rec[6:]
		return f[:len(f):len(f)], ethHeaderLen - sll2HeaderLen, ifIndex, false
	}
	// Not reached: the reader checks Supported first.
	return region[:0:0], 0, 0, true
}

func putEthHeader(h []byte, etherType uint16) {
	clear(h[:12])
	binary.BigEndian.PutUint16(h[12:14], etherType)
}

// pppHeader reads the PPP header of a PPP or PPP_HDLC record: the
// HDLC-like framing (ff 03) when present, then the PPP protocol, two
// bytes or, compressed (RFC 1661: an odd first byte), one; or, for
// PPP_HDLC, a Cisco HDLC header (0f or 8f, a control byte, an EtherType).
// It returns the EtherType the frame gets, the header's length, and
// false for a record too short for its header.
func pppHeader(lt LinkType, rec []byte) (etherType uint16, hl int, ok bool) {
	if lt == LinkTypePPPHDLC && len(rec) > 0 && (rec[0] == ciscoUnicast || rec[0] == ciscoMulti) {
		if len(rec) < ciscoHeaderLn {
			return 0, 0, false
		}
		return binary.BigEndian.Uint16(rec[2:4]), ciscoHeaderLn, true
	}
	if len(rec) >= 2 && rec[0] == pppAddress && rec[1] == pppControl {
		hl = 2
	}
	if len(rec) <= hl {
		return 0, 0, false
	}
	proto := uint16(rec[hl])
	if proto&1 == 0 {
		if len(rec) < hl+2 {
			return 0, 0, false
		}
		proto = binary.BigEndian.Uint16(rec[hl:])
		hl += 2
	} else {
		hl++
	}
	return pppEtherType(proto), hl, true
}

// pppEtherType maps a PPP protocol number to an EtherType: IPv4 (0x0021),
// IPv6 (0x0057) and MPLS (0x0281, 0x0283) to theirs, anything else (LCP,
// IPCP, ...) to 0x880b, PPP's own, which the classifier takes as non-IP.
func pppEtherType(proto uint16) uint16 {
	switch proto {
	case 0x0021:
		return etherTypeIPv4
	case 0x0057:
		return etherTypeIPv6
	case 0x0281:
		return 0x8847
	case 0x0283:
		return 0x8848
	}
	return etherTypePPP
}

// addressFamilyEtherType maps a BSD loopback address family to an
// EtherType: AF_INET is 2 everywhere; AF_INET6 is 10 on Linux, 24 on NetBSD
// and OpenBSD, 28 on FreeBSD and 30 on Darwin.
func addressFamilyEtherType(af uint32) uint16 {
	switch af {
	case 2:
		return etherTypeIPv4
	case 10, 24, 28, 30:
		return etherTypeIPv6
	}
	return 0
}

// Headroom returns how many bytes [LinkType.ToEthernet] needs free before
// a record of this link type, for the Ethernet header it puts in front.
func (lt LinkType) Headroom() int { return lt.headroom() }

// ToEthernet turns a record of this link type into an Ethernet frame in
// place, as the Reader does (see the package documentation). region holds
// lt.Headroom() free bytes followed by the record's captured bytes. It
// returns the frame (a view into region, capped at its length), the change
// the rewrite made to the frame's length (add it to the original length),
// and the interface index a LINUX_SLL2 header carries (zero otherwise).
// runt is set, and frame empty, when the record is too short for its
// link-layer header, or the link type is not Supported.
func (lt LinkType) ToEthernet(region []byte) (frame []byte, delta, ifIndex int, runt bool) {
	if lt == LinkTypeEthernet {
		return region[:len(region):len(region)], 0, 0, false
	}
	if !lt.Supported() || len(region) < lt.headroom() {
		return region[:0:0], 0, 0, true
	}
	return rewrite(lt, region[:len(region):len(region)])
}
