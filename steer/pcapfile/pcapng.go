package pcapfile

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
)

// The pcapng format is a sequence of blocks: type (4 bytes), total length
// (4), body, total length again. A section header block (SHB) starts each
// section and sets its byte order; interface description blocks (IDB) are
// numbered from zero within their section; enhanced (EPB), simple (SPB) and
// obsolete packet blocks (PB) hold the records. Other blocks are skipped.

const (
	ngBlockSHB = 0x0a0d0d0a
	ngBlockIDB = 1
	ngBlockPB  = 2
	ngBlockSPB = 3
	ngBlockEPB = 6

	ngByteOrderMagic = 0x1a2b3c4d
	ngMaxBlockLen    = 1 << 30

	ngOptEnd      = 0
	ngOptTSResol  = 9
	ngOptTSOffset = 14
)

type ngState struct {
	order  binary.ByteOrder
	ifaces []ngIface
	total  uint32 // the current block's total length, to check its trailer
	remain int    // bytes of the current packet block after the captured data, before the trailer
}

// ngIface is what the reader keeps of an interface description: 16 bytes,
// so that a section's [MaxInterfaces] interfaces take at most 64 KiB.
type ngIface struct {
	tsOffset int64 // if_tsoffset, seconds
	snap     uint32
	link     uint16 // an interface's link type has 16 bits in pcapng
	exp      uint8  // if_tsresol's exponent: units are 10^-exp or 2^-exp seconds
	binary   bool   // if_tsresol is a power of two
}

func (ifc *ngIface) linkType() LinkType { return LinkType(ifc.link) }

// time converts a timestamp in the interface's units.
func (ifc *ngIface) time(ts uint64) (sec, nsec int64) {
	if ifc.binary {
		frac := ts & (1<<ifc.exp - 1)
		hi, lo := bits.Mul64(frac, 1e9)
		if ifc.exp == 0 {
			return int64(ts) + ifc.tsOffset, 0
		}
		return int64(ts>>ifc.exp) + ifc.tsOffset, int64(hi<<(64-ifc.exp) | lo>>ifc.exp)
	}
	div := pow10[ifc.exp]
	sec, frac := int64(ts/div), ts%div
	if ifc.exp <= 9 {
		return sec + ifc.tsOffset, int64(frac * pow10[9-ifc.exp])
	}
	return sec + ifc.tsOffset, int64(frac / pow10[ifc.exp-9])
}

// pow10[e] is 10^e, up to 10^19, the largest power of ten in a uint64.
var pow10 = func() (p [20]uint64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

func (r *Reader) ngErr(format string, args ...any) error {
	if r.nrec == 0 {
		return fmt.Errorf("pcapfile: pcapng: %s: %w", fmt.Sprintf(format, args...), ErrFormat)
	}
	return fmt.Errorf("pcapfile: pcapng, before record %d: %s: %w", r.nrec, fmt.Sprintf(format, args...), ErrFormat)
}

// ngOpen reads the first section header and blocks up to the first
// interface description, which gives LinkType.
func (r *Reader) ngOpen() error {
	for {
		typ, body, err := r.ngBlockHeader()
		if err != nil {
			return r.openErr(err)
		}
		switch typ {
		case ngBlockSHB:
			err = r.ngSection(body)
		case ngBlockIDB:
			if err = r.ngInterface(body); err == nil {
				r.link = r.ng.ifaces[0].linkType()
				if !r.link.Supported() {
					return &LinkTypeError{LinkType: r.link, Interface: 0}
				}
				return nil
			}
		case ngBlockEPB, ngBlockSPB, ngBlockPB:
			return r.ngErr("a packet block comes before any interface description block")
		default:
			err = r.ngSkipBlock(body)
		}
		if err != nil {
			return r.openErr(err)
		}
	}
}

// openErr maps a clean end of file while opening: a pcapng file with no
// interface is an empty capture.
func (r *Reader) openErr(err error) error {
	if err == io.EOF {
		if r.ng.order == nil {
			return r.ngErr("no section header block")
		}
		return nil
	}
	return err
}

// ngNext reads blocks up to the next packet block and fills r.rec.
func (r *Reader) ngNext() error {
	for {
		typ, body, err := r.ngBlockHeader()
		if err != nil {
			return err
		}
		switch typ {
		case ngBlockSHB:
			err = r.ngSection(body)
		case ngBlockIDB:
			err = r.ngInterface(body)
		case ngBlockEPB, ngBlockPB:
			return r.ngPacket(typ, body)
		case ngBlockSPB:
			return r.ngSimplePacket(body)
		default:
			err = r.ngSkipBlock(body)
		}
		if err != nil {
			return err
		}
	}
}

// ngBlockHeader reads a block's type and length (and, for a section header,
// its byte-order magic) and returns the length of the body left to read,
// without the trailing length.
func (r *Reader) ngBlockHeader() (typ uint32, body int, err error) {
	h := r.scratch[:8]
	if err := r.readHeader(h, "a block header"); err != nil {
		return 0, 0, err
	}
	minLen := uint32(12)
	if binary.BigEndian.Uint32(h) == ngBlockSHB {
		typ = ngBlockSHB
		bom := r.scratch[8:12]
		if err := r.readHeader(bom, "a section header"); err != nil {
			return 0, 0, r.truncatedIfEOF(err, "a section header")
		}
		switch {
		case binary.BigEndian.Uint32(bom) == ngByteOrderMagic:
			r.ng.order = binary.BigEndian
		case binary.LittleEndian.Uint32(bom) == ngByteOrderMagic:
			r.ng.order = binary.LittleEndian
		default:
			return 0, 0, r.ngErr("bad byte-order magic %#08x in a section header", binary.BigEndian.Uint32(bom))
		}
		minLen = 28
	} else {
		if r.ng.order == nil {
			return 0, 0, r.ngErr("no section header block")
		}
		typ = r.ng.order.Uint32(h)
	}
	total := r.ng.order.Uint32(h[4:8])
	if total < minLen || total%4 != 0 || total > ngMaxBlockLen {
		return 0, 0, r.ngErr("block type %#x has a bad total length %d", typ, total)
	}
	r.ng.total = total
	body = int(total) - 12
	if typ == ngBlockSHB {
		body -= 4
	}
	return typ, body, nil
}

// truncatedIfEOF turns a clean end of file inside a block into ErrTruncated.
func (r *Reader) truncatedIfEOF(err error, what string) error {
	if err == io.EOF {
		return r.readErr(io.EOF, what)
	}
	return err
}

// ngTrailer reads and checks a block's trailing length.
func (r *Reader) ngTrailer() error {
	t := r.scratch[:4]
	if err := r.readHeader(t, "a block trailer"); err != nil {
		return r.truncatedIfEOF(err, "a block trailer")
	}
	if got := r.ng.order.Uint32(t); got != r.ng.total {
		return r.ngErr("block trailer length %d differs from its header's %d", got, r.ng.total)
	}
	return nil
}

func (r *Reader) ngSkipBlock(body int) error {
	if err := r.skip(body, "a block"); err != nil {
		return err
	}
	return r.ngTrailer()
}

func (r *Reader) ngSection(body int) error {
	h := r.scratch[:12]
	if err := r.readHeader(h, "a section header"); err != nil {
		return r.truncatedIfEOF(err, "a section header")
	}
	body -= 12
	major, minor := r.ng.order.Uint16(h[0:2]), r.ng.order.Uint16(h[2:4])
	if major != 1 {
		return r.ngErr("pcapng version %d.%d is not supported", major, minor)
	}
	r.ng.ifaces = r.ng.ifaces[:0]
	return r.ngSkipBlock(body)
}

func (r *Reader) ngInterface(body int) error {
	if body < 8 {
		return r.ngErr("interface description block too short")
	}
	if len(r.ng.ifaces) >= MaxInterfaces {
		return r.ngErr("a section has more than %d interface description blocks (MaxInterfaces)", MaxInterfaces)
	}
	h := r.scratch[:8]
	if err := r.readHeader(h, "an interface description"); err != nil {
		return r.truncatedIfEOF(err, "an interface description")
	}
	body -= 8
	ifc := ngIface{
		link: r.ng.order.Uint16(h[0:2]),
		snap: r.ng.order.Uint32(h[4:8]),
		exp:  6,
	}
	for body >= 4 {
		o := r.scratch[:4]
		if err := r.readHeader(o, "an interface option"); err != nil {
			return r.truncatedIfEOF(err, "an interface option")
		}
		body -= 4
		code, n := r.ng.order.Uint16(o[0:2]), int(r.ng.order.Uint16(o[2:4]))
		if code == ngOptEnd {
			break
		}
		padded := (n + 3) &^ 3
		if padded > body {
			return r.ngErr("interface option %d of %d bytes overruns its block", code, n)
		}
		body -= padded
		v := r.scratch[:0]
		if (code == ngOptTSResol && n == 1) || (code == ngOptTSOffset && n == 8) {
			v = r.scratch[:n]
			if err := r.readHeader(v, "an interface option"); err != nil {
				return r.truncatedIfEOF(err, "an interface option")
			}
		}
		if err := r.skip(padded-len(v), "an interface option"); err != nil {
			return err
		}
		switch {
		case code == ngOptTSResol && n == 1:
			ifc.binary = v[0]&0x80 != 0
			ifc.exp = v[0] & 0x7f
		case code == ngOptTSOffset && n == 8:
			ifc.tsOffset = int64(r.ng.order.Uint64(v))
		}
	}
	if ifc.binary && ifc.exp > 63 || !ifc.binary && int(ifc.exp) >= len(pow10) {
		return r.ngErr("interface %d has an unsupported timestamp resolution", len(r.ng.ifaces))
	}
	r.ng.ifaces = append(r.ng.ifaces, ifc)
	return r.ngSkipBlock(body)
}

// ngPacket reads the fixed part of an enhanced or obsolete packet block.
func (r *Reader) ngPacket(typ uint32, body int) error {
	if body < 20 {
		return r.ngErr("packet block too short")
	}
	h := r.scratch[:20]
	if err := r.readHeader(h, "a packet block"); err != nil {
		return r.truncatedIfEOF(err, "a packet block")
	}
	body -= 20
	o := r.ng.order
	id := int(o.Uint32(h[0:4]))
	if typ == ngBlockPB {
		id = int(o.Uint16(h[0:2]))
	}
	if id >= len(r.ng.ifaces) {
		return r.ngErr("packet block for interface %d, but the section has %d", id, len(r.ng.ifaces))
	}
	ifc := &r.ng.ifaces[id]
	if !ifc.linkType().Supported() {
		return &LinkTypeError{LinkType: ifc.linkType(), Interface: id}
	}
	capLen, origLen := o.Uint32(h[12:16]), o.Uint32(h[16:20])
	if capLen > MaxRecordLen {
		return r.formatErr("captured length %d exceeds the %d-byte limit", capLen, MaxRecordLen)
	}
	if int(capLen) > body {
		return r.formatErr("captured length %d overruns its %d-byte block", capLen, r.ng.total)
	}
	sec, nsec := ifc.time(uint64(o.Uint32(h[4:8]))<<32 | uint64(o.Uint32(h[8:12])))
	r.rec = record{
		sec:     sec,
		nsec:    nsec,
		capLen:  int(capLen),
		origLen: int(min(origLen, 1<<31-1)),
		link:    ifc.linkType(),
		ifIndex: id + 1,
	}
	r.ng.remain = body - int(capLen)
	return nil
}

// ngSimplePacket reads the fixed part of a simple packet block, which
// belongs to interface 0 and has no timestamp.
func (r *Reader) ngSimplePacket(body int) error {
	if body < 4 {
		return r.ngErr("simple packet block too short")
	}
	h := r.scratch[:4]
	if err := r.readHeader(h, "a simple packet block"); err != nil {
		return r.truncatedIfEOF(err, "a simple packet block")
	}
	body -= 4
	if len(r.ng.ifaces) == 0 {
		return r.ngErr("simple packet block, but the section has no interface")
	}
	ifc := &r.ng.ifaces[0]
	if !ifc.linkType().Supported() {
		return &LinkTypeError{LinkType: ifc.linkType(), Interface: 0}
	}
	origLen := r.ng.order.Uint32(h)
	capLen := min(int64(origLen), int64(body))
	if ifc.snap != 0 {
		capLen = min(capLen, int64(ifc.snap))
	}
	if capLen > MaxRecordLen {
		return r.formatErr("captured length %d exceeds the %d-byte limit", capLen, MaxRecordLen)
	}
	r.rec = record{
		capLen:  int(capLen),
		origLen: int(min(origLen, 1<<31-1)),
		link:    ifc.linkType(),
		ifIndex: 1,
		noTime:  true,
	}
	r.ng.remain = body - int(capLen)
	return nil
}

// ngEndRecord skips a packet block's padding and options and checks its
// trailer.
func (r *Reader) ngEndRecord() error {
	return r.ngSkipBlock(r.ng.remain)
}
