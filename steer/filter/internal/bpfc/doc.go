// Package bpfc compiles filter expressions in pcap-filter(7) syntax, as
// tcpdump takes them, to classic BPF programs for Ethernet frames, with
// the outcome libpcap 1.10's programs have on every frame.
//
// # How it follows libpcap
//
// The parser takes libpcap's grammar as its yacc parser resolves it: and
// and or of equal precedence, left to right; not binding tighter; an
// address or number after and/or inheriting the qualifiers of the
// primitive before it ("host a or b"); % and ^, which have no precedence
// in that grammar, taking all that follows them as their right operand.
// Each primitive becomes the tests libpcap's gencode.c makes, in its
// order and at its offsets, and "vlan" and "mpls" move the offsets of
// every primitive after them, as there.
//
// A program's outcome on a frame shorter than a load it makes depends on
// which loads it makes, and libpcap's optimizer decides that: it skips a
// test whose outcome a test before it settles, or both of whose branches
// go to the same place, and it moves a test up a chain of ors (ands) to
// next to a test of the same value. The optimizer here works on the same
// graph of tests, numbering values the way libpcap's value numbering
// does, in the same two phases (branches first, then constants: "x & 0"
// and "x * 0" are 0, and then load nothing), so that it skips the same
// tests. It keeps two of libpcap's quirks because tcpdump's programs have
// them: the first pass takes the dominators of a masked comparison with
// zero before swapping its branches (so "net 0.0.0.0/8 and net
// 0.0.0.0/8" rejects everything), and "x & 0xffffffff" compared with zero
// is taken as always set.
//
// It does not reproduce libpcap's bugs that make a program read the wrong
// bytes: a later test reading X after the optimizer dropped the load of
// X in a test it had settled; in live programs, a pull-up moving the
// first vlan's change of offsets before its out-of-band check, the
// peephole breaking the jumps inside the vlan ID test, and the register
// allocator giving the vlan offset a scratch word that arithmetic before
// the vlan uses.
//
// # What it covers
//
// Link layer Ethernet (DLT_EN10MB) only. Primitives: host, net (with a
// length, a mask, short forms), port, portrange (numbers and names from
// /etc/services), with src, dst, src or dst, src and dst; ether host,
// src, dst, proto, broadcast, multicast; ip, ip6 and arp (host, net,
// proto, multicast), rarp; tcp, udp, sctp, icmp, icmp6, igmp, igrp, pim,
// vrrp, carp, ah, esp; proto with numbers and names (/etc/protocols, the
// link-layer names); iso, esis, isis, clnp and the IS-IS PDU types, stp,
// ipx, netbeui, atalk, aarp, decnet, lat, sca, mopdl, moprc; vlan and mpls
// with their IDs, nested; greater, less, len; byte with =, < and >;
// proto[expr:size] for every protocol libpcap indexes, with arithmetic
// and the named fields and values (tcpflags, tcp-syn, icmptype, ...).
//
// Left to libpcap, as errors wrapping ErrUnsupported that name the
// construct: host and network names (they need the resolver), gateway,
// protochain (libpcap's program for it loops, which the kernel refuses),
// ip broadcast (it needs the interface's netmask), byte with & or |
// (libpcap's program for them loads no byte), decnet addresses,
// pppoed/pppoes, geneve, llc, 802.11, ATM, SS7, pf, inbound, outbound
// and ifindex, and ARCnet addresses.
//
// # Live programs
//
// Options.Live writes the program libpcap attaches to a Linux socket:
// the kernel takes the outermost 802.1Q or 802.1ad tag out of the frame,
// so the first vlan matches a tag in the socket buffer's metadata
// (SKF_AD_VLAN_TAG_PRESENT, SKF_AD_VLAN_TAG) or in the frame; only in the
// second case do the primitives after it look 4 bytes further. The
// program's tests are specialized for each case instead of keeping the
// offset in a scratch word, as libpcap does; so its optimizer sees more
// tests as the same than libpcap's, whose value numbers lose the offset
// where paths with both meet, and the two programs can make different
// loads. They agree on every frame that holds the fields the expression
// reads, and may differ on one cut shorter.
package bpfc
