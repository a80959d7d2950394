package synth

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/rpsgo/rps/steer"
)

// Flows is a TCP/IPv4 and a UDP/IPv6 flow, the two the tests put in every
// case.
var flows = []Flow{
	{Src: netip.MustParseAddr("10.1.2.3"), Dst: netip.MustParseAddr("10.4.5.6"), SrcPort: 40000, DstPort: 80},
	{Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2"), SrcPort: 4000, DstPort: 9000, UDP: true},
}

// gopacketCannot are the cases gopacket does not decode: ERSPAN type I
// (GRE's 0x88be is always type II to it) and a pseudowire control word.
var gopacketCannot = map[string]bool{"erspan1": true, "mpls-pw": true}

// TestCases: each case's frame, BigCases' too, is what its name says, as
// the classifier reads it with tunnels opened and closed, and as gopacket
// decodes it (but BigCases').
func TestCases(t *testing.T) {
	inner, err := steer.NewClassifier(steer.HashConfig{Tunnels: steer.TunnelsInner, VXLANPorts: []uint16{4789, 8472}})
	if err != nil {
		t.Fatal(err)
	}
	outer, err := steer.NewClassifier(steer.HashConfig{})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for i, c := range append(Cases[:len(Cases):len(Cases)], BigCases...) {
		big := i >= len(Cases)
		if names[c.Name] {
			t.Errorf("case %s twice", c.Name)
		}
		names[c.Name] = true
		for _, f := range flows {
			frame := c.Build(f)
			var cl steer.Classification
			inner.Classify(frame, &cl)
			k := cl.Key
			if cl.Reason != steer.ReasonOK || k.Encapsulation() != c.Inner || k.Src != f.Src || k.Dst != f.Dst ||
				k.SrcPort != f.SrcPort || k.DstPort != f.DstPort {
				t.Errorf("%s, %v, tunnels inner: %s %+v, want %q and the flow", c.Name, f.Src, cl.Reason, k, c.Inner)
			}
			outer.Classify(frame, &cl)
			k = cl.Key
			if cl.Reason != steer.ReasonOK || k.Encapsulation() != c.Outer || k.Depth != 0 || (k.Src == f.Src) == c.Tunnel {
				t.Errorf("%s, %v, tunnels outer: %s %+v, want %q and the flow only outside a tunnel", c.Name, f.Src, cl.Reason, k, c.Outer)
			}
			if big {
				if len(frame) < BigLen {
					t.Errorf("%s: a frame of %d bytes", c.Name, len(frame))
				}
				continue // gopacket reads no UDP length of zero
			}
			p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
			if el := p.ErrorLayer(); el != nil && !gopacketCannot[c.Name] {
				t.Errorf("%s: gopacket: %v", c.Name, el.Error())
			}
		}
	}
}

// TestVXLANCapture: the capture is reproducible, seven frames in eight
// are VXLAN, and they carry the flows asked for.
func TestVXLANCapture(t *testing.T) {
	a, b := VXLANCapture(400, 64, 1), VXLANCapture(400, 64, 1)
	if !slices.EqualFunc(a, b, bytes.Equal) {
		t.Fatal("the same seed gave two captures")
	}
	c, err := steer.NewClassifier(steer.HashConfig{Tunnels: steer.TunnelsInner})
	if err != nil {
		t.Fatal(err)
	}
	vxlan := 0
	inner := map[netip.Addr]bool{}
	for _, f := range a {
		var cl steer.Classification
		c.Classify(f, &cl)
		if cl.Key.Depth == 1 && cl.Key.Encapsulation() == "vxlan:42" {
			vxlan++
			inner[cl.Key.Src] = true
		}
	}
	if vxlan != 350 || len(inner) < 60 {
		t.Errorf("%d VXLAN frames of 400 from %d inner hosts; want 350 from about 64", vxlan, len(inner))
	}
}

// TestChecksums: the IPv4, TCP and UDP checksums of the plain frames are
// what gopacket computes when it writes the same layers again.
func TestChecksums(t *testing.T) {
	for _, f := range append(flows, Flow{Src: flows[0].Src, Dst: flows[0].Dst, SrcPort: 1, DstPort: 2, UDP: true},
		Flow{Src: flows[1].Src, Dst: flows[1].Dst, SrcPort: 3, DstPort: 4}) {
		frame := plain(f)
		p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
		var ls []gopacket.SerializableLayer
		for _, l := range p.Layers() {
			ls = append(ls, l.(gopacket.SerializableLayer))
		}
		if tl, ok := p.TransportLayer().(interface {
			SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
		}); !ok || tl.SetNetworkLayerForChecksum(p.NetworkLayer()) != nil {
			t.Fatalf("%v: no transport layer", f)
		}
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true}, ls...); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), frame) {
			t.Errorf("%v:\n got %x\nwant %x", f, frame, buf.Bytes())
		}
	}
}

// TestFragment: an IPv4 and an IPv6 datagram cut into fragments of 1,480
// bytes come back whole, each fragment with its offset, the more-fragments
// flag on all but the last, the identification, and a valid IPv4 header
// checksum.
func TestFragment(t *testing.T) {
	payload := make([]byte, 4000)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	for _, f := range flows {
		whole := f.ethernet(f.packetWith(payload))
		hl := 20
		if f.Src.Is6() {
			hl = 40
		}
		data := whole[14+hl:]
		frags := Fragment(whole, 1480, 0x1234)
		if len(frags) != 3 {
			t.Fatalf("%v: %d fragments, want 3", f.Src, len(frags))
		}
		var got []byte
		for i, fr := range frags {
			ip := fr[14:]
			var off int
			var more bool
			if f.Src.Is6() {
				fh := ip[40:48]
				if ip[6] != 44 || fh[0] != f.proto() || binary.BigEndian.Uint32(fh[4:]) != 0x1234 ||
					int(binary.BigEndian.Uint16(ip[4:])) != len(ip)-40 {
					t.Errorf("%v fragment %d: header %x", f.Src, i, ip[:48])
				}
				off, more = int(binary.BigEndian.Uint16(fh[2:])&^7), fh[3]&1 == 1
				got = append(got, ip[48:]...)
			} else {
				fo := binary.BigEndian.Uint16(ip[6:])
				if binary.BigEndian.Uint16(ip[4:]) != 0x1234 || checksum(ip[:20]) != 0 || int(binary.BigEndian.Uint16(ip[2:])) != len(ip) {
					t.Errorf("%v fragment %d: header %x", f.Src, i, ip[:20])
				}
				off, more = int(fo&0x1fff)*8, fo&0x2000 != 0
				got = append(got, ip[20:]...)
			}
			if off != i*1480 || more != (i < 2) {
				t.Errorf("%v fragment %d: offset %d, more %v", f.Src, i, off, more)
			}
		}
		if !bytes.Equal(got, data) {
			t.Errorf("%v: the fragments do not make the datagram", f.Src)
		}
	}
}
