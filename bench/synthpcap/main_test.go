package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// TestWrite writes a capture with -cycle and reads it back: every frame,
// each flow in turn, a -gap apart, and the same bytes for the same flags.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.pcap"), filepath.Join(dir, "b.pcap")
	args := []string{"-frames", "300", "-flows", "100", "-cycle", "-size", "80", "-gap", "1ms"}
	for _, p := range []string{a, b} {
		if err := run(append(args, "-w", p), io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	if string(da) != string(db) {
		t.Error("the same flags wrote two different files")
	}
	f, err := os.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapfile.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Unix(1_700_000_000, 0)
	flows := map[string]int{}
	n := 0
	var batch steer.Batch
	for {
		err := r.ReadBatch(context.Background(), &batch)
		for _, fr := range batch.Frames {
			if len(fr.Data) != 80 || !fr.Timestamp.Equal(start.Add(time.Duration(n)*time.Millisecond)) {
				t.Fatalf("frame %d: %d bytes at %v", n, len(fr.Data), fr.Timestamp)
			}
			flows[string(fr.Data[26:38])]++
			n++
		}
		if batch.Release != nil {
			batch.Release()
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if n != 300 || len(flows) != 100 {
		t.Errorf("%d frames of %d flows, want 300 of 100", n, len(flows))
	}
	for _, bad := range [][]string{{}, {"-w", a, "-size", "10"}, {"-w", a, "-flows", "0"}, {"-w", a, "x"}} {
		if err := run(bad, io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}
