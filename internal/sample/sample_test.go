package sample_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/rpsgo/rps/internal/sample"
	sg "github.com/rpsgo/rps/internal/synth"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// TestEmbeddedIsGenerated regenerates the sample and compares it with the
// embedded file, so the generator and the file cannot drift apart.
func TestEmbeddedIsGenerated(t *testing.T) {
	b := generate(t, sg.Sample)
	if !bytes.Equal(b, sample.Pcap) {
		t.Fatalf("the embedded %s (%d bytes) differs from the generator's output (%d bytes): run go generate ./examples/sample",
			sample.Name, len(sample.Pcap), len(b))
	}
	r := sample.Reader()
	if r.Len() != len(sample.Pcap) {
		t.Errorf("Reader has %d bytes", r.Len())
	}
}

// generate writes a capture's packets as internal/sample/gen does.
func generate(t *testing.T, packets func() ([]sg.Packet, error)) []byte {
	t.Helper()
	ps, err := packets()
	var b bytes.Buffer
	var w *pcapfile.Writer
	if err == nil {
		w, err = pcapfile.NewWriter(&b, pcapfile.LinkTypeEthernet, pcapfile.WriterOptions{SnapLen: sg.SampleSnapLen})
	}
	if err == nil {
		err = sg.WriteAll(w, ps)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

type record struct {
	ts      time.Time
	data    []byte
	origLen int
}

// parse reads the classic pcap file by hand (independently of the
// steer/pcapfile reader).
func parse(t *testing.T, b []byte) []record {
	t.Helper()
	if len(b) < 24 || binary.LittleEndian.Uint32(b) != 0xa1b2c3d4 || binary.LittleEndian.Uint32(b[20:]) != 1 {
		t.Fatalf("not a little-endian microsecond Ethernet pcap file")
	}
	var recs []record
	for off := 24; off < len(b); {
		if off+16 > len(b) {
			t.Fatalf("truncated record header at %d", off)
		}
		h := b[off : off+16]
		capLen := int(binary.LittleEndian.Uint32(h[8:]))
		origLen := int(binary.LittleEndian.Uint32(h[12:]))
		if off+16+capLen > len(b) || capLen > origLen {
			t.Fatalf("bad record at %d", off)
		}
		ts := time.Unix(int64(binary.LittleEndian.Uint32(h)), int64(binary.LittleEndian.Uint32(h[4:]))*1000)
		recs = append(recs, record{ts, b[off+16 : off+16+capLen], origLen})
		off += 16 + capLen
	}
	return recs
}

type endpoint struct {
	addr netip.Addr
	port uint16
}

type flowKey struct {
	a, b endpoint // a < b
	tags string
}

// tcpSide tracks one direction of a TCP connection.
type tcpSide struct {
	started bool
	next    uint32 // next expected sequence number
	acked   uint32 // highest ACK this side sent
	fin     bool
	data    int // data segments
	first   []byte
}

type tcpFlow struct {
	sides  map[endpoint]*tcpSide
	client endpoint
	syns   int
}

func addrOf(ip []byte) netip.Addr { a, _ := netip.AddrFromSlice(ip); return a.Unmap() }

func TestContents(t *testing.T) {
	recs := parse(t, sample.Pcap)
	if n := len(recs); n < 4000 || n > 8000 {
		t.Errorf("%d frames, want 4000..8000", n)
	}
	if len(sample.Pcap) > 1500*1024 {
		t.Errorf("%d bytes, want under 1.5 MiB", len(sample.Pcap))
	}

	counts := map[string]int{}
	flows := map[flowKey]*tcpFlow{}
	var order []flowKey
	prev := sg.SampleStart
	for i, r := range recs {
		if r.ts.Before(prev) {
			t.Fatalf("frame %d: time %v before the previous %v", i, r.ts, prev)
		}
		prev = r.ts
		if r.origLen > len(r.data) {
			counts["snapcut"]++
			continue
		}
		if m := malformed(r.data); m != "" {
			counts["malformed"]++
			counts["malformed-"+m]++
			continue
		}
		pkt := gopacket.NewPacket(r.data, layers.LayerTypeEthernet, gopacket.Default)
		if el := pkt.ErrorLayer(); el != nil {
			t.Errorf("frame %d does not decode: %v", i, el.Error())
			continue
		}
		var tags string
		eth := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		for _, l := range pkt.Layers() {
			if q, ok := l.(*layers.Dot1Q); ok {
				tags += fmt.Sprintf("/%d", q.VLANIdentifier)
			}
		}
		if eth.EthernetType == layers.EthernetTypeQinQ {
			tags = "qinq" + tags
		}
		var src, dst netip.Addr
		v6 := false
		if ip := pkt.Layer(layers.LayerTypeIPv4); ip != nil {
			ip := ip.(*layers.IPv4)
			src, dst = addrOf(ip.SrcIP), addrOf(ip.DstIP)
			if ip.Flags&layers.IPv4MoreFragments != 0 || ip.FragOffset != 0 {
				// gopacket does not decode a first fragment's UDP header.
				if ip.FragOffset == 0 && len(ip.Payload) >= 8 && binary.BigEndian.Uint16(ip.Payload[2:]) == 9000 {
					counts["frag4-first"]++
				} else if ip.FragOffset != 0 {
					counts["frag4-later"]++
				}
				continue
			}
		}
		if ip := pkt.Layer(layers.LayerTypeIPv6); ip != nil {
			ip := ip.(*layers.IPv6)
			src, dst, v6 = addrOf(ip.SrcIP), addrOf(ip.DstIP), true
		}
		switch {
		case pkt.Layer(layers.LayerTypeIPv6Fragment) != nil:
			counts["frag6"]++
		case pkt.Layer(layers.LayerTypeIPv6HopByHop) != nil && pkt.Layer(layers.LayerTypeUDP) != nil:
			counts["hbh-udp6"]++
		case pkt.Layer(layers.LayerTypeARP) != nil:
			counts[fmt.Sprintf("arp-%d", pkt.Layer(layers.LayerTypeARP).(*layers.ARP).Operation)]++
		case pkt.Layer(layers.LayerTypeLinkLayerDiscovery) != nil:
			counts["lldp"]++
		case pkt.Layer(layers.LayerTypeICMPv4) != nil:
			counts[fmt.Sprintf("icmp4-%d", pkt.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4).TypeCode.Type())]++
		case pkt.Layer(layers.LayerTypeICMPv6) != nil:
			counts[fmt.Sprintf("icmp6-%d", pkt.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6).TypeCode.Type())]++
		case pkt.Layer(layers.LayerTypeDNS) != nil:
			d := pkt.Layer(layers.LayerTypeDNS).(*layers.DNS)
			kind := "query"
			if d.QR {
				kind = "response"
				if len(d.Answers) != 1 {
					t.Errorf("frame %d: DNS response with %d answers", i, len(d.Answers))
				}
			}
			net := "dns4"
			if v6 {
				net = "dns6"
			}
			counts[net+tags+"-"+kind]++
		case pkt.Layer(layers.LayerTypeUDP) != nil:
			u := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
			counts[fmt.Sprintf("udp-%d", u.DstPort)]++
		case pkt.Layer(layers.LayerTypeTCP) != nil:
			tcp := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
			if pkt.Layer(layers.LayerTypeIPv6Destination) != nil {
				counts["destopts-tcp6"]++
			}
			from, to := endpoint{src, uint16(tcp.SrcPort)}, endpoint{dst, uint16(tcp.DstPort)}
			k := flowKey{from, to, tags}
			if to.addr.Less(from.addr) || to.addr == from.addr && to.port < from.port {
				k.a, k.b = to, from
			}
			f := flows[k]
			if f == nil {
				f = &tcpFlow{sides: map[endpoint]*tcpSide{from: {}, to: {}}}
				flows[k] = f
				order = append(order, k)
			}
			checkSegment(t, i, f, from, to, tcp)
		default:
			t.Errorf("frame %d: unexpected content %v", i, pkt)
		}
	}

	// Count TCP connections by kind and check they are complete.
	conns := map[string]int{}
	elephants, httpText := 0, 0
	for _, k := range order {
		f := flows[k]
		kind := "tcp4"
		if k.a.addr.Is6() {
			kind = "tcp6"
		}
		conns[kind+k.tags]++
		if f.syns != 1 {
			t.Errorf("flow %v: %d SYNs", k, f.syns)
		}
		for ep, s := range f.sides {
			if !s.fin || s.acked != f.sides[other(k, ep)].next {
				t.Errorf("flow %v: side %v not closed cleanly (fin %v, acked %d of %d)", k, ep, s.fin, s.acked, f.sides[other(k, ep)].next)
			}
			if s.data >= sg.ElephantSegments {
				elephants++
			}
			if bytes.HasPrefix(s.first, []byte("HTTP/1.1 200 OK\r\n")) {
				httpText++
			}
		}
	}
	want := map[string]int{
		"tcp4":            sg.TCPv4Connections + sg.Elephants,
		"tcp4/100":        sg.VLANConnections,
		"tcp4qinq/300/42": sg.QinQConnections,
		"tcp6":            sg.TCPv6Connections + sg.DestOpts,
	}
	for k, n := range want {
		if conns[k] != n {
			t.Errorf("%d %s connections, want %d (all: %v)", conns[k], k, n, conns)
		}
	}
	if len(conns) != len(want) {
		t.Errorf("connection kinds %v, want those of %v", conns, want)
	}
	if elephants != sg.Elephants {
		t.Errorf("%d flows with at least %d data segments, want %d", elephants, sg.ElephantSegments, sg.Elephants)
	}
	if httpText < 50 {
		t.Errorf("only %d HTTP responses start a server's data", httpText)
	}

	wantCounts := map[string]int{
		"dns4-query": sg.DNSv4, "dns4-response": sg.DNSv4,
		"dns4/200-query": sg.VLANDNS, "dns4/200-response": sg.VLANDNS,
		"dns6-query": sg.DNSv6, "dns6-response": sg.DNSv6,
		"udp-123": 2 * sg.NTP, "udp-514": sg.Syslog,
		"hbh-udp6": sg.HopByHop, "destopts-tcp6": -1,
		"icmp4-8": sg.Pings, "icmp4-0": sg.Pings,
		"icmp6-128": sg.Pings6, "icmp6-129": sg.Pings6,
		"icmp6-135": sg.Neighbors6, "icmp6-136": sg.Neighbors6,
		"frag4-first": sg.FragDatagrams4, "frag4-later": 2 * sg.FragDatagrams4,
		"frag6": 3 * sg.FragDatagrams6,
		"arp-1": sg.ARPs, "arp-2": sg.ARPs,
		"lldp":      sg.LLDPs,
		"snapcut":   sg.SnapCut,
		"malformed": sg.Malformed, "malformed-runt": 1, "malformed-ihl": 1, "malformed-ipv4-past-frame": 1,
		"malformed-short-tcp": 2, "malformed-short-ipv6": 1, "malformed-vlan-depth": 1,
	}
	for k, n := range wantCounts {
		if n == -1 {
			if counts[k] < 6 {
				t.Errorf("%d %s frames, want a whole connection", counts[k], k)
			}
			continue
		}
		if counts[k] != n {
			t.Errorf("%d %s frames, want %d", counts[k], k, n)
		}
	}
	for k := range counts {
		if _, ok := wantCounts[k]; !ok {
			t.Errorf("unexpected category %s: %d frames", k, counts[k])
		}
	}
	t.Logf("%d frames, %d bytes, %d TCP connections, %v", len(recs), len(sample.Pcap), len(flows), counts)
}

func other(k flowKey, ep endpoint) endpoint {
	if ep == k.a {
		return k.b
	}
	return k.a
}

// checkSegment checks that sequence numbers are contiguous in each
// direction and that ACKs never exceed what the peer has sent, never go
// back, and acknowledge the peer's FIN only after it.
func checkSegment(t *testing.T, i int, f *tcpFlow, from, to endpoint, tcp *layers.TCP) {
	t.Helper()
	s, peer := f.sides[from], f.sides[to]
	if tcp.SYN {
		if !tcp.ACK {
			f.syns++
			f.client = from
		}
		if s.started {
			t.Errorf("frame %d: a second SYN from %v", i, from)
		}
		s.started, s.next = true, tcp.Seq+1
	} else {
		if !s.started {
			t.Errorf("frame %d: a segment from %v before its SYN", i, from)
			return
		}
		if tcp.Seq != s.next {
			t.Errorf("frame %d: seq %d from %v, want %d", i, tcp.Seq, from, s.next)
		}
		s.next += uint32(len(tcp.Payload))
		if len(tcp.Payload) > 0 {
			s.data++
			if s.first == nil {
				s.first = tcp.Payload
			}
		}
		if tcp.FIN {
			s.next++
			s.fin = true
		}
	}
	if tcp.ACK {
		if !peer.started || int32(tcp.Ack-peer.next) > 0 || int32(tcp.Ack-s.acked) < 0 && s.acked != 0 {
			t.Errorf("frame %d: ack %d from %v; peer next %d, previous ack %d", i, tcp.Ack, from, peer.next, s.acked)
		}
		s.acked = tcp.Ack
	}
}

// malformed names what is wrong with a frame the classifier must reject,
// or returns "".
func malformed(f []byte) string {
	if len(f) < 14 {
		return "runt"
	}
	et := binary.BigEndian.Uint16(f[12:])
	p := f[14:]
	tags := 0
	for et == 0x8100 || et == 0x88a8 {
		tags++
		if len(p) < 4 {
			return "runt-tag"
		}
		et = binary.BigEndian.Uint16(p[2:])
		p = p[4:]
	}
	if tags > 2 {
		return "vlan-depth"
	}
	switch et {
	case 0x0800:
		if len(p) < 20 {
			return "short-ipv4"
		}
		ihl := int(p[0]&0xf) * 4
		if ihl < 20 {
			return "ihl"
		}
		if ihl > len(p) {
			return "ipv4-past-frame"
		}
		tot := int(binary.BigEndian.Uint16(p[2:]))
		frag := binary.BigEndian.Uint16(p[6:])&0x3fff != 0
		if p[9] == 6 && !frag && tot-ihl < 20 {
			return "short-tcp"
		}
	case 0x86dd:
		if len(p) < 40 {
			return "short-ipv6"
		}
	}
	return ""
}
