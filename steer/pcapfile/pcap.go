package pcapfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"time"

	"github.com/rpsgo/rps/steer"
)

// The classic pcap format: a 24-byte file header (magic, version 2.4,
// time zone, sigfigs, snap length, link type), then records, each a 16-byte
// header (seconds, micro- or nanoseconds, captured length, original length)
// and the captured bytes, all in the byte order the magic number shows.

const (
	pcapFileHeaderLen   = 24
	pcapRecordHeaderLen = 16
)

func (r *Reader) pcapOpen() error {
	if err := r.fill(pcapFileHeaderLen); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("pcapfile: the file ends inside its %d-byte header: %w", pcapFileHeaderLen, ErrTruncated)
		}
		return fmt.Errorf("pcapfile: reading file header: %w", decompressErr(err))
	}
	h := r.cur.buf[r.pos : r.pos+pcapFileHeaderLen]
	r.pos += pcapFileHeaderLen
	switch binary.LittleEndian.Uint32(h) {
	case 0xa1b23c4d:
		r.nanoFrac = true
	case 0xd4c3b2a1:
		r.bigEndian = true
	case 0x4d3cb2a1:
		r.bigEndian, r.nanoFrac = true, true
	}
	if major := u16(h[4:6], r.bigEndian); major != 2 {
		return fmt.Errorf("pcapfile: pcap version %d.%d is not supported: %w",
			major, u16(h[6:8], r.bigEndian), ErrFormat)
	}
	r.snap = int(min(u32(h[16:20], r.bigEndian), math.MaxInt32))
	// The upper bits of the link type field may carry FCS information.
	r.link = LinkType(u32(h[20:24], r.bigEndian) & 0xffff)
	if !r.link.Supported() {
		return &LinkTypeError{LinkType: r.link, Interface: -1}
	}
	return nil
}

// u16, u32 and u64 read an integer in the byte order the file's magic
// number gave: big-endian when be is set, little-endian otherwise.
func u16(b []byte, be bool) uint16 {
	v := binary.LittleEndian.Uint16(b)
	if be {
		v = bits.ReverseBytes16(v)
	}
	return v
}

func u32(b []byte, be bool) uint32 {
	v := binary.LittleEndian.Uint32(b)
	if be {
		v = bits.ReverseBytes32(v)
	}
	return v
}

func u64(b []byte, be bool) uint64 {
	v := binary.LittleEndian.Uint64(b)
	if be {
		v = bits.ReverseBytes64(v)
	}
	return v
}

// pcapNext reads the next record the careful way: its header, checked,
// then its captured bytes, reading as much of the file as they need.
func (r *Reader) pcapNext(bt *batchRef) ([]byte, error) {
	h, err := r.take(pcapRecordHeaderLen, "its header")
	if err != nil {
		return nil, err
	}
	be := r.bigEndian
	capLen := u32(h[8:12], be)
	if capLen > MaxRecordLen {
		return nil, r.formatErr("captured length %d exceeds the %d-byte limit", capLen, MaxRecordLen)
	}
	frac := int64(u32(h[4:8], be))
	if !r.nanoFrac {
		frac *= 1000
	}
	r.rec = record{
		sec:     int64(u32(h[0:4], be)),
		nsec:    frac,
		capLen:  int(capLen),
		origLen: int(min(u32(h[12:16], be), 1<<31-1)),
		link:    r.link,
	}
	return r.data(bt)
}

// pcapRecords is the fast path: it parses the records that are whole in
// the chunk into frames, up to limit, and stops at the first one that is
// not whole or whose captured length is over the limit, which pcapNext
// then takes. The caller holds the chunk for the batch.
func (r *Reader) pcapRecords(frames []steer.Frame, limit int, nbytes, runts uint64) ([]steer.Frame, uint64, uint64) {
	buf := r.cur.buf[:r.end]
	pos := r.pos
	be, nano := r.bigEndian, r.nanoFrac
	link := r.link
	hr := link.headroom()
	ifIndex := r.cfg.ifIndex
	n := len(frames)
	frames = frames[:limit]
	for n < limit && len(buf)-pos >= pcapRecordHeaderLen {
		h := buf[pos : pos+pcapRecordHeaderLen]
		capLen := int(u32(h[8:12], be))
		start := pos + pcapRecordHeaderLen
		if capLen > MaxRecordLen || capLen > len(buf)-start {
			break
		}
		frac := int64(u32(h[4:8], be))
		if !nano {
			frac *= 1000
		}
		ts := time.Unix(int64(u32(h[0:4], be)), frac).UTC()
		origLen := int(min(u32(h[12:16], be), 1<<31-1))
		pos = start + capLen
		// The slot is zero (ReadBatch clears them): storing the fields one
		// by one costs less than storing a whole Frame literal, which is
		// built on the stack and copied.
		f := &frames[n]
		n++
		nbytes += uint64(capLen)
		f.Timestamp = ts
		f.IfIndex = ifIndex
		if link == LinkTypeEthernet {
			f.Data = buf[start:pos:pos]
			f.WireLen = max(origLen, capLen)
			continue
		}
		data, delta, sllIf, runt := rewrite(link, buf[start-hr:pos:pos])
		f.Data = data
		f.WireLen = max(origLen+delta, len(data))
		switch {
		case runt:
			f.WireLen = origLen
			runts++
		case ifIndex == 0 && sllIf > 0:
			f.IfIndex = sllIf
		}
	}
	r.pos = pos
	return frames[:n], nbytes, runts
}
