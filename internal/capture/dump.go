package capture

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// DefaultSnapLen is the snap length a Dump's file header records when the
// command sets none: tcpdump's default, 262144 bytes.
const DefaultSnapLen = pcapfile.MaxRecordLen

// dumpFlush is how many bytes a worker buffers before it writes them.
const dumpFlush = 64 << 10

// Dump is tcpdump's -w: it writes the frames the workers handle as a
// classic pcap file (microsecond timestamps, link type Ethernet, what every
// steer source delivers), either into one file or, when the name is a
// pattern with one %d, into one file per worker, the worker's index in
// place of the %d ("out-%d.pcap": out-0.pcap, out-1.pcap, ...): each
// flow's frames are then in one file (a flow is handled by one worker
// while it does not move), and each file holds the many flows of its
// worker.
//
// Each worker writes through a WorkerDump of its own, made in the worker
// (steer.NewPerWorker's state) and used only there: with a pattern it owns
// its file and nothing is shared; into one file, it buffers whole records
// and appends them to the file under a lock, once per 64 KiB or per tick.
// The frames of a flow are then in order in the file (a flow is handled by
// one worker, in order, while it does not move); frames of different
// workers are in chunks, so the file's timestamps are not sorted.
type Dump struct {
	name    string
	pattern bool
	snaplen int
	pw      *pcapfile.Writer // the one file's: workers build their records with it

	mu     sync.Mutex
	out    io.Writer // the one file, or standard output
	file   *os.File  // nil for standard output and patterns
	err    error
	first  *WorkerDump // worker 0's, opened early with a pattern
	closed bool
}

// OpenDump opens the dump named name: "-" writes to stdout, a name with one
// %d verb (such as "out-%d.pcap" or "flow%02d.pcap") opens one file per
// worker, any other name one file. snaplen is recorded in the file headers
// (zero: DefaultSnapLen, which is also the largest: more is taken as it,
// as libpcap does) and frames longer are cut to it. The one file, or
// worker 0's file of a pattern, is created at once, so that a name that
// cannot be written fails here.
func OpenDump(name string, snaplen int, stdout io.Writer) (*Dump, error) {
	if snaplen <= 0 || snaplen > DefaultSnapLen {
		snaplen = DefaultSnapLen
	}
	d := &Dump{name: name, snaplen: snaplen}
	pattern, err := isPattern(name)
	if err != nil {
		return nil, err
	}
	switch {
	case name == "-":
		d.out = stdout
	case pattern:
		d.pattern = true
		w, err := d.openWorker(0)
		if err != nil {
			return nil, err
		}
		d.first = w
		return d, nil
	default:
		f, err := os.Create(name)
		if err != nil {
			return nil, fmt.Errorf("capture: -w: %w", err)
		}
		d.out, d.file = f, f
	}
	if d.pw, err = d.newWriter(d.out); err != nil {
		d.closeFile()
		return nil, fmt.Errorf("capture: writing %s: %w", d.Name(0), err)
	}
	return d, nil
}

// newWriter writes a file header to out and returns the writer of its
// records: link type Ethernet, what every steer source delivers.
func (d *Dump) newWriter(out io.Writer) (*pcapfile.Writer, error) {
	return pcapfile.NewWriter(out, pcapfile.LinkTypeEthernet, pcapfile.WriterOptions{SnapLen: d.snaplen})
}

// isPattern reports whether name has exactly one formatting verb, a %d
// (flags and width allowed, %% is a percent sign).
func isPattern(name string) (bool, error) {
	verbs := 0
	for i := 0; i < len(name); i++ {
		if name[i] != '%' {
			continue
		}
		if i+1 < len(name) && name[i+1] == '%' {
			i++
			continue
		}
		verbs++
		j := i + 1
		for j < len(name) && strings.IndexByte("0123456789-+ #", name[j]) >= 0 {
			j++
		}
		if j >= len(name) || name[j] != 'd' {
			return false, fmt.Errorf("capture: -w %q: the only verb a file name may hold is %%d, the worker's index", name)
		}
		i = j
	}
	if verbs > 1 {
		return false, fmt.Errorf("capture: -w %q: one %%d at most", name)
	}
	return verbs == 1, nil
}

// Name returns the file worker writes to ("standard output" for "-").
func (d *Dump) Name(worker int) string {
	switch {
	case d.pattern:
		return fmt.Sprintf(d.name, worker)
	case d.name == "-":
		return "standard output"
	}
	return d.name
}

// PerWorker reports whether each worker has a file of its own.
func (d *Dump) PerWorker() bool { return d.pattern }

func (d *Dump) openWorker(i int) (*WorkerDump, error) {
	w := &WorkerDump{d: d, index: i}
	name := d.Name(i)
	f, err := os.Create(name)
	if err != nil {
		return nil, fmt.Errorf("capture: -w: %w", err)
	}
	w.file = f
	if w.pw, err = d.newWriter(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("capture: writing %s: %w", name, err)
	}
	return w, nil
}

// Worker returns worker i's writer; call it in the worker's state
// constructor. An error opening the worker's file is returned by the
// writer's Close (and so by Dispatcher.Close) and the writer writes nothing.
func (d *Dump) Worker(i int) *WorkerDump {
	if !d.pattern {
		return &WorkerDump{d: d, index: i, pw: d.pw}
	}
	d.mu.Lock()
	first := d.first
	if i == 0 {
		d.first = nil
	}
	d.mu.Unlock()
	if i == 0 && first != nil {
		return first
	}
	w, err := d.openWorker(i)
	if err != nil {
		return &WorkerDump{d: d, index: i, err: err}
	}
	return w
}

// Close closes the one file (standard output stays open), or worker 0's
// file of a pattern if no worker took it. Call it after the dispatcher is
// closed, when every worker's writer has been closed.
func (d *Dump) Close() error {
	d.mu.Lock()
	first := d.first
	d.first, d.closed = nil, true
	d.mu.Unlock()
	if first != nil {
		return first.Close()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	err := d.err
	if cerr := d.closeFile(); err == nil {
		err = cerr
	}
	return err
}

func (d *Dump) closeFile() error {
	if d.file == nil {
		return nil
	}
	err := d.file.Close()
	d.file = nil
	if err != nil {
		return fmt.Errorf("capture: closing %s: %w", d.name, err)
	}
	return nil
}

// appendShared writes whole records into the one file.
func (d *Dump) appendShared(b []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return d.err
	}
	if d.closed && d.file == nil && d.name != "-" {
		return fmt.Errorf("capture: writing %s after Close", d.name)
	}
	if _, err := d.out.Write(b); err != nil {
		d.err = fmt.Errorf("capture: writing %s: %w", d.Name(0), err)
	}
	return d.err
}

// WorkerDump is one worker's writer. Its methods are for that worker's
// goroutine only. It implements steer.Ticker (a tick writes what it holds)
// and io.Closer, so a per-worker state can embed it.
type WorkerDump struct {
	d      *Dump
	index  int
	file   *os.File         // its own file, with a pattern
	pw     *pcapfile.Writer // its own file's, or the one file's
	buf    []byte
	tagged []byte // a frame with its VLAN tag put back
	frames uint64
	err    error
}

// Write appends p as one record. An 802.1Q tag the source delivered out of
// band (a live socket's; see steer.Packet.Key) is put back into the bytes
// after the MAC addresses, as libpcap does, with priority zero.
func (w *WorkerDump) Write(p *steer.Packet) {
	if w.err != nil {
		return
	}
	data := p.Data
	wire := p.Length
	if k := p.Key(); k.NVLAN > 0 && int(k.NVLAN) > tagsIn(data) && len(data) >= 12 {
		tag := []byte{0x81, 0x00, byte(k.VLANs[0] >> 8), byte(k.VLANs[0])}
		w.tagged = append(append(append(w.tagged[:0], data[:12]...), tag...), data[12:]...)
		data = w.tagged
		wire += 4
	}
	ts := p.Timestamp
	if sec := ts.Unix(); sec <= 0 || sec > math.MaxUint32 {
		ts = time.Time{} // no capture time, or one pcap cannot hold: written as 1970
	}
	buf, err := w.pw.AppendPacket(w.buf, ts, data, wire)
	if err != nil {
		w.err = fmt.Errorf("capture: writing %s: %w", w.d.Name(w.index), err)
		return
	}
	w.buf = buf
	w.frames++
	if len(w.buf) >= dumpFlush {
		w.flush()
	}
}

// tagsIn counts the 802.1Q/802.1ad tags in a frame's bytes.
func tagsIn(b []byte) int {
	n := 0
	for off := 12; off+4 <= len(b); off += 4 {
		switch binary.BigEndian.Uint16(b[off:]) {
		case 0x8100, 0x88a8, 0x9100:
			n++
		default:
			return n
		}
	}
	return n
}

// Frames returns the number of records written (or buffered).
func (w *WorkerDump) Frames() uint64 { return w.frames }

func (w *WorkerDump) flush() {
	if len(w.buf) == 0 || w.err != nil {
		w.buf = w.buf[:0]
		return
	}
	if w.file != nil {
		if _, err := w.file.Write(w.buf); err != nil {
			w.err = fmt.Errorf("capture: writing %s: %w", w.d.Name(w.index), err)
		}
	} else {
		w.err = w.d.appendShared(w.buf)
	}
	w.buf = w.buf[:0]
}

// Tick writes what the worker holds, so that a slow capture reaches the
// file (or a pipe) within a tick.
func (w *WorkerDump) Tick(time.Time) { w.flush() }

// Close writes what is left and closes the worker's own file. It returns
// the first error the writer met.
func (w *WorkerDump) Close() error {
	w.flush()
	if w.file != nil {
		if err := w.file.Close(); err != nil && w.err == nil {
			w.err = fmt.Errorf("capture: closing %s: %w", w.d.Name(w.index), err)
		}
		w.file = nil
	}
	return w.err
}
