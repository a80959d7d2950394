package pcapfile

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/rpsgo/rps/steer"
)

var (
	t0   = time.Date(2025, 3, 1, 12, 0, 0, 123456000, time.UTC)
	mac1 = []byte{0x02, 0, 0, 0, 0, 1}
	mac2 = []byte{0x02, 0, 0, 0, 0, 2}
	// ip4 and ip6 are the starts of IP packets; the reader looks at the
	// version nibble only.
	ip4 = []byte{0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}
	ip6 = append([]byte{0x60, 0, 0, 0, 0, 0, 59, 64}, make([]byte, 32)...)
)

func cat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

// eth is the Ethernet frame the reader should produce.
func eth(dst, src []byte, et uint16, payload []byte) []byte {
	return cat(dst, src, be16(et), payload)
}

var zeroMAC = make([]byte, 6)

// readAll reads every batch, copying the frames out, and releases them.
func readAll(t testing.TB, r *Reader) ([]steer.Frame, error) {
	t.Helper()
	var out []steer.Frame
	var b steer.Batch
	for {
		err := r.ReadBatch(context.Background(), &b)
		if err != nil {
			if len(b.Frames) != 0 || b.Release != nil {
				t.Fatalf("ReadBatch returned %v with %d frames, release %v", err, len(b.Frames), b.Release != nil)
			}
			return out, err
		}
		if len(b.Frames) == 0 || b.Release == nil {
			t.Fatalf("ReadBatch returned nil error with %d frames, release %v", len(b.Frames), b.Release != nil)
		}
		for _, f := range b.Frames {
			f.Data = bytes.Clone(f.Data)
			out = append(out, f)
		}
		b.Release()
	}
}

func mustRead(t testing.TB, file []byte, opt ...Option) []steer.Frame {
	t.Helper()
	r, err := NewReader(bytes.NewReader(file), opt...)
	if err != nil {
		t.Fatalf("NewReader: %v", err)
	}
	fs, err := readAll(t, r)
	if err != io.EOF {
		t.Fatalf("reading: got %v, want io.EOF", err)
	}
	return fs
}

type linkCase struct {
	name    string
	link    uint32
	rec     []byte
	want    []byte // expected frame
	delta   int    // expected Length - original length
	ifIndex int
	runt    bool
}

func linkCases() []linkCase {
	sll := func(halen uint16, addr []byte, proto uint16, payload []byte) []byte {
		a := make([]byte, 8)
		copy(a, addr)
		return cat(be16(0), be16(1), be16(halen), a, be16(proto), payload)
	}
	sll2 := func(proto uint16, ifindex uint32, halen byte, addr []byte, payload []byte) []byte {
		a := make([]byte, 8)
		copy(a, addr)
		return cat(be16(proto), be16(0), be32(ifindex), be16(1), []byte{0, halen}, a, payload)
	}
	srcMAC := []byte{0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	arp := bytes.Repeat([]byte{0x11}, 28)
	return append(pppLinkCases(), []linkCase{
		{name: "ethernet", link: 1, rec: eth(mac1, mac2, 0x0800, ip4), want: eth(mac1, mac2, 0x0800, ip4)},
		{name: "ethernet-short", link: 1, rec: []byte{1, 2, 3}, want: []byte{1, 2, 3}},
		{name: "sll-ipv4", link: 113, rec: sll(6, cat(srcMAC, []byte{9, 9}), 0x0800, ip4), want: eth(zeroMAC, srcMAC, 0x0800, ip4), delta: -2},
		{name: "sll-arp-no-mac", link: 113, rec: sll(4, []byte{1, 2, 3, 4}, 0x0806, arp), want: eth(zeroMAC, zeroMAC, 0x0806, arp), delta: -2},
		{name: "sll-ipv6", link: 113, rec: sll(6, srcMAC, 0x86dd, ip6), want: eth(zeroMAC, srcMAC, 0x86dd, ip6), delta: -2},
		{name: "sll-runt", link: 113, rec: make([]byte, 15), want: []byte{}, runt: true},
		{name: "sll2-ipv6", link: 276, rec: sll2(0x86dd, 7, 6, srcMAC, ip6), want: eth(zeroMAC, srcMAC, 0x86dd, ip6), delta: -6, ifIndex: 7},
		{name: "sll2-no-mac", link: 276, rec: sll2(0x0800, 3, 0, srcMAC, ip4), want: eth(zeroMAC, zeroMAC, 0x0800, ip4), delta: -6, ifIndex: 3},
		{name: "sll2-runt", link: 276, rec: make([]byte, 19), want: []byte{}, runt: true},
		{name: "raw-ipv4", link: 101, rec: ip4, want: eth(zeroMAC, zeroMAC, 0x0800, ip4), delta: 14},
		{name: "raw-ipv6", link: 101, rec: ip6, want: eth(zeroMAC, zeroMAC, 0x86dd, ip6), delta: 14},
		{name: "raw12-ipv4", link: 12, rec: ip4, want: eth(zeroMAC, zeroMAC, 0x0800, ip4), delta: 14},
		{name: "raw14-ipv6", link: 14, rec: ip6, want: eth(zeroMAC, zeroMAC, 0x86dd, ip6), delta: 14},
		{name: "raw-bad-version", link: 101, rec: []byte{0x55, 1, 2}, want: eth(zeroMAC, zeroMAC, 0, []byte{0x55, 1, 2}), delta: 14},
		{name: "raw-empty", link: 101, rec: []byte{}, want: eth(zeroMAC, zeroMAC, 0, nil), delta: 14},
		{name: "ipv4", link: 228, rec: ip4, want: eth(zeroMAC, zeroMAC, 0x0800, ip4), delta: 14},
		{name: "ipv6", link: 229, rec: ip6, want: eth(zeroMAC, zeroMAC, 0x86dd, ip6), delta: 14},
		{name: "null-le-inet", link: 0, rec: cat(le32(2), ip4), want: eth(zeroMAC, zeroMAC, 0x0800, ip4), delta: 10},
		{name: "null-be-inet", link: 0, rec: cat(be32(2), ip4), want: eth(zeroMAC, zeroMAC, 0x0800, ip4), delta: 10},
		{name: "null-le-inet6-linux", link: 0, rec: cat(le32(10), ip6), want: eth(zeroMAC, zeroMAC, 0x86dd, ip6), delta: 10},
		{name: "null-le-inet6-bsd", link: 0, rec: cat(le32(24), ip6), want: eth(zeroMAC, zeroMAC, 0x86dd, ip6), delta: 10},
		{name: "null-le-inet6-freebsd", link: 0, rec: cat(le32(28), ip6), want: eth(zeroMAC, zeroMAC, 0x86dd, ip6), delta: 10},
		{name: "null-be-inet6-darwin", link: 0, rec: cat(be32(30), ip6), want: eth(zeroMAC, zeroMAC, 0x86dd, ip6), delta: 10},
		{name: "null-unknown-family", link: 0, rec: cat(le32(99), ip4), want: eth(zeroMAC, zeroMAC, 0, ip4), delta: 10},
		{name: "null-runt", link: 0, rec: []byte{2, 0, 0}, want: []byte{}, runt: true},
		{name: "loop-inet", link: 108, rec: cat(be32(2), ip4), want: eth(zeroMAC, zeroMAC, 0x0800, ip4), delta: 10},
		{name: "loop-inet6", link: 108, rec: cat(be32(28), ip6), want: eth(zeroMAC, zeroMAC, 0x86dd, ip6), delta: 10},
	}...)
}

// TestLinkTypes writes every supported link type as classic pcap (both
// byte orders, both resolutions) and as pcapng, reads it back and checks
// the Ethernet frame, its length, time and interface index.
func TestLinkTypes(t *testing.T) {
	const extra = 100 // the original length exceeds the captured one by this
	for _, c := range linkCases() {
		t.Run(c.name, func(t *testing.T) {
			ts2 := t0.Add(1500 * time.Millisecond)
			recs := []pcapRec{
				{ts: t0, data: c.rec, orig: len(c.rec) + extra},
				{ts: ts2, data: c.rec},
			}
			check := func(t *testing.T, fs []steer.Frame, wantIf int, nano bool) {
				t.Helper()
				if len(fs) != 2 {
					t.Fatalf("got %d frames, want 2", len(fs))
				}
				for i, f := range fs {
					if !bytes.Equal(f.Data, c.want) {
						t.Errorf("frame %d:\n got %x\nwant %x", i, f.Data, c.want)
					}
					orig := len(c.rec)
					if i == 0 {
						orig += extra
					}
					wantLen := orig + c.delta
					if c.runt {
						wantLen = orig
					}
					if f.WireLen != wantLen {
						t.Errorf("frame %d: Length %d, want %d", i, f.WireLen, wantLen)
					}
					if f.IfIndex != wantIf {
						t.Errorf("frame %d: IfIndex %d, want %d", i, f.IfIndex, wantIf)
					}
					if f.HashType != 0 || f.HasVLAN {
						t.Errorf("frame %d: unexpected HashType %v / HasVLAN", i, f.HashType)
					}
				}
				want0 := t0
				if !nano {
					want0 = t0.Truncate(time.Microsecond)
				}
				if !fs[0].Timestamp.Equal(want0) || !fs[1].Timestamp.Equal(ts2) {
					t.Errorf("timestamps %v, %v; want %v, %v", fs[0].Timestamp, fs[1].Timestamp, want0, ts2)
				}
				if fs[0].Timestamp.Location() != time.UTC {
					t.Errorf("timestamp not in UTC")
				}
				if len(fs[0].Data) >= 14 && c.delta != 0 {
					if got, want := binary.BigEndian.Uint16(fs[0].Data[12:]), binary.BigEndian.Uint16(c.want[12:]); got != want {
						t.Errorf("EtherType %#04x, want %#04x", got, want)
					}
				}
			}
			wantIf := c.ifIndex
			for _, v := range []struct {
				name  string
				order binary.ByteOrder
				nano  bool
			}{{"le-usec", binary.LittleEndian, false}, {"be-nsec", binary.BigEndian, true}, {"be-usec", binary.BigEndian, false}, {"le-nsec", binary.LittleEndian, true}} {
				t.Run(v.name, func(t *testing.T) {
					file := writePcap(v.order, v.nano, c.link, recs)
					r, err := NewReader(bytes.NewReader(file))
					if err != nil {
						t.Fatal(err)
					}
					if r.LinkType() != LinkType(c.link) || r.Format() != FormatPcap {
						t.Errorf("LinkType %v, Format %v", r.LinkType(), r.Format())
					}
					fs, err := readAll(t, r)
					if err != io.EOF {
						t.Fatalf("got %v, want io.EOF", err)
					}
					check(t, fs, wantIf, v.nano)
					st := r.Stats()
					wantRunts := uint64(0)
					if c.runt {
						wantRunts = 2
					}
					if st.Records != 2 || st.Bytes != uint64(2*len(c.rec)) || st.Runts != wantRunts || st.Batches != 1 {
						t.Errorf("Stats %+v", st)
					}
				})
			}
			t.Run("pcapng", func(t *testing.T) {
				w := &ngWriter{}
				w.section(binary.LittleEndian)
				w.iface(ngIfOpts{link: uint16(c.link), tsresol: 9})
				w.epb(0, uint64(t0.UnixNano()), c.rec, len(c.rec)+extra, true)
				w.epb(0, uint64(ts2.UnixNano()), c.rec, 0, false)
				fs := mustRead(t, w.b)
				ngIf := 1
				if c.ifIndex != 0 {
					ngIf = c.ifIndex
				}
				check(t, fs, ngIf, true)
				fs = mustRead(t, w.b, WithIfIndex(42))
				check(t, fs, 42, true)
			})
		})
	}
}

func TestUnsupportedLinkType(t *testing.T) {
	check := func(t *testing.T, err error, iface int) {
		t.Helper()
		if !errors.Is(err, ErrLinkType) {
			t.Fatalf("got %v, want ErrLinkType", err)
		}
		if !strings.Contains(err.Error(), "link type IEEE802_11 (105) is not supported") {
			t.Errorf("message %q does not name the link type", err)
		}
		var le *LinkTypeError
		if !errors.As(err, &le) || le.LinkType != LinkTypeIEEE802_11 || le.Interface != iface {
			t.Errorf("errors.As: %+v", le)
		}
	}
	t.Run("pcap", func(t *testing.T) {
		_, err := NewReader(bytes.NewReader(writePcap(binary.LittleEndian, false, 105, nil)))
		check(t, err, -1)
		dir := t.TempDir()
		p := filepath.Join(dir, "wifi.pcap")
		if err := os.WriteFile(p, writePcap(binary.LittleEndian, false, 105, nil), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = Open(p)
		check(t, err, -1)
		if !strings.Contains(err.Error(), p) {
			t.Errorf("Open error %q does not name the file", err)
		}
	})
	t.Run("pcapng-first", func(t *testing.T) {
		w := &ngWriter{}
		w.section(binary.BigEndian)
		w.iface(ngIfOpts{link: 105, tsresol: -1})
		_, err := NewReader(bytes.NewReader(w.b))
		check(t, err, 0)
	})
	t.Run("pcapng-later", func(t *testing.T) {
		w := &ngWriter{}
		w.section(binary.LittleEndian)
		w.iface(ngIfOpts{link: 1, tsresol: -1})
		w.iface(ngIfOpts{link: 105, tsresol: -1})
		frame := eth(mac1, mac2, 0x0800, ip4)
		w.epb(0, 1, frame, 0, false)
		w.epb(1, 2, []byte{1, 2, 3}, 0, false)
		r, err := NewReader(bytes.NewReader(w.b))
		if err != nil {
			t.Fatal(err)
		}
		fs, err := readAll(t, r)
		if len(fs) != 1 || !bytes.Equal(fs[0].Data, frame) {
			t.Errorf("got %d frames before the error, want the Ethernet one", len(fs))
		}
		check(t, err, 1)
		// The error is sticky.
		var b steer.Batch
		if err2 := r.ReadBatch(context.Background(), &b); err2 != err {
			t.Errorf("second call: %v, want %v", err2, err)
		}
	})
	if (LinkType(9999)).String() != "UNKNOWN" || LinkTypeLinuxSLL2.String() != "LINUX_SLL2" {
		t.Errorf("LinkType names: %v %v", LinkType(9999), LinkTypeLinuxSLL2)
	}
}

// TestPcapNGMixed reads a pcapng file with several interfaces of different
// link types and timestamp resolutions, several sections in both byte
// orders, blocks the reader skips, simple and obsolete packet blocks.
func TestPcapNGMixed(t *testing.T) {
	frame := eth(mac1, mac2, 0x0800, ip4)
	sllRec := cat(be16(0), be16(1), be16(6), mac2, []byte{0, 0}, be16(0x86dd), ip6)
	w := &ngWriter{}
	w.section(binary.LittleEndian)
	w.block(4, []byte{1, 0, 4, 0, 10, 0, 0, 1, 0, 0, 0, 0}) // name resolution block: skipped
	w.iface(ngIfOpts{link: 1, tsresol: -1})                 // microseconds
	w.iface(ngIfOpts{link: 113, tsresol: 9})                // nanoseconds
	w.iface(ngIfOpts{link: 101, tsresol: 0x80 | 20, tsoffset: 1000, offset: true})
	w.iface(ngIfOpts{link: 229, tsresol: 12}) // picoseconds
	w.epb(0, 5_250_000, frame, 0, true)       // 5.25 s
	w.epb(1, 7_000_000_123, sllRec, 0, false)
	w.block(5, append(w.u32(0), make([]byte, 8)...)) // interface statistics: skipped
	w.epb(2, 3<<20|1<<19, ip4, 0, false)             // 3.5 s + 1000 s offset
	w.epb(3, 9_000_000_000_001, ip6, 0, false)       // 9 s + 1 ps
	w.block(0x0bad, []byte("custom block"))
	w.section(binary.BigEndian) // interfaces restart from 0
	w.iface(ngIfOpts{link: 1, snap: 20, tsresol: 3})
	w.pb(0, 42_001, frame)
	w.spb(len(frame), frame) // cut at the snap length 20

	r, err := NewReader(bytes.NewReader(w.b), WithBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	if r.Format() != FormatPcapNG || r.LinkType() != LinkTypeEthernet {
		t.Errorf("Format %v, LinkType %v", r.Format(), r.LinkType())
	}
	fs, err := readAll(t, r)
	if err != io.EOF {
		t.Fatalf("got %v, want EOF", err)
	}
	want := []struct {
		data []byte
		ts   time.Time
		ifx  int
		len  int
	}{
		{frame, time.Unix(5, 250_000_000), 1, len(frame)},
		{eth(zeroMAC, mac2, 0x86dd, ip6), time.Unix(7, 123), 2, len(ip6) + 14},
		{eth(zeroMAC, zeroMAC, 0x0800, ip4), time.Unix(1003, 500_000_000), 3, len(ip4) + 14},
		{eth(zeroMAC, zeroMAC, 0x86dd, ip6), time.Unix(9, 0), 4, len(ip6) + 14},
		{frame, time.Unix(42, 1_000_000), 1, len(frame)},
		{frame[:20], time.Time{}, 1, len(frame)},
	}
	if len(fs) != len(want) {
		t.Fatalf("got %d frames, want %d", len(fs), len(want))
	}
	for i, w := range want {
		f := fs[i]
		if !bytes.Equal(f.Data, w.data) || !f.Timestamp.Equal(w.ts) || f.IfIndex != w.ifx || f.WireLen != w.len {
			t.Errorf("frame %d: data %x ts %v if %d len %d\nwant %x ts %v if %d len %d",
				i, f.Data, f.Timestamp, f.IfIndex, f.WireLen, w.data, w.ts, w.ifx, w.len)
		}
	}
	if st := r.Stats(); st.Batches != 3 || st.Records != 6 {
		t.Errorf("Stats %+v, want 3 batches of 2", st)
	}
}

func TestEmptyPcapNG(t *testing.T) {
	w := &ngWriter{}
	w.section(binary.LittleEndian)
	fs := mustRead(t, w.b)
	if len(fs) != 0 {
		t.Errorf("got %d frames", len(fs))
	}
	fs = mustRead(t, writePcap(binary.LittleEndian, false, 1, nil))
	if len(fs) != 0 {
		t.Errorf("got %d frames", len(fs))
	}
}

func TestMalformed(t *testing.T) {
	frame := eth(mac1, mac2, 0x0800, ip4)
	good := writePcap(binary.LittleEndian, false, 1, []pcapRec{{ts: t0, data: frame}})
	edit := func(b []byte, f func(b []byte)) []byte { b = bytes.Clone(b); f(b); return b }
	ng := func(f func(w *ngWriter)) []byte {
		w := &ngWriter{}
		w.section(binary.LittleEndian)
		f(w)
		return w.b
	}
	cases := []struct {
		name   string
		file   []byte
		open   bool // the error comes from NewReader
		target error
		msg    string
	}{
		{"empty", nil, true, ErrFormat, "empty"},
		{"short", []byte{0xd4, 0xc3}, true, ErrFormat, "empty"},
		{"bad-magic", []byte("GIF89a this is not a capture"), true, ErrFormat, "unknown magic"},
		{"kuznetzov", edit(good, func(b []byte) { binary.LittleEndian.PutUint32(b, 0xa1b2cd34) }), true, ErrFormat, "Kuznetzov"},
		{"version", edit(good, func(b []byte) { b[4] = 3 }), true, ErrFormat, "version 3.4"},
		{"header-cut", good[:20], true, ErrTruncated, "header"},
		{"caplen-huge", edit(good, func(b []byte) { binary.LittleEndian.PutUint32(b[24+8:], 1<<31) }), false, ErrFormat, "exceeds"},
		{"ng-bom", edit(ng(func(*ngWriter) {}), func(b []byte) { b[8] = 0 }), true, ErrFormat, "byte-order"},
		{"ng-version", edit(ng(func(*ngWriter) {}), func(b []byte) { b[12] = 2 }), true, ErrFormat, "version 2.0"},
		{"ng-packet-first", ng(func(w *ngWriter) { w.epb(0, 0, frame, 0, false) }), true, ErrFormat, "before any interface"},
		{"ng-block-len", ng(func(w *ngWriter) {
			w.iface(ngIfOpts{link: 1, tsresol: -1})
			w.block(6, make([]byte, 2))
			binary.LittleEndian.PutUint32(w.b[len(w.b)-12:], 13)
		}), false, ErrFormat, "bad total length"},
		{"ng-trailer", ng(func(w *ngWriter) {
			w.iface(ngIfOpts{link: 1, tsresol: -1})
			w.epb(0, 0, frame, 0, false)
			binary.LittleEndian.PutUint32(w.b[len(w.b)-4:], 4)
		}), false, ErrFormat, "trailer"},
		{"ng-unknown-iface", ng(func(w *ngWriter) {
			w.iface(ngIfOpts{link: 1, tsresol: -1})
			w.epb(3, 0, frame, 0, false)
		}), false, ErrFormat, "interface 3"},
		{"ng-caplen-overrun", ng(func(w *ngWriter) {
			w.iface(ngIfOpts{link: 1, tsresol: -1})
			w.epb(0, 0, frame, 0, false)
			binary.LittleEndian.PutUint32(w.b[len(w.b)-4-(len(frame)+3)&^3-8:], 500)
		}), false, ErrFormat, "overruns"},
		{"ng-tsresol", ng(func(w *ngWriter) { w.iface(ngIfOpts{link: 1, tsresol: 20}) }), true, ErrFormat, "resolution"},
		{"ng-tsresol-bin", ng(func(w *ngWriter) { w.iface(ngIfOpts{link: 1, tsresol: 0x80 | 64}) }), true, ErrFormat, "resolution"},
		{"ng-option-overrun", ng(func(w *ngWriter) {
			w.block(ngBlockIDB, append([]byte{1, 0, 0, 0, 0, 0, 0, 0}, 9, 0, 200, 0))
		}), true, ErrFormat, "overruns"},
		{"ng-no-iface-spb", ng(func(w *ngWriter) {
			w.iface(ngIfOpts{link: 1, tsresol: -1})
			w.section(binary.BigEndian)
			w.spb(4, []byte{1, 2, 3, 4})
		}), false, ErrFormat, "no interface"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := NewReader(bytes.NewReader(c.file))
			if c.open {
				if err == nil {
					t.Fatal("NewReader succeeded")
				}
			} else {
				if err != nil {
					t.Fatalf("NewReader: %v", err)
				}
				_, err = readAll(t, r)
			}
			if !errors.Is(err, c.target) || !strings.Contains(err.Error(), c.msg) || !strings.HasPrefix(err.Error(), "pcapfile: ") {
				t.Errorf("got %q, want %v containing %q", err, c.target, c.msg)
			}
		})
	}
}

// TestTruncated cuts files at every length: reading must never panic, must
// deliver exactly the records that are complete, and must end in io.EOF at
// a record boundary and in ErrTruncated anywhere else.
func TestTruncated(t *testing.T) {
	frame := eth(mac1, mac2, 0x0800, ip4)
	var recs []pcapRec
	for i := range 4 {
		recs = append(recs, pcapRec{ts: t0.Add(time.Duration(i) * time.Second), data: frame[:20+i*5]})
	}
	pcap := writePcap(binary.BigEndian, true, 1, recs)
	w := &ngWriter{}
	w.section(binary.LittleEndian)
	w.iface(ngIfOpts{link: 1, tsresol: -1})
	ngHeaderEnd := len(w.b)
	var ngEnds []int // where each record's block ends
	for i, r := range recs {
		w.epb(0, uint64(i), r.data, 0, i%2 == 0)
		ngEnds = append(ngEnds, len(w.b))
	}
	var pcapEnds []int
	off := 24
	for _, r := range recs {
		off += 16 + len(r.data)
		pcapEnds = append(pcapEnds, off)
	}
	for _, v := range []struct {
		name      string
		file      []byte
		headerEnd int
		ends      []int
	}{{"pcap", pcap, 24, pcapEnds}, {"pcapng", w.b, ngHeaderEnd, ngEnds}} {
		t.Run(v.name, func(t *testing.T) {
			for n := v.headerEnd; n <= len(v.file); n++ {
				r, err := NewReader(bytes.NewReader(v.file[:n]), WithBatchSize(3))
				if err != nil {
					t.Fatalf("cut at %d: NewReader: %v", n, err)
				}
				fs, err := readAll(t, r)
				complete, boundary := 0, n == v.headerEnd
				for _, e := range v.ends {
					if e <= n {
						complete++
					}
					boundary = boundary || e == n
				}
				if len(fs) != complete {
					t.Errorf("cut at %d: %d frames, want %d", n, len(fs), complete)
				}
				if boundary && err != io.EOF {
					t.Errorf("cut at %d (a boundary): %v, want io.EOF", n, err)
				}
				if !boundary && !errors.Is(err, ErrTruncated) {
					t.Errorf("cut at %d: %v, want ErrTruncated", n, err)
				}
			}
		})
	}
}

func TestBatching(t *testing.T) {
	small := eth(mac1, mac2, 0x0800, ip4)
	big := bytes.Repeat([]byte{0xab}, 60000)
	huge := bytes.Repeat([]byte{0xcd}, 200000)
	var recs []pcapRec
	for range 10 {
		recs = append(recs, pcapRec{ts: t0, data: small})
	}
	for range 5 {
		recs = append(recs, pcapRec{ts: t0, data: big})
	}
	recs = append(recs, pcapRec{ts: t0, data: huge}, pcapRec{ts: t0, data: small})
	file := writePcap(binary.LittleEndian, false, 1, recs)

	r, err := NewReader(bytes.NewReader(file), WithBatchSize(4))
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	var b steer.Batch
	for {
		err := r.ReadBatch(context.Background(), &b)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(b.Frames))
		for _, f := range b.Frames {
			if cap(f.Data) != len(f.Data) {
				t.Errorf("frame capacity %d exceeds its length %d", cap(f.Data), len(f.Data))
			}
		}
		b.Release()
	}
	// Batches are full whatever the sizes of their records: a batch may
	// span chunks, and the huge record is larger than the first chunk.
	total := 0
	for _, s := range sizes {
		total += s
		if s < 1 || s > 4 {
			t.Errorf("batch of %d frames", s)
		}
	}
	if total != len(recs) {
		t.Errorf("read %d frames in batches %v, want %d", total, sizes, len(recs))
	}
	if want := []int{4, 4, 4, 4, 1}; !equalInts(sizes, want) {
		t.Errorf("batch sizes %v, want %v", sizes, want)
	}

	for _, n := range []int{0, -1, MaxBatchSize + 1} {
		if _, err := NewReader(bytes.NewReader(file), WithBatchSize(n)); err == nil {
			t.Errorf("WithBatchSize(%d) accepted", n)
		}
	}
	if _, err := NewReader(bytes.NewReader(file), WithIfIndex(0)); err == nil {
		t.Error("WithIfIndex(0) accepted")
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func manyRecords(n int) []byte {
	var recs []pcapRec
	for i := range n {
		f := eth(mac1, mac2, 0x0800, ip4)
		f[len(f)-1] = byte(i)
		recs = append(recs, pcapRec{ts: t0.Add(time.Duration(i) * time.Microsecond), data: f})
	}
	return writePcap(binary.LittleEndian, false, 1, recs)
}

// TestRelease checks that a batch's bytes stay valid until it is released,
// however many chunks the reader goes through meanwhile, that released
// chunks are reused, and that releasing twice is caught.
func TestRelease(t *testing.T) {
	const size = 512 // chunks of a few records, so that reading moves on fast
	r, err := newReader(bytes.NewReader(manyRecords(2000)), size, []Option{WithBatchSize(10)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var held steer.Batch
	if err := r.ReadBatch(ctx, &held); err != nil {
		t.Fatal(err)
	}
	heldFrames := slices.Clone(held.Frames)
	var want [][]byte
	for _, f := range heldFrames {
		want = append(want, bytes.Clone(f.Data))
	}
	seen := map[*chunk]bool{} // the chunks read into
	var b steer.Batch
	for range 50 {
		if err := r.ReadBatch(ctx, &b); err != nil {
			t.Fatal(err)
		}
		seen[r.cur] = true
		b.Release()
	}
	for i, f := range heldFrames {
		if !bytes.Equal(f.Data, want[i]) {
			t.Fatalf("frame %d of an unreleased batch was overwritten", i)
		}
	}
	// 500 frames of 50 bytes in 512-byte chunks went through a few chunks,
	// reused: the free list bounds them.
	if len(seen) > maxFreeChunks+2 {
		t.Errorf("%d chunks used for 50 batches released at once, want them reused", len(seen))
	}
	held.Release()
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a second Release did not panic")
			}
		}()
		held.Release()
	}()

	// Every batch's Release is called exactly once, from other goroutines,
	// in any order.
	r, err = newReader(bytes.NewReader(manyRecords(3000)), size, []Option{WithBatchSize(7)})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var n int
	for {
		var b steer.Batch
		err := r.ReadBatch(ctx, &b)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range b.Frames {
			if got := f.Data[len(f.Data)-1]; got != byte(n+i) {
				t.Fatalf("frame %d ends in %d", n+i, got)
			}
		}
		n += len(b.Frames)
		wg.Go(b.Release)
	}
	wg.Wait()
	if n != 3000 {
		t.Errorf("read %d frames, want 3000", n)
	}
	r.mu.Lock()
	free := len(r.freeChunks)
	r.mu.Unlock()
	if free == 0 || free > maxFreeChunks {
		t.Errorf("%d chunks free after %d batches, want 1..%d", free, r.Stats().Batches, maxFreeChunks)
	}
}

// TestNoAllocs proves that reading a file and releasing its batches
// allocates nothing in steady state.
func TestNoAllocs(t *testing.T) {
	for _, format := range []string{"pcap", "pcapng"} {
		t.Run(format, func(t *testing.T) {
			var file []byte
			if format == "pcap" {
				file = manyRecords(64 * 120)
			} else {
				w := &ngWriter{}
				w.section(binary.BigEndian)
				w.iface(ngIfOpts{link: 113, tsresol: 9})
				rec := cat(be16(0), be16(1), be16(6), mac2, []byte{0, 0}, be16(0x0800), ip4)
				for i := range 64 * 120 {
					w.epb(0, uint64(i), rec, 0, i%3 == 0)
				}
				file = w.b
			}
			p := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(p, file, 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			ctx := context.Background()
			var b steer.Batch
			step := func() {
				if err := r.ReadBatch(ctx, &b); err != nil {
					t.Fatal(err)
				}
				if len(b.Frames) != DefaultBatchSize {
					t.Fatalf("batch of %d", len(b.Frames))
				}
				b.Release()
			}
			for range 10 {
				step()
			}
			if a := testing.AllocsPerRun(100, step); a != 0 {
				t.Errorf("%v allocations per ReadBatch+Release, want 0", a)
			}
		})
	}
}

func TestContextAndClose(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f.pcap")
	if err := os.WriteFile(p, manyRecords(5000), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var b steer.Batch
	if err := r.ReadBatch(ctx, &b); err != nil {
		t.Fatal(err)
	}
	b.Release()
	cancel()
	if err := r.ReadBatch(ctx, &b); !errors.Is(err, context.Canceled) || len(b.Frames) != 0 {
		t.Errorf("after cancel: %v, %d frames", err, len(b.Frames))
	}

	// Close while another goroutine reads.
	done := make(chan error)
	go func() {
		var b steer.Batch
		for {
			err := r.ReadBatch(context.Background(), &b)
			if err != nil {
				done <- err
				return
			}
			b.Release()
		}
	}()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil || err == io.EOF && r.Stats().Records < 5000 {
		t.Errorf("reader ended with %v after %d records", err, r.Stats().Records)
	}
	if err := r.ReadBatch(context.Background(), &b); err != ErrClosed {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing.pcap")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open of a missing file: %v", err)
	}
}

func TestStdin(t *testing.T) {
	p := filepath.Join(t.TempDir(), "in.pcap")
	if err := os.WriteFile(p, manyRecords(100), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	saved := os.Stdin
	os.Stdin = f
	defer func() { os.Stdin = saved }()
	r, err := Open("-")
	if err != nil {
		t.Fatal(err)
	}
	fs, err := readAll(t, r)
	if err != io.EOF || len(fs) != 100 {
		t.Errorf("read %d frames, %v", len(fs), err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Stat(); err != nil {
		t.Errorf("Close closed standard input: %v", err)
	}
}

func TestGzip(t *testing.T) {
	file := manyRecords(300)
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write(file)
	zw.Close()
	fs := mustRead(t, zb.Bytes())
	want := mustRead(t, file)
	if len(fs) != 300 || len(want) != 300 {
		t.Fatalf("read %d and %d frames", len(fs), len(want))
	}
	for i := range fs {
		if !bytes.Equal(fs[i].Data, want[i].Data) || !fs[i].Timestamp.Equal(want[i].Timestamp) {
			t.Fatalf("frame %d differs", i)
		}
	}
	// A stream whose bytes are wrong, not short: ErrFormat.
	z := zb.Bytes()
	edit := func(f func(b []byte)) []byte { b := bytes.Clone(z); f(b); return b }
	for _, c := range []struct {
		name string
		file []byte
	}{
		{"method", edit(func(b []byte) { b[2] = 0 })},
		{"deflate", edit(func(b []byte) { b[10] = 0xff })}, // a reserved block type
		{"checksum", edit(func(b []byte) { b[len(b)-8] ^= 0xff })},
		{"length", edit(func(b []byte) { b[len(b)-1] ^= 0xff })},
		{"trailing", append(bytes.Clone(z), "not a gzip member"...)},
	} {
		r, err := NewReader(bytes.NewReader(c.file))
		if err == nil {
			_, err = readAll(t, r)
		}
		if !errors.Is(err, ErrFormat) || !strings.HasPrefix(err.Error(), "pcapfile: ") {
			t.Errorf("gzip %s broken: %v, want ErrFormat", c.name, err)
		}
	}
	// A gzip stream of nothing: the empty-input error.
	zb.Reset()
	zw = gzip.NewWriter(&zb)
	zw.Close()
	if _, err := NewReader(bytes.NewReader(zb.Bytes())); !errors.Is(err, ErrFormat) {
		t.Errorf("an empty gzip stream: %v, want ErrFormat", err)
	}
}

// TestGzipTruncated cuts gzip'd captures at every length, inside the gzip
// header, the deflate stream and the trailer: each cut must end in an
// error wrapping ErrTruncated (or ErrFormat, for a cut too short to tell
// what the input is), after frames that are a prefix of the whole file's.
func TestGzipTruncated(t *testing.T) {
	w := &ngWriter{}
	w.section(binary.BigEndian)
	w.iface(ngIfOpts{link: 1, tsresol: 9})
	for i := range 6 {
		w.epb(0, uint64(i), eth(mac1, mac2, 0x86dd, ip6), 0, i%2 == 0)
	}
	for _, v := range []struct {
		name string
		file []byte
	}{{"pcap", manyRecords(12)}, {"pcapng", w.b}} {
		t.Run(v.name, func(t *testing.T) {
			var zb bytes.Buffer
			zw := gzip.NewWriter(&zb)
			zw.Name = v.name + ".cap" // a header with a file name field to cut
			zw.Write(v.file)
			zw.Close()
			z := zb.Bytes()
			want := mustRead(t, z)
			for n := range len(z) {
				var fs []steer.Frame
				r, err := NewReader(bytes.NewReader(z[:n]), WithBatchSize(5))
				if err == nil {
					fs, err = readAll(t, r)
				}
				if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrFormat) {
					t.Errorf("cut at %d of %d: %v, want ErrTruncated or ErrFormat", n, len(z), err)
				}
				if err != nil && !strings.HasPrefix(err.Error(), "pcapfile: ") {
					t.Errorf("cut at %d: %q does not name the package", n, err)
				}
				if len(fs) > len(want) {
					t.Fatalf("cut at %d: %d frames, the whole file has %d", n, len(fs), len(want))
				}
				for i := range fs {
					if !bytes.Equal(fs[i].Data, want[i].Data) {
						t.Fatalf("cut at %d: frame %d differs", n, i)
					}
				}
			}
		})
	}
}

// TestInterfaceLimit checks the bound on interface description blocks: a
// section may hold MaxInterfaces of them (and each new section starts
// counting again), one more is an error wrapping ErrFormat.
func TestInterfaceLimit(t *testing.T) {
	if n := unsafe.Sizeof(ngIface{}); n > 16 {
		t.Errorf("an interface takes %d bytes, more than the 16 documented", n)
	}
	frame := eth(mac1, mac2, 0x0800, ip4)
	section := func(w *ngWriter, ifaces int) {
		w.section(binary.LittleEndian)
		for range ifaces {
			w.block(ngBlockIDB, append(w.u16(1), 0, 0, 0, 0, 0, 0)) // Ethernet, no snap length, no options
		}
		w.epb(uint32(ifaces-1), 0, frame, 0, false)
	}
	w := &ngWriter{}
	section(w, MaxInterfaces)
	section(w, MaxInterfaces)
	fs := mustRead(t, w.b)
	if len(fs) != 2 || fs[0].IfIndex != MaxInterfaces || fs[1].IfIndex != MaxInterfaces {
		t.Fatalf("at the limit: %d frames, want 2 of interface index %d", len(fs), MaxInterfaces)
	}

	w = &ngWriter{}
	section(w, MaxInterfaces+1)
	r, err := NewReader(bytes.NewReader(w.b))
	if err != nil {
		t.Fatalf("NewReader: %v", err)
	}
	fs, err = readAll(t, r)
	if len(fs) != 0 || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "MaxInterfaces") {
		t.Errorf("over the limit: %d frames and %v, want ErrFormat naming MaxInterfaces", len(fs), err)
	}
}

// TestSnapLen checks the snap length the reader reports: the pcap
// header's, a pcapng file's first interface's.
func TestSnapLen(t *testing.T) {
	file := writePcap(binary.BigEndian, false, 1, nil)
	binary.BigEndian.PutUint32(file[16:], 1514)
	if r, err := NewReader(bytes.NewReader(file)); err != nil || r.SnapLen() != 1514 {
		t.Errorf("pcap: %v, snap length %d, want 1514", err, r.SnapLen())
	}
	w := &ngWriter{}
	w.section(binary.LittleEndian)
	w.iface(ngIfOpts{link: 1, snap: 9000, tsresol: -1})
	w.iface(ngIfOpts{link: 1, snap: 100, tsresol: -1})
	if r, err := NewReader(bytes.NewReader(w.b)); err != nil || r.SnapLen() != 9000 {
		t.Errorf("pcapng: %v, snap length %d, want 9000", err, r.SnapLen())
	}
}
