package pcapfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/netns"
	"github.com/rpsgo/rps/internal/sample"
)

// writerPackets are packets of every kind the writer treats apart: cut by
// the snap length, with a wire length above, equal to and below (taken as
// equal) the captured one, empty, at the zero time.
func writerPackets() []pcapRec {
	frame := eth(mac1, mac2, 0x0800, ip4)
	long := cat(frame, bytes.Repeat([]byte{0xaa}, 200))
	return []pcapRec{
		{ts: t0, data: frame},
		{ts: t0.Add(1500 * time.Millisecond), data: frame, orig: len(frame) + 100},
		{ts: t0.Add(time.Nanosecond), data: long},
		{ts: t0.Add(2 * time.Second), data: []byte{}, orig: 60},
		{ts: time.Time{}, data: frame, orig: 3}, // below the captured length
	}
}

// TestWriter writes packets with every option, checks the bytes against
// the test's own pcap writer and reads them back.
func TestWriter(t *testing.T) {
	for _, nano := range []bool{false, true} {
		for _, snap := range []int{0, 65535, 100} {
			t.Run(fmt.Sprintf("nano=%v/snap=%d", nano, snap), func(t *testing.T) {
				var buf bytes.Buffer
				w, err := NewWriter(&buf, LinkTypeEthernet, WriterOptions{SnapLen: snap, Nanosecond: nano})
				if err != nil {
					t.Fatal(err)
				}
				recs := writerPackets()
				for _, p := range recs {
					if err := w.WritePacket(p.ts, p.data, p.orig); err != nil {
						t.Fatal(err)
					}
				}
				// What the file should hold: packets cut to the snap length,
				// wire lengths at least the captured ones.
				wantSnap := snap
				if snap == 0 {
					wantSnap = MaxRecordLen
				}
				var want []pcapRec
				for _, p := range recs {
					orig := max(p.orig, len(p.data))
					if len(p.data) > wantSnap {
						p.data = p.data[:wantSnap]
					}
					p.orig = orig
					if p.ts.IsZero() {
						p.ts = time.Unix(0, 0)
					}
					want = append(want, p)
				}
				file := writePcap(binary.LittleEndian, nano, 1, want)
				binary.LittleEndian.PutUint32(file[16:], uint32(wantSnap))
				if !bytes.Equal(buf.Bytes(), file) {
					t.Fatalf("wrote\n%x\nwant\n%x", buf.Bytes(), file)
				}

				r, err := NewReader(bytes.NewReader(buf.Bytes()))
				if err != nil {
					t.Fatal(err)
				}
				if r.SnapLen() != wantSnap || r.LinkType() != LinkTypeEthernet {
					t.Errorf("read back snap length %d, link type %v", r.SnapLen(), r.LinkType())
				}
				fs, err := readAll(t, r)
				if err != io.EOF || len(fs) != len(want) {
					t.Fatalf("read back %d frames, %v", len(fs), err)
				}
				for i, f := range fs {
					ts := want[i].ts
					if !nano {
						ts = ts.Truncate(time.Microsecond)
					}
					if !bytes.Equal(f.Data, want[i].data) || !f.Timestamp.Equal(ts) || f.WireLen != want[i].orig {
						t.Errorf("frame %d: %x %v len %d, want %x %v len %d", i, f.Data, f.Timestamp, f.WireLen,
							want[i].data, ts, want[i].orig)
					}
				}
			})
		}
	}
}

// TestWriterLinkTypes writes packets of other link types: the reader
// gives them back rewritten into Ethernet, as it does tcpdump's files.
func TestWriterLinkTypes(t *testing.T) {
	for _, c := range linkCases() {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, LinkType(c.link), WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WritePacket(t0, c.rec, 0); err != nil {
			t.Fatal(err)
		}
		fs := mustRead(t, buf.Bytes())
		if len(fs) != 1 || !bytes.Equal(fs[0].Data, c.want) {
			t.Errorf("%s: read back %d frames, want 1 of %x", c.name, len(fs), c.want)
		}
	}
}

type failingWriter struct{ after int }

var errDisk = errors.New("disk full")

func (f *failingWriter) Write(p []byte) (int, error) {
	if f.after--; f.after < 0 {
		return 0, errDisk
	}
	return len(p), nil
}

func TestWriterErrors(t *testing.T) {
	for _, o := range []WriterOptions{{SnapLen: -1}, {SnapLen: MaxRecordLen + 1}} {
		if _, err := NewWriter(io.Discard, LinkTypeEthernet, o); err == nil {
			t.Errorf("NewWriter accepted %+v", o)
		}
	}
	if _, err := NewWriter(io.Discard, 1<<16, WriterOptions{}); err == nil {
		t.Error("NewWriter accepted a link type of 17 bits")
	}
	if _, err := NewWriter(&failingWriter{}, LinkTypeEthernet, WriterOptions{}); !errors.Is(err, errDisk) {
		t.Errorf("NewWriter on a failing writer: %v", err)
	}
	w, err := NewWriter(&failingWriter{after: 1}, LinkTypeEthernet, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WritePacket(t0, []byte{1}, 0); !errors.Is(err, errDisk) || !strings.HasPrefix(err.Error(), "pcapfile: ") {
		t.Errorf("WritePacket on a failing writer: %v", err)
	}
	var buf bytes.Buffer
	w, err = NewWriter(&buf, LinkTypeEthernet, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range []time.Time{time.Unix(-1, 0), time.Unix(1<<32, 0), time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if err := w.WritePacket(ts, []byte{1}, 0); !errors.Is(err, ErrTimestamp) {
			t.Errorf("WritePacket at %v: %v, want ErrTimestamp", ts, err)
		}
	}
	if buf.Len() != pcapFileHeaderLen {
		t.Errorf("refused packets wrote %d bytes", buf.Len()-pcapFileHeaderLen)
	}
	if err := w.WritePacket(time.Unix(1<<32-1, 999999999), []byte{1}, 0); err != nil {
		t.Errorf("WritePacket at the last second the format holds: %v", err)
	}
}

// TestWriterAppendConcurrent builds records with AppendPacket from several
// goroutines, as a dump from several workers does, and reads the file
// back (the race detector checks that AppendPacket shares nothing).
func TestWriterAppendConcurrent(t *testing.T) {
	var file bytes.Buffer
	w, err := NewWriter(&file, LinkTypeEthernet, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			var buf []byte
			for i := range 100 {
				frame := eth(mac1, mac2, 0x0800, ip4)
				frame[len(frame)-1] = byte(g)
				var err error
				if buf, err = w.AppendPacket(buf, t0.Add(time.Duration(i)*time.Millisecond), frame, 0); err != nil {
					t.Error(err)
					return
				}
			}
			mu.Lock()
			file.Write(buf)
			mu.Unlock()
		})
	}
	wg.Wait()
	if fs := mustRead(t, file.Bytes()); len(fs) != 400 {
		t.Errorf("read back %d frames, want 400", len(fs))
	}
}

// TestWriterTcpdump has tcpdump read what the writer wrote: every packet,
// at its time, to the microsecond and to the nanosecond.
func TestWriterTcpdump(t *testing.T) {
	if _, err := exec.LookPath("tcpdump"); err != nil {
		netns.SkipOrFatal(t, "needs tcpdump: "+err.Error())
	}
	for _, nano := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "w.pcap")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		w, err := NewWriter(f, LinkTypeEthernet, WriterOptions{SnapLen: 100, Nanosecond: nano})
		if err != nil {
			t.Fatal(err)
		}
		var recs []pcapRec
		for _, p := range writerPackets() {
			if len(p.data) > 0 { // tcpdump prints "[Invalid header: caplen==0]" for an empty one
				recs = append(recs, p)
			}
		}
		for _, p := range recs {
			if err := w.WritePacket(p.ts, p.data, p.orig); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		args := []string{"-r", path, "-nn", "-tt"}
		if nano {
			args = append(args, "--time-stamp-precision=nano")
		}
		out, err := exec.Command("tcpdump", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("tcpdump %v: %v\n%s", args, err, out)
		}
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if !strings.HasPrefix(l, "reading from file") {
				lines = append(lines, l)
			}
		}
		if len(lines) != len(recs) {
			t.Fatalf("tcpdump printed %d packets, want %d:\n%s", len(lines), len(recs), out)
		}
		for i, p := range recs {
			ts := p.ts
			if ts.IsZero() {
				ts = time.Unix(0, 0)
			}
			want := fmt.Sprintf("%d.%06d ", ts.Unix(), ts.Nanosecond()/1000)
			if nano {
				want = fmt.Sprintf("%d.%09d ", ts.Unix(), ts.Nanosecond())
			}
			if !strings.HasPrefix(lines[i], want) {
				t.Errorf("tcpdump's packet %d: %q, want it at %s", i, lines[i], want)
			}
		}
	}
}

// TestWriterAsTcpdump copies the sample's frames longer than 1000 bytes
// with the writer and with tcpdump -w: the files must be the same, byte
// for byte.
func TestWriterAsTcpdump(t *testing.T) {
	if _, err := exec.LookPath("tcpdump"); err != nil {
		netns.SkipOrFatal(t, "needs tcpdump: "+err.Error())
	}
	dir := t.TempDir()
	in, want := filepath.Join(dir, "in.pcap"), filepath.Join(dir, "want.pcap")
	if err := os.WriteFile(in, sample.Pcap, 0o644); err != nil {
		t.Fatal(err)
	}
	// tcpdump drops root for the file it writes: the directory must let it.
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tcpdump", "-r", in, "-w", want, "greater 1001").CombinedOutput(); err != nil {
		t.Fatalf("tcpdump: %v\n%s", err, out)
	}
	r, err := NewReader(bytes.NewReader(sample.Pcap))
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	w, err := NewWriter(&got, r.LinkType(), WriterOptions{SnapLen: r.SnapLen()})
	if err != nil {
		t.Fatal(err)
	}
	fs, err := readAll(t, r)
	if err != io.EOF {
		t.Fatal(err)
	}
	for _, f := range fs {
		if f.WireLen > 1000 {
			if err := w.WritePacket(f.Timestamp, f.Data, f.WireLen); err != nil {
				t.Fatal(err)
			}
		}
	}
	wantBytes, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), wantBytes) {
		t.Errorf("the writer's copy (%d bytes) differs from tcpdump's (%d bytes)", got.Len(), len(wantBytes))
	}
}
