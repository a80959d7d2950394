package gopacketsrc_test

import (
	"context"
	"testing"

	"github.com/google/gopacket/pcapgo"

	"github.com/rpsgo/rps/internal/sample"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/gopacketsrc"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// endless reads as a pcap file whose records are the sample capture's,
// over and over: the file header once, then the records in a loop.
type endless struct {
	data []byte // the sample capture
	pos  int
}

const pcapHeaderLen = 24

func (e *endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if e.pos == len(e.data) {
			e.pos = pcapHeaderLen
		}
		c := copy(p[n:], e.data[e.pos:])
		e.pos += c
		n += c
	}
	return n, nil
}

// BenchmarkSample reads the sample capture, looped in memory, a batch of
// 64 frames per op: through pcapfile; through a pcapgo reader and the
// adapter, zero-copy and with ReadPacketData; and, for scale, with the
// pcapgo reader alone (64 reads, no batch, no copy). ns/frame is the cost
// of a frame, frames/s its inverse.
func BenchmarkSample(b *testing.B) {
	newPcapgo := func(b *testing.B) *pcapgo.Reader {
		r, err := pcapgo.NewReader(&endless{data: sample.Pcap})
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	b.Run("pcapfile", func(b *testing.B) {
		r, err := pcapfile.NewReader(&endless{data: sample.Pcap})
		if err != nil {
			b.Fatal(err)
		}
		readBatches(b, context.Background(), r)
	})
	b.Run("pcapgo-adapter", func(b *testing.B) {
		r := newPcapgo(b)
		src, err := gopacketsrc.New(r, pcapfile.LinkType(r.LinkType()))
		if err != nil {
			b.Fatal(err)
		}
		readBatches(b, context.Background(), src)
	})
	b.Run("pcapgo-adapter-copying", func(b *testing.B) {
		r := newPcapgo(b)
		src, err := gopacketsrc.New(copyOnly{r}, pcapfile.LinkType(r.LinkType()))
		if err != nil {
			b.Fatal(err)
		}
		readBatches(b, context.Background(), src)
	})
	b.Run("pcapgo-alone", func(b *testing.B) {
		r := newPcapgo(b)
		b.ReportAllocs()
		frames := 0
		for b.Loop() {
			for range gopacketsrc.DefaultBatchSize {
				if _, _, err := r.ZeroCopyReadPacketData(); err != nil {
					b.Fatal(err)
				}
			}
			frames += gopacketsrc.DefaultBatchSize
		}
		report(b, frames)
	})
}

// BenchmarkReadBatch measures the adapter alone: a batch of 64 frames of
// 590 bytes per op from a packet source that costs nothing, half of them
// with an AncillaryVLAN.
func BenchmarkReadBatch(b *testing.B) {
	src, err := gopacketsrc.NewZeroCopy(&loop{data: numbered(1, 590)}, pcapfile.LinkTypeEthernet)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background()) // one with a Done channel
	defer cancel()
	readBatches(b, ctx, src)
}

// readBatches reads and releases a batch per op and reports the cost per
// frame.
func readBatches(b *testing.B, ctx context.Context, src steer.Source) {
	b.ReportAllocs()
	var batch steer.Batch
	frames := 0
	for b.Loop() {
		if err := src.ReadBatch(ctx, &batch); err != nil {
			b.Fatal(err)
		}
		frames += len(batch.Frames)
		batch.Release()
	}
	report(b, frames)
}

func report(b *testing.B, frames int) {
	if frames == 0 {
		return
	}
	ns := float64(b.Elapsed().Nanoseconds()) / float64(frames)
	b.ReportMetric(ns, "ns/frame")
	b.ReportMetric(1e9/ns, "frames/s")
}

// BenchmarkRun steers the whole sample capture per op through a dispatcher
// with two workers and a handler that does nothing, read by pcapfile and
// by a pcapgo reader through the adapter: the adapter's share of a run.
// Opening the readers is part of each op.
func BenchmarkRun(b *testing.B) {
	open := map[string]func() (steer.Source, error){
		"pcapfile": func() (steer.Source, error) { return pcapfile.NewReader(sample.Reader()) },
		"pcapgo-adapter": func() (steer.Source, error) {
			r, err := pcapgo.NewReader(sample.Reader())
			if err != nil {
				return nil, err
			}
			return gopacketsrc.New(r, pcapfile.LinkType(r.LinkType()))
		},
	}
	for _, name := range []string{"pcapfile", "pcapgo-adapter"} {
		b.Run(name, func(b *testing.B) {
			d, err := steer.New(steer.Config{Workers: 2}, func(*steer.Packet) {})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close(context.Background())
			b.ReportAllocs()
			frames := 0
			for b.Loop() {
				src, err := open[name]()
				if err != nil {
					b.Fatal(err)
				}
				if err := d.Run(context.Background(), src); err != nil {
					b.Fatal(err)
				}
				frames += 4623
			}
			report(b, frames)
		})
	}
}
