package pcapfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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
	h := r.scratch[:pcapFileHeaderLen]
	if _, err := io.ReadFull(r.br, h); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("pcapfile: the file ends inside its %d-byte header: %w", pcapFileHeaderLen, ErrTruncated)
		}
		return fmt.Errorf("pcapfile: reading file header: %w", decompressErr(err))
	}
	switch binary.LittleEndian.Uint32(h) {
	case 0xa1b2c3d4:
		r.order = binary.LittleEndian
	case 0xa1b23c4d:
		r.order, r.nanoFrac = binary.LittleEndian, true
	case 0xd4c3b2a1:
		r.order = binary.BigEndian
	case 0x4d3cb2a1:
		r.order, r.nanoFrac = binary.BigEndian, true
	}
	if major := r.order.Uint16(h[4:6]); major != 2 {
		return fmt.Errorf("pcapfile: pcap version %d.%d is not supported: %w",
			major, r.order.Uint16(h[6:8]), ErrFormat)
	}
	// The upper bits of the link type field may carry FCS information.
	r.link = LinkType(r.order.Uint32(h[20:24]) & 0xffff)
	if !r.link.Supported() {
		return &LinkTypeError{LinkType: r.link, Interface: -1}
	}
	return nil
}

func (r *Reader) pcapNext() error {
	h := r.scratch[:pcapRecordHeaderLen]
	if err := r.readHeader(h, "its header"); err != nil {
		return err
	}
	sec := int64(r.order.Uint32(h[0:4]))
	frac := int64(r.order.Uint32(h[4:8]))
	capLen := r.order.Uint32(h[8:12])
	origLen := r.order.Uint32(h[12:16])
	if capLen > MaxRecordLen {
		return r.formatErr("captured length %d exceeds the %d-byte limit", capLen, MaxRecordLen)
	}
	if !r.nanoFrac {
		frac *= 1000
	}
	r.rec = record{
		sec:     sec,
		nsec:    frac,
		capLen:  int(capLen),
		origLen: int(min(origLen, 1<<31-1)),
		link:    r.link,
	}
	return nil
}
