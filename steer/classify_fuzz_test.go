package steer

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/rpsgo/rps/hash"
)

// gopacket's view of a frame, for the differential fuzz target. The
// DecodingLayerParser reuses one layer value per type, so the VLAN tags and
// extension headers are recorded as they are decoded.

type recDot1Q struct {
	layers.Dot1Q
	ids []uint16
}

func (d *recDot1Q) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := d.Dot1Q.DecodeFromBytes(data, df); err != nil {
		return err
	}
	d.ids = append(d.ids, d.VLANIdentifier)
	return nil
}

// recExt records the next header of every extension header the skipper
// decodes.
type recExt struct {
	layers.IPv6ExtensionSkipper
	next []uint8
}

func (e *recExt) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := e.IPv6ExtensionSkipper.DecodeFromBytes(data, df); err != nil {
		return err
	}
	e.next = append(e.next, uint8(e.NextHeader))
	return nil
}

// 13: IP in IP. gopacket decodes the inner packet into the same layer
// value; we classify by the outer header, as RSS does. The parser is made
// to stop after the outer packet.
func notTunnel(t gopacket.LayerType) gopacket.LayerType {
	if t == layers.LayerTypeIPv4 || t == layers.LayerTypeIPv6 {
		return gopacket.LayerTypeZero
	}
	return t
}

type outerIPv4 struct{ layers.IPv4 }

func (i *outerIPv4) NextLayerType() gopacket.LayerType { return notTunnel(i.IPv4.NextLayerType()) }

type outerIPv6 struct{ layers.IPv6 }

func (i *outerIPv6) NextLayerType() gopacket.LayerType { return notTunnel(i.IPv6.NextLayerType()) }

func (e *recExt) NextLayerType() gopacket.LayerType {
	return notTunnel(e.IPv6ExtensionSkipper.NextLayerType())
}

type gopacketView struct {
	parser  *gopacket.DecodingLayerParser
	eth     layers.Ethernet
	dot1q   recDot1Q
	ip4     outerIPv4
	ip6     outerIPv6
	ext     recExt
	tcp     layers.TCP
	udp     layers.UDP
	sctp    layers.SCTP
	decoded []gopacket.LayerType
	err     error
}

func newGopacketView() *gopacketView {
	g := &gopacketView{}
	g.parser = gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet,
		&g.eth, &g.dot1q, &g.ip4, &g.ip6, &g.ext, &g.tcp, &g.udp, &g.sctp)
	g.parser.IgnoreUnsupported = true
	return g
}

func (g *gopacketView) decode(frame []byte) {
	g.dot1q.ids = g.dot1q.ids[:0]
	g.ext.next = g.ext.next[:0]
	g.err = g.parser.DecodeLayers(frame, &g.decoded)
}

func (g *gopacketView) has(t gopacket.LayerType) bool {
	for _, d := range g.decoded {
		if d == t {
			return true
		}
	}
	return false
}

func addrOf(b []byte) netip.Addr {
	a, _ := netip.AddrFromSlice(b)
	return a
}

func isIPv6Ext(nh uint8) bool {
	switch nh {
	case protoHopByHop, protoRouting, protoFragment, protoDstOpts, protoAH:
		return true
	}
	return false
}

// FuzzClassify checks the classifier against its invariants and, where
// gopacket decodes a frame, against gopacket. The deliberate differences,
// where the comparison is skipped or inverted:
//
//  1. 0x9100 (legacy QinQ) tags: gopacket stops at them, we walk them. We
//     may record more VLANs than gopacket decoded, never fewer (up to 4).
//  2. More than 4 tags: gopacket walks on, we stop with TooManyVLANs.
//  3. IPv4 version field: gopacket does not check it; we give BadIPVersion.
//  4. IPv4 total length 0: gopacket takes the frame length (Windows TSO);
//     we give BadIPLength (total length below the header length).
//  5. IPv4 options: gopacket rejects malformed options; we skip them
//     unparsed (only the converse is checked: gopacket OK implies us OK).
//  6. IPv4 fragments: gopacket stops before the transport layer and so do
//     we (Fragment set, ports zero); the comparison of ports is skipped.
//  7. TCP/UDP/SCTP headers shorter than 20/8/12 bytes: gopacket fails, we
//     read the ports from the first 4 bytes (only gopacket OK => us OK is
//     checked).
//  8. IPv6 payload length 0: we take the frame. gopacket fails without a
//     jumbogram option, and with one decodes the next header from the
//     hop-by-hop header's own bytes; the comparison past the addresses is
//     skipped.
//  9. IPv6 hop-by-hop: gopacket parses its TLV options and rejects bad
//     ones, we skip them; and gopacket applies the payload length after the
//     hop-by-hop header (counting it twice), so with trailing bytes it may
//     read past the end we use. The comparison past the IPv6 header is
//     skipped when a hop-by-hop header is present and bytes trail.
//  10. IPv6 fragment headers: gopacket treats them as generic extension
//     headers (length from their reserved byte) and decodes the transport
//     header of any fragment; we take 8 bytes, stop at a real fragment
//     (Fragment set, Proto the fragment header's next header, ports zero),
//     and walk through an atomic fragment.
//  11. AH: gopacket has no DecodingLayer for it and stops; we walk it.
//  12. More than 8 extension headers: gopacket walks on; we stop with
//     BadExtHeader.
//  13. IP in IP (protocols 4 and 41): gopacket decodes the inner packet,
//     we classify by the outer one (as RSS does); the parser is stopped
//     after the outer packet.
func FuzzClassify(f *testing.F) {
	h, err := hash.NewToeplitz(hash.MicrosoftKey[:])
	if err != nil {
		f.Fatal(err)
	}
	plain := newTestClassifier(f, h, false, false)
	sym := newTestClassifier(f, h, true, true)
	f.Fuzz(func(t *testing.T, frame []byte) {
		var o, s, v Classification
		plain.Classify(frame, &o)
		sym.Classify(frame, &s)
		plain.ClassifyVLAN(frame, 0xf123, &v)

		checkInvariants(t, h, frame, &o, false)
		checkInvariants(t, h, frame, &s, true)
		checkInvariants(t, h, frame, &v, false)
		if s.Key != o.Key || s.Reason != o.Reason || s.EtherType != o.EtherType {
			t.Errorf("symmetric/udp4 classifier disagrees on the key: %+v %v vs %+v %v", s.Key, s.Reason, o.Key, o.Reason)
		}
		checkOutOfBand(t, &o, &v)
		checkSplit(t, plain, frame, &o)
		checkSplit(t, sym, frame, &s)

		g := newGopacketView()
		g.decode(frame)
		compareGopacket(t, frame, &o, g)
	})
}

// checkSplit checks the dispatcher's split of Classify (want, by c): the
// producer's flowOnly gives the same hash, hash type, EtherType and reason,
// stale fields in its output notwithstanding, and the key-only classifier
// that Packet.Key uses gives the same key.
func checkSplit(t *testing.T, c *Classifier, frame []byte, want *Classification) {
	t.Helper()
	stale := Classification{FlowID: 0xdeadbeef, HashType: hash.OpaqueHash, Reason: ReasonBadIHL, EtherType: 0x1234}
	stale.Key.Proto = 99
	f := stale
	c.flowOnly(frame, &f)
	if f.FlowID != want.FlowID || f.HashType != want.HashType || f.EtherType != want.EtherType || f.Reason != want.Reason {
		t.Errorf("flowOnly: flowid %#x %v ethertype %#x %v; Classify: %#x %v %#x %v",
			f.FlowID, f.HashType, f.EtherType, f.Reason, want.FlowID, want.HashType, want.EtherType, want.Reason)
	}
	var k Classification
	c.keyOnly().Classify(frame, &k)
	if k.Key != want.Key || k.Reason != want.Reason || k.FlowID != 0 {
		t.Errorf("key-only classifier: key %+v %v flowid %#x; Classify: %+v %v", k.Key, k.Reason, k.FlowID, want.Key, want.Reason)
	}
}

// checkInvariants checks what holds for any input.
func checkInvariants(t *testing.T, h *hash.Toeplitz, frame []byte, c *Classification, symmetric bool) {
	t.Helper()
	checkHash(t, h, c, symmetric) // FlowID 0 and no tuple with NONE; else FlowID = Sum(tuple from key)
	hashed := c.Reason == ReasonOK || c.Reason == ReasonShortTransport
	if hashed != (c.HashType != hash.None) {
		t.Errorf("reason %v with HashType %v", c.Reason, c.HashType)
	}
	if c.HashType == hash.None && c.FlowID != 0 {
		t.Errorf("FlowID %#x with HashType NONE", c.FlowID)
	}
	if (len(frame) < ethHeaderLen) != (c.Reason == ReasonShortEthernet) {
		t.Errorf("frame of %d bytes: reason %v", len(frame), c.Reason)
	}
	if c.Reason >= numReasons {
		t.Errorf("reason %d out of range", c.Reason)
	}
	if c.Key.NVLAN > MaxVLANDepth {
		t.Errorf("NVLAN %d", c.Key.NVLAN)
	}
	for i, id := range c.Key.VLANs {
		if id > vlanIDMask || (i >= int(c.Key.NVLAN) && id != 0) {
			t.Errorf("VLANs %v with NVLAN %d", c.Key.VLANs, c.Key.NVLAN)
		}
	}
	if hashed {
		switch c.EtherType {
		case etherTypeIPv4:
			if !c.Key.Src.Is4() || !c.Key.Dst.Is4() {
				t.Errorf("IPv4 with addresses %v %v", c.Key.Src, c.Key.Dst)
			}
		case etherTypeIPv6:
			if !c.Key.Src.Is6() || !c.Key.Dst.Is6() {
				t.Errorf("IPv6 with addresses %v %v", c.Key.Src, c.Key.Dst)
			}
		default:
			t.Errorf("hashed with EtherType %#x", c.EtherType)
		}
	}
	if c.Reason == ReasonNonIP && (c.EtherType == etherTypeIPv4 || c.EtherType == etherTypeIPv6) {
		t.Errorf("non-IP with EtherType %#x", c.EtherType)
	}
	portsRead := c.Key.SrcPort != 0 || c.Key.DstPort != 0
	if portsRead && (c.Key.Fragment || c.Reason != ReasonOK ||
		(c.Key.Proto != protoTCP && c.Key.Proto != protoUDP && c.Key.Proto != protoSCTP)) {
		t.Errorf("ports %d %d read with %+v %v", c.Key.SrcPort, c.Key.DstPort, c.Key, c.Reason)
	}
	if c.HashType.Is4Tuple() && c.Key.Fragment {
		t.Errorf("4-tuple hash %v for a fragment", c.HashType)
	}
}

// checkOutOfBand compares ClassifyVLAN (v) with Classify (o) of one frame.
func checkOutOfBand(t *testing.T, o, v *Classification) {
	t.Helper()
	if v.Key.NVLAN == 0 || v.Key.VLANs[0] != 0x123 {
		t.Fatalf("out-of-band tag not recorded: %+v", v.Key)
	}
	if o.Key.NVLAN == MaxVLANDepth {
		if v.Reason != ReasonTooManyVLANs || v.HashType != hash.None || v.Key.NVLAN != MaxVLANDepth ||
			[3]uint16(v.Key.VLANs[1:]) != [3]uint16(o.Key.VLANs[:3]) {
			t.Errorf("4 tags + out-of-band: %+v %v", v.Key, v.Reason)
		}
		return
	}
	want := *o
	want.Key.NVLAN++
	copy(want.Key.VLANs[1:], o.Key.VLANs[:MaxVLANDepth-1])
	want.Key.VLANs[0] = 0x123
	if !sameClassification(v, &want) {
		t.Errorf("ClassifyVLAN differs from Classify beyond the tag:\n%+v\n%+v", *v, want)
	}
}

// compareGopacket compares our classification with gopacket's decoding,
// except where the rules differ on purpose (see FuzzClassify).
func compareGopacket(t *testing.T, frame []byte, o *Classification, g *gopacketView) {
	t.Helper()
	if !g.has(layers.LayerTypeEthernet) {
		return // a frame shorter than 14 bytes: checked by the invariants
	}
	// 1, 2: VLAN tags.
	ids := g.dot1q.ids
	n := min(len(ids), MaxVLANDepth)
	if int(o.Key.NVLAN) < n {
		t.Fatalf("gopacket decoded VLANs %v, we %v (%d)", ids, o.Key.VLANs, o.Key.NVLAN)
	}
	for i := 0; i < n; i++ {
		if o.Key.VLANs[i] != ids[i] {
			t.Fatalf("VLAN %d: %d, gopacket %d", i, o.Key.VLANs[i], ids[i])
		}
	}
	if len(ids) > MaxVLANDepth {
		if o.Reason != ReasonTooManyVLANs {
			t.Fatalf("%d tags: reason %v", len(ids), o.Reason)
		}
		return
	}
	switch {
	case g.has(layers.LayerTypeIPv4):
		compareIPv4(t, o, g)
	case g.has(layers.LayerTypeIPv6):
		compareIPv6(t, frame, o, g)
	}
}

func compareIPv4(t *testing.T, o *Classification, g *gopacketView) {
	t.Helper()
	ip := &g.ip4
	if o.EtherType != etherTypeIPv4 {
		t.Fatalf("gopacket decoded IPv4, our EtherType %#x (%v)", o.EtherType, o.Reason)
	}
	if ip.Version != 4 { // 3
		if o.Reason != ReasonBadIPVersion {
			t.Fatalf("IPv4 version %d: reason %v", ip.Version, o.Reason)
		}
		return
	}
	if ip.Contents[2] == 0 && ip.Contents[3] == 0 { // 4
		if o.Reason != ReasonBadIPLength {
			t.Fatalf("IPv4 total length 0: reason %v", o.Reason)
		}
		return
	}
	if o.Reason != ReasonOK && o.Reason != ReasonShortTransport {
		t.Fatalf("gopacket decoded IPv4 (%v), our reason %v", g.err, o.Reason)
	}
	if o.Key.Src != addrOf(ip.SrcIP) || o.Key.Dst != addrOf(ip.DstIP) || o.Key.Proto != uint8(ip.Protocol) {
		t.Fatalf("IPv4 %v -> %v proto %d, gopacket %v -> %v proto %d", o.Key.Src, o.Key.Dst, o.Key.Proto, ip.SrcIP, ip.DstIP, ip.Protocol)
	}
	frag := ip.Flags&layers.IPv4MoreFragments != 0 || ip.FragOffset != 0
	if o.Key.Fragment != frag {
		t.Fatalf("IPv4 fragment %v, gopacket flags %v offset %d", o.Key.Fragment, ip.Flags, ip.FragOffset)
	}
	if !frag { // 6
		compareTransport(t, o, g)
	}
}

func compareIPv6(t *testing.T, frame []byte, o *Classification, g *gopacketView) {
	t.Helper()
	ip := &g.ip6
	if o.EtherType != etherTypeIPv6 {
		t.Fatalf("gopacket decoded IPv6, our EtherType %#x (%v)", o.EtherType, o.Reason)
	}
	if ip.Version != 6 {
		if o.Reason != ReasonBadIPVersion {
			t.Fatalf("IPv6 version %d: reason %v", ip.Version, o.Reason)
		}
		return
	}
	if o.Key.Src != addrOf(ip.SrcIP) || o.Key.Dst != addrOf(ip.DstIP) {
		t.Fatalf("IPv6 %v -> %v, gopacket %v -> %v", o.Key.Src, o.Key.Dst, ip.SrcIP, ip.DstIP)
	}
	if o.Reason != ReasonOK && o.Reason != ReasonShortTransport && o.Reason != ReasonBadExtHeader {
		t.Fatalf("gopacket decoded IPv6, our reason %v", o.Reason)
	}
	// The IPv6 header starts after the tags, which we and gopacket read
	// alike when gopacket reached IPv6 (no 0x9100 tag on the way).
	pkt := frame[ethHeaderLen+vlanTagLen*len(g.dot1q.ids):]
	// 8: with payload length 0 and a jumbogram option, gopacket decodes the
	// next header from the hop-by-hop header's own bytes.
	if ip.Length == 0 {
		return
	}
	// 9: gopacket's end of packet differs from ours after a hop-by-hop
	// header when bytes trail the payload length.
	if ip.HopByHop != nil && ipv6HeaderLen+int(ip.Length) < len(pkt) {
		return
	}
	// gopacket's chain: the IPv6 next header, the hop-by-hop header the
	// IPv6 layer decodes itself, the headers the skipper decoded.
	var chain []uint8 // header types, in order
	cur := uint8(ip.NextHeader)
	if ip.HopByHop != nil {
		chain = append(chain, cur)
		cur = uint8(ip.HopByHop.NextHeader)
	}
	for _, nh := range g.ext.next {
		chain = append(chain, cur)
		cur = nh
	}
	// Walk it as we do, to find where our rules part from gopacket's.
	off := ipv6HeaderLen
	for i, typ := range chain {
		if i >= maxIPv6ExtHeaders { // 12
			if o.Reason != ReasonBadExtHeader {
				t.Fatalf("%d extension headers: reason %v", len(chain), o.Reason)
			}
			return
		}
		if off+4 > len(pkt) {
			t.Fatalf("gopacket decoded an extension header past the frame at %d", off)
		}
		if typ == protoFragment {
			if pkt[off+1] != 0 { // 10: gopacket takes another length
				return
			}
			if fo := binary.BigEndian.Uint16(pkt[off+2 : off+4]); fo>>3 != 0 || fo&1 != 0 { // offset, M
				// 10: a real fragment stops our walk.
				if !o.Key.Fragment || o.Key.Proto != pkt[off] || o.Reason != ReasonOK || o.HashType != hash.RSSIPv6 {
					t.Fatalf("IPv6 fragment: %+v %v, gopacket next header %d", o.Key, o.Reason, pkt[off])
				}
				return
			}
		}
		off += (int(pkt[off+1]) + 1) * 8
	}
	if isIPv6Ext(cur) {
		return // gopacket stopped inside the chain (AH, an error, the end of data)
	}
	if o.Reason == ReasonBadExtHeader || o.Key.Proto != cur || o.Key.Fragment {
		t.Fatalf("IPv6 chain %v then %d: our proto %d fragment %v reason %v", chain, cur, o.Key.Proto, o.Key.Fragment, o.Reason)
	}
	compareTransport(t, o, g)
}

// compareTransport: where gopacket decoded a transport header, we read the
// same ports (7: we may read ports where gopacket did not).
func compareTransport(t *testing.T, o *Classification, g *gopacketView) {
	t.Helper()
	var sp, dp uint16
	switch {
	case g.has(layers.LayerTypeTCP):
		sp, dp = uint16(g.tcp.SrcPort), uint16(g.tcp.DstPort)
	case g.has(layers.LayerTypeUDP):
		sp, dp = uint16(g.udp.SrcPort), uint16(g.udp.DstPort)
	case g.has(layers.LayerTypeSCTP):
		sp, dp = uint16(g.sctp.SrcPort), uint16(g.sctp.DstPort)
	default:
		return
	}
	if o.Reason != ReasonOK || o.Key.SrcPort != sp || o.Key.DstPort != dp {
		t.Fatalf("ports %d %d (%v), gopacket %d %d", o.Key.SrcPort, o.Key.DstPort, o.Reason, sp, dp)
	}
}

var updateSeeds = flag.Bool("classify.update-seeds", false, "rewrite testdata/fuzz/FuzzClassify from the classify test cases")

// TestClassifyFuzzSeeds writes the seed corpus of FuzzClassify, one file
// per case of TestClassify, when run with -classify.update-seeds; without
// it, it checks that every seed file is in the `go test fuzz v1` format.
func TestClassifyFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzClassify")
	if *updateSeeds {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		seen := make(map[string]bool)
		for _, tc := range classifyCases() {
			if seen[string(tc.frame)] {
				continue // the same frame under another config
			}
			seen[string(tc.frame)] = true
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", tc.frame)
			name := filepath.Join(dir, seedName(tc.name))
			if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 30 {
		t.Fatalf("%d seed files in %s, want at least 30", len(files), dir)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte("go test fuzz v1\n[]byte(")) {
			t.Errorf("%s: not a go test fuzz v1 []byte file", name)
		}
	}
}

// seedName turns a case name into a file name.
func seedName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			b[i] = '_'
		}
	}
	return string(b)
}
