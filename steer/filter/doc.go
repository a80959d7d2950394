// Package filter is capture filtering for the steering sources: a filter in
// tcpdump's syntax, or the classic BPF program tcpdump compiles it to, run
// in the kernel on a live socket (package afpacket attaches it with
// SO_ATTACH_FILTER) or in user space over any steer.Source (a capture file).
//
// # Where the program comes from
//
// [Compile] takes either of two texts and returns a [Program]:
//
//   - A classic BPF program as tcpdump prints it, `tcpdump -dd` (C array
//     lines such as "{ 0x28, 0, 0, 0x0000000c },") or `tcpdump -ddd` (a
//     count, then "code jt jf k" in decimal, on lines or comma separated as
//     iptables' bpf match takes it). This is parsed in Go, everywhere, with no
//     other program: the pure-Go path.
//   - An expression in pcap-filter(7) syntax, such as "tcp port 80".
//     It is compiled by running `tcpdump -dd` when tcpdump is on PATH, and is
//     an error wrapping [ErrNoCompiler] otherwise, which says how to get the
//     program text from a machine that has tcpdump.
//
// Why tcpdump and not a compiler in Go: the one pure-Go compiler of the
// syntax, github.com/packetcap/go-pcap's filter package, was measured
// against tcpdump 4.99.3 (libpcap 1.10.3) on 35 expressions (tcp port 80,
// host, udp and not port 53, vlan, ip6, icmp, portrange, net with a length
// and with a mask, and/or/not, ether proto, ...), by running both programs
// over 3,699 synthetic frames: it agreed on 14. It emits programs that jump
// past their end for ip, ip6, arp and ip6 and tcp; does not parse vlan,
// less, greater or numeric protocols (ether proto 0x88cc, ip proto 47);
// compiles portrange to a program that accepts nothing; and gives other
// answers than tcpdump for icmp, icmp6, net with a mask, tcp[13] & 2 != 0
// and expressions that mix and with or (libpcap gives them equal
// precedence, left to right). A filter that silently lets the wrong frames
// through is worse than none, and matching libpcap's semantics (qualifier
// inheritance, VLAN offsets, Linux's out-of-band VLAN tags) is a compiler
// project of its own; libpcap, through tcpdump, is the reference. So the
// library accepts libpcap's output, and uses tcpdump as a helper where it is
// installed.
//
// # File and live programs
//
// libpcap compiles one expression two ways. For a file (and by default
// here), the program reads 802.1Q tags in the frame bytes: Compile runs
// `tcpdump -y EN10MB -dd EXPR`, Ethernet being what steer/pcapfile delivers
// for every link type it reads. For a live Linux socket, where the kernel
// has taken the outermost tag out of the frame before any filter runs,
// libpcap also reads it from the socket's metadata (the SKF_AD_VLAN_TAG
// loads): Options.Interface asks for that program, compiled as
// `tcpdump -i IFACE -p -dd EXPR`, which opens the interface briefly (it
// needs the capture privileges a live capture needs anyway, and must run in
// the interface's network namespace). Without vlan in the expression both
// programs are the same. A program text given by hand is used as it is.
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
// sees them.
package filter
