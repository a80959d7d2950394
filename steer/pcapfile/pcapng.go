package pcapfile

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/bits"
	"time"

	"github.com/rpsgo/rps/steer"
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
	be     bool // the section's byte order is big-endian
	order  bool // a section header has set the byte order
	ifaces []ngIface
	total  uint32 // the current block's total length, to check its trailer
}

// ngIface is what the reader keeps of an interface description: 16 bytes,
// so that a section's [MaxInterfaces] interfaces take at most 64 KiB.
type ngIface struct {
	tsOffset int64 // if_tsoffset, seconds
	snap     uint32
	link     uint16 // an interface's link type has 16 bits in pcapng
	tsresol  uint8  // if_tsresol: units are 10^-exp or, with the top bit set, 2^-exp seconds
	ok       bool   // the link type is Supported
}

func (ifc *ngIface) linkType() LinkType { return LinkType(ifc.link) }

// exp and binary split if_tsresol.
func (ifc *ngIface) exp() uint8   { return ifc.tsresol & 0x7f }
func (ifc *ngIface) binary() bool { return ifc.tsresol&0x80 != 0 }

// time converts a timestamp in the interface's units.
func (ifc *ngIface) time(ts uint64) (sec, nsec int64) {
	if ifc.tsresol == 6 { // microseconds, the default: a constant divisor costs less
		return int64(ts/1e6) + ifc.tsOffset, int64(ts%1e6) * 1000
	}
	return ifc.timeOther(ts)
}

// timeOther is time for the units other than microseconds.
func (ifc *ngIface) timeOther(ts uint64) (sec, nsec int64) {
	if ifc.tsresol == 9 {
		return int64(ts/1e9) + ifc.tsOffset, int64(ts % 1e9)
	}
	exp := ifc.exp()
	if ifc.binary() {
		frac := ts & (1<<exp - 1)
		hi, lo := bits.Mul64(frac, 1e9)
		if exp == 0 {
			return int64(ts) + ifc.tsOffset, 0
		}
		return int64(ts>>exp) + ifc.tsOffset, int64(hi<<(64-exp) | lo>>exp)
	}
	div := pow10[exp]
	sec, frac := int64(ts/div), ts%div
	if exp <= 9 {
		return sec + ifc.tsOffset, int64(frac * pow10[9-exp])
	}
	return sec + ifc.tsOffset, int64(frac / pow10[exp-9])
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
				r.snap = int(min(r.ng.ifaces[0].snap, math.MaxInt32))
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
		if !r.ng.order {
			return r.ngErr("no section header block")
		}
		return nil
	}
	return err
}

// ngNext reads blocks up to the next packet block and reads the packet the
// careful way, as pcapNext does.
func (r *Reader) ngNext(bt *batchRef) ([]byte, error) {
	for {
		typ, body, err := r.ngBlockHeader()
		if err != nil {
			return nil, err
		}
		switch typ {
		case ngBlockSHB:
			err = r.ngSection(body)
		case ngBlockIDB:
			err = r.ngInterface(body)
		case ngBlockEPB, ngBlockPB:
			return r.ngPacket(bt, typ, body)
		case ngBlockSPB:
			return r.ngSimplePacket(bt, body)
		default:
			err = r.ngSkipBlock(body)
		}
		if err != nil {
			return nil, err
		}
	}
}

// ngBlockHeader reads a block's type and length (and, for a section header,
// its byte-order magic) and returns the length of the body left to read,
// without the trailing length.
func (r *Reader) ngBlockHeader() (typ uint32, body int, err error) {
	h, err := r.take(8, "a block header")
	if err != nil {
		return 0, 0, err
	}
	minLen := uint32(12)
	if binary.BigEndian.Uint32(h) == ngBlockSHB {
		typ = ngBlockSHB
		total := binary.LittleEndian.Uint32(h[4:8])
		bom, err := r.take(4, "a section header")
		if err != nil {
			return 0, 0, r.truncatedIfEOF(err, "a section header")
		}
		switch {
		case binary.BigEndian.Uint32(bom) == ngByteOrderMagic:
			r.ng.be = true
			total = bits.ReverseBytes32(total)
		case binary.LittleEndian.Uint32(bom) == ngByteOrderMagic:
			r.ng.be = false
		default:
			return 0, 0, r.ngErr("bad byte-order magic %#08x in a section header", binary.BigEndian.Uint32(bom))
		}
		r.ng.order = true
		return r.ngBlockLen(typ, total, 28)
	}
	if !r.ng.order {
		return 0, 0, r.ngErr("no section header block")
	}
	return r.ngBlockLen(u32(h, r.ng.be), u32(h[4:8], r.ng.be), minLen)
}

// ngBlockLen checks a block's total length and returns the length of its
// body left to read.
func (r *Reader) ngBlockLen(typ, total, minLen uint32) (uint32, int, error) {
	if total < minLen || total%4 != 0 || total > ngMaxBlockLen {
		return 0, 0, r.ngErr("block type %#x has a bad total length %d", typ, total)
	}
	r.ng.total = total
	body := int(total) - 12
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
	t, err := r.take(4, "a block trailer")
	if err != nil {
		return r.truncatedIfEOF(err, "a block trailer")
	}
	if got := u32(t, r.ng.be); got != r.ng.total {
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
	h, err := r.take(12, "a section header")
	if err != nil {
		return r.truncatedIfEOF(err, "a section header")
	}
	body -= 12
	major, minor := u16(h[0:2], r.ng.be), u16(h[2:4], r.ng.be)
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
	be := r.ng.be
	h, err := r.take(8, "an interface description")
	if err != nil {
		return r.truncatedIfEOF(err, "an interface description")
	}
	body -= 8
	ifc := ngIface{
		link:    u16(h[0:2], be),
		snap:    u32(h[4:8], be),
		tsresol: 6,
	}
	ifc.ok = ifc.linkType().Supported()
	for body >= 4 {
		o, err := r.take(4, "an interface option")
		if err != nil {
			return r.truncatedIfEOF(err, "an interface option")
		}
		body -= 4
		code, n := u16(o[0:2], be), int(u16(o[2:4], be))
		if code == ngOptEnd {
			break
		}
		padded := (n + 3) &^ 3
		if padded > body {
			return r.ngErr("interface option %d of %d bytes overruns its block", code, n)
		}
		body -= padded
		var v []byte
		if (code == ngOptTSResol && n == 1) || (code == ngOptTSOffset && n == 8) {
			if v, err = r.take(n, "an interface option"); err != nil {
				return r.truncatedIfEOF(err, "an interface option")
			}
		}
		switch {
		case code == ngOptTSResol && n == 1:
			ifc.tsresol = v[0]
		case code == ngOptTSOffset && n == 8:
			ifc.tsOffset = int64(u64(v, be))
		}
		if err := r.skip(padded-len(v), "an interface option"); err != nil {
			return err
		}
	}
	if ifc.binary() && ifc.exp() > 63 || !ifc.binary() && int(ifc.exp()) >= len(pow10) {
		return r.ngErr("interface %d has an unsupported timestamp resolution", len(r.ng.ifaces))
	}
	r.ng.ifaces = append(r.ng.ifaces, ifc)
	return r.ngSkipBlock(body)
}

// ngPacket reads an enhanced or obsolete packet block the careful way.
func (r *Reader) ngPacket(bt *batchRef, typ uint32, body int) ([]byte, error) {
	if body < 20 {
		return nil, r.ngErr("packet block too short")
	}
	h, err := r.take(20, "a packet block")
	if err != nil {
		return nil, r.truncatedIfEOF(err, "a packet block")
	}
	body -= 20
	be := r.ng.be
	id := int(u32(h[0:4], be))
	if typ == ngBlockPB {
		id = int(u16(h[0:2], be))
	}
	if id >= len(r.ng.ifaces) {
		return nil, r.ngErr("packet block for interface %d, but the section has %d", id, len(r.ng.ifaces))
	}
	ifc := &r.ng.ifaces[id]
	if !ifc.ok {
		return nil, &LinkTypeError{LinkType: ifc.linkType(), Interface: id}
	}
	capLen, origLen := u32(h[12:16], be), u32(h[16:20], be)
	if capLen > MaxRecordLen {
		return nil, r.formatErr("captured length %d exceeds the %d-byte limit", capLen, MaxRecordLen)
	}
	if int(capLen) > body {
		return nil, r.formatErr("captured length %d overruns its %d-byte block", capLen, r.ng.total)
	}
	sec, nsec := ifc.time(uint64(u32(h[4:8], be))<<32 | uint64(u32(h[8:12], be)))
	r.rec = record{
		sec:     sec,
		nsec:    nsec,
		capLen:  int(capLen),
		origLen: int(min(origLen, 1<<31-1)),
		link:    ifc.linkType(),
		ifIndex: id + 1,
	}
	return r.ngData(bt, body-int(capLen))
}

// ngData reads a packet block's captured bytes, then skips its padding and
// options (remain bytes) and checks its trailer: the packet is delivered
// only when all of its block is read.
func (r *Reader) ngData(bt *batchRef, remain int) ([]byte, error) {
	region, err := r.data(bt)
	if err != nil {
		return nil, err
	}
	if err := r.ngSkipBlock(remain); err != nil {
		return nil, err
	}
	return region, nil
}

// ngSimplePacket reads a simple packet block, which belongs to interface 0
// and has no timestamp.
func (r *Reader) ngSimplePacket(bt *batchRef, body int) ([]byte, error) {
	if body < 4 {
		return nil, r.ngErr("simple packet block too short")
	}
	h, err := r.take(4, "a simple packet block")
	if err != nil {
		return nil, r.truncatedIfEOF(err, "a simple packet block")
	}
	body -= 4
	if len(r.ng.ifaces) == 0 {
		return nil, r.ngErr("simple packet block, but the section has no interface")
	}
	ifc := &r.ng.ifaces[0]
	if !ifc.ok {
		return nil, &LinkTypeError{LinkType: ifc.linkType(), Interface: 0}
	}
	origLen := u32(h, r.ng.be)
	capLen := min(int64(origLen), int64(body))
	if ifc.snap != 0 {
		capLen = min(capLen, int64(ifc.snap))
	}
	if capLen > MaxRecordLen {
		return nil, r.formatErr("captured length %d exceeds the %d-byte limit", capLen, MaxRecordLen)
	}
	r.rec = record{
		capLen:  int(capLen),
		origLen: int(min(origLen, 1<<31-1)),
		link:    ifc.linkType(),
		ifIndex: 1,
		noTime:  true,
	}
	return r.ngData(bt, body-int(capLen))
}

// ngRecords is the fast path, as pcapRecords is for classic pcap: it
// parses the enhanced packet blocks that are whole in the chunk, up to
// limit frames, and stops at the first other block, or one with anything
// wrong, which ngNext then takes. The caller holds the chunk for the
// batch.
func (r *Reader) ngRecords(frames []steer.Frame, limit int, nbytes, runts uint64) ([]steer.Frame, uint64, uint64) {
	buf := r.cur.buf[:r.end]
	pos := r.pos
	be := r.ng.be
	ifaces := r.ng.ifaces
	ifIndex := r.cfg.ifIndex
	n := len(frames)
	frames = frames[:limit]
	for n < limit && len(buf)-pos >= 32 {
		typ, total := u32(buf[pos:], be), int(u32(buf[pos+4:], be))
		if typ != ngBlockEPB || total < 32 || total%4 != 0 || total > len(buf)-pos {
			break
		}
		blk := buf[pos : pos+total]
		id := u32(blk[8:12], be)
		capLen := int(u32(blk[20:24], be))
		if int(u32(blk[total-4:], be)) != total || id >= uint32(len(ifaces)) ||
			capLen > MaxRecordLen || capLen > total-32 || !ifaces[id].ok {
			break
		}
		ifc := &ifaces[id]
		ts := uint64(u32(blk[12:16], be))<<32 | uint64(u32(blk[16:20], be))
		var sec, nsec int64
		if ifc.tsresol == 6 { // ifc.time's common case, inlined by hand
			sec, nsec = int64(ts/1e6)+ifc.tsOffset, int64(ts%1e6)*1000
		} else {
			sec, nsec = ifc.timeOther(ts)
		}
		origLen := int(min(u32(blk[24:28], be), 1<<31-1))
		link := ifc.linkType()
		start, end := pos+28, pos+28+capLen
		data, delta, sllIf, runt := buf[start:end:end], 0, 0, false
		if link != LinkTypeEthernet {
			data, delta, sllIf, runt = rewriteOther(link, buf[start-link.headroom():end:end])
		}
		f := &frames[n] // zero, as in pcapRecords
		f.Data = data
		f.Timestamp = time.Unix(sec, nsec).UTC()
		f.WireLen = max(origLen+delta, len(data))
		f.IfIndex = int(id) + 1
		switch {
		case ifIndex > 0:
			f.IfIndex = ifIndex
		case sllIf > 0:
			f.IfIndex = sllIf
		}
		if runt {
			f.WireLen = origLen
			runts++
		}
		n++
		nbytes += uint64(capLen)
		pos += total
	}
	r.pos = pos
	return frames[:n], nbytes, runts
}
