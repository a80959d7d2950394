// Package sample holds a small capture file for examples, tests and
// benchmarks: a minute of synthetic traffic from a tap next to some
// clients, with many TCP/IPv4 connections (handshakes, request and
// response text, closes, and three long transfers), DNS, NTP and syslog
// over UDP, TCP and UDP over IPv6 (with hop-by-hop and destination options
// headers), ICMP and ICMPv6, 802.1Q and QinQ tags, IPv4 and IPv6
// fragments, ARP, LLDP, frames cut by a snap length, and a few malformed
// frames. Package samplegen documents the contents and builds the file;
// this package only embeds it, so that its users do not link gopacket.
package sample

import (
	"bytes"
	_ "embed" // for the sample file
)

//go:generate go run ./gen -o sample.pcap

// Name is the sample's file name.
const Name = "sample.pcap"

// Pcap is the sample capture: a classic pcap file (little-endian,
// microsecond timestamps, link type Ethernet). Do not modify it.
//
//go:embed sample.pcap
var Pcap []byte

// Reader returns a reader of the sample capture.
func Reader() *bytes.Reader { return bytes.NewReader(Pcap) }
