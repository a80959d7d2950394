// Command gopacketdecode is a gopacket program that steers: it reads a
// capture with gopacket's pcapgo, steers the packets over workers with the
// library, and decodes each one with gopacket in the worker that handles it.
//
//	go run ./examples/gopacketdecode                # the sample capture
//	go run ./examples/gopacketdecode -r trace.pcap -workers 4
//
// It teaches two things. First, bringing a gopacket capture to the
// dispatcher: gopacketsrc.New makes any gopacket packet source a
// steer.Source, copying each packet once into buffers the dispatcher
// releases batch by batch. Here that source is a pcapgo.Reader; a program
// that captures live passes a gopacket/pcap handle instead, with
// gopacketsrc.WithLive so that a full worker queue drops rather than holds
// the capture back (gopacketsrc's documentation shows how). This example
// reads files only, because gopacket/pcap needs cgo and libpcap's headers
// and the repository builds with CGO_ENABLED=0.
//
// Second, decoding in the workers. A gopacket.DecodingLayerParser is not
// safe for concurrent use, so each worker has its own, with the layers it
// decodes into, as its per-worker state (steer.NewPerWorker). It decodes
// the frame in place: no copy, no lock and, for most frames, no
// allocation. The report shows, per worker, how far the frames decoded and
// the TCP and UDP flows seen; each flow is seen by one worker only, which
// is the steering.
//
// Look at decoder (the per-worker state), its decode method (the handler),
// and run.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/rpsgo/rps/examples/sample"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/gopacketsrc"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// decoder is one worker's state. Only the worker's goroutine touches it
// while the dispatcher runs.
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

	frames, failed int
	layers         map[gopacket.LayerType]int // frames by the layers they decoded
	flows          map[flow]bool              // TCP and UDP flows seen, one direction each
}

// flow names one direction of a TCP or UDP flow.
type flow struct{ net, transport gopacket.Flow }

func newDecoder(*steer.Worker) *decoder {
	d := &decoder{layers: map[gopacket.LayerType]int{}, flows: map[flow]bool{}}
	d.parser = gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet,
		&d.eth, &d.dot1q, &d.ip4, &d.ip6, &d.tcp, &d.udp, &d.payload)
	// A layer the parser has no decoder for (ARP, ICMP, a fragment, an
	// IPv6 extension header) ends the decoding quietly.
	d.parser.IgnoreUnsupported = true
	return d
}

// decode is the handler. The layers point into p.Data, which is valid until
// the handler returns; the flows it keeps are copies (gopacket.Flow holds
// its bytes).
func (d *decoder) decode(p *steer.Packet) {
	d.frames++
	if err := d.parser.DecodeLayers(p.Data, &d.decoded); err != nil {
		d.failed++
	}
	var netFlow gopacket.Flow
	for _, lt := range d.decoded {
		d.layers[lt]++
		switch lt {
		case layers.LayerTypeIPv4:
			netFlow = d.ip4.NetworkFlow()
		case layers.LayerTypeIPv6:
			netFlow = d.ip6.NetworkFlow()
		case layers.LayerTypeTCP:
			d.flows[flow{netFlow, d.tcp.TransportFlow()}] = true
		case layers.LayerTypeUDP:
			d.flows[flow{netFlow, d.udp.TransportFlow()}] = true
		}
	}
}

// run steers the classic pcap file name (the sample when name is empty)
// over workers workers (0: one per CPU), each decoding what it handles.
func run(name string, workers int) ([]*decoder, steer.Stats, error) {
	f, err := sample.Open(name)
	if err != nil {
		return nil, steer.Stats{}, err
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f) // pcapgo.NewNgReader reads pcapng
	if err != nil {
		return nil, steer.Stats{}, err
	}
	src, err := gopacketsrc.New(r, pcapfile.LinkType(r.LinkType()))
	if err != nil {
		return nil, steer.Stats{}, err
	}
	d, decoders, err := steer.NewPerWorker(steer.Config{Workers: workers}, newDecoder, (*decoder).decode)
	if err != nil {
		return nil, steer.Stats{}, err
	}
	runErr := d.Run(context.Background(), src)
	if err := d.Close(context.Background()); err != nil {
		return nil, steer.Stats{}, err
	}
	// The workers have exited: the decoders may be read now.
	return decoders, d.Stats(), runErr
}

func print(w io.Writer, decoders []*decoder, st steer.Stats) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "worker\tframes\tIPv4\tIPv6\tTCP\tUDP\tundecodable\tflows\t")
	for i, d := range decoders {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", i, d.frames, d.layers[layers.LayerTypeIPv4], d.layers[layers.LayerTypeIPv6],
			d.layers[layers.LayerTypeTCP], d.layers[layers.LayerTypeUDP], d.failed, len(d.flows))
	}
	tw.Flush()
	fmt.Fprintf(w, "dispatcher: %d frames, %d handled, %d dropped\n", st.Frames, st.Handled(), st.Dropped())
}

func main() {
	file := flag.String("r", "", "classic pcap `file` to read; default: the sample capture")
	workers := flag.Int("workers", 0, "`number` of workers (0: one per CPU)")
	flag.Parse()
	decoders, st, err := run(*file, *workers)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gopacketdecode:", err)
		os.Exit(1)
	}
	print(os.Stdout, decoders, st)
}
