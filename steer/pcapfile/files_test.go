package pcapfile

import (
	"encoding/binary"
	"time"
)

// Small writers for the tests: they can write what gopacket's pcapgo
// cannot (link types above 255, several pcapng sections and interfaces,
// both byte orders, odd timestamp resolutions, broken blocks).

type pcapRec struct {
	ts   time.Time
	data []byte
	orig int // 0: len(data)
}

func writePcap(order binary.ByteOrder, nano bool, link uint32, recs []pcapRec) []byte {
	b := make([]byte, 24)
	magic := uint32(0xa1b2c3d4)
	if nano {
		magic = 0xa1b23c4d
	}
	order.PutUint32(b[0:], magic)
	order.PutUint16(b[4:], 2)
	order.PutUint16(b[6:], 4)
	order.PutUint32(b[16:], 65535)
	order.PutUint32(b[20:], link)
	for _, r := range recs {
		h := make([]byte, 16)
		frac := r.ts.Nanosecond()
		if !nano {
			frac /= 1000
		}
		orig := r.orig
		if orig == 0 {
			orig = len(r.data)
		}
		order.PutUint32(h[0:], uint32(r.ts.Unix()))
		order.PutUint32(h[4:], uint32(frac))
		order.PutUint32(h[8:], uint32(len(r.data)))
		order.PutUint32(h[12:], uint32(orig))
		b = append(b, h...)
		b = append(b, r.data...)
	}
	return b
}

// ngWriter builds a pcapng file block by block.
type ngWriter struct {
	o interface {
		binary.ByteOrder
		binary.AppendByteOrder
	}
	b []byte
}

func pad4(b []byte) []byte {
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func (w *ngWriter) u16(v uint16) []byte { return w.o.AppendUint16(nil, v) }
func (w *ngWriter) u32(v uint32) []byte { return w.o.AppendUint32(nil, v) }

func (w *ngWriter) opt(code uint16, v []byte) []byte {
	b := append(w.u16(code), w.u16(uint16(len(v)))...)
	return pad4(append(b, v...))
}

func (w *ngWriter) block(typ uint32, body []byte) {
	body = pad4(body)
	total := uint32(12 + len(body))
	w.b = append(w.b, w.u32(typ)...)
	w.b = append(w.b, w.u32(total)...)
	w.b = append(w.b, body...)
	w.b = append(w.b, w.u32(total)...)
}

// section starts a section in byte order o.
func (w *ngWriter) section(o binary.ByteOrder) {
	w.o = o.(interface {
		binary.ByteOrder
		binary.AppendByteOrder
	})
	body := w.u32(ngByteOrderMagic)
	body = append(body, w.u16(1)...)
	body = append(body, w.u16(0)...)
	body = append(body, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff) // section length unknown
	body = append(body, w.opt(4, []byte("rps test"))...)                // shb_userappl
	body = append(body, w.opt(0, nil)...)
	w.block(ngBlockSHB, body)
}

type ngIfOpts struct {
	link     uint16
	snap     uint32
	tsresol  int // -1: none
	tsoffset int64
	offset   bool
}

func (w *ngWriter) iface(o ngIfOpts) {
	body := append(w.u16(o.link), 0, 0)
	body = append(body, w.u32(o.snap)...)
	body = append(body, w.opt(2, []byte("eth0"))...) // if_name
	if o.tsresol >= 0 {
		body = append(body, w.opt(ngOptTSResol, []byte{byte(o.tsresol)})...)
	}
	if o.offset {
		body = append(body, w.opt(ngOptTSOffset, w.o.AppendUint64(nil, uint64(o.tsoffset)))...)
	}
	body = append(body, w.opt(0, nil)...)
	w.block(ngBlockIDB, body)
}

func (w *ngWriter) epb(id uint32, ts uint64, data []byte, orig int, withOpts bool) {
	if orig == 0 {
		orig = len(data)
	}
	body := w.u32(id)
	body = append(body, w.u32(uint32(ts>>32))...)
	body = append(body, w.u32(uint32(ts))...)
	body = append(body, w.u32(uint32(len(data)))...)
	body = append(body, w.u32(uint32(orig))...)
	body = pad4(append(body, data...))
	if withOpts {
		body = append(body, w.opt(1, []byte("a comment"))...) // opt_comment
		body = append(body, w.opt(0, nil)...)
	}
	w.block(ngBlockEPB, body)
}

func (w *ngWriter) pb(id uint16, ts uint64, data []byte) {
	body := w.u16(id)
	body = append(body, w.u16(0)...)
	body = append(body, w.u32(uint32(ts>>32))...)
	body = append(body, w.u32(uint32(ts))...)
	body = append(body, w.u32(uint32(len(data)))...)
	body = append(body, w.u32(uint32(len(data)))...)
	w.block(ngBlockPB, append(body, data...))
}

func (w *ngWriter) spb(orig int, data []byte) {
	w.block(ngBlockSPB, append(w.u32(uint32(orig)), data...))
}
