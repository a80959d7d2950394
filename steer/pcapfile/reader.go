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

	readBufferSize = 64 << 10
	arenaPerFrame  = 2048
	minArenaSize   = 64 << 10
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
	br     *bufio.Reader
	format Format
	link   LinkType
	file   *os.File // closed by Close when Open opened it
	closed atomic.Bool

	// Classic pcap state.
	order    binary.ByteOrder
	nanoFrac bool

	// pcapng state.
	ng ngState

	rec     record // the record whose header was read last
	pending bool   // rec's header is read, its data is not
	nrec    uint64 // records whose header was read, for error messages
	err     error  // sticky error, returned once the frames before it are out
	scratch [24]byte

	mu        sync.Mutex
	free      []*arena
	arenaSize int // size of a new arena

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

// arena holds the bytes of one batch's frames.
type arena struct {
	r       *Reader
	buf     []byte
	off     int
	inUse   atomic.Bool
	release func()
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
	cfg := config{batchSize: DefaultBatchSize}
	for _, o := range opt {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	r := &Reader{cfg: cfg, br: bufio.NewReaderSize(rd, readBufferSize)}
	r.arenaSize = max(cfg.batchSize*arenaPerFrame, minArenaSize)

	magic, err := r.br.Peek(4)
	if len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, gzErr := gzip.NewReader(r.br)
		if gzErr != nil {
			if errors.Is(gzErr, io.EOF) || errors.Is(gzErr, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("pcapfile: the file ends inside its gzip header: %w", ErrTruncated)
			}
			return nil, fmt.Errorf("pcapfile: opening gzip stream: %w", decompressErr(gzErr))
		}
		r.br = bufio.NewReaderSize(gz, readBufferSize)
		magic, err = r.br.Peek(4)
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

// Format returns the file's container format.
func (r *Reader) Format() Format { return r.format }

// LinkType returns the file's link type: for pcapng, that of its first
// interface (each interface has its own; zero when the file has none).
func (r *Reader) LinkType() LinkType { return r.link }

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
	a := r.getArena()
	var nbytes, runts uint64
	for len(b.Frames) < r.cfg.batchSize {
		if !r.pending {
			if err := r.nextRecord(); err != nil {
				r.err = err
				break
			}
			r.pending = true
		}
		rec := &r.rec
		need := rec.link.headroom() + rec.capLen
		if need > len(a.buf)-a.off {
			if len(b.Frames) > 0 {
				break // the record starts the next batch
			}
			a.buf = make([]byte, max(need, r.arenaSize))
		}
		r.pending = false
		region := a.buf[a.off : a.off+need]
		if _, err := io.ReadFull(r.br, region[need-rec.capLen:]); err != nil {
			r.err = r.readErr(err, "its captured bytes")
			break
		}
		a.off += need
		frame, delta, sllIf, runt := rewrite(rec.link, region)
		f := steer.Frame{
			Data:      frame,
			Timestamp: time.Unix(rec.sec, rec.nsec).UTC(),
			Length:    max(rec.origLen+delta, len(frame)),
			IfIndex:   rec.ifIndex,
		}
		switch {
		case r.cfg.ifIndex > 0:
			f.IfIndex = r.cfg.ifIndex
		case sllIf > 0:
			f.IfIndex = sllIf
		}
		if rec.noTime {
			f.Timestamp = time.Time{}
		}
		if err := r.endRecord(); err != nil {
			r.err = err // the record is delivered only when all of it is read
			break
		}
		if runt {
			f.Length = rec.origLen
			runts++
		}
		b.Frames = append(b.Frames, f)
		nbytes += uint64(rec.capLen)
	}
	if runts > 0 {
		r.stats.runts.Add(runts)
	}
	if len(b.Frames) == 0 {
		r.putArena(a)
		return r.err
	}
	r.stats.records.Add(uint64(len(b.Frames)))
	r.stats.bytes.Add(nbytes)
	r.stats.batches.Add(1)
	b.Release = a.release
	return nil
}

// nextRecord reads the next record header into r.rec.
func (r *Reader) nextRecord() error {
	r.nrec++
	if r.format == FormatPcapNG {
		return r.ngNext()
	}
	return r.pcapNext()
}

// endRecord consumes what follows a record's captured bytes.
func (r *Reader) endRecord() error {
	if r.format == FormatPcapNG {
		return r.ngEndRecord()
	}
	return nil
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

// readHeader reads len(p) bytes at a record boundary: io.EOF (unwrapped)
// when the file ends cleanly before them.
func (r *Reader) readHeader(p []byte, what string) error {
	n, err := io.ReadFull(r.br, p)
	if err == nil {
		return nil
	}
	if n == 0 && errors.Is(err, io.EOF) {
		return io.EOF
	}
	return r.readErr(err, what)
}

// skip discards n bytes inside a record or block.
func (r *Reader) skip(n int, what string) error {
	if n <= 0 {
		return nil
	}
	if _, err := r.br.Discard(n); err != nil {
		return r.readErr(err, what)
	}
	return nil
}

func (r *Reader) formatErr(format string, args ...any) error {
	return fmt.Errorf("pcapfile: record %d: %s: %w", r.nrec, fmt.Sprintf(format, args...), ErrFormat)
}

func (r *Reader) getArena() *arena {
	r.mu.Lock()
	var a *arena
	if n := len(r.free); n > 0 {
		a = r.free[n-1]
		r.free[n-1] = nil
		r.free = r.free[:n-1]
	}
	r.mu.Unlock()
	if a == nil {
		a = &arena{r: r, buf: make([]byte, r.arenaSize)}
		a.release = func() { a.r.putArena(a) }
	}
	a.off = 0
	a.inUse.Store(true)
	return a
}

func (r *Reader) putArena(a *arena) {
	if !a.inUse.CompareAndSwap(true, false) {
		panic("pcapfile: batch released twice")
	}
	r.mu.Lock()
	r.free = append(r.free, a)
	r.mu.Unlock()
}
