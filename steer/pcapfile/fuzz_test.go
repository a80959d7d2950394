package pcapfile

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/rpsgo/rps/steer"
)

// fuzzSeeds are small valid files of every format and link type; the
// corpus in testdata/fuzz/FuzzReader holds them (write it again with
// PCAPFILE_WRITE_SEEDS=1 go test -run TestWriteFuzzSeeds).
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
	return seeds
}

func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("PCAPFILE_WRITE_SEEDS") != "1" {
		t.Skip("set PCAPFILE_WRITE_SEEDS=1 to rewrite testdata/fuzz/FuzzReader")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzReader")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range fuzzSeeds() {
		text := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzReader feeds arbitrary bytes to the reader: it must not panic, and
// what it delivers must respect the documented limits.
func FuzzReader(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		// A gzip stream's own errors are passed on wrapped.
		gz := len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b
		r, err := NewReader(bytes.NewReader(data), WithBatchSize(5))
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrLinkType) && !gz {
				t.Fatalf("NewReader: unexpected error %v", err)
			}
			return
		}
		var b steer.Batch
		for range 10000 {
			err := r.ReadBatch(context.Background(), &b)
			if err != nil {
				if err != io.EOF && !errors.Is(err, ErrFormat) && !errors.Is(err, ErrTruncated) &&
					!errors.Is(err, ErrLinkType) && !gz {
					t.Fatalf("ReadBatch: unexpected error %v", err)
				}
				return
			}
			if len(b.Frames) == 0 || len(b.Frames) > 5 {
				t.Fatalf("batch of %d frames", len(b.Frames))
			}
			for _, fr := range b.Frames {
				if len(fr.Data) > MaxRecordLen+ethHeaderLen || cap(fr.Data) != len(fr.Data) {
					t.Fatalf("frame of %d bytes, capacity %d", len(fr.Data), cap(fr.Data))
				}
				if fr.Length < len(fr.Data) {
					t.Fatalf("Length %d below the %d captured bytes", fr.Length, len(fr.Data))
				}
			}
			b.Release()
		}
	})
}
