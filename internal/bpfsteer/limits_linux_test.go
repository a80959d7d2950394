//go:build linux

package bpfsteer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/steer"
)

// Builders of well-formed frames for the limit cases, by hand.

// tEth is an Ethernet frame with VLAN tags.
func tEth(et uint16, p []byte, tags int) []byte {
	f := []byte{0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2}
	for i := 0; i < tags; i++ {
		f = be16(be16(f, 0x8100), uint16(10+i))
	}
	return append(be16(f, et), p...)
}

// tIPv4 is an IPv4 packet from 10.0.0.a to 10.0.1.a.
func tIPv4(a byte, proto uint8, l4 []byte) []byte {
	h := []byte{0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, proto, 0, 0, 10, 0, 0, a, 10, 0, 1, a}
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(l4)))
	return append(h, l4...)
}

// tTCP is a TCP header with ports from a.
func tTCP(a byte) []byte {
	t := make([]byte, 20)
	t[0], t[1], t[2], t[3], t[12] = 0x9c, a, 0x01, 0xbb, 0x50
	return t
}

func tUDP(dport uint16, body []byte) []byte {
	u := be16(be16(nil, 40000), dport)
	u = be16(u, uint16(8+len(body)))
	return append(be16(u, 0), body...)
}

// tVXLAN is a VXLAN packet over UDP carrying frame.
func tVXLAN(frame []byte) []byte {
	return tUDP(VXLANPort, append([]byte{0x08, 0, 0, 0, 0, 0, 42, 0}, frame...))
}

// tMPLS is a stack of n labels, the last with the bottom-of-stack bit.
func tMPLS(n int, p []byte) []byte {
	var b []byte
	for i := 0; i < n; i++ {
		e := uint32(100+i) << 12
		if i == n-1 {
			e |= 0x100
		}
		b = be32(b, e)
	}
	return append(b, p...)
}

// tPW is an MPLS pseudowire: one label, the control word, the frame.
func tPW(frame []byte) []byte {
	return tMPLS(1, append([]byte{0, 0, 0, 0}, frame...))
}

// limitCase is a frame at a limit and what user space makes of it.
type limitCase struct {
	name   string
	frame  []byte
	hashed bool
	depth  uint8
}

func limitCases() []limitCase {
	inner := func(a byte) []byte { return tIPv4(a, protoTCP, tTCP(a)) }
	var cs []limitCase
	add := func(name string, f []byte, hashed bool, depth uint8) {
		cs = append(cs, limitCase{name, f, hashed, depth})
	}
	add("mpls 8 labels", tEth(etMPLS, tMPLS(8, inner(1)), 0), true, 0)
	add("mpls 9 labels", tEth(etMPLS, tMPLS(9, inner(1)), 0), false, 0)
	add("4 outer vlans and mpls 8 labels", tEth(etMPLS, tMPLS(8, inner(1)), 4), true, 0)
	pw := func(n, tags int) []byte {
		f := tEth(etIPv4, inner(2), tags)
		for i := 0; i < n; i++ {
			f = tEth(etMPLS, tPW(f), 0)
		}
		return f
	}
	add("4 pseudowires", pw(4, 0), true, 0)
	add("4 pseudowires and a vlan", pw(4, 1), false, 0)
	add("3 pseudowires and 2 vlans", pw(3, 2), true, 0)
	add("5 pseudowires", pw(5, 0), false, 0)
	add("pppoe", tEth(etPPPoE, append([]byte{0x11, 0, 0, 7, 0, byte(2 + 40)}, append([]byte{0, 0x21}, inner(3)...)...), 0), true, 0)
	outer := func(l4 []byte, proto uint8) []byte { return tEth(etIPv4, tIPv4(200, proto, l4), 0) }
	add("vxlan, 4 inner vlans", outer(tVXLAN(tEth(etIPv4, inner(4), 4)), protoUDP), true, 1)
	add("vxlan, 5 inner vlans", outer(tVXLAN(tEth(etIPv4, inner(4), 5)), protoUDP), true, 0)
	add("vxlan, 4 vlans, mpls 3: 8 headers", outer(tVXLAN(tEth(etMPLS, tMPLS(3, inner(5)), 4)), protoUDP), true, 1)
	add("vxlan, 4 vlans, mpls 4: 9 headers", outer(tVXLAN(tEth(etMPLS, tMPLS(4, inner(5)), 4)), protoUDP), true, 0)
	nest := func(n int) []byte {
		p := inner(6)
		for i := 0; i < n; i++ {
			p = tIPv4(byte(50+i), protoUDP, tVXLAN(tEth(etIPv4, p, 0)))
		}
		return tEth(etIPv4, p, 0)
	}
	add("vxlan 4 deep", nest(4), true, 4)
	add("vxlan 5 deep", nest(5), true, 4)
	ipip := func(n int) []byte {
		p := inner(7)
		for i := 0; i < n; i++ {
			p = tIPv4(byte(60+i), protoIPIP, p)
		}
		return tEth(etIPv4, p, 0)
	}
	add("ipip 4 deep", ipip(4), true, 4)
	add("ipip 6 deep", ipip(6), true, 4)
	frag := outer(tVXLAN(tEth(etIPv4, inner(8), 0)), protoUDP)
	frag[14+6] = 0x20 // MF: an outer fragment is never opened
	add("outer fragment", frag, true, 0)
	return cs
}

// TestEncapLimits runs frames at the walk's limits (MaxEncaps headers,
// MaxVLANDepth inner tags, MaxTunnelDepth tunnels, the most pseudowires)
// and one past each, for tunnels off and on, Toeplitz and SipHash: the
// program and user space agree, and user space does what the case says.
func TestEncapLimits(t *testing.T) {
	requirePriv(t)
	forHooks(t, encapLimits)
}

// encapLimits is TestEncapLimits for one hook.
func encapLimits(t *testing.T, hook Hook) {
	table := identityTable()
	for _, alg := range []hash.Algorithm{hash.AlgorithmToeplitz, hash.AlgorithmSipHash} {
		for _, tun := range []steer.TunnelMode{steer.TunnelsOuter, steer.TunnelsInner} {
			n := 40
			if alg == hash.AlgorithmSipHash {
				n = hash.SipHashKeyLen
			}
			hc := steer.HashConfig{Algorithm: alg, Key: randKey(t, n), Tunnels: tun, Symmetric: true}
			cls, err := steer.NewClassifier(hc)
			if err != nil {
				t.Fatal(err)
			}
			p := loadHook(t, optionsFor(hc, table, encFallback, hook))
			for _, lc := range limitCases() {
				var c steer.Classification
				w := want(cls, lc.frame, &c)
				name := fmt.Sprintf("%v/%v/%s", alg, tun, lc.name)
				if tun == steer.TunnelsInner && ((c.HashType != hash.None) != lc.hashed || c.Key.Depth != lc.depth) {
					t.Errorf("%s: user space: %v, depth %d, reason %v; the case wants hashed %v at depth %d",
						name, c.HashType, c.Key.Depth, c.Reason, lc.hashed, lc.depth)
				}
				if got := run(t, p, lc.frame); got != w {
					t.Errorf("%s: program %#x, user space %#x (%v, reason %v, encaps %s)", name, got, w, c.HashType, c.Reason, c.Key.Encapsulation())
				}
			}
		}
	}
}

// TestEncapTruncated cuts a frame of each encapsulation at every byte:
// the program and user space agree on every cut.
func TestEncapTruncated(t *testing.T) {
	requirePriv(t)
	forHooks(t, encapTruncated)
}

// encapTruncated is TestEncapTruncated for one hook.
func encapTruncated(t *testing.T, hook Hook) {
	table := identityTable()
	frames := [][]byte{}
	for _, lc := range limitCases() {
		frames = append(frames, lc.frame)
	}
	in := tEth(etIPv4, tIPv4(9, protoTCP, tTCP(9)), 1)
	outer := func(proto uint8, l4 []byte) []byte { return tEth(etIPv4, tIPv4(201, proto, l4), 0) }
	frames = append(frames,
		outer(protoUDP, tUDP(GENEVEPort, append([]byte{1, 0, 0x65, 0x58, 0, 0, 1, 0, 1, 2, 3, 4}, in...))),
		outer(protoGRE, append([]byte{0xb0, 0, 0x65, 0x58, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1}, in...)),
		outer(protoGRE, append([]byte{0x10, 0, 0x88, 0xbe, 0, 0, 0, 1, 0x10, 0, 0, 5, 0, 0, 0, 0}, in...)),
		outer(protoGRE, append(append([]byte{0, 0, 0x22, 0xeb, 0x20, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 1}, make([]byte, 8)...), in...)),
		outer(protoUDP, tUDP(GTPUPort, append([]byte{0x34, 0xff, 0, 4 + 4 + 40, 0, 0, 0, 1, 0, 0, 0, 0x85, 1, 0, 0, 0},
			tIPv4(10, protoTCP, tTCP(10))...))),
		outer(protoIPv6, ipv6Of(tIPv4(11, protoTCP, tTCP(11)))),
	)
	for _, alg := range []hash.Algorithm{hash.AlgorithmToeplitz, hash.AlgorithmSipHash} {
		n := 40
		if alg == hash.AlgorithmSipHash {
			n = hash.SipHashKeyLen
		}
		hc := steer.HashConfig{Algorithm: alg, Key: randKey(t, n), Tunnels: steer.TunnelsInner, UDP4Tuple: true}
		cls, err := steer.NewClassifier(hc)
		if err != nil {
			t.Fatal(err)
		}
		p := loadHook(t, optionsFor(hc, table, encFallback, hook))
		for _, f := range frames {
			for l := 14; l <= len(f); l++ {
				cut := f[:l]
				if !testable(cut) {
					continue
				}
				var c steer.Classification
				w := want(cls, cut, &c)
				if got := run(t, p, cut); got != w {
					t.Fatalf("%v: frame %x cut to %d bytes: program %#x, user space %#x (%v, reason %v)", alg, f, l, got, w, c.HashType, c.Reason)
				}
			}
		}
	}
}

// ipv6Of wraps a packet in an IPv6 header with a destination options
// header: IP in IP over IPv6's extension headers.
func ipv6Of(p []byte) []byte {
	h := make([]byte, 40)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(8+len(p)))
	h[6], h[7] = 60, 64
	copy(h[8:], bytes.Repeat([]byte{0xfd}, 16))
	copy(h[24:], bytes.Repeat([]byte{0xfe}, 16))
	return append(append(h, protoIPIP, 0, 1, 4, 0, 0, 0, 0), p...)
}
