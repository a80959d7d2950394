package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// recordsHeader is the -records CSV's header row.
var recordsHeader = []string{"src", "dst", "sport", "dport", "proto", "hashtype", "flowid", "worker", "packets", "bytes", "first", "last", "state"}

// recordWriter writes the -records CSV, one row per record as the report
// receives it (under the report's lock), through csv's own buffer.
type recordWriter struct {
	cw   *csv.Writer
	file *os.File // nil for standard output
	name string
	row  []string
}

// createRecords creates the -records file, or writes to stdout for "-", and
// writes the header row.
func createRecords(name string, stdout io.Writer) (*recordWriter, error) {
	w := &recordWriter{name: "standard output", row: make([]string, len(recordsHeader))}
	out := stdout
	if name != "-" {
		f, err := os.Create(name)
		if err != nil {
			return nil, fmt.Errorf("-records: %w", err)
		}
		w.file, w.name, out = f, name, f
	}
	w.cw = csv.NewWriter(out)
	w.cw.Write(recordsHeader)
	return w, nil
}

// write writes one record's row. Its error is the first one writing met.
func (w *recordWriter) write(r *record) error {
	row := w.row[:0]
	k := r.flow()
	var src, dst string
	if k.Src.IsValid() {
		src, dst = k.Src.String(), k.Dst.String()
	}
	state := "active"
	switch {
	case r.Idle:
		state = "idle"
	case r.Evicted:
		state = "evicted"
	}
	row = append(row, src, dst,
		strconv.Itoa(int(k.SrcPort)), strconv.Itoa(int(k.DstPort)), strconv.Itoa(int(k.Proto)),
		r.HashType.String(), fmt.Sprintf("0x%08x", r.FlowID), strconv.Itoa(r.Worker),
		strconv.FormatUint(r.Packets, 10), strconv.FormatUint(r.Bytes, 10),
		r.First.UTC().Format(time.RFC3339Nano), r.Last.UTC().Format(time.RFC3339Nano), state)
	if err := w.cw.Write(row); err != nil {
		return fmt.Errorf("writing records to %s: %w", w.name, err)
	}
	return nil
}

// close flushes the rows and closes the file; its error is the first one
// writing met.
func (w *recordWriter) close() error {
	w.cw.Flush()
	err := w.cw.Error()
	if w.file != nil {
		if cerr := w.file.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("writing records to %s: %w", w.name, err)
	}
	return nil
}
