// This file builds the sample capture (Sample) and the tunnels capture
// (SampleTunnels) that examples/sample and internal/sample embed. They
// are deterministic: a fixed pseudo-random generator (splitmix64, defined
// here so that no library change can alter its sequence), a fixed start
// time and fixed addresses. Addresses come from the documentation and
// private ranges (10.0.0.0/8, 192.0.2.0/24, 198.51.100.0/24,
// 2001:db8::/32). The capture point is a tap next to the clients: a
// client's packets appear at once, the server's answers one round trip
// later.

package synth

import (
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// What the sample holds; the sample tests count these by decoding it.
const (
	TCPv4Connections = 150 // ordinary TCP/IPv4 connections, untagged (HTTP 80, TLS 443, SSH 22, PostgreSQL 5432)
	Elephants        = 3   // long TCP/IPv4 transfers, untagged, with many segments each
	ElephantSegments = 100 // fewest data segments in an elephant
	VLANConnections  = 8   // TCP/IPv4 connections on 802.1Q VLAN 100
	VLANDNS          = 20  // DNS query/response pairs on VLAN 200
	QinQConnections  = 2   // TCP/IPv4 connections with an 802.1ad S-tag 300 and an 802.1Q C-tag 42
	TCPv6Connections = 20  // TCP/IPv6 connections
	DNSv4            = 200 // DNS query/response pairs over UDP/IPv4, untagged
	DNSv6            = 30  // DNS query/response pairs over UDP/IPv6
	NTP              = 20  // NTP request/response pairs
	Syslog           = 30  // syslog messages
	HopByHop         = 10  // UDP/IPv6 datagrams after a hop-by-hop options header
	DestOpts         = 1   // TCP/IPv6 connections with a destination options header in every segment
	Pings            = 20  // ICMP echo request/reply pairs
	Pings6           = 10  // ICMPv6 echo request/reply pairs
	Neighbors6       = 4   // ICMPv6 neighbor solicitation/advertisement pairs
	FragDatagrams4   = 3   // UDP/IPv4 datagrams sent in 3 fragments each
	FragDatagrams6   = 1   // UDP/IPv6 datagram sent in 3 fragments
	ARPs             = 10  // ARP request/reply pairs
	LLDPs            = 3   // LLDP frames
	SnapCut          = 2   // frames captured with fewer bytes than they had on the wire

	// What the tunnels capture holds (SampleTunnels): TCP/IPv4
	// connections in tunnels and shims, each kind between one pair of
	// endpoints, which the classifier steers by their inner flow only with
	// tunnels opened (MPLS and PPPoE always), and a few odd frames.
	VXLANConnections  = 48 // inside VXLAN, VNI 5001, between two VTEPs (UDP 4789)
	GENEVEConnections = 4  // inside GENEVE, VNI 77, an Ethernet payload (UDP 6081)
	GREConnections    = 4  // inside GRE with key 9, an IPv4 payload
	ERSPANConnections = 2  // mirrored by ERSPAN type II, session 5, over GRE
	GTPUConnections   = 4  // inside GTP-U G-PDUs, a TEID per user and direction (UDP 2152)
	IPIPConnections   = 2  // IPv4 inside IPv4
	MPLSConnections   = 4  // under MPLS label 1600
	PPPoEConnections  = 4  // inside PPPoE sessions (PPP protocol 0x0021), one per client
	NestedConnections = 2  // inside GRE (key 7) inside VXLAN (VNI 5002)
	InnerVLANConns    = 2  // inside VXLAN (VNI 5003) with an 802.1Q tag 100 on the inner frame
	PseudowireConns   = 2  // an Ethernet pseudowire: MPLS label 2000, a control word, the frame
	// The odd frames of the tunnels capture, each kind twice: ARP inside
	// VXLAN, VXLAN headers cut short, GTP-U echo requests, PPPoE discovery
	// (PADI) and LCP echo requests, and the two fragments of a VXLAN
	// datagram fragmented on the outer path.
	TunnelOddities = 2

	// The malformed frames, one each: a 10-byte frame, IPv4 with IHL 3,
	// IPv4 whose header runs past the frame, TCP headers of 10 and 2 bytes,
	// an IPv6 header cut at 20 bytes, and five VLAN tags.
	Malformed = 7

	// SampleSnapLen is the snap length of the captures' file headers.
	SampleSnapLen = 65535

	// The seeds of the captures' pseudo-random sequences.
	sampleSeed  = 0x5eed_2025_0301
	tunnelsSeed = 0x5eed_2026_1201
)

// SampleStart is the time of the captures' first frames.
var SampleStart = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// Sample returns the sample capture's packets, in time order; written
// with a snap length of SampleSnapLen (as a pcap file, little-endian with
// microsecond timestamps, by internal/sample/gen) they are
// examples/sample's file.
func Sample() ([]Packet, error) {
	g := &gen{rng: rng(sampleSeed), ports: map[string]bool{}}
	g.build()
	return g.packets()
}

// SampleTunnels returns the tunnels capture's packets, as Sample does: a
// minute of TCP connections carried in VXLAN (most of them), GENEVE, GRE,
// ERSPAN, GTP-U, IP in IP, MPLS and PPPoE, and the odd frames of
// TunnelOddities.
func SampleTunnels() ([]Packet, error) {
	g := &gen{rng: rng(tunnelsSeed), ports: map[string]bool{}}
	g.tunnels()
	g.tunnelOddities()
	return g.packets()
}

// packets sorts the events by time and returns them as packets.
func (g *gen) packets() ([]Packet, error) {
	if g.err != nil {
		return nil, fmt.Errorf("synth: the sample: %w", g.err)
	}
	slices.SortStableFunc(g.evs, func(a, b event) int { return int(a.t - b.t) })
	ps := make([]Packet, len(g.evs))
	for i, e := range g.evs {
		ps[i] = Packet{Time: SampleStart.Add(e.t), Data: e.data, WireLen: e.orig}
	}
	return ps, nil
}

// rng is splitmix64.
type rng uint64

func (r *rng) next() uint64 {
	*r += 0x9e3779b97f4a7c15
	z := uint64(*r)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// intn returns a number in [0, n).
func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

// between returns a number in [lo, hi].
func (r *rng) between(lo, hi int) int { return lo + r.intn(hi-lo+1) }

// dur returns a duration in [lo, hi].
func (r *rng) dur(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.next()%uint64(hi-lo+1))
}

func pick[T any](r *rng, xs []T) T { return xs[r.intn(len(xs))] }

type event struct {
	t    time.Duration
	data []byte
	orig int
}

type gen struct {
	rng   rng
	evs   []event
	err   error
	ipid  uint16
	ports map[string]bool
}

var serializeOpts = gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}

func (g *gen) serialize(ls ...gopacket.SerializableLayer) []byte {
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, serializeOpts, ls...); err != nil {
		if g.err == nil {
			g.err = err
		}
		return nil
	}
	return slices.Clone(buf.Bytes())
}

func (g *gen) add(t time.Duration, data []byte) {
	g.evs = append(g.evs, event{t: t.Truncate(time.Microsecond), data: data, orig: len(data)})
}

func (g *gen) emit(t time.Duration, ls ...gopacket.SerializableLayer) {
	g.add(t, g.serialize(ls...))
}

// emitOn is emit for a packet on path p from the client or the server:
// encapsulated when the path says so.
func (g *gen) emitOn(p path, fromClient bool, t time.Duration, ls ...gopacket.SerializableLayer) {
	if p.wrap == nil {
		g.emit(t, ls...)
		return
	}
	if f := g.serialize(ls...); f != nil {
		g.add(t, p.wrap(g, f, fromClient))
	}
}

// lldpMAC is LLDP's multicast address (nearest bridge).
var lldpMAC = net.HardwareAddr{0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e}

func v4(a, b, c, d byte) net.IP { return net.IPv4(a, b, c, d).To4() }

func v6(s string) net.IP { return net.ParseIP(s) }

// tag is one VLAN tag, outermost first.
type tag struct {
	tpid layers.EthernetType
	vid  uint16
}

// path is the link and network layers between a client and a server.
type path struct {
	cIP, sIP net.IP
	tags     []tag
	// wrap, when set, encapsulates each frame of the path (an untagged
	// Ethernet frame): a tunnel or a shim between the tap and the hosts.
	wrap func(g *gen, frame []byte, fromClient bool) []byte
}

func (p path) v6() bool { return p.cIP.To4() == nil }

// layers returns the Ethernet, VLAN and IP layers of a packet, and the IP
// layer for transport checksums.
func (g *gen) layers(p path, fromClient bool, proto layers.IPProtocol) ([]gopacket.SerializableLayer, gopacket.NetworkLayer) {
	src, dst := p.cIP, p.sIP
	smac, dmac := hostMAC(p.cIP), routerMAC
	hop := uint8(64)
	if !fromClient {
		src, dst = dst, src
		smac, dmac = dmac, smac
		hop = 52
	}
	ipType := layers.EthernetTypeIPv4
	if p.v6() {
		ipType = layers.EthernetTypeIPv6
	}
	eth := &layers.Ethernet{SrcMAC: smac, DstMAC: dmac, EthernetType: ipType}
	ls := []gopacket.SerializableLayer{eth}
	for i, t := range p.tags {
		if i == 0 {
			eth.EthernetType = t.tpid
		}
		next := ipType
		if i+1 < len(p.tags) {
			next = p.tags[i+1].tpid
		}
		ls = append(ls, &layers.Dot1Q{VLANIdentifier: t.vid, Type: next})
	}
	if p.v6() {
		ip := &layers.IPv6{Version: 6, HopLimit: hop, NextHeader: proto, SrcIP: src, DstIP: dst}
		return append(ls, ip), ip
	}
	g.ipid++
	ip := &layers.IPv4{Version: 4, TTL: hop, Protocol: proto, SrcIP: src, DstIP: dst, Id: g.ipid}
	if proto == layers.IPProtocolTCP {
		ip.Flags = layers.IPv4DontFragment
	}
	return append(ls, ip), ip
}

// ephemeral picks a client port not used before with this client and
// server port.
func (g *gen) ephemeral(cIP net.IP, sPort uint16) uint16 {
	for {
		port := uint16(g.rng.between(32768, 60999))
		k := fmt.Sprint(cIP, port, sPort)
		if !g.ports[k] {
			g.ports[k] = true
			return port
		}
	}
}

// conn is a TCP connection; side 0 is the client, side 1 the server.
type conn struct {
	g            *gen
	p            path
	cPort, sPort uint16
	next         [2]uint32 // the next sequence number each side sends
	t            time.Duration
	rtt          time.Duration
	mss          int
	ackDelay     time.Duration // how long the client takes to acknowledge data
	destOpts     bool          // put an IPv6 destination options header in every segment
}

func (g *gen) newConn(p path, sPort uint16, start time.Duration) *conn {
	return &conn{
		g: g, p: p, sPort: sPort, cPort: g.ephemeral(p.cIP, sPort),
		next: [2]uint32{uint32(g.rng.next()), uint32(g.rng.next())},
		t:    start, rtt: g.rng.dur(time.Millisecond, 80*time.Millisecond), mss: 1448,
		ackDelay: g.rng.dur(20*time.Microsecond, 200*time.Microsecond),
	}
}

type flags struct{ syn, ack, psh, fin, rst bool }

// seg sends a segment at time t from one side, with the sequence number
// that side is at and, with ACK, everything the other side has sent.
func (c *conn) seg(t time.Duration, fromClient bool, f flags, payload []byte) {
	side, other := 0, 1
	sp, dp := c.cPort, c.sPort
	if !fromClient {
		side, other = 1, 0
		sp, dp = dp, sp
	}
	tcp := &layers.TCP{
		SrcPort: layers.TCPPort(sp), DstPort: layers.TCPPort(dp),
		Seq: c.next[side], SYN: f.syn, ACK: f.ack, PSH: f.psh, FIN: f.fin, RST: f.rst,
		Window: 64240,
	}
	if f.ack {
		tcp.Ack = c.next[other]
		tcp.Window = 501
	}
	if f.syn {
		tcp.Options = []layers.TCPOption{
			{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{0x05, 0xb4}},
			{OptionType: layers.TCPOptionKindSACKPermitted, OptionLength: 2},
			{OptionType: layers.TCPOptionKindNop},
			{OptionType: layers.TCPOptionKindWindowScale, OptionLength: 3, OptionData: []byte{7}},
		}
	}
	ls, nl := c.g.layers(c.p, fromClient, layers.IPProtocolTCP)
	if err := tcp.SetNetworkLayerForChecksum(nl); err != nil && c.g.err == nil {
		c.g.err = err
	}
	if c.destOpts {
		// Serialize TCP alone (its checksum covers the IPv6 pseudo-header,
		// which names the upper-layer length), then put the options header
		// in front: next header TCP, length 0 (8 bytes), a PadN of 4 bytes.
		nl.(*layers.IPv6).NextHeader = layers.IPProtocolIPv6Destination
		l4 := c.g.serialize(tcp, gopacket.Payload(payload))
		ext := []byte{byte(layers.IPProtocolTCP), 0, 1, 4, 0, 0, 0, 0}
		c.g.emit(t, append(ls, gopacket.Payload(append(ext, l4...)))...)
	} else {
		c.g.emitOn(c.p, fromClient, t, append(ls, tcp, gopacket.Payload(payload))...)
	}
	c.next[side] += uint32(len(payload))
	if f.syn || f.fin {
		c.next[side]++
	}
}

func (c *conn) think() time.Duration { return c.g.rng.dur(20*time.Microsecond, 400*time.Microsecond) }

func (c *conn) handshake() {
	c.seg(c.t, true, flags{syn: true}, nil)
	c.t += c.rtt
	c.seg(c.t, false, flags{syn: true, ack: true}, nil)
	c.t += c.think()
	c.seg(c.t, true, flags{ack: true}, nil)
}

// send sends data from one side in MSS-sized segments and returns when the
// last is sent. The receiver acknowledges every second segment and the
// last one, one round trip later as the tap sees it when the receiver is
// the server, at once when it is the client.
func (c *conn) send(fromClient bool, data []byte, gap time.Duration) {
	if !fromClient {
		c.t += c.rtt // the request reaches the server, the answer comes back
	}
	c.t += c.think()
	n := 0
	for off := 0; off < len(data); off += c.mss {
		end := min(off+c.mss, len(data))
		c.seg(c.t, fromClient, flags{ack: true, psh: end == len(data)}, data[off:end])
		n++
		if n%2 == 0 || end == len(data) {
			at := c.t + c.ackDelay
			if fromClient {
				at = c.t + c.rtt
			}
			c.seg(at, !fromClient, flags{ack: true}, nil)
			if end == len(data) {
				c.t = at
			}
		}
		c.t += gap
	}
}

func (c *conn) close(clientFirst bool) {
	c.t += c.think()
	c.seg(c.t, clientFirst, flags{fin: true, ack: true}, nil)
	c.t += c.rtt
	c.seg(c.t, !clientFirst, flags{fin: true, ack: true}, nil)
	if clientFirst {
		c.t += c.think()
	} else {
		c.t += c.rtt
	}
	c.seg(c.t, clientFirst, flags{ack: true}, nil)
}

var (
	words = strings.Fields("alpha bravo charlie delta echo foxtrot golf hotel india juliett kilo lima mike " +
		"november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu")
	paths = []string{"/", "/index.html", "/api/v1/items", "/api/v1/users/42", "/static/app.js",
		"/static/style.css", "/images/logo.png", "/search?q=steering", "/docs/netisr", "/health"}
	agents = []string{"curl/8.5.0", "Mozilla/5.0 (X11; Linux x86_64)", "rps-sample/1.0", "Go-http-client/1.1"}
)

// text returns n bytes of lines of words.
func (g *gen) text(n int) []byte {
	var b strings.Builder
	line := 0
	for b.Len() < n {
		line++
		fmt.Fprintf(&b, "%04d %s %s %s\n", line, pick(&g.rng, words), pick(&g.rng, words), pick(&g.rng, words))
	}
	return []byte(b.String()[:n])
}

func (g *gen) random(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(g.rng.next())
	}
	return b
}

func (g *gen) httpRequest(host string) []byte {
	return fmt.Appendf(nil, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: %s\r\nAccept: */*\r\n\r\n",
		pick(&g.rng, paths), host, pick(&g.rng, agents))
}

func (g *gen) httpResponse(body int) []byte {
	b := fmt.Appendf(nil, "HTTP/1.1 200 OK\r\nServer: rps-sample\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n", body)
	return append(b, g.text(body)...)
}

// tlsRecord is a TLS-looking record: type, version 3.3, length, random.
func (g *gen) tlsRecord(typ byte, n int) []byte {
	return append([]byte{typ, 3, 3, byte(n >> 8), byte(n)}, g.random(n)...)
}

// pgMessage is a PostgreSQL protocol message: type, length, body.
func pgMessage(typ byte, body string) []byte {
	b := []byte{typ}
	b = binary.BigEndian.AppendUint32(b, uint32(4+len(body)+1))
	return append(append(b, body...), 0)
}

// conversation runs a connection's exchange by its server port.
func (g *gen) conversation(c *conn, host string) {
	c.handshake()
	switch c.sPort {
	case 80:
		for range g.rng.between(1, 3) {
			c.send(true, g.httpRequest(host), 0)
			c.send(false, g.httpResponse(g.rng.between(60, 1200)), 12*time.Microsecond)
		}
	case 443:
		c.send(true, g.tlsRecord(22, g.rng.between(200, 500)), 0)
		c.send(false, g.tlsRecord(22, g.rng.between(1200, 2600)), 12*time.Microsecond)
		c.send(true, g.tlsRecord(20, 1), 0)
		for range g.rng.between(1, 2) {
			c.send(true, g.tlsRecord(23, g.rng.between(100, 400)), 0)
			c.send(false, g.tlsRecord(23, g.rng.between(200, 1400)), 12*time.Microsecond)
		}
	case 22:
		c.send(true, []byte("SSH-2.0-OpenSSH_9.6p1 Debian-4\r\n"), 0)
		c.send(false, []byte("SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n"), 0)
		for range g.rng.between(2, 4) {
			c.send(true, g.random(g.rng.between(36, 200)), 0)
			c.send(false, g.random(g.rng.between(36, 600)), 12*time.Microsecond)
		}
	case 5432:
		c.send(true, append([]byte{0, 0, 0, 41, 0, 3, 0, 0}, "user\x00app\x00database\x00inventory\x00\x00"...), 0)
		c.send(false, pgMessage('R', "\x00\x00\x00\x00"), 0)
		for range g.rng.between(1, 3) {
			q := fmt.Sprintf("SELECT name, qty FROM items WHERE id = %d;", g.rng.between(1, 9999))
			c.send(true, pgMessage('Q', q), 0)
			c.send(false, pgMessage('D', string(g.text(g.rng.between(40, 300)))), 0)
		}
	}
	c.close(g.rng.intn(4) != 0)
}

var servers = []struct {
	ip   net.IP
	port uint16
	host string
	n    int // connections
}{
	{v4(192, 0, 2, 10), 80, "www.example.com", 50},
	{v4(198, 51, 100, 20), 80, "static.example.net", 20},
	{v4(192, 0, 2, 11), 443, "shop.example.com", 40},
	{v4(192, 0, 2, 12), 22, "ssh.example.com", 20},
	{v4(192, 0, 2, 13), 5432, "db.example.com", 20},
}

const span = 55 * time.Second // flows start within this time

func (g *gen) client() net.IP {
	return v4(10, 0, byte(g.rng.intn(4)), byte(g.rng.between(2, 250)))
}

func (g *gen) build() {
	// Ordinary TCP/IPv4 connections.
	for _, s := range servers {
		for range s.n {
			c := g.newConn(path{cIP: g.client(), sIP: s.ip}, s.port, g.rng.dur(0, span))
			g.conversation(c, s.host)
		}
	}
	// Elephants: two downloads and an upload, each with many segments.
	for i, e := range []struct {
		port      uint16
		fromSrv   bool
		segs, mss int
	}{{80, true, 250, 900}, {443, true, 200, 700}, {22, false, 150, 600}} {
		c := g.newConn(path{cIP: v4(10, 0, 7, byte(10+i)), sIP: servers[[]int{0, 2, 3}[i]].ip}, e.port, g.rng.dur(0, 10*time.Second))
		c.mss = e.mss
		c.handshake()
		switch e.port {
		case 80:
			c.send(true, []byte("GET /downloads/big.txt HTTP/1.1\r\nHost: www.example.com\r\n\r\n"), 0)
			c.send(false, g.httpResponse(e.segs*e.mss-100), 100*time.Microsecond)
		case 443:
			c.send(true, g.tlsRecord(23, 300), 0)
			c.send(false, g.random(e.segs*e.mss), 100*time.Microsecond)
		case 22:
			c.send(true, []byte("SSH-2.0-OpenSSH_9.6\r\n"), 0)
			c.send(false, []byte("SSH-2.0-OpenSSH_9.2\r\n"), 0)
			c.send(true, g.random(e.segs*e.mss), 150*time.Microsecond)
		}
		c.close(true)
	}
	// 802.1Q and QinQ.
	for range VLANConnections {
		p := path{cIP: v4(10, 100, 0, byte(g.rng.between(2, 250))), sIP: servers[0].ip, tags: []tag{{layers.EthernetTypeDot1Q, 100}}}
		g.conversation(g.newConn(p, 80, g.rng.dur(0, span)), servers[0].host)
	}
	for range QinQConnections {
		p := path{cIP: v4(10, 42, 0, byte(g.rng.between(2, 250))), sIP: servers[0].ip,
			tags: []tag{{layers.EthernetTypeQinQ, 300}, {layers.EthernetTypeDot1Q, 42}}}
		g.conversation(g.newConn(p, 80, g.rng.dur(0, span)), servers[0].host)
	}
	// TCP/IPv6, one of them with destination options.
	for i := range TCPv6Connections + DestOpts {
		p := path{cIP: v6(fmt.Sprintf("2001:db8:1::%x", 0x100+g.rng.intn(0xe00))), sIP: v6("2001:db8:2::80")}
		c := g.newConn(p, 80, g.rng.dur(0, span))
		c.mss = 1428
		c.destOpts = i == TCPv6Connections
		g.conversation(c, "www6.example.com")
	}
	g.dns(DNSv4, v4(192, 0, 2, 53), nil)
	g.dns(VLANDNS, v4(192, 0, 2, 53), []tag{{layers.EthernetTypeDot1Q, 200}})
	g.dns(DNSv6, v6("2001:db8:2::53"), nil)
	g.ntpSyslog()
	g.icmp()
	g.fragments()
	g.hopByHop()
	g.arpLLDP()
	g.snapCut()
	g.malformed()
}

func (g *gen) udp(t time.Duration, p path, fromClient bool, cPort, sPort uint16, payload gopacket.SerializableLayer) {
	sp, dp := cPort, sPort
	if !fromClient {
		sp, dp = dp, sp
	}
	ls, nl := g.layers(p, fromClient, layers.IPProtocolUDP)
	u := &layers.UDP{SrcPort: layers.UDPPort(sp), DstPort: layers.UDPPort(dp)}
	if err := u.SetNetworkLayerForChecksum(nl); err != nil && g.err == nil {
		g.err = err
	}
	g.emit(t, append(ls, u, payload)...)
}

func (g *gen) dns(n int, server net.IP, tags []tag) {
	for i := range n {
		var client net.IP
		if server.To4() != nil {
			client = g.client()
			if tags != nil {
				client = v4(10, 200, 0, byte(g.rng.between(2, 250)))
			}
		} else {
			client = v6(fmt.Sprintf("2001:db8:1::%x", 0x100+g.rng.intn(0xe00)))
		}
		p := path{cIP: client, sIP: server, tags: tags}
		name := []byte(fmt.Sprintf("%s%d.example.com", pick(&g.rng, words), g.rng.intn(100)))
		qt := layers.DNSTypeA
		if i%3 == 2 {
			qt = layers.DNSTypeAAAA
		}
		id := uint16(g.rng.next())
		q := &layers.DNS{ID: id, RD: true, QDCount: 1,
			Questions: []layers.DNSQuestion{{Name: name, Type: qt, Class: layers.DNSClassIN}}}
		ans := layers.DNSResourceRecord{Name: name, Type: qt, Class: layers.DNSClassIN, TTL: 300,
			IP: v4(192, 0, 2, byte(g.rng.between(1, 254)))}
		if qt == layers.DNSTypeAAAA {
			ans.IP = v6(fmt.Sprintf("2001:db8:2::%x", g.rng.between(1, 0xffff)))
		}
		r := &layers.DNS{ID: id, QR: true, RD: true, RA: true, QDCount: 1, ANCount: 1,
			Questions: q.Questions, Answers: []layers.DNSResourceRecord{ans}}
		port := g.ephemeral(client, 53)
		t := g.rng.dur(0, span)
		g.udp(t, p, true, port, 53, q)
		g.udp(t+g.rng.dur(500*time.Microsecond, 30*time.Millisecond), p, false, port, 53, r)
	}
}

func (g *gen) ntpSyslog() {
	for range NTP {
		p := path{cIP: g.client(), sIP: v4(192, 0, 2, 123)}
		req := make([]byte, 48)
		req[0] = 0x23 // version 4, client
		copy(req[40:], g.random(8))
		resp := make([]byte, 48)
		resp[0], resp[1] = 0x24, 2 // version 4, server, stratum 2
		copy(resp[12:], "GPS\x00")
		copy(resp[24:], req[40:48])
		copy(resp[32:], g.random(16))
		t := g.rng.dur(0, span)
		g.udp(t, p, true, 123, 123, gopacket.Payload(req))
		g.udp(t+g.rng.dur(time.Millisecond, 20*time.Millisecond), p, false, 123, 123, gopacket.Payload(resp))
	}
	for i := range Syslog {
		p := path{cIP: v4(10, 0, 9, byte(g.rng.between(2, 30))), sIP: v4(192, 0, 2, 14)}
		t := g.rng.dur(0, span)
		ts := SampleStart.Add(t)
		msg := fmt.Sprintf("<%d>%s host%d sshd[%d]: Accepted publickey for %s from 10.0.0.%d port %d ssh2",
			30+i%8, ts.Format(time.Stamp), i%5, 1000+g.rng.intn(9000), pick(&g.rng, words), g.rng.between(2, 250), g.rng.between(32768, 60999))
		g.udp(t, p, true, 514, 514, gopacket.Payload(msg))
	}
}

func (g *gen) icmp() {
	for i := range Pings {
		p := path{cIP: v4(10, 0, 0, 5), sIP: v4(192, 0, 2, 1)}
		t := time.Duration(i) * time.Second
		payload := gopacket.Payload(g.text(56))
		for _, fromClient := range []bool{true, false} {
			typ := uint8(layers.ICMPv4TypeEchoRequest)
			if !fromClient {
				typ = layers.ICMPv4TypeEchoReply
				t += 2 * time.Millisecond
			}
			ls, _ := g.layers(p, fromClient, layers.IPProtocolICMPv4)
			ic := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(typ, 0), Id: 0x1234, Seq: uint16(i + 1)}
			g.emit(t, append(ls, ic, payload)...)
		}
	}
	p := path{cIP: v6("2001:db8:1::5"), sIP: v6("2001:db8:2::1")}
	for i := range Pings6 {
		t := time.Duration(i)*time.Second + 500*time.Millisecond
		payload := gopacket.Payload(g.text(56))
		for _, fromClient := range []bool{true, false} {
			typ := uint8(layers.ICMPv6TypeEchoRequest)
			if !fromClient {
				typ = layers.ICMPv6TypeEchoReply
				t += 3 * time.Millisecond
			}
			ls, nl := g.layers(p, fromClient, layers.IPProtocolICMPv6)
			ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(typ, 0)}
			if err := ic.SetNetworkLayerForChecksum(nl); err != nil && g.err == nil {
				g.err = err
			}
			g.emit(t, append(ls, ic, &layers.ICMPv6Echo{Identifier: 0x4242, SeqNumber: uint16(i + 1)}, payload)...)
		}
	}
	for i := range Neighbors6 {
		me := v6(fmt.Sprintf("2001:db8:1::%x", 0x10+i))
		target := v6("2001:db8:1::1")
		snm := v6("ff02::1:ff00:1")
		t := time.Duration(i)*10*time.Second + 250*time.Millisecond
		ip := &layers.IPv6{Version: 6, HopLimit: 255, NextHeader: layers.IPProtocolICMPv6, SrcIP: me, DstIP: snm}
		ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeNeighborSolicitation, 0)}
		_ = ic.SetNetworkLayerForChecksum(ip)
		g.emit(t, &layers.Ethernet{SrcMAC: hostMAC(me), DstMAC: net.HardwareAddr{0x33, 0x33, 0xff, 0, 0, 1}, EthernetType: layers.EthernetTypeIPv6},
			ip, ic, &layers.ICMPv6NeighborSolicitation{TargetAddress: target,
				Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: hostMAC(me)}}})
		ip2 := &layers.IPv6{Version: 6, HopLimit: 255, NextHeader: layers.IPProtocolICMPv6, SrcIP: target, DstIP: me}
		ic2 := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeNeighborAdvertisement, 0)}
		_ = ic2.SetNetworkLayerForChecksum(ip2)
		g.emit(t+200*time.Microsecond, &layers.Ethernet{SrcMAC: routerMAC, DstMAC: hostMAC(me), EthernetType: layers.EthernetTypeIPv6},
			ip2, ic2, &layers.ICMPv6NeighborAdvertisement{Flags: 0x60, TargetAddress: target,
				Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: routerMAC}}})
	}
}

// fragments sends UDP datagrams too large for one frame, as IP fragments.
func (g *gen) fragments() {
	for i := range FragDatagrams4 {
		p := path{cIP: v4(10, 0, 5, 5), sIP: v4(192, 0, 2, 50)}
		g.emitFragments(time.Duration(5+i*15)*time.Second, p, 40000, 3800, 1480, 0)
	}
	p := path{cIP: v6("2001:db8:1::9"), sIP: v6("2001:db8:2::50")}
	g.emitFragments(20*time.Second, p, 40001, 3000, 1448, 0xcafef00d)
}

// emitFragments sends a datagram of n bytes of text from the client's
// port to port 9000 from time t on, in fragments of size bytes 15 µs
// apart; id is an IPv6 datagram's identification (IPv4's is the header's).
func (g *gen) emitFragments(t time.Duration, p path, port uint16, n, size int, id uint32) {
	ls, nl := g.layers(p, true, layers.IPProtocolUDP)
	u := &layers.UDP{SrcPort: layers.UDPPort(port), DstPort: 9000}
	_ = u.SetNetworkLayerForChecksum(nl)
	whole := g.serialize(append(ls, u, gopacket.Payload(g.text(n)))...)
	if ip, ok := nl.(*layers.IPv4); ok {
		id = uint32(ip.Id)
	}
	for _, f := range Fragment(whole, size, id) {
		g.add(t, f)
		t += 15 * time.Microsecond
	}
}

// hopByHop sends UDP/IPv6 datagrams after a hop-by-hop options header
// holding a router alert.
func (g *gen) hopByHop() {
	p := path{cIP: v6("2001:db8:1::7"), sIP: v6("2001:db8:2::99")}
	for i := range HopByHop {
		ls, nl := g.layers(p, true, layers.IPProtocolIPv6HopByHop)
		u := &layers.UDP{SrcPort: 5000, DstPort: 6000}
		_ = u.SetNetworkLayerForChecksum(nl)
		l4 := g.serialize(u, gopacket.Payload(fmt.Sprintf("report %d", i)))
		hbh := []byte{byte(layers.IPProtocolUDP), 0, 5, 2, 0, 0, 1, 0}
		g.emit(time.Duration(i)*5*time.Second+time.Second, append(ls, gopacket.Payload(append(hbh, l4...)))...)
	}
}

func (g *gen) arpLLDP() {
	for i := range ARPs {
		ip := v4(10, 0, byte(g.rng.intn(4)), byte(g.rng.between(2, 250)))
		gw := v4(10, 0, 0, 1)
		t := time.Duration(i)*5*time.Second + 100*time.Millisecond
		g.emit(t, &layers.Ethernet{SrcMAC: hostMAC(ip), DstMAC: broadcast, EthernetType: layers.EthernetTypeARP},
			&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
				Operation: layers.ARPRequest, SourceHwAddress: hostMAC(ip), SourceProtAddress: ip,
				DstHwAddress: make([]byte, 6), DstProtAddress: gw})
		g.emit(t+300*time.Microsecond, &layers.Ethernet{SrcMAC: routerMAC, DstMAC: hostMAC(ip), EthernetType: layers.EthernetTypeARP},
			&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
				Operation: layers.ARPReply, SourceHwAddress: routerMAC, SourceProtAddress: gw,
				DstHwAddress: hostMAC(ip), DstProtAddress: ip})
	}
	tlv := func(typ int, v []byte) []byte {
		return append(binary.BigEndian.AppendUint16(nil, uint16(typ<<9|len(v))), v...)
	}
	var lldp []byte
	lldp = append(lldp, tlv(1, append([]byte{4}, switchMAC...))...)  // chassis ID: MAC address
	lldp = append(lldp, tlv(2, append([]byte{5}, "ge-0/0/1"...))...) // port ID: interface name
	lldp = append(lldp, tlv(3, []byte{0, 120})...)                   // TTL
	lldp = append(lldp, tlv(5, []byte("sw1.example.net"))...)        // system name
	lldp = append(lldp, 0, 0)                                        // end
	for i := range LLDPs {
		g.emit(time.Duration(i)*30*time.Second+2*time.Second,
			&layers.Ethernet{SrcMAC: switchMAC, DstMAC: lldpMAC, EthernetType: layers.EthernetTypeLinkLayerDiscovery},
			gopacket.Payload(lldp))
	}
}

// snapCut adds frames captured with a snap length of 128 bytes.
func (g *gen) snapCut() {
	p := path{cIP: v4(10, 0, 9, 40), sIP: v4(192, 0, 2, 14)}
	for i := range SnapCut {
		ls, nl := g.layers(p, true, layers.IPProtocolUDP)
		u := &layers.UDP{SrcPort: 514, DstPort: 514}
		_ = u.SetNetworkLayerForChecksum(nl)
		data := g.serialize(append(ls, u, gopacket.Payload(g.text(1400)))...)
		g.evs = append(g.evs, event{t: time.Duration(30+i) * time.Second, data: data[:128], orig: len(data)})
	}
}

// malformed adds frames the classifier must reject with a reason.
func (g *gen) malformed() {
	at := func(i int) time.Duration { return time.Duration(40+i) * time.Second }
	udp4 := func() []byte {
		p := path{cIP: v4(10, 0, 66, 6), sIP: v4(192, 0, 2, 66)}
		ls, nl := g.layers(p, true, layers.IPProtocolUDP)
		u := &layers.UDP{SrcPort: 6666, DstPort: 7777}
		_ = u.SetNetworkLayerForChecksum(nl)
		return g.serialize(append(ls, u, gopacket.Payload("malformed"))...)
	}
	// A 10-byte frame.
	g.add(at(0), append(slices.Clone(routerMAC), 0x02, 0x00, 0x0a, 0x00))
	// IPv4 with IHL 3.
	f := udp4()
	f[14] = 0x43
	g.add(at(1), f)
	// IPv4 whose 60-byte header (IHL 15) runs past the frame's 20 bytes.
	f = udp4()[:34]
	f[14] = 0x4f
	g.add(at(2), f)
	// TCP headers of 10 and 2 bytes: the IP total length says so.
	for i, n := range []int{10, 2} {
		p := path{cIP: v4(10, 0, 66, 7), sIP: v4(192, 0, 2, 66)}
		ls, _ := g.layers(p, true, layers.IPProtocolTCP)
		tcp := []byte{0xc3, 0x50, 0x00, 0x50, 0, 0, 0, 1, 0, 0}
		g.emit(at(3+i), append(ls, gopacket.Payload(tcp[:n]))...)
	}
	// An IPv6 header cut after 20 of its 40 bytes.
	p6 := path{cIP: v6("2001:db8:1::66"), sIP: v6("2001:db8:2::66")}
	ls, _ := g.layers(p6, true, layers.IPProtocolUDP)
	f = g.serialize(append(ls, gopacket.Payload(make([]byte, 8)))...)
	g.add(at(5), f[:14+20])
	// Five VLAN tags.
	p := path{cIP: v4(10, 0, 66, 8), sIP: v4(192, 0, 2, 66)}
	for _, vid := range []uint16{1, 2, 3, 4, 5} {
		p.tags = append(p.tags, tag{layers.EthernetTypeDot1Q, vid})
	}
	ls, nl := g.layers(p, true, layers.IPProtocolUDP)
	u := &layers.UDP{SrcPort: 6666, DstPort: 7777}
	_ = u.SetNetworkLayerForChecksum(nl)
	g.emit(at(6), append(ls, u, gopacket.Payload("too many tags"))...)
}
