//go:build cgo && rpsexample_pcap

// This file captures live through gopacket/pcap (libpcap). It needs cgo
// and libpcap's headers, so it is built only with the rpsexample_pcap tag:
//
//	go run -tags rpsexample_pcap ./examples/gopacketdecode -i eth0 -f 'tcp port 443'

package main

import (
	"fmt"
	"time"

	"github.com/google/gopacket/pcap"

	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/gopacketsrc"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// readTimeout bounds how long a read of the handle waits for a packet: the
// adapter checks the context between reads, so it bounds how long Ctrl-C
// or -duration takes to stop the capture.
const readTimeout = 100 * time.Millisecond

func init() {
	openLive = func(o options) (*gopacketsrc.Source, func(), error) {
		h, err := pcap.OpenLive(o.device, int32(o.snaplen), true, readTimeout)
		if err != nil {
			return nil, nil, fmt.Errorf("opening %s: %w", o.device, err)
		}
		if o.filter != "" {
			if err := h.SetBPFFilter(o.filter); err != nil {
				h.Close()
				return nil, nil, fmt.Errorf("-f %q: %w", o.filter, err)
			}
		}
		src, err := gopacketsrc.New(h, pcapfile.LinkType(h.LinkType()),
			gopacketsrc.WithLive(), // a full worker queue drops rather than hold libpcap back
			gopacketsrc.WithSourceStats(func() (steer.SourceStats, error) {
				st, err := h.Stats()
				if err != nil {
					return steer.SourceStats{}, err
				}
				return steer.SourceStats{
					Name:     "libpcap " + o.device,
					Received: uint64(st.PacketsReceived),
					Dropped:  uint64(st.PacketsDropped), // for lack of buffer space, as tp_drops
				}, nil
			}))
		if err != nil {
			h.Close()
			return nil, nil, err
		}
		// The dispatcher has stopped reading when done runs, so closing the
		// handle cannot race a read.
		return src, func() { src.Close(); h.Close() }, nil
	}
}
