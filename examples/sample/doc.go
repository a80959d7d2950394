// Package sample holds the sample capture that the examples read when they
// are given no file: a minute of synthetic traffic from a tap next to some
// clients, 4,623 frames (TCP connections over IPv4 and IPv6 with their
// handshakes, requests, responses and closes, three long transfers, DNS, NTP
// and syslog over UDP, ICMP, VLAN tags, fragments, ARP, LLDP, frames cut by
// a snap length and a few malformed ones).
//
// It is a package of its own, outside internal/, so that an example copied
// out of the repository still runs with no arguments: it imports this
// package as it imports the library. Open opens a capture file by name and
// falls back to the sample for none; a program of your own would call
// pcapfile.Open instead.
//
// The file is written by internal/sample/gen; package internal/synth
// documents what it holds in detail.
package sample
