package pcapfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// ErrTimestamp is wrapped by the error for a packet whose time a classic
// pcap file cannot hold: before 1970 (other than the zero time) or after
// 2106, its seconds being an unsigned 32-bit count.
var ErrTimestamp = errors.New("timestamp outside the pcap range (1970 to 2106)")

// WriterOptions configures a [Writer]. The zero value writes microsecond
// timestamps and a snap length of [MaxRecordLen], as tcpdump -w does.
type WriterOptions struct {
	// SnapLen is the snap length the file header records, and the most
	// bytes of a packet the writer keeps: a longer packet is cut to it and
	// keeps its wire length. Zero means MaxRecordLen, which is also the
	// largest accepted. A program that copies or filters a capture passes
	// the input's ([Reader.SnapLen]).
	SnapLen int
	// Nanosecond writes nanosecond timestamps (the magic number
	// 0xa1b23c4d, which tcpdump writes with --time-stamp-precision=nano)
	// instead of microseconds.
	Nanosecond bool
}

// Writer writes a classic pcap file, little-endian, record by record, as
// tcpdump -w does. It writes what it is given in that order: the file's
// records are in time order only when the packets are. WritePacket is not
// safe for concurrent use; AppendPacket is, so that several goroutines
// writing one file build their records with it and write them under a
// lock of their own.
type Writer struct {
	w    io.Writer
	link LinkType
	snap int
	nano bool
	buf  []byte // the record WritePacket writes
}

// NewWriter writes the file header of a capture of link type link (such as
// [LinkTypeEthernet], the frames steer's sources deliver) to w and returns
// a Writer of the packets that follow. The snap length must be between 0
// and [MaxRecordLen], the link type fit in 16 bits.
func NewWriter(w io.Writer, link LinkType, opt WriterOptions) (*Writer, error) {
	if opt.SnapLen < 0 || opt.SnapLen > MaxRecordLen {
		return nil, fmt.Errorf("pcapfile: snap length %d is outside 0..%d", opt.SnapLen, MaxRecordLen)
	}
	if link > math.MaxUint16 {
		return nil, fmt.Errorf("pcapfile: link type %d does not fit in a pcap file header's 16 bits", uint32(link))
	}
	pw := &Writer{w: w, link: link, snap: opt.SnapLen, nano: opt.Nanosecond}
	if pw.snap == 0 {
		pw.snap = MaxRecordLen
	}
	if _, err := w.Write(pw.appendFileHeader(nil)); err != nil {
		return nil, fmt.Errorf("pcapfile: writing the file header: %w", err)
	}
	return pw, nil
}

// appendFileHeader appends the 24-byte file header to dst.
func (w *Writer) appendFileHeader(dst []byte) []byte {
	le := binary.LittleEndian
	magic := uint32(0xa1b2c3d4)
	if w.nano {
		magic = 0xa1b23c4d
	}
	dst = le.AppendUint32(dst, magic)
	dst = le.AppendUint16(dst, 2) // version 2.4
	dst = le.AppendUint16(dst, 4)
	dst = le.AppendUint32(dst, 0) // time zone and timestamp accuracy, unused
	dst = le.AppendUint32(dst, 0)
	dst = le.AppendUint32(dst, uint32(w.snap))
	return le.AppendUint32(dst, uint32(w.link))
}

// WritePacket writes one packet as a record, in one Write call: ts is its
// capture time (the zero time is written as 1970-01-01, the pcap format
// having no "unknown"), data its bytes from the link-layer header on (cut
// to the snap length), wireLen its length on the wire (zero, or less than
// len(data), means len(data)). It returns an error wrapping
// [ErrTimestamp] for a time the format cannot hold, writing nothing, or
// the error of the Write.
func (w *Writer) WritePacket(ts time.Time, data []byte, wireLen int) error {
	buf, err := w.AppendPacket(w.buf[:0], ts, data, wireLen)
	if err != nil {
		return err
	}
	w.buf = buf
	if _, err := w.w.Write(buf); err != nil {
		return fmt.Errorf("pcapfile: writing a packet: %w", err)
	}
	return nil
}

// AppendPacket appends the record WritePacket would write to dst and
// returns it, writing nothing: for a program that batches records or
// writes them from several goroutines.
func (w *Writer) AppendPacket(dst []byte, ts time.Time, data []byte, wireLen int) ([]byte, error) {
	var sec int64
	var frac int
	if !ts.IsZero() {
		sec = ts.Unix()
		if sec < 0 || sec > math.MaxUint32 {
			return dst, fmt.Errorf("pcapfile: %v: %w", ts, ErrTimestamp)
		}
		frac = ts.Nanosecond()
		if !w.nano {
			frac /= 1000
		}
	}
	wire := uint32(min(int64(max(wireLen, len(data))), math.MaxUint32))
	data = data[:min(len(data), w.snap)]
	le := binary.LittleEndian
	dst = le.AppendUint32(dst, uint32(sec))
	dst = le.AppendUint32(dst, uint32(frac))
	dst = le.AppendUint32(dst, uint32(len(data)))
	dst = le.AppendUint32(dst, wire)
	return append(dst, data...), nil
}
