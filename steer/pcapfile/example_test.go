package pcapfile_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"

	"github.com/rpsgo/rps/examples/sample"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// Example reads the embedded sample capture batch by batch and counts its
// frames. A program would use pcapfile.Open with a file name instead.
func Example() {
	r, err := pcapfile.NewReader(sample.Reader())
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	var b steer.Batch
	frames, bytes := 0, 0
	for {
		err := r.ReadBatch(context.Background(), &b)
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		for _, f := range b.Frames {
			frames++
			bytes += f.WireLen
		}
		b.Release() // the batch's buffer goes back to the reader
	}
	fmt.Printf("%s, link type %s: %d frames, %d bytes on the wire, %d batches\n",
		r.Format(), r.LinkType(), frames, bytes, r.Stats().Batches)
	// Output: pcap, link type ETHERNET: 4623 frames, 1150676 bytes on the wire, 73 batches
}

// ExampleWriter copies the frames of the embedded sample capture that are
// longer than 1000 bytes into a new capture, with the input's snap length,
// as tcpdump -r in.pcap -w out.pcap 'greater 1001' would. A program would
// write to a file (through a bufio.Writer: each packet is one Write).
func ExampleWriter() {
	r, err := pcapfile.NewReader(sample.Reader())
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	var out bytes.Buffer
	w, err := pcapfile.NewWriter(&out, r.LinkType(), pcapfile.WriterOptions{SnapLen: r.SnapLen()})
	if err != nil {
		log.Fatal(err)
	}
	var b steer.Batch
	written := 0
	for r.ReadBatch(context.Background(), &b) == nil {
		for _, f := range b.Frames {
			if f.WireLen > 1000 {
				if err := w.WritePacket(f.Timestamp, f.Data, f.WireLen); err != nil {
					log.Fatal(err)
				}
				written++
			}
		}
		b.Release()
	}
	fmt.Printf("%d frames, %d bytes with the header, snap length %d\n", written, out.Len(), r.SnapLen())
	// Output: 159 frames, 204314 bytes with the header, snap length 65535
}
