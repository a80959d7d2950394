package wire

import "time"

// The UDP destination ports of the tunnels whose port is fixed (IANA's).
// VXLAN's is configurable: steer.VXLANPort and HashConfig.VXLANPorts.
const (
	GENEVEPort  = 6081 // GENEVE, RFC 8926
	GTPUPort    = 2152 // GTP-U, 3GPP TS 29.281
	MPLSUDPPort = 6635 // MPLS over UDP, RFC 7510
)

// The fragment table of steer.FragmentsFollow.
const (
	// FragmentTableSize is how many datagrams an input's fragment table
	// remembers.
	FragmentTableSize = 4096
	// FragmentTimeout is how long, in capture time, an IPv4 datagram's
	// first fragment is remembered: Linux's ipfrag_time.
	FragmentTimeout = 30 * time.Second
	// FragmentTimeout6 is the same for IPv6: Linux's ip6frag_time.
	FragmentTimeout6 = 60 * time.Second
)
