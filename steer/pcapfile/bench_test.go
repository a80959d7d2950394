package pcapfile

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/sample"
	"github.com/rpsgo/rps/steer"
)

// looped reads as a capture file whose header (head) comes once and whose
// records (body) repeat for ever: a file of unbounded length read with a
// copy per read, as a file in the page cache is.
type looped struct {
	head, body []byte
	pos        int // offset in head, then in body once head is read
	inBody     bool
}

func (l *looped) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		src := l.body
		if !l.inBody {
			src = l.head
		}
		if l.pos == len(src) {
			l.pos, l.inBody = 0, true
			continue
		}
		c := copy(p[n:], src[l.pos:])
		l.pos += c
		n += c
	}
	return n, nil
}

// benchFrame is a 64-byte TCP/IPv4 frame, and benchIP its IP packet.
var (
	benchFrame = func() []byte {
		f := make([]byte, 64)
		copy(f, eth(mac1, mac2, 0x0800, ip4))
		f[23] = 6 // TCP
		return f
	}()
	benchIP = benchFrame[14:]
)

// benchRecords is what each link type's benchmark file holds: records that
// become benchFrame (with zero MAC addresses where the link type has none).
func benchRecord(link uint32) []byte {
	switch link {
	case 113: // LINUX_SLL
		return cat(be16(0), be16(1), be16(6), mac2, []byte{0, 0}, be16(0x0800), benchIP)
	case 276: // LINUX_SLL2
		return cat(be16(0x0800), be16(0), be32(3), be16(1), []byte{0, 6}, mac2, []byte{0, 0}, benchIP)
	case 101: // RAW
		return benchIP
	case 0: // NULL
		return cat(le32(2), benchIP)
	case 9: // PPP
		return cat([]byte{0xff, 0x03, 0x00, 0x21}, benchIP)
	}
	return benchFrame
}

const benchRecords = 4096 // records in one pass of a looped file

// benchPcap returns a classic pcap file's header and records.
func benchPcap(order binary.ByteOrder, nano bool, link uint32) (head, body []byte) {
	recs := make([]pcapRec, benchRecords)
	for i := range recs {
		recs[i] = pcapRec{ts: t0.Add(time.Duration(i) * time.Microsecond), data: benchRecord(link)}
	}
	f := writePcap(order, nano, link, recs)
	return f[:24], f[24:]
}

// benchPcapNG returns a pcapng file's section header and interface
// description, and its enhanced packet blocks.
func benchPcapNG(link uint16, tsresol int) (head, body []byte) {
	w := &ngWriter{}
	w.section(binary.LittleEndian)
	w.iface(ngIfOpts{link: link, tsresol: tsresol})
	n := len(w.b)
	for i := range benchRecords {
		w.epb(0, uint64(t0.UnixMicro())+uint64(i), benchRecord(uint32(link)), 0, false)
	}
	return w.b[:n], w.b[n:]
}

// gzipLooped reads as a gzip'd capture of unbounded length: a first gzip
// member holding the file header and records, then members holding the
// records alone, for ever (a multi-member stream decompresses to the
// concatenation of its members).
type gzipLooped struct{ looped }

func newGzipLooped(head, body []byte) *gzipLooped {
	member := func(parts ...[]byte) []byte {
		var zb bytes.Buffer
		zw := gzip.NewWriter(&zb)
		for _, p := range parts {
			zw.Write(p)
		}
		zw.Close()
		return zb.Bytes()
	}
	return &gzipLooped{looped{head: member(head, body), body: member(body)}}
}

// readLoop measures ReadBatch and Release, one batch per op; ns/frame is
// the cost of a frame.
func readLoop(b *testing.B, r *Reader) {
	b.ReportAllocs()
	var batch steer.Batch
	ctx := context.Background()
	for range 1000 { // reach the steady state: chunks and batch handles pooled
		if err := r.ReadBatch(ctx, &batch); err != nil {
			b.Fatal(err)
		}
		batch.Release()
	}
	frames, nbytes := 0, 0
	for b.Loop() {
		if err := r.ReadBatch(ctx, &batch); err != nil {
			b.Fatal(err)
		}
		frames += len(batch.Frames)
		for i := range batch.Frames {
			nbytes += len(batch.Frames[i].Data)
		}
		batch.Release()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(max(frames, 1)), "ns/frame")
	b.ReportMetric(float64(nbytes)/float64(max(frames, 1)), "B/frame")
}

// BenchmarkRead reads 64-byte frames from an endless in-memory file, a
// batch of 64 per op, by each read path: classic pcap in both byte orders
// and both resolutions, pcapng, each link type the reader rewrites into
// Ethernet, and gzip'd input.
func BenchmarkRead(b *testing.B) {
	le, be := binary.LittleEndian, binary.BigEndian
	cases := []struct {
		name string
		src  func() io.Reader
	}{
		{"pcap-ethernet", func() io.Reader { h, d := benchPcap(le, false, 1); return &looped{head: h, body: d} }},
		{"pcap-ethernet-nsec", func() io.Reader { h, d := benchPcap(le, true, 1); return &looped{head: h, body: d} }},
		{"pcap-ethernet-bigendian", func() io.Reader { h, d := benchPcap(be, false, 1); return &looped{head: h, body: d} }},
		{"pcap-sll", func() io.Reader { h, d := benchPcap(le, false, 113); return &looped{head: h, body: d} }},
		{"pcap-sll2", func() io.Reader { h, d := benchPcap(le, false, 276); return &looped{head: h, body: d} }},
		{"pcap-raw", func() io.Reader { h, d := benchPcap(le, false, 101); return &looped{head: h, body: d} }},
		{"pcap-null", func() io.Reader { h, d := benchPcap(le, false, 0); return &looped{head: h, body: d} }},
		{"pcap-ppp", func() io.Reader { h, d := benchPcap(le, false, 9); return &looped{head: h, body: d} }},
		{"pcapng-ethernet", func() io.Reader { h, d := benchPcapNG(1, -1); return &looped{head: h, body: d} }},
		{"pcapng-ethernet-nsec", func() io.Reader { h, d := benchPcapNG(1, 9); return &looped{head: h, body: d} }},
		{"pcapng-sll", func() io.Reader { h, d := benchPcapNG(113, -1); return &looped{head: h, body: d} }},
		{"pcap-ethernet-gzip", func() io.Reader { h, d := benchPcap(le, false, 1); return newGzipLooped(h, d) }},
		{"sample", func() io.Reader { return &looped{head: sample.Pcap[:24], body: sample.Pcap[24:]} }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			r, err := NewReader(c.src())
			if err != nil {
				b.Fatal(err)
			}
			readLoop(b, r)
		})
	}
}

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
				frames += readToEOF(b, r, &batch)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(frames), "ns/frame")
		})
	}
}

// BenchmarkReadFile reads a 32 MiB file of 64-byte frames through Open,
// the whole file per op: reads from the page cache, as a program reading
// a capture it wrote recently does.
func BenchmarkReadFile(b *testing.B) {
	head, body := benchPcap(binary.LittleEndian, false, 1)
	path := filepath.Join(b.TempDir(), "f.pcap")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	f.Write(head)
	for range (32 << 20) / len(body) {
		f.Write(body)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	frames := 0
	var batch steer.Batch
	for b.Loop() {
		r, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		frames += readToEOF(b, r, &batch)
		r.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(frames), "ns/frame")
}

// readToEOF reads r to its end, releasing each batch at once, and returns
// the number of frames.
func readToEOF(b *testing.B, r *Reader, batch *steer.Batch) int {
	frames := 0
	for {
		err := r.ReadBatch(context.Background(), batch)
		if err == io.EOF {
			return frames
		}
		if err != nil {
			b.Fatal(err)
		}
		frames += len(batch.Frames)
		batch.Release()
	}
}
