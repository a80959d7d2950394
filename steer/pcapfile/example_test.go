package pcapfile_test

import (
	"context"
	"fmt"
	"io"
	"log"

	"github.com/rpsgo/rps/internal/sample"
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
			bytes += f.WireLen()
		}
		b.Release() // the batch's buffer goes back to the reader
	}
	fmt.Printf("%s, link type %s: %d frames, %d bytes on the wire, %d batches\n",
		r.Format(), r.LinkType(), frames, bytes, r.Stats().Batches)
	// Output: pcap, link type ETHERNET: 4623 frames, 1150676 bytes on the wire, 73 batches
}
