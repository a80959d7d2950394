// Package filter is capture filtering for the steering sources: a filter in
// tcpdump's syntax, or a classic BPF program as tcpdump prints one, run in
// the kernel on a live socket (package afpacket attaches it with
// SO_ATTACH_FILTER) or in user space over any steer.Source (a capture file).
//
// # Where the program comes from
//
// [Compile] takes either of two texts and returns a [Program]:
//
//   - A classic BPF program as tcpdump prints it, `tcpdump -dd` (C array
//     lines such as "{ 0x28, 0, 0, 0x0000000c },") or `tcpdump -ddd` (a
//     count, then "code jt jf k" in decimal, on lines or comma separated as
//     iptables' bpf match takes it), used as it is.
//   - An expression in pcap-filter(7) syntax, such as "tcp port 80",
//     compiled in Go by the built-in compiler: no tcpdump, no cgo, no
//     privileges.
//
// The built-in compiler writes, for Ethernet frames, the program libpcap
// 1.10 writes, or one with the same outcome on every frame (a live
// program: on every frame that holds the fields it reads): libpcap's
// grammar (and and or of equal precedence, left to right; "host a or b"
// inheriting the qualifiers), its tests in its order and at its offsets,
// and its optimizer's choice of which tests to skip, which decides what a
// program does with a frame too short for a load it would make. It covers
// host, net (with a length or a mask), port and portrange, with src, dst
// and their combinations; ether host, src, dst, proto, broadcast and
// multicast; ip, ip6, arp, rarp, tcp, udp, sctp, icmp, icmp6, igmp, pim,
// vrrp, ah, esp and the link-layer protocols libpcap names (iso, stp,
// ipx, atalk, ...); proto with numbers and names; vlan (a tag of type
// 0x8100, 0x88a8 or 0x9100, as libpcap 1.10 takes) and mpls (0x8847) with
// their IDs, nested; greater, less, len; byte-offset expressions (ip[6:2] &
// 0x1fff = 0, tcp[tcpflags] & (tcp-syn|tcp-ack) != 0, icmp[icmptype] =
// icmp-echo) with their arithmetic; and, or, not and parentheses. Port and
// protocol names are read from /etc/services and /etc/protocols, as
// libpcap reads them.
//
// What it does not cover is left to tcpdump, when it is installed: host
// and network names (libpcap resolves them), gateway, protochain, ip
// broadcast (it needs the interface's netmask), pppoe, geneve, llc,
// 802.11, and live programs for interfaces that are not Ethernet. Without
// tcpdump, such an expression is an error wrapping [ErrNoCompiler] that
// names the construct and says how to get the program text from a machine
// that has tcpdump. [Options.Compiler] forces one compiler or the other.
//
// The built-in compiler is checked against tcpdump (4.99, libpcap 1.10)
// by compiling thousands of generated expressions with both and running
// both programs over thousands of frames, whole and cut short
// (TestDifferential), with no disagreement; live programs agree on every
// frame that holds the fields the expression reads, and may differ from
// libpcap's, as libpcap's optimized and unoptimized programs differ from
// each other, on a frame cut shorter (which a live socket sees only from
// a malformed frame). Where libpcap's own program is wrong (a later test
// reading X after its optimizer dropped the load; in live programs, the
// first vlan's change of offsets moved ahead of its metadata test, the
// jumps of its ID test broken, or its offset kept in a scratch word that
// arithmetic before it uses), the built-in program keeps the meaning the
// expression has.
//
// # File and live programs
//
// libpcap compiles one expression two ways. For a file (and by default
// here), the program reads 802.1Q tags in the frame bytes, Ethernet being
// what steer/pcapfile delivers for every link type it reads. For a live
// Linux socket, where the kernel has taken the outermost tag out of the
// frame before any filter runs, the first vlan of the expression also
// matches a tag in the socket buffer's metadata (the SKF_AD_VLAN_TAG and
// SKF_AD_VLAN_TAG_PRESENT ancillary loads), and only for a tag in the
// frame do the primitives after it look 4 bytes further: Options.Interface
// asks for that program, for the interface's link type (Compile must run
// in the interface's network namespace). Without vlan in the expression
// both programs are the same. A program text given by hand is used as it
// is.
//
// # User space
//
// [Program.Match] runs the program over one frame in golang.org/x/net/bpf's
// virtual machine, which runs the classic instruction set but no Linux
// ancillary loads: a live program that uses them ([Program.UserSpace] says
// so) runs only in the kernel. The VM's len is the captured length, not the
// wire length, so `greater` and `less` see a truncated frame's captured
// bytes. [NewSource] wraps a steer.Source with a program: each batch keeps
// the frames the program accepts, each cut to the length the program
// returns (a filter's snap length), and the frames it rejects are counted in
// SourceStats.Filtered, neither handled nor dropped: the dispatcher never
// sees them. [Program.Disassemble] prints a program as `tcpdump -d` does.
package filter
