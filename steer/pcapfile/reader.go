package pcapfile

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpsgo/rps/steer"
)

// Errors that callers test with errors.Is.
var (
	// ErrLinkType is wrapped by the error for a link type the reader cannot
	// turn into Ethernet frames.
	ErrLinkType = errors.New("unsupported link type")
	// ErrFormat is wrapped by the errors for input that is not a valid
	// capture file.
	ErrFormat = errors.New("malformed capture file")
	// ErrTruncated is wrapped by the error for a file that ends inside a
	// record (or a header), as a capture cut off while being written does.
	ErrTruncated = errors.New("truncated capture file")
	// ErrClosed is returned by ReadBatch after Close.
	ErrClosed = errors.New("pcapfile: reader closed")
)

const (
	// DefaultBatchSize is the number of frames per batch unless
	// [WithBatchSize] says otherwise.
	DefaultBatchSize = 64
	// MaxBatchSize is the largest batch size [WithBatchSize] accepts.
	MaxBatchSize = 1024
	// MaxRecordLen is the largest captured length of a record the reader
	// accepts (tcpdump's largest snap length, 256 KiB).
	MaxRecordLen = 262144
	// MaxInterfaces is the largest number of interface description blocks
	// a pcapng section may hold (a capture has one per interface it was
	// taken on, a handful in practice); a section with more is taken as a
	// corrupt file. It bounds what the reader keeps per interface.
	MaxInterfaces = 4096

	// peekSize is the buffer the first bytes are peeked in, to tell gzip
	// input; gzipBufferSize the one compressed input is read through.
	peekSize       = 4 << 10
	gzipBufferSize = 64 << 10
)

// Format is the container format of a capture file.
type Format int

// The formats [Reader] reads.
const (
	FormatPcap   Format = 1 // classic libpcap format
	FormatPcapNG Format = 2 // pcapng
)

// String returns "pcap" or "pcapng".
func (f Format) String() string {
	switch f {
	case FormatPcap:
		return "pcap"
	case FormatPcapNG:
		return "pcapng"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// Option configures a [Reader].
type Option func(*config) error

type config struct {
	batchSize int
	ifIndex   int
}

// WithBatchSize sets the largest number of frames per batch, between 1 and
// [MaxBatchSize] ([DefaultBatchSize] by default).
func WithBatchSize(n int) Option {
	return func(c *config) error {
		if n < 1 || n > MaxBatchSize {
			return fmt.Errorf("pcapfile: batch size %d is outside 1..%d", n, MaxBatchSize)
		}
		c.batchSize = n
		return nil
	}
}

// WithIfIndex sets the ingress interface index (Frame.IfIndex) of every
// frame, overriding what the file says. It must be positive.
func WithIfIndex(i int) Option {
	return func(c *config) error {
		if i < 1 {
			return fmt.Errorf("pcapfile: interface index %d is not positive", i)
		}
		c.ifIndex = i
		return nil
	}
}

// Stats counts what a [Reader] has read.
type Stats struct {
	Records uint64 // records delivered as frames
	Bytes   uint64 // captured bytes of those records, as stored in the file
	Runts   uint64 // records too short for their link-layer header (delivered with empty Data)
	Batches uint64 // batches delivered
}

// Reader reads a capture file as a [steer.Source]. ReadBatch must not be
// called from several goroutines at once; Close, Stats and a batch's
// Release may be called from any goroutine.
type Reader struct {
	cfg    config
	src    io.Reader // the file's bytes, decompressed
	format Format
	link   LinkType
	snap   int      // the snap length the file's header says
	file   *os.File // closed by Close when Open opened it
	closed atomic.Bool

	// The chunk being read: cur.buf[pos:end] is read and not yet parsed.
	cur       *chunk
	pos, end  int
	rerr      error // the error the input's last read returned, kept
	chunkSize int

	// Classic pcap state.
	bigEndian bool
	nanoFrac  bool

	// pcapng state.
	ng ngState

	rec  record // the record the careful path read last
	nrec uint64 // records whose header was read, for error messages
	err  error  // sticky error, returned once the frames before it are out

	mu          sync.Mutex
	freeChunks  []*chunk
	freeBatches []*batchRef

	stats struct{ records, bytes, runts, batches atomic.Uint64 }
}

// record is what a record header says.
type record struct {
	sec, nsec int64
	capLen    int
	origLen   int
	link      LinkType
	ifIndex   int  // pcapng interface ID + 1, or 0
	noTime    bool // a pcapng simple packet block: no timestamp
}

// Open opens the capture file at path ("-" reads standard input, which
// Close then leaves open) and reads its header.
func Open(path string, opt ...Option) (*Reader, error) {
	if path == "-" {
		r, err := NewReader(os.Stdin, opt...)
		if err != nil {
			return nil, fmt.Errorf("%w (reading standard input)", err)
		}
		return r, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pcapfile: %w", err)
	}
	r, err := NewReader(f, opt...)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w (reading %s)", err, path)
	}
	r.file = f
	return r, nil
}

// NewReader reads a capture file from rd, detecting its format by its
// magic number, and reads its header. Close does not close rd.
func NewReader(rd io.Reader, opt ...Option) (*Reader, error) {
	return newReader(rd, chunkSize, opt)
}

// newReader is NewReader with chunks of size bytes (tests make them small
// to put records across chunk boundaries).
func newReader(rd io.Reader, size int, opt []Option) (*Reader, error) {
	cfg := config{batchSize: DefaultBatchSize}
	for _, o := range opt {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	r := &Reader{cfg: cfg, chunkSize: size}
	br := bufio.NewReaderSize(rd, peekSize)
	magic, err := br.Peek(4)
	if len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, gzErr := gzip.NewReader(bufio.NewReaderSize(&drainThen{br: br, rd: rd}, gzipBufferSize))
		if gzErr != nil {
			if errors.Is(gzErr, io.EOF) || errors.Is(gzErr, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("pcapfile: the file ends inside its gzip header: %w", ErrTruncated)
			}
			return nil, fmt.Errorf("pcapfile: opening gzip stream: %w", decompressErr(gzErr))
		}
		r.src = gz
	} else {
		r.src = &drainThen{br: br, rd: rd}
	}
	r.cur = &chunk{buf: make([]byte, min(firstChunkSize, size))}
	r.cur.refs.Store(1)
	r.pos, r.end = chunkReserve, chunkReserve
	if err == nil {
		err = r.fill(4)
	}
	if err != nil {
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF):
			// Only a gzip stream says this: it ends before its trailer.
			return nil, fmt.Errorf("pcapfile: the gzip stream ends inside the file header: %w", ErrTruncated)
		case errors.Is(err, io.EOF):
			return nil, fmt.Errorf("pcapfile: reading file header: input is empty or shorter than a header: %w", ErrFormat)
		}
		return nil, fmt.Errorf("pcapfile: reading file header: %w", decompressErr(err))
	}
	magic = r.cur.buf[r.pos : r.pos+4]
	switch binary.BigEndian.Uint32(magic) {
	case ngBlockSHB:
		r.format = FormatPcapNG
		err = r.ngOpen()
	case 0xa1b2c3d4, 0xd4c3b2a1, 0xa1b23c4d, 0x4d3cb2a1:
		r.format = FormatPcap
		err = r.pcapOpen()
	case 0xa1b2cd34, 0x34cdb2a1:
		err = fmt.Errorf("pcapfile: the modified (Kuznetzov) pcap format is not supported: %w", ErrFormat)
	default:
		err = fmt.Errorf("pcapfile: unknown magic number %#08x: not a pcap or pcapng file: %w",
			binary.BigEndian.Uint32(magic), ErrFormat)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// drainThen reads what a bufio.Reader holds, then the reader under it
// directly: the bytes peeked at to tell the format are read once, and the
// rest of the file goes straight into the chunks.
type drainThen struct {
	br *bufio.Reader
	rd io.Reader
}

func (d *drainThen) Read(p []byte) (int, error) {
	if d.br != nil {
		if d.br.Buffered() > 0 {
			return d.br.Read(p)
		}
		d.br = nil
	}
	return d.rd.Read(p)
}

// Format returns the file's container format.
func (r *Reader) Format() Format { return r.format }

// LinkType returns the file's link type: for pcapng, that of its first
// interface (each interface has its own; zero when the file has none).
func (r *Reader) LinkType() LinkType { return r.link }

// SnapLen returns the snap length the file records: the pcap header's, or
// for pcapng that of its first interface (zero when the file does not
// say, pcapng's "no limit", or has no interface). A program that writes
// what it reads passes it on ([WriterOptions]).
func (r *Reader) SnapLen() int { return r.snap }

// Stats returns the counts so far. It is safe to call at any time.
func (r *Reader) Stats() Stats {
	return Stats{
		Records: r.stats.records.Load(),
		Bytes:   r.stats.bytes.Load(),
		Runts:   r.stats.runts.Load(),
		Batches: r.stats.batches.Load(),
	}
}

// Close closes the file if [Open] opened it; further ReadBatch calls return
// [ErrClosed]. It is safe to call while another goroutine is in ReadBatch,
// and more than once. A reader of standard input or of an [io.Reader]
// leaves it open, so a ReadBatch blocked in a read of it stays blocked
// until that read returns.
func (r *Reader) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	if r.file != nil {
		if err := r.file.Close(); err != nil {
			return fmt.Errorf("pcapfile: closing file: %w", err)
		}
	}
	return nil
}

// ReadBatch fills b with up to the batch size of frames. It returns io.EOF
// (unwrapped) after the last frame, ctx's error when ctx has ended (checked
// before each batch), and [ErrClosed] after Close. An error found in the
// middle of a batch is returned by the next call, after the frames before
// it. On success b.Release is set and must be called exactly once, when
// every frame of the batch is done with; on error b has no frames and no
// Release.
func (r *Reader) ReadBatch(ctx context.Context, b *steer.Batch) error {
	b.Frames = b.Frames[:0]
	b.Release = nil
	if r.closed.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.err != nil {
		return r.err
	}
	limit := r.cfg.batchSize
	if cap(b.Frames) < limit {
		b.Frames = make([]steer.Frame, 0, limit)
	}
	clear(b.Frames[:limit])
	bt := r.getBatch()
	frames := b.Frames[:0]
	var nbytes, runts uint64
	for len(frames) < limit {
		// The records that are whole in the chunk, parsed in place; then
		// one record the careful way, which reads more of the file and
		// finds what is wrong with a record the fast path stopped at.
		if r.avail() > 0 {
			bt.hold(r.cur)
			n := len(frames)
			if r.format == FormatPcap {
				frames, nbytes, runts = r.pcapRecords(frames, limit, nbytes, runts)
			} else {
				frames, nbytes, runts = r.ngRecords(frames, limit, nbytes, runts)
			}
			r.nrec += uint64(len(frames) - n)
			if len(frames) == limit {
				break
			}
		}
		region, err := r.nextRecord(bt)
		if err != nil {
			r.err = err
			break
		}
		frames = frames[:len(frames)+1]
		if r.frame(&frames[len(frames)-1], &r.rec, region) {
			runts++
		}
		nbytes += uint64(r.rec.capLen)
	}
	b.Frames = frames
	if runts > 0 {
		r.stats.runts.Add(runts)
	}
	if len(frames) == 0 {
		bt.put()
		return r.err
	}
	r.stats.records.Add(uint64(len(frames)))
	r.stats.bytes.Add(nbytes)
	r.stats.batches.Add(1)
	b.Release = bt.release
	return nil
}

// frame fills f, a zero frame, with the record rec, whose captured bytes region holds
// after the link type's headroom, turned into Ethernet in place. It
// reports whether the record was a runt.
func (r *Reader) frame(f *steer.Frame, rec *record, region []byte) (runt bool) {
	data, delta, sllIf, runt := rewrite(rec.link, region)
	f.Data = data // f is zero, as in pcapRecords
	f.WireLen = max(rec.origLen+delta, len(data))
	f.IfIndex = rec.ifIndex
	if !rec.noTime {
		f.Timestamp = time.Unix(rec.sec, rec.nsec).UTC()
	}
	switch {
	case r.cfg.ifIndex > 0:
		f.IfIndex = r.cfg.ifIndex
	case sllIf > 0:
		f.IfIndex = sllIf
	}
	if runt {
		f.WireLen = rec.origLen
	}
	return runt
}

// nextRecord reads the next record into r.rec, consuming it, and returns
// the region its captured bytes are in, after the link type's headroom: a
// view into the chunk, which bt holds.
func (r *Reader) nextRecord(bt *batchRef) (region []byte, err error) {
	r.nrec++
	if r.format == FormatPcapNG {
		return r.ngNext(bt)
	}
	return r.pcapNext(bt)
}

// data makes the captured bytes of the record whose header was just
// consumed available in the chunk, has bt hold the chunk, and consumes
// them; it returns them after the record's headroom (the chunk has at
// least chunkReserve bytes before r.pos).
func (r *Reader) data(bt *batchRef) (region []byte, err error) {
	n := r.rec.capLen
	if err := r.fill(n); err != nil {
		return nil, r.readErr(err, "its captured bytes")
	}
	bt.hold(r.cur)
	start := r.pos - r.rec.link.headroom()
	r.pos += n
	return r.cur.buf[start:r.pos:r.pos], nil
}

// readErr turns a read error inside record r.nrec into the error to report.
func (r *Reader) readErr(err error, what string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("pcapfile: record %d: the file ends inside %s: %w", r.nrec, what, ErrTruncated)
	}
	return fmt.Errorf("pcapfile: record %d: reading %s: %w", r.nrec, what, decompressErr(err))
}

// decompressErr marks an error by which the gzip decompressor says its
// input is wrong (a bad header, corrupt deflate data, a checksum or length
// that does not match) as ErrFormat. A stream that is cut short says
// io.ErrUnexpectedEOF instead, which callers map to ErrTruncated; other
// errors (those of the underlying reader) are returned as they are.
func decompressErr(err error) error {
	var corrupt flate.CorruptInputError
	if errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) || errors.As(err, &corrupt) {
		return fmt.Errorf("%w: %w", err, ErrFormat)
	}
	return err
}

func (r *Reader) formatErr(format string, args ...any) error {
	return fmt.Errorf("pcapfile: record %d: %s: %w", r.nrec, fmt.Sprintf(format, args...), ErrFormat)
}
