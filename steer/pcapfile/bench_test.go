package pcapfile

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"testing"

	"github.com/rpsgo/rps/internal/sample"
	"github.com/rpsgo/rps/steer"
)

// BenchmarkReadSample reads the whole embedded sample per iteration
// (opening included), releasing each batch at once.
func BenchmarkReadSample(b *testing.B) {
	for _, bs := range []int{16, 64, 256} {
		b.Run(map[int]string{16: "batch16", 64: "batch64", 256: "batch256"}[bs], func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(sample.Pcap)))
			frames := 0
			var batch steer.Batch
			for b.Loop() {
				r, err := NewReader(bytes.NewReader(sample.Pcap), WithBatchSize(bs))
				if err != nil {
					b.Fatal(err)
				}
				for {
					err := r.ReadBatch(context.Background(), &batch)
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					frames += len(batch.Frames)
					batch.Release()
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(frames), "ns/frame")
		})
	}
}

// BenchmarkReadBatch measures one steady-state ReadBatch+Release of 64
// frames on the Linux cooked (SLL) link type, which is rewritten in place.
func BenchmarkReadBatch(b *testing.B) {
	w := &ngWriter{}
	w.section(binary.LittleEndian)
	w.iface(ngIfOpts{link: 113, tsresol: -1})
	rec := cat(be16(0), be16(1), be16(6), mac2, []byte{0, 0}, be16(0x0800), ip4, make([]byte, 400))
	for i := range 64 * 256 {
		w.epb(0, uint64(i), rec, 0, false)
	}
	b.ReportAllocs()
	var batch steer.Batch
	var r *Reader
	frames := 0
	for b.Loop() {
		if r == nil || r.ReadBatch(context.Background(), &batch) == io.EOF {
			var err error
			if r, err = NewReader(bytes.NewReader(w.b)); err != nil {
				b.Fatal(err)
			}
			continue
		}
		frames += len(batch.Frames)
		batch.Release()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(max(frames, 1)), "ns/frame")
}
