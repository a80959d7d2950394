// Package synth builds synthetic Ethernet frames for the repository's
// tests, benchmarks and tools, deterministically from a seed. It is the
// one frame generator:
//
//   - Spec, Generator, Frames and Build: TCP or UDP over IPv4 from a chosen
//     number of flows, with a chosen frame size and flow-size distribution,
//     each frame numbered within its flow (Seq), built by hand and fast
//     enough for captures larger than memory (bench/synthpcap).
//   - Cases and BigCases: a flow (Flow, TCP or UDP over IPv4 or IPv6) in
//     every encapsulation the classifier walks (VLAN tags, MPLS with and
//     without a pseudowire, PPPoE, Cisco MetaData, VXLAN, GENEVE, GRE with
//     its key, checksum and sequence fields, NVGRE, ERSPAN types I, II and
//     III, GTP-U, IP in IP, MPLS over UDP, tunnels nested in tunnels), and
//     in packets over 64 KiB as BIG TCP sends them; VXLANCapture and
//     FragmentedUDP, captures made of such frames; Fragment, which cuts an
//     IP packet into fragments.
//   - Sample and SampleTunnels: the sample captures that examples/sample
//     and internal/sample embed, a minute of conversations from a tap
//     (internal/sample/gen writes them).
//   - Packet, Packets and WriteAll: frames as a capture's packets, written
//     to a PacketWriter such as steer/pcapfile's Writer (synth does not
//     import pcapfile, which imports steer, whose own tests import synth).
//
// The sample's conversations are written with gopacket's layers (TCP
// options, DNS, ICMPv6 neighbor discovery); every tunnel and shim header,
// and the encapsulation cases' frames, by hand, each header kind once
// (headers.go). The library's packages do not import synth.
package synth
