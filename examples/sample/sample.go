package sample

import (
	"bytes"
	_ "embed" // for the sample file
	"io"
	"os"
)

//go:generate go run ../../internal/sample/gen -o sample.pcap

// Name is the sample's file name.
const Name = "sample.pcap"

// Pcap is the sample capture: a classic pcap file (little-endian,
// microsecond timestamps, link type Ethernet). Do not modify it.
//
//go:embed sample.pcap
var Pcap []byte

// Reader returns a reader of the sample capture.
func Reader() *bytes.Reader { return bytes.NewReader(Pcap) }

// Open opens the capture file name, or the sample when name is empty, for
// a reader such as pcapfile.NewReader or gopacket's pcapgo.NewReader.
func Open(name string) (io.ReadCloser, error) {
	if name == "" {
		return io.NopCloser(Reader()), nil
	}
	return os.Open(name) // its error names the file
}
