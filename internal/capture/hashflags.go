package capture

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/steer"
)

// HashFlags are the flags that say what a flowid is computed from, alike in
// both commands:
//
//	-tunnels outer|inner   steer.HashConfig.Tunnels (default outer)
//	-vxlan-ports LIST      HashConfig.VXLANPorts, comma-separated (default 4789)
//	-hashtypes SET         HashConfig.Types, in hash.Types' text form
//	                       (default ipv4,tcp_ipv4,ipv6,tcp_ipv6)
//	-udp4tuple             HashConfig.UDP4Tuple: adds udp_ipv4,udp_ipv6
//	-fragments tuple|follow HashConfig.Fragments (default tuple)
//	-hash toeplitz|siphash HashConfig.Algorithm (default toeplitz)
//
// The key and symmetric hashing stay the commands' own flags.
type HashFlags struct {
	Tunnels   steer.TunnelMode   // -tunnels
	Types     hash.Types         // -hashtypes
	UDP4Tuple bool               // -udp4tuple
	Fragments steer.FragmentMode // -fragments
	Algorithm hash.Algorithm     // -hash
	ports     string             // -vxlan-ports, parsed by Config
}

// Register adds the flags to fs.
func (h *HashFlags) Register(fs *flag.FlagSet) {
	fs.TextVar(&h.Tunnels, "tunnels", steer.TunnelsOuter,
		"`mode`: outer hashes a tunnelled frame by its outer header, as a NIC and FreeBSD do; inner opens VXLAN, GENEVE, GRE, ERSPAN, GTP-U, IP in IP and MPLS over UDP and hashes the innermost flow (MPLS, PPPoE and Cisco MetaData are walked either way)")
	fs.StringVar(&h.ports, "vxlan-ports", "",
		fmt.Sprintf("UDP destination `ports` taken for VXLAN, comma-separated, such as 4789,8472 (Linux's legacy port); default %d", steer.VXLANPort))
	fs.TextVar(&h.Types, "hashtypes", hash.DefaultTypes,
		"the RSS hash types in use, a comma-separated `set` of ipv4, tcp_ipv4, udp_ipv4, ipv6, tcp_ipv6, udp_ipv6: a protocol without its 4-tuple type hashes by its addresses; ipv4,ipv6 hashes by IP pair only")
	fs.BoolVar(&h.UDP4Tuple, "udp4tuple", false, "hash UDP over addresses and ports: -hashtypes with udp_ipv4,udp_ipv6 added")
	fs.TextVar(&h.Fragments, "fragments", steer.FragmentsTuple,
		"`mode`: tuple hashes every fragment by its addresses, as FreeBSD and Linux do (with a 4-tuple hash type a datagram's fragments may then leave its flow's worker); follow hashes a first fragment by its ports and sends the datagram's later fragments after it")
	fs.TextVar(&h.Algorithm, "hash", hash.AlgorithmToeplitz,
		"hash `function`: toeplitz (what a NIC's RSS and FreeBSD compute) or siphash (keyed, resists an attacker who can observe collisions)")
}

// Config returns the hash configuration the flags give, with the key and
// symmetric setting the command chose, checked as package steer checks
// it: a value or a combination steer refuses is a usage error naming the
// flag (still errors.Is steer.ErrConfig).
func (h *HashFlags) Config(key []byte, symmetric bool) (steer.HashConfig, error) {
	ports, err := parsePorts(h.ports)
	if err != nil {
		return steer.HashConfig{}, cli.Usagef("-vxlan-ports: %v", err)
	}
	// Each part alone first, so that the error names its flag.
	if err := checkHash(steer.HashConfig{VXLANPorts: ports}); err != nil {
		return steer.HashConfig{}, cli.UsageError(fmt.Errorf("-vxlan-ports: %w", err))
	}
	if err := checkHash(steer.HashConfig{Types: h.Types, UDP4Tuple: h.UDP4Tuple}); err != nil {
		return steer.HashConfig{}, cli.UsageError(fmt.Errorf("-hashtypes: %w", err))
	}
	hc := steer.HashConfig{
		Algorithm: h.Algorithm, Key: key, Symmetric: symmetric,
		Types: h.Types, UDP4Tuple: h.UDP4Tuple, Tunnels: h.Tunnels, VXLANPorts: ports, Fragments: h.Fragments,
	}
	if err := checkHash(hc); err != nil {
		return steer.HashConfig{}, cli.UsageError(fmt.Errorf("-hash %s and -key: %w", h.Algorithm, err))
	}
	return hc, nil
}

// checkHash returns steer's error for a hash configuration it refuses.
func checkHash(hc steer.HashConfig) error {
	_, err := steer.NewClassifier(hc)
	return err
}

// parsePorts parses a comma-separated list of UDP ports; "" is nil (the
// library's default).
func parsePorts(s string) ([]uint16, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var ports []uint16
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.ParseUint(f, 10, 16)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("%q: %q is not a port from 1 to 65535", s, f)
		}
		if slices.Contains(ports, uint16(n)) {
			return nil, fmt.Errorf("%q: port %d is listed twice", s, n)
		}
		ports = append(ports, uint16(n))
	}
	return ports, nil
}

// HashSummary describes a hash configuration in one line, for
// the commands' headers: the function, the hash types, and the tunnel
// mode with the VXLAN ports, such as "toeplitz over ipv4,tcp_ipv4,ipv6,tcp_ipv6,
// tunnels inner (vxlan ports 4789)".
func HashSummary(hc steer.HashConfig) string {
	types := hc.Types
	if types == 0 {
		types = hash.DefaultTypes
	}
	if hc.UDP4Tuple {
		types |= hash.TypeUDPIPv4 | hash.TypeUDPIPv6
	}
	s := fmt.Sprintf("%s over %s, tunnels %s", hc.Algorithm, types, hc.Tunnels)
	ports := hc.VXLANPorts
	if ports == nil {
		ports = []uint16{steer.VXLANPort}
	}
	if hc.Tunnels == steer.TunnelsInner {
		list := make([]string, len(ports))
		for i, p := range ports {
			list[i] = strconv.Itoa(int(p))
		}
		s += " (vxlan ports " + strings.Join(list, ",") + ")"
	}
	if hc.Fragments == steer.FragmentsFollow {
		s += ", fragments follow"
	}
	if hc.Symmetric {
		s += ", symmetric"
	}
	return s
}
