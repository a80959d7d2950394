package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/google/gopacket"
	"github.com/google/gopacket/pcapgo"

	"github.com/rpsgo/rps/internal/sample"
	"github.com/rpsgo/rps/steer/gopacketsrc"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// pcapngMagic starts a pcapng file (its section header block type).
var pcapngMagic = []byte{0x0a, 0x0d, 0x0d, 0x0a}

// openFile reads a capture file with gopacket's pcapgo (pcap or pcapng, by
// its first bytes), or the embedded sample when name is empty.
func openFile(name string) (*gopacketsrc.Source, func(), error) {
	var rc io.ReadCloser
	switch name {
	case "":
		rc = io.NopCloser(sample.Reader())
	case "-":
		rc = io.NopCloser(os.Stdin)
	default:
		f, err := os.Open(name)
		if err != nil {
			return nil, nil, err
		}
		rc = f
	}
	br := bufio.NewReader(rc)
	var (
		pds  gopacket.PacketDataSource
		link pcapfile.LinkType
	)
	if magic, _ := br.Peek(4); bytes.Equal(magic, pcapngMagic) {
		r, err := pcapgo.NewNgReader(br, pcapgo.DefaultNgReaderOptions)
		if err != nil {
			rc.Close()
			return nil, nil, fmt.Errorf("reading %s: %w", name, err)
		}
		pds, link = r, pcapfile.LinkType(r.LinkType())
	} else {
		r, err := pcapgo.NewReader(br)
		if err != nil {
			rc.Close()
			return nil, nil, fmt.Errorf("reading %s: %w", name, err)
		}
		pds, link = r, pcapfile.LinkType(r.LinkType())
	}
	src, err := gopacketsrc.New(pds, link)
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	return src, func() { src.Close(); rc.Close() }, nil
}
