// Package sample holds a small capture file for examples, tests and
// benchmarks: a minute of synthetic traffic from a tap next to some
// clients, with many TCP/IPv4 connections (handshakes, request and
// response text, closes, and three long transfers), DNS, NTP and syslog
// over UDP, TCP and UDP over IPv6 (with hop-by-hop and destination options
// headers), ICMP and ICMPv6, 802.1Q and QinQ tags, IPv4 and IPv6
// fragments, ARP, LLDP, frames cut by a snap length, and a few malformed
// frames; and a second capture of tunnelled traffic: TCP connections
// carried in VXLAN (most of them), GENEVE, GRE, ERSPAN, GTP-U, IP in IP,
// MPLS, PPPoE and pseudowires between a few tunnel endpoints. Package
// internal/synth documents the contents and builds them; this package only
// embeds them, so that its users do not link gopacket. The sample capture
// itself lives in the public package examples/sample, so that an example
// copied out of the repository can read it; this package passes it on.
package sample

import (
	"bytes"
	_ "embed" // for the tunnels file

	pub "github.com/rpsgo/rps/examples/sample"
)

//go:generate go run ./gen -tunnels -o tunnels.pcap

// Name is the sample's file name.
const Name = pub.Name

// Pcap is the sample capture: a classic pcap file (little-endian,
// microsecond timestamps, link type Ethernet). Do not modify it.
var Pcap = pub.Pcap

// Reader returns a reader of the sample capture.
func Reader() *bytes.Reader { return pub.Reader() }

// TunnelsName is the tunnels capture's file name.
const TunnelsName = "tunnels.pcap"

// Tunnels is the tunnels capture, in the sample's format: by their outer
// headers its connections are a handful of flows, by their inner ones
// each its own (HashConfig.Tunnels = TunnelsInner in package steer).
// Package synth's constants say what it holds. Do not modify it.
//
//go:embed tunnels.pcap
var Tunnels []byte

// TunnelsReader returns a reader of the tunnels capture.
func TunnelsReader() *bytes.Reader { return bytes.NewReader(Tunnels) }
