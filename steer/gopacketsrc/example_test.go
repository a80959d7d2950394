package gopacketsrc_test

import (
	"context"
	"fmt"
	"log"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/rpsgo/rps/examples/sample"
	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/gopacketsrc"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// Steer what a gopacket packet source reads. A pcapgo reader of the
// embedded sample stands for any of them: a pcap handle, an afpacket
// TPacket or a PF_RING ring is passed the same way, with WithLive.
func ExampleNew() {
	r, err := pcapgo.NewReader(sample.Reader())
	if err != nil {
		log.Fatal(err)
	}
	src, err := gopacketsrc.New(r, pcapfile.LinkType(r.LinkType()))
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()

	d, err := steer.New(steer.Config{Workers: 2}, func(p *steer.Packet) {})
	if err != nil {
		log.Fatal(err)
	}
	if err := d.Run(context.Background(), src); err != nil {
		log.Fatal(err)
	}
	if err := d.Close(context.Background()); err != nil {
		log.Fatal(err)
	}
	st, ss := d.Stats(), src.Stats()
	fmt.Printf("%d packets read in %d batches; %d frames handled, %d dropped\n",
		ss.Packets, ss.Batches, st.Handled(), st.Dropped())
	// Output: 4623 packets read in 73 batches; 4623 frames handled, 0 dropped
}

// decoder is one worker's gopacket decoding state: a DecodingLayerParser
// and the layers it decodes into, which are reused for every packet.
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

	// What the worker counted.
	frames, tcp4, tcp6, udps, failed, tcpPayload int
}

func newDecoder(*steer.Worker) *decoder {
	d := &decoder{decoded: make([]gopacket.LayerType, 0, 8)}
	d.parser = gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet,
		&d.eth, &d.dot1q, &d.ip4, &d.ip6, &d.tcp, &d.udp, &d.payload)
	// Stop quietly at a layer the parser has no decoder for (ARP, ICMP,
	// fragments, IPv6 extension headers, ...) rather than report it as an
	// error.
	d.parser.IgnoreUnsupported = true
	return d
}

// decode runs in the worker that handles p. The parser decodes p.Data in
// place: no copy, and no allocation for a well-formed IPv4 frame (gopacket
// allocates for its errors and for IPv6 hop-by-hop options); the layers
// point into the frame, so they are valid until the handler returns (copy
// what must outlive it, or keep the frame with p.Retain).
func (d *decoder) decode(p *steer.Packet) {
	d.frames++
	if err := d.parser.DecodeLayers(p.Data, &d.decoded); err != nil {
		d.failed++ // a truncated or malformed frame: the layers before it stay decoded
	}
	ip6 := false
	for _, lt := range d.decoded {
		switch lt {
		case layers.LayerTypeIPv6:
			ip6 = true
		case layers.LayerTypeTCP:
			if ip6 {
				d.tcp6++
			} else {
				d.tcp4++
			}
			d.tcpPayload += len(d.tcp.Payload)
		case layers.LayerTypeUDP:
			d.udps++
		}
	}
}

// Decode steered packets with gopacket in the workers. A
// DecodingLayerParser is not safe for concurrent use, so each worker keeps
// its own, as its per-worker state: no lock and no copy. The Microsoft key makes the split between the workers
// reproducible; every flow is decoded by one worker whatever the key.
func Example_decodingLayerParser() {
	d, decoders, err := steer.NewPerWorker(
		steer.Config{Workers: 2, Hash: steer.HashConfig{Key: hash.MicrosoftKey[:]}},
		newDecoder, (*decoder).decode)
	if err != nil {
		log.Fatal(err)
	}
	r, err := pcapgo.NewReader(sample.Reader())
	if err != nil {
		log.Fatal(err)
	}
	src, err := gopacketsrc.New(r, pcapfile.LinkType(r.LinkType()))
	if err != nil {
		log.Fatal(err)
	}
	if err := d.Run(context.Background(), src); err != nil {
		log.Fatal(err)
	}
	// After Close the workers are gone and their states can be read.
	if err := d.Close(context.Background()); err != nil {
		log.Fatal(err)
	}
	for i, dec := range decoders {
		fmt.Printf("worker %d: %d frames: %d TCP/IPv4, %d TCP/IPv6, %d UDP, %d undecodable; %d bytes of TCP payload\n",
			i, dec.frames, dec.tcp4, dec.tcp6, dec.udps, dec.failed, dec.tcpPayload)
	}
	// Output:
	// worker 0: 2370 frames: 1883 TCP/IPv4, 141 TCP/IPv6, 297 UDP, 4 undecodable; 543992 bytes of TCP payload
	// worker 1: 2253 frames: 1762 TCP/IPv4, 127 TCP/IPv6, 286 UDP, 2 undecodable; 283678 bytes of TCP payload
}
