package pcapfile

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rpsgo/rps/steer"
)

// fuzzSeeds are small valid files of every format and link type, two of
// them also gzip'd. The corpus in testdata/fuzz/FuzzReader holds them
// (TestFuzzSeeds checks it, and writes it again when asked).
func fuzzSeeds() map[string][]byte {
	seeds := map[string][]byte{}
	for _, c := range linkCases() {
		recs := []pcapRec{{ts: t0, data: c.rec, orig: len(c.rec) + 3}, {ts: t0, data: c.rec}}
		seeds["pcap-"+c.name] = writePcap(binary.LittleEndian, c.link%2 == 0, c.link, recs)
	}
	w := &ngWriter{}
	w.section(binary.BigEndian)
	w.iface(ngIfOpts{link: 1, tsresol: 9})
	w.iface(ngIfOpts{link: 276, tsresol: 0x80 | 10, tsoffset: 5, offset: true})
	w.epb(0, 1, eth(mac1, mac2, 0x0800, ip4), 0, true)
	w.epb(1, 2, linkCases()[6].rec, 0, false)
	w.block(5, make([]byte, 12))
	w.section(binary.LittleEndian)
	w.iface(ngIfOpts{link: 101, snap: 30, tsresol: -1})
	w.pb(0, 3, ip6)
	w.spb(len(ip6), ip6)
	seeds["pcapng-mixed"] = w.b

	// Records and blocks that straddle FuzzReader's small chunks.
	var recs []pcapRec
	for i := range 6 {
		recs = append(recs, pcapRec{ts: t0, data: bytes.Repeat([]byte{byte(i)}, 20+i*61)})
	}
	seeds["pcap-straddle"] = writePcap(binary.BigEndian, true, 1, recs)
	w = &ngWriter{}
	w.section(binary.LittleEndian)
	w.block(0x0bad, make([]byte, 300))
	body := append(w.u16(113), 0, 0, 0, 0, 0, 0)
	body = append(body, w.opt(1, bytes.Repeat([]byte{'c'}, 150))...)
	body = append(body, w.opt(ngOptTSResol, []byte{9})...)
	body = append(body, w.opt(0, nil)...)
	w.block(ngBlockIDB, body)
	w.epb(0, 1, linkCases()[len(linkCases())-1].rec, 0, true)
	w.epb(0, 2, cat(linkCases()[13].rec, make([]byte, 400)), 0, true)
	w.spb(90, make([]byte, 90))
	seeds["pcapng-straddle"] = w.b
	for _, name := range []string{"pcap-ethernet", "pcapng-mixed"} {
		var zb bytes.Buffer
		zw := gzip.NewWriter(&zb)
		zw.Write(seeds[name])
		zw.Close()
		seeds[name+"-gzip"] = zb.Bytes()
	}
	return seeds
}

// TestFuzzSeeds checks that testdata/fuzz/FuzzReader holds every seed of
// fuzzSeeds, gzip'd ones compared decompressed (compressors may change
// between Go releases). PCAPFILE_WRITE_SEEDS=1 writes the corpus instead.
func TestFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzReader")
	write := os.Getenv("PCAPFILE_WRITE_SEEDS") == "1"
	if write {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, b := range fuzzSeeds() {
		path := filepath.Join(dir, name)
		if write {
			text := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		text, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%v (PCAPFILE_WRITE_SEEDS=1 go test -run TestFuzzSeeds writes the corpus)", err)
			continue
		}
		quoted, ok := strings.CutPrefix(string(text), "go test fuzz v1\n[]byte(")
		quoted, ok2 := strings.CutSuffix(quoted, ")\n")
		got, err := strconv.Unquote(quoted)
		if !ok || !ok2 || err != nil {
			t.Errorf("%s: not a corpus file of one []byte", path)
			continue
		}
		if !bytes.Equal(gunzipSeed(t, []byte(got)), gunzipSeed(t, b)) {
			t.Errorf("%s differs from its seed (PCAPFILE_WRITE_SEEDS=1 go test -run TestFuzzSeeds writes it again)", path)
		}
	}
}

// gunzipSeed returns a gzip'd seed's contents, and any other seed as it is.
func gunzipSeed(t *testing.T, b []byte) []byte {
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		return b
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// FuzzReader feeds arbitrary bytes to the reader: it must not panic, what
// it delivers must respect the documented limits, and reading with chunks
// small enough that records straddle them must give the same frames and
// the same error as reading with the usual ones.
func FuzzReader(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		want, wantErr := fuzzRead(t, data, chunkSize)
		got, err := fuzzRead(t, data, fuzzChunkSize)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("%d-byte chunks: error %v, want %v", fuzzChunkSize, err, wantErr)
		}
		if d := diffFrames(got, want); d != "" {
			t.Fatalf("%d-byte chunks: %s", fuzzChunkSize, d)
		}
	})
}

// fuzzChunkSize is the small chunk size FuzzReader compares with.
const fuzzChunkSize = chunkReserve + 37

// fuzzRead reads data with chunks of size bytes, in batches of 5, checking
// what the reader delivers, and returns the frames (copied, at most 10000
// batches of them) and the error that ended the reading.
func fuzzRead(t *testing.T, data []byte, size int) ([]steer.Frame, error) {
	r, err := newReader(bytes.NewReader(data), size, []Option{WithBatchSize(5)})
	if err != nil {
		if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrLinkType) {
			t.Fatalf("NewReader: unexpected error %v", err)
		}
		return nil, err
	}
	var out []steer.Frame
	var b steer.Batch
	for range 10000 {
		err := r.ReadBatch(context.Background(), &b)
		if err != nil {
			if err != io.EOF && !errors.Is(err, ErrFormat) && !errors.Is(err, ErrTruncated) &&
				!errors.Is(err, ErrLinkType) {
				t.Fatalf("ReadBatch: unexpected error %v", err)
			}
			return out, err
		}
		if len(b.Frames) == 0 || len(b.Frames) > 5 {
			t.Fatalf("batch of %d frames", len(b.Frames))
		}
		for _, fr := range b.Frames {
			if len(fr.Data) > MaxRecordLen+ethHeaderLen || cap(fr.Data) != len(fr.Data) {
				t.Fatalf("frame of %d bytes, capacity %d", len(fr.Data), cap(fr.Data))
			}
			if fr.WireLen < len(fr.Data) {
				t.Fatalf("Length %d below the %d captured bytes", fr.WireLen, len(fr.Data))
			}
			fr.Data = bytes.Clone(fr.Data)
			out = append(out, fr)
		}
		b.Release()
	}
	return out, nil
}
