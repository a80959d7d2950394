//go:build linux

package bpfsteer

import (
	"context"
	"encoding/binary"
	"fmt"
	"github.com/rpsgo/rps/internal/wire"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/steer"
)

// fragGen makes datagrams cut into fragments, and what carries them.
type fragGen struct {
	*encGen
	id uint32 // the last identification used
}

// datagram returns the frames of one datagram cut into fragments: IPv4
// or IPv6 (with a hop-by-hop header before the fragment header and a
// destination options header after it, sometimes), TCP, UDP or another
// protocol, plain or inside VXLAN or GRE, its fragments in order but now
// and then a later one first, one twice, or one cut short.
func (g *fragGen) datagram() [][]byte {
	v6 := g.one(2)
	proto := uint8(g.pick(protoTCP, protoUDP, protoUDP, 1))
	body := g.bytes(16 + 8*g.n(12))
	if proto != 1 {
		copy(body, be16(be16(nil, uint16(g.n(1<<16))), uint16(g.pick(80, 53, 4789, g.n(1<<16)))))
	}
	// A few addresses and identifications, so that keys meet: a datagram
	// may take an identification an older one of its pair had.
	pair := g.n(4)
	src, dst := []byte{10, 0, 0, byte(pair)}, []byte{10, 0, 1, byte(pair)}
	if v6 {
		src, dst = append(make([]byte, 12), src...), append(make([]byte, 12), dst...)
	}
	if g.one(3) {
		g.id = uint32(g.n(8))
	} else {
		g.id++
	}
	k := 2 + g.n(2)
	step := (len(body)/k + 7) &^ 7
	var frames [][]byte
	for off := 0; off < len(body); off += step {
		end := min(off+step, len(body))
		frames = append(frames, g.wrap(g.fragment(v6, src, dst, proto, g.id, off, end < len(body), body[off:end])))
	}
	switch g.n(8) {
	case 0: // a later fragment first
		i := 1 + g.n(len(frames)-1)
		frames[0], frames[i] = frames[i], frames[0]
	case 1: // one twice
		frames = append(frames, frames[g.n(len(frames))])
	case 2: // one cut short
		i := g.n(len(frames))
		frames[i] = frames[i][:14+g.n(len(frames[i])-13)]
	}
	return frames
}

// fragment returns the IP packet of one fragment: offset off (bytes),
// more fragments after it when more.
func (g *fragGen) fragment(v6 bool, src, dst []byte, proto uint8, id uint32, off int, more bool, data []byte) []byte {
	if !v6 {
		h := []byte{0x45, 0, 0, 0}
		h = be16(h, uint16(id))
		fo := uint16(off / 8)
		if more {
			fo |= 0x2000
		}
		h = be16(h, fo)
		h = append(h, 64, proto, 0, 0)
		h = append(append(h, src...), dst...)
		binary.BigEndian.PutUint16(h[2:], uint16(20+len(data)))
		return append(h, data...)
	}
	var ext []byte
	nh := proto
	if off == 0 && g.one(3) { // destination options in the first fragment
		ext = append([]byte{nh, 0, 1, 4, 0, 0, 0, 0}, ext...)
		nh = 60
	}
	fo := uint16(off)
	if more {
		fo |= 1
	}
	frag := be32(be16([]byte{nh, 0}, fo), id)
	ext = append(frag, ext...)
	nh = 44
	if g.one(4) { // hop-by-hop before
		ext = append([]byte{nh, 0, 1, 4, 0, 0, 0, 0}, ext...)
		nh = 0
	}
	h := []byte{0x60, 0, 0, 0}
	h = be16(h, uint16(len(ext)+len(data)))
	h = append(h, nh, 64)
	h = append(append(h, src...), dst...)
	return append(append(h, ext...), data...)
}

// wrap returns an Ethernet frame carrying the IP packet ip: plain, or in
// VXLAN or GRE over IPv4.
func (g *fragGen) wrap(ip []byte) []byte {
	eth := func(p []byte) []byte {
		f := g.bytes(12)
		et := uint16(0x0800)
		if p[0]>>4 == 6 {
			et = 0x86dd
		}
		return append(be16(f, et), p...)
	}
	outer := func(proto uint8, l4 []byte) []byte {
		h := []byte{0x45, 0, 0, 0, 0, 1, 0, 0, 64, proto, 0, 0, 192, 0, 2, 1, 192, 0, 2, 2}
		binary.BigEndian.PutUint16(h[2:], uint16(20+len(l4)))
		return eth(append(h, l4...))
	}
	switch g.n(5) {
	case 0:
		vx := append([]byte{0x08, 0, 0, 0, 0, 0, 42, 0}, eth(ip)...)
		return outer(protoUDP, g.udp(VXLANPort, vx))
	case 1:
		et := uint16(0x0800)
		if ip[0]>>4 == 6 {
			et = 0x86dd
		}
		return outer(protoGRE, append(be16([]byte{0, 0}, et), ip...))
	}
	return eth(ip)
}

// TestFragmentAgreement runs datagrams cut into fragments, and random
// frames of every encapsulation between them, through the program with
// BPF_PROG_TEST_RUN and through a dispatcher's input, in the same order,
// with FollowFragments and steer.FragmentsFollow, for every configuration
// of the encapsulation tests with a 4-tuple type: the same flowid for
// every frame, whether it follows its first fragment from the map, is an
// orphan, or is no fragment at all.
func TestFragmentAgreement(t *testing.T) {
	seed, datagrams := agreementStart(t, 600, 100)
	table := identityTable()
	forHooks(t, func(t *testing.T, hook Hook) {
		for _, cfg := range encConfigs(t) {
			if cfg.hc.Types == hash.TypeIPv4|hash.TypeIPv6 || cfg.hc.Types == hash.TypeIPv4|hash.TypeIPv6|hash.TypeTCPIPv4|hash.TypeUDPIPv6 {
				continue // no 4-tuple, or a mixed set the rest covers
			}
			cfg.hc.Fragments = steer.FragmentsFollow
			t.Run(cfg.name, func(t *testing.T) { fragmentAgreement(t, hook, cfg.hc, table, seed, datagrams) })
		}
	})
}

func fragmentAgreement(t *testing.T, hook Hook, hc steer.HashConfig, table []uint32, seed uint64, datagrams int) {
	p := loadHook(t, optionsFor(hc, table, encFallback, hook))
	g := &fragGen{encGen: &encGen{r: rand.New(rand.NewPCG(seed, 3)), vxlan: []uint16{VXLANPort}}}
	var frames []steer.Frame
	for range datagrams {
		for _, f := range g.datagram() {
			frames = append(frames, steer.Frame{Data: f})
		}
		if g.one(2) {
			frames = append(frames, steer.Frame{Data: g.frame()})
		}
	}
	var got []steer.Packet
	d, err := steer.New(steer.Config{Workers: 1, Dispatch: steer.DispatchDirect, Hash: hc}, func(pk *steer.Packet) { got = append(got, *pk) })
	if err != nil {
		t.Fatal(err)
	}
	in := d.NewInput()
	var tuple steer.Classification
	hcTuple := hc
	hcTuple.Fragments = steer.FragmentsTuple
	tc, err := steer.NewClassifier(hcTuple)
	if err != nil {
		t.Fatal(err)
	}
	followed, orphans, tested := 0, 0, 0
	for i, f := range frames {
		if !testable(f.Data) {
			continue
		}
		if err := in.Dispatch(frames[i:i+1], nil); err != nil {
			t.Fatal(err)
		}
		pk := got[len(got)-1]
		w := uint32(encFallback)
		if pk.HashType != hash.None {
			w = pk.FlowID & (MaxTableLen - 1)
		}
		if r := run(t, p, f.Data); r != w {
			t.Fatalf("frame %d %x: program returned %#x, user space %#x (%v, flowid %#x, reason %v)", i, f.Data, r, w, pk.HashType, pk.FlowID, pk.Reason)
		}
		tested++
		tc.Classify(f.Data, &tuple)
		switch {
		case pk.Reason == steer.ReasonOrphanFragment:
			orphans++
		case tuple.Key.Fragment && pk.FlowID != tuple.FlowID:
			followed++ // a later fragment given its first's flowid, or a first one its 4-tuple's
		}
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d frames: %d fragments hashed otherwise than by their addresses, %d orphans", tested, followed, orphans)
	if !testing.Short() && (followed < tested/20 || orphans == 0) {
		t.Errorf("the frames exercised too little: %d followed, %d orphans of %d", followed, orphans, tested)
	}
}

// TestFragmentExpiry: a later fragment takes its first fragment's flowid
// until the entry is older, in kernel time, than its family's timeout,
// and its own 2-tuple after; set by writing the entry's time back.
func TestFragmentExpiry(t *testing.T) {
	requirePriv(t)
	forHooks(t, func(t *testing.T, hook Hook) {
		hc := steer.HashConfig{Key: randKey(t, 40), UDP4Tuple: true, Fragments: steer.FragmentsFollow}
		opts := optionsFor(hc, identityTable(), encFallback, hook)
		g := &fragGen{encGen: &encGen{r: rand.New(rand.NewPCG(1, 2)), vxlan: []uint16{VXLANPort}}}
		for _, v6 := range []bool{false, true} {
			src, dst := []byte{10, 0, 0, 1}, []byte{10, 0, 1, 1}
			timeout := wire.FragmentTimeout
			if v6 {
				src, dst = append(make([]byte, 12), src...), append(make([]byte, 12), dst...)
				timeout = wire.FragmentTimeout6
			}
			eth := func(ip []byte) []byte {
				et := uint16(0x0800)
				if v6 {
					et = 0x86dd
				}
				return append(be16(make([]byte, 12), et), ip...)
			}
			body := append(be16(be16(nil, 1000), 2000), make([]byte, 28)...)
			first := eth(g.fragment(v6, src, dst, protoUDP, 77, 0, true, body[:16]))
			later := eth(g.fragment(v6, src, dst, protoUDP, 77, 16, false, body[16:]))
			cls, err := steer.NewClassifier(hc)
			if err != nil {
				t.Fatal(err)
			}
			var c steer.Classification
			cls.Classify(first, &c)
			whole := c.FlowID & (MaxTableLen - 1)
			cls.Classify(later, &c)
			own := c.FlowID & (MaxTableLen - 1)
			if whole == own {
				t.Fatal("the test's flow hashes alike by 2 and 4 tuples")
			}
			s := loadHook(t, opts)
			m := fragMapOf(s)
			for _, tc := range []struct {
				age  time.Duration
				want uint32
			}{{0, whole}, {timeout - time.Second, whole}, {timeout + time.Second, own}} {
				if got := run(t, s, first); got != whole {
					t.Fatalf("v6=%v: first fragment %#x, want %#x", v6, got, whole)
				}
				age(t, m, tc.age)
				if got := run(t, s, later); got != tc.want {
					t.Errorf("v6=%v, entry %v old: later fragment %#x, want %#x", v6, tc.age, got, tc.want)
				}
			}
		}
	})
}

// fragMapOf returns a loaded program's fragment map.
func fragMapOf(s steering) *ebpf.Map {
	switch p := s.(type) {
	case *Program:
		return p.frags
	case *XDP:
		return p.frags
	}
	return nil
}

// age makes every entry of a fragment map d older, in kernel time
// (CLOCK_MONOTONIC, bpf_ktime_get_ns's clock).
func age(t *testing.T, m *ebpf.Map, d time.Duration) {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	now := ts.Nano()
	var k [fragKeyLen]byte
	var v [fragValueLen]byte
	it := m.Iterate()
	for it.Next(&k, &v) {
		binary.NativeEndian.PutUint64(v[8:], uint64(now-int64(d)))
		if err := m.Update(k, v, ebpf.UpdateExist); err != nil {
			t.Fatal(err)
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(fmt.Errorf("iterating the fragment map: %w", err))
	}
}
