package capture

import (
	"bufio"
	"container/heap"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
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
// steer source delivers, whatever the input's link type), either into one
// file or, when the name is a pattern with one %d, into one file per
// worker, the worker's index in place of the %d ("out-%d.pcap": out-0.pcap,
// out-1.pcap, ...): each flow's frames are then in one file (a flow is
// handled by one worker while it does not move), and each file holds the
// many flows of its worker.
//
// Each worker writes through a WorkerDump of its own, made in the worker
// (steer.NewPerWorker's state) and used only there: with a pattern it owns
// its file and nothing is shared. Into one file there are two ways:
//
//   - In time order (DumpOptions.TimeOrder, for a capture file): each
//     worker writes a spool file of its own, and Close merges the spools
//     by capture time into the file, as mergecap merges captures. For an
//     input in time order that is the input's order (frames of one
//     microsecond that different workers handled may swap). Nothing
//     reaches the file before Close, and the frames are written twice.
//   - As the workers write (for a live capture, whose file grows while it
//     runs): each worker buffers whole records and appends them to the
//     file under a lock, once per 64 KiB or per tick. The frames of a flow
//     are then in order in the file; frames of different workers are in
//     chunks, so the file's timestamps are not sorted.
//
// The files are created by OpenDump, so that a name that cannot be
// written fails before anything is steered; their headers are written
// when the workers take their writers, so that SetSnapLen may come
// between.
type Dump struct {
	name      string
	pattern   bool
	timeOrder bool
	snaplen   int
	pw        *pcapfile.Writer // the one file's: workers build their records with it

	mu      sync.Mutex
	out     io.Writer // the one file, or standard output
	file    *OutFile  // nil for standard output and patterns
	err     error
	first   *OutFile      // worker 0's file of a pattern, created early
	spools  []*WorkerDump // with TimeOrder, the workers' spools
	started bool          // a worker took its writer
	closed  bool

	outsMu sync.Mutex
	outs   []*OutFile // every file opened, to Commit, Chown or Abort
}

// DumpOptions configures a Dump.
type DumpOptions struct {
	// SnapLen is recorded in the file headers (zero: DefaultSnapLen, which
	// is also the largest: more is taken as it, as libpcap does), and
	// frames longer are cut to it. A command that copies a capture passes
	// the input's.
	SnapLen int
	// TimeOrder writes one file in capture time order, merging the
	// workers' spools at Close (see Dump); without it the one file gets
	// the workers' records as they write them. A pattern ignores it.
	TimeOrder bool
}

// OpenDump opens the dump named name: "-" writes to stdout, a name with one
// %d verb (such as "out-%d.pcap" or "flow%02d.pcap") opens one file per
// worker, any other name one file. The one file, or worker 0's file of a
// pattern, is opened at once, so that a name that cannot be written fails
// here; a file that exists is cut only when the dump first writes to it
// (see OutFile).
func OpenDump(name string, opt DumpOptions, stdout io.Writer) (*Dump, error) {
	d := &Dump{name: name, timeOrder: opt.TimeOrder}
	d.SetSnapLen(opt.SnapLen)
	pattern, err := isPattern(name)
	if err != nil {
		return nil, err
	}
	switch {
	case name == "-":
		d.out = stdout
	case pattern:
		d.pattern, d.timeOrder = true, false
		if d.first, err = CreateOutFile(d.Name(0), "-w"); err != nil {
			return nil, err
		}
		d.keep(d.first)
	default:
		f, err := CreateOutFile(name, "-w")
		if err != nil {
			return nil, err
		}
		d.out, d.file = f, f
		d.keep(f)
	}
	return d, nil
}

// SetSnapLen sets the snap length as DumpOptions.SnapLen does, for a
// command that learns it after OpenDump (the input's, once the input is
// open). Call it before the first Worker.
func (d *Dump) SetSnapLen(n int) {
	if n <= 0 || n > DefaultSnapLen {
		n = DefaultSnapLen
	}
	d.snaplen = n
}

// newWriter writes a file header to out and returns the writer of its
// records: link type Ethernet, what every steer source delivers.
func (d *Dump) newWriter(out io.Writer) (*pcapfile.Writer, error) {
	return pcapfile.NewWriter(out, pcapfile.LinkTypeEthernet, pcapfile.WriterOptions{SnapLen: d.snaplen})
}

// header writes the one file's header, once; d.mu is held.
func (d *Dump) header() error {
	if d.pw != nil || d.err != nil {
		return d.err
	}
	if d.pw, d.err = d.newWriter(d.out); d.err != nil {
		d.err = fmt.Errorf("capture: writing %s: %w", d.Name(0), d.err)
	}
	return d.err
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

// openWorker returns worker i's writer into a file of its own: f, or a
// new file of the pattern when f is nil.
func (d *Dump) openWorker(i int, f *OutFile) (*WorkerDump, error) {
	name := d.Name(i)
	if f == nil {
		var err error
		if f, err = CreateOutFile(name, "-w"); err != nil {
			return nil, err
		}
		d.keep(f)
	}
	w := &WorkerDump{d: d, index: i, file: f}
	var err error
	if w.pw, err = d.newWriter(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("capture: writing %s: %w", name, err)
	}
	return w, nil
}

// openSpool returns worker i's writer into a spool file, in the one file's
// directory (the system's temporary directory for standard output or
// anything but a regular file, such as /dev/null or a FIFO), removed at
// once where the system allows an open file to be, else at Close.
func (d *Dump) openSpool(i int) (*WorkerDump, error) {
	dir, base := os.TempDir(), "pcap"
	if fi, err := os.Stat(d.name); err == nil && fi.Mode().IsRegular() {
		dir, base = filepath.Dir(d.name), filepath.Base(d.name)
	}
	f, err := os.CreateTemp(dir, "."+base+".worker*.spool")
	if err != nil {
		return nil, fmt.Errorf("capture: -w: a spool for worker %d: %w", i, err)
	}
	w := &WorkerDump{d: d, index: i, file: f, spoolFile: f, spool: true}
	if os.Remove(f.Name()) != nil {
		w.spoolName = f.Name()
	}
	if w.pw, err = d.newWriter(f); err != nil {
		w.discard()
		return nil, fmt.Errorf("capture: writing a spool for %s: %w", d.Name(0), err)
	}
	return w, nil
}

// Worker returns worker i's writer; call it in the worker's state
// constructor. An error opening the worker's file is returned by the
// writer's Close (and so by Dispatcher.Close) and the writer writes nothing.
func (d *Dump) Worker(i int) *WorkerDump {
	d.mu.Lock()
	d.started = true
	var first *OutFile
	if i == 0 {
		first, d.first = d.first, nil
	}
	var err error
	if !d.pattern && !d.timeOrder {
		err = d.header()
	}
	d.mu.Unlock()
	var w *WorkerDump
	switch {
	case err != nil:
	case d.pattern:
		w, err = d.openWorker(i, first)
	case d.timeOrder:
		if w, err = d.openSpool(i); err == nil {
			d.mu.Lock()
			d.spools = append(d.spools, w)
			d.mu.Unlock()
		}
	default:
		w = &WorkerDump{d: d, index: i, pw: d.pw}
	}
	if err != nil {
		return &WorkerDump{d: d, index: i, err: err}
	}
	return w
}

// Close finishes the dump; call it after the dispatcher is closed, when
// every worker's writer has been closed. With TimeOrder it merges the
// spools into the one file; it writes the header of a file no worker
// wrote to, closes the one file (standard output stays open) and commits
// the files.
func (d *Dump) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return d.err
	}
	d.closed = true
	err := d.finish()
	if cerr := d.Commit(); err == nil {
		err = cerr
	}
	d.err = err
	return err
}

// finish writes what Close writes and closes the files; the caller holds
// mu.
func (d *Dump) finish() error {
	if d.pattern {
		if d.first != nil { // no worker took it: a file with a header alone
			w, err := d.openWorker(0, d.first)
			d.first = nil
			if err != nil {
				return err
			}
			return w.Close()
		}
		return nil
	}
	err := d.header()
	if err == nil && d.timeOrder {
		err = d.merge()
	}
	for _, w := range d.spools {
		w.discard()
	}
	d.spools = nil
	if cerr := d.closeFile(); err == nil {
		err = cerr
	}
	return err
}

// Abort closes the dump, removes the files it created and leaves the ones
// that existed as they were, for a command that fails before it steers
// anything: no empty capture is left behind, and no capture is lost.
// A nil Dump does nothing.
func (d *Dump) Abort() {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.closed = true
	for _, w := range d.spools {
		w.discard()
	}
	d.outsMu.Lock()
	for _, o := range d.outs {
		o.Abort()
	}
	d.outs = nil
	d.outsMu.Unlock()
	d.first, d.file = nil, nil
}

// keep notes a file the dump opened.
func (d *Dump) keep(o *OutFile) {
	d.outsMu.Lock()
	d.outs = append(d.outs, o)
	d.outsMu.Unlock()
}

// Commit gives the dump's files their names (see OutFile), replacing the
// files that had them; a command that writes as it steers calls it once
// the steering has begun. Close commits too. A nil Dump does nothing.
func (d *Dump) Commit() error {
	if d == nil {
		return nil
	}
	d.outsMu.Lock()
	defer d.outsMu.Unlock()
	for _, o := range d.outs {
		if err := o.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// Chown gives the dump's files, those open now, to user uid and group gid.
func (d *Dump) Chown(uid, gid int) error {
	d.outsMu.Lock()
	defer d.outsMu.Unlock()
	for _, o := range d.outs {
		if err := o.Chown(uid, gid); err != nil {
			return fmt.Errorf("capture: %s: %w", o.Name(), err)
		}
	}
	return nil
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

// spoolReader reads back the records of one worker's spool, in the order
// the worker wrote them.
type spoolReader struct {
	r      *bufio.Reader
	worker int
	rec    []byte // the current record, header included
	ts     uint64 // its time: seconds << 32 | microseconds
}

// next reads the next record; it returns io.EOF after the last.
func (s *spoolReader) next() error {
	var hdr [16]byte
	if _, err := io.ReadFull(s.r, hdr[:]); err != nil {
		if err == io.EOF {
			return io.EOF
		}
		return fmt.Errorf("a truncated record: %w", err)
	}
	le := binary.LittleEndian
	n := int(le.Uint32(hdr[8:]))
	if cap(s.rec) < 16+n {
		s.rec = make([]byte, 16+n)
	}
	s.rec = s.rec[:16+n]
	copy(s.rec, hdr[:])
	if _, err := io.ReadFull(s.r, s.rec[16:]); err != nil {
		return fmt.Errorf("a truncated record: %w", err)
	}
	s.ts = uint64(le.Uint32(hdr[0:]))<<32 | uint64(le.Uint32(hdr[4:]))
	return nil
}

// spoolHeap orders the spools' current records by time, then worker.
type spoolHeap []*spoolReader

func (h spoolHeap) Len() int { return len(h) }
func (h spoolHeap) Less(i, j int) bool {
	return h[i].ts < h[j].ts || h[i].ts == h[j].ts && h[i].worker < h[j].worker
}
func (h spoolHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *spoolHeap) Push(x any)   { *h = append(*h, x.(*spoolReader)) }
func (h *spoolHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// merge writes the records of every spool into the one file, by capture
// time; d.mu is held and the header written. The spools hold records in
// the file's own format (the same writer options), so they are copied as
// they are.
func (d *Dump) merge() error {
	var h spoolHeap
	for _, w := range d.spools {
		if w.err != nil {
			return w.err
		}
		if _, err := w.spoolFile.Seek(24, io.SeekStart); err != nil { // past the spool's file header
			return fmt.Errorf("capture: reading a spool of %s: %w", d.Name(0), err)
		}
		s := &spoolReader{r: bufio.NewReaderSize(w.spoolFile, dumpFlush), worker: w.index}
		switch err := s.next(); err {
		case nil:
			h = append(h, s)
		case io.EOF:
		default:
			return fmt.Errorf("capture: reading a spool of %s: %w", d.Name(0), err)
		}
	}
	heap.Init(&h)
	out := bufio.NewWriterSize(d.out, dumpFlush)
	for len(h) > 0 {
		s := h[0]
		if _, err := out.Write(s.rec); err != nil {
			return fmt.Errorf("capture: writing %s: %w", d.Name(0), err)
		}
		switch err := s.next(); err {
		case nil:
			heap.Fix(&h, 0)
		case io.EOF:
			heap.Pop(&h)
		default:
			return fmt.Errorf("capture: reading a spool of %s: %w", d.Name(0), err)
		}
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("capture: writing %s: %w", d.Name(0), err)
	}
	return nil
}

// WorkerDump is one worker's writer. Its methods are for that worker's
// goroutine only. It implements steer.Ticker (a tick writes what it holds)
// and io.Closer, so a per-worker state can embed it.
type WorkerDump struct {
	d         *Dump
	index     int
	file      io.WriteCloser   // its own file, with a pattern, or its spool
	spoolFile *os.File         // the spool, which the Dump reads back
	spool     bool             // file is a spool, which the Dump merges and closes
	spoolName string           // a spool to remove at the end, when it could not be at once
	pw        *pcapfile.Writer // its own file's, or the one file's
	buf       []byte
	tagged    []byte // a frame with its VLAN tag put back
	frames    uint64
	err       error
}

// Write appends p as one record. An 802.1Q tag the source delivered out of
// band (a live socket's; see steer.Packet.Key) is put back into the bytes
// after the MAC addresses, as libpcap does, with priority zero.
func (w *WorkerDump) Write(p *steer.Packet) {
	if w.err != nil {
		return
	}
	data := p.Data
	wire := p.WireLen
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

// Close writes what is left and closes the worker's own file (a spool
// stays open for the Dump's Close). It returns the first error the writer
// met.
func (w *WorkerDump) Close() error {
	w.flush()
	if w.file != nil && !w.spool {
		if err := w.file.Close(); err != nil && w.err == nil {
			w.err = fmt.Errorf("capture: closing %s: %w", w.d.Name(w.index), err)
		}
		w.file = nil
	}
	return w.err
}

// discard closes and removes a spool.
func (w *WorkerDump) discard() {
	if w.file != nil {
		w.file.Close()
		w.file = nil
	}
	if w.spoolName != "" {
		os.Remove(w.spoolName)
	}
}
