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
//  4. IPv4 total length 0: gopacket takes the frame length (Windows TSO),
//     as we do (Linux's BIG TCP): no difference left, the number is kept.
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
//     we classify by the outer one (as RSS does, and as we do with
//     tunnels off: FuzzClassifyEncap opens them); the parser is stopped
//     after the outer packet.
//  14. IPv4 whose protocol is an IPv6 extension header's number (0, 43,
//     44, 60, 51): gopacket decodes an extension header after it and the
//     transport header after that; IPv4 has no extension headers, so we
//     hash the addresses.
func FuzzClassify(f *testing.F) {
	h, err := hash.NewToeplitz(hash.MicrosoftKey[:])
	if err != nil {
		f.Fatal(err)
	}
	plain := newTestClassifier(f, h, false, false)
	sym := newTestClassifier(f, h, true, true)
	udp4 := newTestClassifier(f, h, false, true)
	follow, err := NewClassifier(HashConfig{Key: hash.MicrosoftKey[:], UDP4Tuple: true, Fragments: FragmentsFollow})
	if err != nil {
		f.Fatal(err)
	}
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
		checkFollow(t, udp4, follow, frame)

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

// checkFollow checks a FragmentsFollow classifier against the same
// configuration's FragmentsTuple one (tuple): the same on every frame but
// a first fragment, which it hashes with its ports; a fragment marked for
// the dispatcher's table is a fragment, a later one hashed as tuple
// hashes it.
func checkFollow(t *testing.T, tuple, follow *Classifier, frame []byte) {
	t.Helper()
	var w, g Classification
	tuple.Classify(frame, &w)
	follow.Classify(frame, &g)
	if w.frag != fragNone {
		t.Fatalf("FragmentsTuple marked a fragment %d", w.frag)
	}
	switch g.frag {
	case fragNone:
		if !sameClassification(&w, &g) || w.Key != g.Key {
			t.Fatalf("no fragment, yet FragmentsFollow classifies otherwise:\n%+v\n%+v", w, g)
		}
	case fragLater:
		if !g.Key.Fragment || g.FlowID != w.FlowID || g.HashType != w.HashType || g.Key != w.Key {
			t.Fatalf("later fragment: %+v, FragmentsTuple %+v", g, w)
		}
	case fragFirst:
		if !g.Key.Fragment || !w.Key.Fragment || g.Key.Src != w.Key.Src || g.Key.Dst != w.Key.Dst || g.HashType == hash.None {
			t.Fatalf("first fragment: %+v, FragmentsTuple %+v", g, w)
		}
	default:
		t.Fatalf("fragment kind %d", g.frag)
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
	// A frame shorter than an Ethernet header, or an Ethernet frame inside
	// (a pseudowire's, recorded in Encaps) cut short.
	if (len(frame) < ethHeaderLen) != (c.Reason == ReasonShortEthernet && c.Key.NEncap == 0) {
		t.Errorf("frame of %d bytes: reason %v, %d encapsulations", len(frame), c.Reason, c.Key.NEncap)
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
	if !frag && !isIPv6Ext(uint8(ip.Protocol)) { // 6, 14
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

// TestClassifyFuzzSeeds writes the seed corpora of FuzzClassify (one file
// per case of TestClassify) and FuzzClassifyEncap (one per encapsulation
// case) when run with -classify.update-seeds; without it, it checks that
// every seed file is in the `go test fuzz v1` format.
func TestClassifyFuzzSeeds(t *testing.T) {
	for _, target := range []struct {
		name  string
		cases []classifyCase
	}{{"FuzzClassify", classifyCases()}, {"FuzzClassifyEncap", encapCases()}} {
		checkSeeds(t, target.name, target.cases)
	}
}

// checkSeeds writes or checks the seed corpus of one fuzz target.
func checkSeeds(t *testing.T, target string, cases []classifyCase) {
	dir := filepath.Join("testdata", "fuzz", target)
	if *updateSeeds {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		seen := make(map[string]bool)
		for _, tc := range cases {
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
	if len(files) < 30 || len(files) < len(cases)/2 {
		t.Fatalf("%d seed files in %s, want at least 30 and half the %d cases", len(files), dir, len(cases))
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

// FuzzClassifyEncap checks the classifier with TunnelsInner against its
// invariants, against itself with tunnels off, and, where gopacket decodes
// a frame whole, against gopacket's layers (VXLAN, Geneve, GRE, ERSPANII,
// GTPv1U, MPLS, PPPoE, PPP, IPv4 and IPv6 in IP). The invariants:
//
//   - a frame whose inside was not hashed (Depth 0) gets the hash and
//     tuple a classifier with tunnels off gives it, whatever the reason:
//     a tunnel never costs a frame its outer flow;
//   - a frame with a hash has ReasonOK or ReasonShortTransport, or a
//     tunnel's reason, or entered a tunnel (recorded in Encaps) whose
//     inside could not be hashed;
//   - Encaps holds at least Depth tunnels, and nothing past NEncap.
//
// Against gopacket, when we classify fully (ReasonOK) and gopacket decodes
// without an error layer, our tuple is that of gopacket's last IP layer,
// and the number of IP layers is Depth+1. The deliberate differences,
// where the comparison is skipped:
//
//  1. UDP to a port that is no tunnel's from a tunnel's port: gopacket
//     also decodes by the source port, we open by the destination port
//     only (a VTEP's source port is entropy).
//  2. ERSPAN type I (GRE 0x88be without a sequence number): gopacket
//     decodes a type II header, we take the mirrored frame at once, as
//     Linux does; ERSPAN type III (0x22eb): gopacket has no decoder.
//  3. The plain classifier's differences (FuzzClassify) inside a tunnel
//     as outside: 0x9100 tags, IPv6 extension headers and fragments
//     (the protocol and ports are compared only when the transport header
//     follows the last IP header at once).
//  4. A packet gopacket marks truncated (an IP length past the frame):
//     gopacket may stop where we, tolerating a snap-length cut, go on.
//  5. GENEVE options: gopacket walks them by each option's own length,
//     past the options length the header gives; we skip them by the
//     header's length, as RFC 8926 defines.
func FuzzClassifyEncap(f *testing.F) {
	h, err := hash.NewToeplitz(hash.MicrosoftKey[:])
	if err != nil {
		f.Fatal(err)
	}
	on, err := NewClassifier(HashConfig{Key: h.Key(), Tunnels: TunnelsInner})
	if err != nil {
		f.Fatal(err)
	}
	onSym, err := NewClassifier(HashConfig{Key: h.Key(), Tunnels: TunnelsInner, Symmetric: true, UDP4Tuple: true})
	if err != nil {
		f.Fatal(err)
	}
	off := newTestClassifier(f, h, false, false)
	offSym := newTestClassifier(f, h, true, true)
	f.Fuzz(func(t *testing.T, frame []byte) {
		for i, c := range [2][2]*Classifier{{on, off}, {onSym, offSym}} {
			var o, x Classification
			c[0].Classify(frame, &o)
			c[1].Classify(frame, &x)
			checkEncapInvariants(t, h, &o, &x, i == 1)
			checkSplit(t, c[0], frame, &o)
			if i == 0 {
				compareGopacketEncap(t, frame, &o)
			}
		}
	})
}

// checkEncapInvariants checks o, by a classifier with TunnelsInner,
// against x, by one with tunnels off and otherwise alike.
func checkEncapInvariants(t *testing.T, h *hash.Toeplitz, o, x *Classification, symmetric bool) {
	t.Helper()
	checkHash(t, h, o, symmetric)
	k := &o.Key
	if o.Reason >= numReasons || k.NVLAN > MaxVLANDepth || k.NEncap > MaxEncaps || k.Depth > MaxTunnelDepth {
		t.Fatalf("out of range: %+v %v", *k, o.Reason)
	}
	tunnels := 0
	for i, e := range k.Encaps {
		if i >= int(k.NEncap) && e != (Encap{}) {
			t.Fatalf("Encaps %v past NEncap %d", k.Encaps, k.NEncap)
		}
		if i < int(k.NEncap) && e.Kind.Tunnel() {
			tunnels++
		}
	}
	if tunnels < int(k.Depth) {
		t.Fatalf("depth %d with %d tunnels in %v", k.Depth, tunnels, k.Encaps)
	}
	hashed := o.HashType != hash.None
	if hashed && o.Reason != ReasonOK && o.Reason != ReasonShortTransport && tunnels == 0 && !isTunnelReason(o.Reason) {
		t.Fatalf("hashed with reason %v and no tunnel: %+v", o.Reason, *k)
	}
	if !hashed && o.FlowID != 0 {
		t.Fatalf("FlowID %#x without a hash", o.FlowID)
	}
	if o.HashType.Is4Tuple() && k.Fragment {
		t.Fatalf("4-tuple hash %v for a fragment", o.HashType)
	}
	if hashed && k.Depth == 0 && o.Reason != ReasonOK && o.Reason != ReasonShortTransport && !x.HashType.IsHash() {
		t.Fatalf("hashed (%v) where tunnels off gives no hash: %+v", o.Reason, *k)
	}
	if k.Depth == 0 && (o.FlowID != x.FlowID || o.HashType != x.HashType || k.Src != x.Key.Src || k.Dst != x.Key.Dst ||
		k.Proto != x.Key.Proto || k.Fragment != x.Key.Fragment) {
		t.Fatalf("inside not hashed (%v), but the hash is not the outer one:\n%v %#x %+v\n%v %#x %+v",
			o.Reason, o.HashType, o.FlowID, *k, x.HashType, x.FlowID, x.Key)
	}
	if k.Depth == 0 && tunnels == 0 && !sameClassification(o, x) && !isTunnelReason(o.Reason) {
		t.Fatalf("no tunnel entered, yet tunnels change the result:\n%+v\n%+v", *o, *x)
	}
}

// isTunnelReason reports whether r is one only a tunnel gives.
func isTunnelReason(r Reason) bool {
	switch r {
	case ReasonBadVXLAN, ReasonBadGENEVE, ReasonBadGRE, ReasonBadERSPAN, ReasonBadGTPU, ReasonTunnelNonIP, ReasonTooDeep:
		return true
	}
	return false
}

// compareGopacketEncap compares our classification with TunnelsInner
// with gopacket's full decoding, except where the rules differ on
// purpose (see FuzzClassifyEncap).
func compareGopacketEncap(t *testing.T, frame []byte, o *Classification) {
	t.Helper()
	if o.Reason != ReasonOK {
		return
	}
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.DecodeOptions{NoCopy: true})
	if p.ErrorLayer() != nil || p.Metadata().Truncated { // 4
		return
	}
	for _, e := range o.Key.Encaps[:o.Key.NEncap] {
		if e.Kind == EncapERSPAN1 || e.Kind == EncapERSPAN3 { // 2
			return
		}
	}
	ls := p.Layers()
	var ips []int // indexes of the IP layers
	for i, l := range ls {
		switch l.LayerType() {
		case layers.LayerTypeIPv4, layers.LayerTypeIPv6:
			ips = append(ips, i)
		case layers.LayerTypeDot1Q:
			if d := l.(*layers.Dot1Q); d.Type == 0x9100 { // 3
				return
			}
		case layers.LayerTypeUDP:
			if u := l.(*layers.UDP); u.DstPort.LayerType() == gopacket.LayerTypePayload && u.SrcPort.LayerType() != gopacket.LayerTypePayload { // 1
				return
			}
		case layers.LayerTypeEthernet:
			if e := l.(*layers.Ethernet); e.EthernetType == 0x9100 { // 3
				return
			}
		case layers.LayerTypeGeneve:
			if c := l.LayerContents(); len(c) != geneveHeaderLen+int(c[0]&0x3f)<<2 { // 5
				return
			}
		}
	}
	if len(ips) == 0 {
		return // the outer header itself is one gopacket takes otherwise (FuzzClassify's exceptions)
	}
	if len(ips) != int(o.Key.Depth)+1 {
		t.Fatalf("gopacket decoded %d IP layers (%v), we are %d tunnels deep: %+v", len(ips), layerTypes(ls), o.Key.Depth, o.Key)
	}
	last := ls[ips[len(ips)-1]]
	var src, dst netip.Addr
	var proto uint8
	switch ip := last.(type) {
	case *layers.IPv4:
		src, dst, proto = addrOf(ip.SrcIP), addrOf(ip.DstIP), uint8(ip.Protocol)
	case *layers.IPv6:
		src, dst, proto = addrOf(ip.SrcIP), addrOf(ip.DstIP), uint8(ip.NextHeader)
	}
	if o.Key.Src != src || o.Key.Dst != dst {
		t.Fatalf("innermost %v -> %v, gopacket %v -> %v (%v)", o.Key.Src, o.Key.Dst, src, dst, layerTypes(ls))
	}
	if ips[len(ips)-1]+1 >= len(ls) || o.Key.Fragment {
		return
	}
	var sp, dp uint16
	switch l := ls[ips[len(ips)-1]+1].(type) {
	case *layers.TCP:
		sp, dp = uint16(l.SrcPort), uint16(l.DstPort)
	case *layers.UDP:
		sp, dp = uint16(l.SrcPort), uint16(l.DstPort)
	case *layers.SCTP:
		sp, dp = uint16(l.SrcPort), uint16(l.DstPort)
	default:
		return
	}
	if o.Key.Proto != proto || o.Key.SrcPort != sp || o.Key.DstPort != dp {
		t.Fatalf("innermost proto %d ports %d %d, gopacket %d %d %d (%v)", o.Key.Proto, o.Key.SrcPort, o.Key.DstPort, proto, sp, dp, layerTypes(ls))
	}
}

func layerTypes(ls []gopacket.Layer) []gopacket.LayerType {
	var ts []gopacket.LayerType
	for _, l := range ls {
		ts = append(ts, l.LayerType())
	}
	return ts
}
