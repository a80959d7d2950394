package pcapfile

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/rpsgo/rps/steer"
)

// testChunkSizes are chunk sizes that put records across chunk boundaries
// at every offset: headers, captured bytes, pcapng options and trailers
// split, records larger than a chunk. The smallest leave a few bytes of
// room after the reserve.
var testChunkSizes = []int{chunkReserve + 1, chunkReserve + 7, 100, 129, 256, 1000, 4099}

// readChunked reads file with chunks of size bytes and returns its frames
// (copied) and the error that ended it, or the error of newReader.
func readChunked(t testing.TB, file []byte, size int, opt ...Option) ([]steer.Frame, error) {
	t.Helper()
	r, err := newReader(bytes.NewReader(file), size, opt)
	if err != nil {
		return nil, err
	}
	return readAll(t, r)
}

// sameRead checks that reading file with small chunks gives what reading
// it with the usual chunks gives: the same frames, field by field, and the
// same error.
func sameRead(t *testing.T, name string, file []byte, opt ...Option) {
	t.Helper()
	want, wantErr := readChunked(t, file, chunkSize, opt...)
	for _, size := range testChunkSizes {
		got, err := readChunked(t, file, size, opt...)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Errorf("%s, %d-byte chunks: error %v, want %v", name, size, err, wantErr)
		}
		if d := diffFrames(got, want); d != "" {
			t.Errorf("%s, %d-byte chunks: %s", name, size, d)
		}
	}
}

// diffFrames says how got differs from want, field by field, or returns
// "" when they are the same.
func diffFrames(got, want []steer.Frame) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d frames, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !bytes.Equal(g.Data, w.Data) || !g.Timestamp.Equal(w.Timestamp) || g.WireLen != w.WireLen || g.IfIndex != w.IfIndex {
			return fmt.Sprintf("frame %d is %x %v len %d if %d, want %x %v len %d if %d",
				i, g.Data, g.Timestamp, g.WireLen, g.IfIndex, w.Data, w.Timestamp, w.WireLen, w.IfIndex)
		}
	}
	return ""
}

// chunkTestFiles returns files of every format and link type, with records
// and blocks of many sizes.
func chunkTestFiles() map[string][]byte {
	files := map[string][]byte{}
	for _, c := range linkCases() {
		var recs []pcapRec
		for i := range 9 {
			recs = append(recs, pcapRec{ts: t0.Add(time.Duration(i) * time.Millisecond), data: c.rec, orig: len(c.rec) + i})
		}
		files["pcap-le-"+c.name] = writePcap(binary.LittleEndian, false, c.link, recs)
		files["pcap-be-nsec-"+c.name] = writePcap(binary.BigEndian, true, c.link, recs)
		w := &ngWriter{}
		w.section(binary.LittleEndian)
		w.iface(ngIfOpts{link: uint16(c.link), tsresol: 9})
		for i := range 9 {
			w.epb(0, uint64(t0.UnixNano())+uint64(i), c.rec, 0, i%2 == 0)
		}
		w.spb(len(c.rec), c.rec)
		w.pb(0, 7, c.rec)
		files["pcapng-"+c.name] = w.b
	}
	var recs []pcapRec
	for i := range 40 {
		recs = append(recs, pcapRec{ts: t0, data: bytes.Repeat([]byte{byte(i)}, 1+i*37)})
	}
	recs = append(recs, pcapRec{ts: t0, data: bytes.Repeat([]byte{0xcd}, 20000)}, pcapRec{ts: t0, data: benchFrame})
	files["pcap-sizes"] = writePcap(binary.LittleEndian, false, 1, recs)

	// pcapng: blocks the reader skips and options larger than the chunks,
	// sections in both byte orders, every packet block type.
	w := &ngWriter{}
	w.section(binary.BigEndian)
	w.block(0x0bad, bytes.Repeat([]byte{7}, 3000))
	body := append(w.u16(1), 0, 0, 0, 0, 0, 0)
	body = append(body, w.opt(1, bytes.Repeat([]byte{'c'}, 2000))...) // a long comment
	body = append(body, w.opt(ngOptTSResol, []byte{3})...)
	body = append(body, w.opt(0, nil)...)
	w.block(ngBlockIDB, body)
	w.iface(ngIfOpts{link: 113, tsresol: 0x80 | 20, tsoffset: 9, offset: true})
	for i := range 30 {
		w.epb(uint32(i%2), uint64(i)<<20, benchRecord(uint32(113*(i%2)+1*(1-i%2))), 0, i%3 == 0)
	}
	w.epb(0, 1, bytes.Repeat([]byte{0xee}, 9000), 0, true)
	w.section(binary.LittleEndian)
	w.iface(ngIfOpts{link: 101, snap: 40, tsresol: -1})
	w.spb(len(benchIP), benchIP)
	w.pb(0, 5, benchIP)
	files["pcapng-mixed"] = w.b

	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write(files["pcap-sizes"])
	zw.Close()
	files["pcap-sizes-gzip"] = zb.Bytes()
	return files
}

// TestChunkBoundaries reads every test file, whole and cut at many
// lengths, with chunks small enough that records straddle them, and
// checks that the frames and the error are those of the usual chunks.
func TestChunkBoundaries(t *testing.T) {
	for name, file := range chunkTestFiles() {
		sameRead(t, name, file)
		sameRead(t, name+" in batches of 3", file, WithBatchSize(3))
		step := max(1, len(file)/60)
		for n := 0; n < len(file); n += step {
			sameRead(t, fmt.Sprintf("%s cut at %d", name, n), file[:n], WithBatchSize(5))
		}
	}
}

// TestChunkHeld holds every batch until the end of the file, with small
// chunks: the frames must stay intact while the reader moves through many
// chunks, each still held, and once all are released the chunks the reader
// keeps are bounded.
func TestChunkHeld(t *testing.T) {
	file := chunkTestFiles()["pcap-sizes"]
	want, err := readChunked(t, file, chunkSize)
	if err != io.EOF {
		t.Fatal(err)
	}
	r, err := newReader(bytes.NewReader(file), 256, []Option{WithBatchSize(4)})
	if err != nil {
		t.Fatal(err)
	}
	var held []steer.Batch
	for {
		var b steer.Batch
		err := r.ReadBatch(context.Background(), &b)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, b)
	}
	i := 0
	for _, b := range held {
		for _, f := range b.Frames {
			if !bytes.Equal(f.Data, want[i].Data) {
				t.Fatalf("frame %d changed while its batch was held", i)
			}
			i++
		}
	}
	if i != len(want) {
		t.Fatalf("%d frames, want %d", i, len(want))
	}
	for _, b := range held {
		b.Release()
	}
	r.mu.Lock()
	free := len(r.freeChunks)
	r.mu.Unlock()
	if free > maxFreeChunks {
		t.Errorf("%d chunks kept, more than %d", free, maxFreeChunks)
	}
	if n := r.cur.refs.Load(); n != 1 {
		t.Errorf("the current chunk has %d references after every batch was released, want the reader's", n)
	}
}

// stalled reads its bytes, then returns no byte and no error for ever.
type stalled struct{ b []byte }

func (s *stalled) Read(p []byte) (int, error) {
	n := copy(p, s.b)
	s.b = s.b[n:]
	return n, nil
}

// TestNoProgress checks that an input whose reads return nothing, without
// an error, ends the reading with io.ErrNoProgress rather than a reader
// spinning for ever.
func TestNoProgress(t *testing.T) {
	file := manyRecords(3)
	r, err := NewReader(&stalled{b: file})
	if err != nil {
		t.Fatal(err)
	}
	fs, err := readAll(t, r)
	if len(fs) != 3 || !errors.Is(err, io.ErrNoProgress) {
		t.Errorf("got %d frames and %v, want 3 and io.ErrNoProgress", len(fs), err)
	}
}
