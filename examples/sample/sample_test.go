package sample_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/rpsgo/rps/examples/sample"
)

// TestOpen checks that Open gives the sample for no name, the named file
// for a name, and the file's error for a file that is not there.
func TestOpen(t *testing.T) {
	read := func(name string) ([]byte, error) {
		f, err := sample.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return io.ReadAll(f)
	}
	if b, err := read(""); err != nil || !bytes.Equal(b, sample.Pcap) || len(b) == 0 {
		t.Errorf("Open(\"\"): %d bytes, %v; want the %d of the sample", len(b), err, len(sample.Pcap))
	}
	name := filepath.Join(t.TempDir(), "x.pcap")
	if err := os.WriteFile(name, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := read(name); err != nil || string(b) != "abc" {
		t.Errorf("Open(%q): %q, %v", name, b, err)
	}
	if _, err := read(name + ".none"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open of a missing file: %v", err)
	}
}
