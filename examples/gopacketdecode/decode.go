package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/gopacketsrc"
)

// decoder is one worker's state: a DecodingLayerParser with the layers it
// decodes into, and what the worker counted. Only that worker's goroutine
// touches it while the dispatcher runs.
type decoder struct {
	eth     layers.Ethernet
	dot1q   layers.Dot1Q
	ip4     layers.IPv4
	ip6     layers.IPv6
	tcp     layers.TCP
	udp     layers.UDP
	payload gopacket.Payload
	parser  *gopacket.DecodingLayerParser
	decoded []gopacket.LayerType

	frames, ip4s, ip6s, tcps, udps, failed int
	flows                                  map[flow]bool // TCP and UDP flows seen, one direction each
}

// flow names one direction of a TCP or UDP flow.
type flow struct {
	net, transport gopacket.Flow
}

func newDecoder(*steer.Worker) *decoder {
	d := &decoder{decoded: make([]gopacket.LayerType, 0, 8), flows: map[flow]bool{}}
	d.parser = gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet,
		&d.eth, &d.dot1q, &d.ip4, &d.ip6, &d.tcp, &d.udp, &d.payload)
	// A layer the parser has no decoder for (ARP, ICMP, a fragment, an
	// IPv6 extension header) ends the decoding quietly.
	d.parser.IgnoreUnsupported = true
	return d
}

// decode runs in the worker that handles p. The parser decodes p.Data in
// place; the layers point into the frame and are valid until the handler
// returns, so the flow keys (gopacket.Flow copies its bytes) are what it
// keeps.
func (d *decoder) decode(p *steer.Packet) {
	d.frames++
	if err := d.parser.DecodeLayers(p.Data, &d.decoded); err != nil {
		d.failed++
	}
	var netFlow gopacket.Flow
	for _, lt := range d.decoded {
		switch lt {
		case layers.LayerTypeIPv4:
			d.ip4s++
			netFlow = d.ip4.NetworkFlow()
		case layers.LayerTypeIPv6:
			d.ip6s++
			netFlow = d.ip6.NetworkFlow()
		case layers.LayerTypeTCP:
			d.tcps++
			d.flows[flow{netFlow, d.tcp.TransportFlow()}] = true
		case layers.LayerTypeUDP:
			d.udps++
			d.flows[flow{netFlow, d.udp.TransportFlow()}] = true
		}
	}
}

// report is what the command prints.
type report struct {
	decoders []*decoder
	stats    steer.Stats
	source   gopacketsrc.Stats
}

func (r *report) write(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "worker\tframes\tIPv4\tIPv6\tTCP\tUDP\tundecodable\tflows\t")
	var total decoder
	for i, d := range r.decoders {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", i, d.frames, d.ip4s, d.ip6s, d.tcps, d.udps, d.failed, len(d.flows))
		total.frames += d.frames
		total.ip4s += d.ip4s
		total.ip6s += d.ip6s
		total.tcps += d.tcps
		total.udps += d.udps
		total.failed += d.failed
	}
	fmt.Fprintf(tw, "all\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", total.frames, total.ip4s, total.ip6s, total.tcps, total.udps, total.failed, r.spread())
	tw.Flush()
	fmt.Fprintf(w, "source: %d packets read in %d batches (%d read timeouts); dispatcher: %d frames, %d handled, %d dropped\n",
		r.source.Packets, r.source.Batches, r.source.Timeouts, r.stats.Frames, r.stats.Handled(), r.stats.Dropped())
	for _, s := range r.stats.Sources {
		fmt.Fprintf(w, "%s: %d received, %d dropped\n", s.Name, s.Received, s.Dropped)
	}
}

// spread returns the number of distinct flows over all workers, and so,
// when it equals the sum of the workers' counts, shows that no flow was
// seen by two workers.
func (r *report) spread() int {
	all := map[flow]bool{}
	for _, d := range r.decoders {
		for f := range d.flows {
			all[f] = true
		}
	}
	return len(all)
}
