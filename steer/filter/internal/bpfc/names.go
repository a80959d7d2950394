package bpfc

import (
	"bufio"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
)

// scode is a name: a port or protocol name looked up as libpcap looks it
// up (/etc/services, /etc/protocols, its own tables). Host and network
// names need the resolver, and are left to libpcap.
func (p *parser) scode(name string, q qual) (*cond, error) {
	switch q.addr {
	case aNet:
		return nil, unsupportedf("network name %q", name)
	case qDefault, aHost:
		switch q.proto {
		case qLink:
			return nil, unsupportedf("Ethernet host name %q", name)
		case qDECNET:
			return nil, unsupportedf("decnet host name %q", name)
		}
		return nil, unsupportedf("host name %q (give the address)", name)
	case aPort, aPortrange:
		kw := "port"
		if q.addr == aPortrange {
			kw = "portrange"
		}
		if q.proto != qDefault && q.proto != qUDP && q.proto != qTCP && q.proto != qSCTP {
			return nil, exprErrorf("illegal qualifier of '%s'", kw)
		}
		var lo, hi int
		var real int
		var ok bool
		what := "port"
		if q.addr == aPort {
			lo, real, ok = nameToPort(name)
			hi = lo
		} else {
			what = "port in range"
			lo, hi, real, ok = nameToPortrange(name)
		}
		if !ok {
			return nil, exprErrorf("unknown %s '%s'", what, name)
		}
		want := map[uint8]int{qUDP: protoUDP, qTCP: protoTCP, qSCTP: protoSCTP}[q.proto]
		if q.proto != qDefault {
			if real != protoUndef && real != want {
				return nil, exprErrorf("%s '%s' is %s", what, name, ipProtoNames[real])
			}
			real = want
		}
		for _, port := range []int{lo, hi} {
			if port < 0 {
				return nil, exprErrorf("illegal port number %d < 0", port)
			}
			if port > 65535 {
				return nil, exprErrorf("illegal port number %d > 65535", port)
			}
		}
		return p.ports(uint32(lo), uint32(hi), q.addr == aPortrange, real, q.dir)
	case aProto:
		v, err := lookupProto(name, q.proto)
		if err != nil {
			return nil, err
		}
		return p.proto(v, q.proto, q.dir)
	}
	return nil, syntaxErrorf("syntax error in filter expression")
}

var ipProtoNames = map[int]string{protoTCP: "tcp", protoUDP: "udp", protoSCTP: "sctp"}

// ncode is an IPv4 address (s, dotted, possibly short) or a number (v).
func (p *parser) ncode(s string, v uint32, q qual) (*cond, error) {
	vlen := uint32(32)
	if s != "" {
		if q.proto == qDECNET {
			return nil, unsupportedf("decnet address %s", s)
		}
		var ok bool
		if v, vlen, ok = atoin(s); !ok {
			return nil, exprErrorf("invalid IPv4 address '%s'", s)
		}
	}
	switch q.addr {
	case qDefault, aHost, aNet:
		switch q.proto {
		case qDECNET:
			return nil, unsupportedf("decnet host")
		case qLink:
			return nil, exprErrorf("illegal link layer address")
		}
		mask := uint32(0xffffffff)
		if s == "" && q.addr == aNet {
			// A short net number: 10 is 10.0.0.0/8.
			for v != 0 && v&0xff000000 == 0 {
				v <<= 8
				mask <<= 8
			}
		} else {
			v <<= 32 - vlen
			mask <<= 32 - vlen
		}
		return p.host(v, mask, q.proto, q.dir, q.addr)
	case aPort, aPortrange:
		kw := "port"
		if q.addr == aPortrange {
			kw = "portrange"
		}
		var proto int
		switch q.proto {
		case qUDP:
			proto = protoUDP
		case qTCP:
			proto = protoTCP
		case qSCTP:
			proto = protoSCTP
		case qDefault:
			proto = protoUndef
		default:
			return nil, exprErrorf("illegal qualifier of '%s'", kw)
		}
		if v > 65535 {
			return nil, exprErrorf("illegal port number %d > 65535", v)
		}
		return p.ports(v, v, q.addr == aPortrange, proto, q.dir)
	case aProto:
		return p.proto(v, q.proto, q.dir)
	}
	return nil, syntaxErrorf("syntax error in filter expression")
}

// mcode is an IPv4 network with a mask length or a mask.
func (p *parser) mcode(s1, s2 string, masklen uint32, q qual) (*cond, error) {
	n, nlen, ok := atoin(s1)
	if !ok {
		return nil, exprErrorf("invalid IPv4 address '%s'", s1)
	}
	n <<= 32 - nlen
	var m uint32
	if s2 != "" {
		var mlen uint32
		if m, mlen, ok = atoin(s2); !ok {
			return nil, exprErrorf("invalid IPv4 address '%s'", s2)
		}
		m <<= 32 - mlen
		if n&^m != 0 {
			return nil, exprErrorf("non-network bits set in \"%s mask %s\"", s1, s2)
		}
	} else {
		if masklen > 32 {
			return nil, exprErrorf("mask length must be <= 32")
		}
		if masklen > 0 {
			m = 0xffffffff << (32 - masklen)
		}
		if n&^m != 0 {
			return nil, exprErrorf("non-network bits set in \"%s/%d\"", s1, masklen)
		}
	}
	if q.addr != aNet {
		return nil, exprErrorf("Mask syntax for networks only")
	}
	return p.host(n, m, q.proto, q.dir, q.addr)
}

// mcode6 is an IPv6 address, or network with a prefix length.
func (p *parser) mcode6(s string, masklen uint32, q qual) (*cond, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() {
		return nil, exprErrorf("invalid ip6 address %s", s)
	}
	if masklen > 128 {
		return nil, exprErrorf("mask length must be <= 128")
	}
	addr := a.As16()
	var mask [16]byte
	for i := range mask {
		switch {
		case uint32(8*i+8) <= masklen:
			mask[i] = 0xff
		case uint32(8*i) < masklen:
			mask[i] = byte(0xff << (8 - masklen%8))
		}
		if addr[i]&^mask[i] != 0 {
			return nil, exprErrorf("non-network bits set in \"%s/%d\"", s, masklen)
		}
	}
	switch q.addr {
	case qDefault, aHost:
		if masklen != 128 {
			return nil, exprErrorf("Mask syntax for networks only")
		}
		fallthrough
	case aNet:
		return p.host6(addr, mask, q.proto, q.dir, q.addr)
	}
	return nil, exprErrorf("invalid qualifier against IPv6 address")
}

// ecode is an Ethernet address.
func (p *parser) ecode(s string, q qual) (*cond, error) {
	if (q.addr == aHost || q.addr == qDefault) && q.proto == qLink {
		return p.ehost(etherAton(s), q.dir), nil
	}
	return nil, exprErrorf("ethernet address used in non-ether expression")
}

// atoin converts a dotted IPv4 address, possibly short ("10.1"), as
// libpcap does: its value and its length in bits.
func atoin(s string) (addr, bits uint32, ok bool) {
	for _, part := range strings.Split(s, ".") {
		var n uint32
		for i := 0; i < len(part); i++ {
			if n > 25 {
				return 0, 0, false
			}
			n = n*10 + uint32(part[i]) - '0'
		}
		if n > 255 {
			return 0, 0, false
		}
		addr = addr<<8 | n
		bits += 8
	}
	return addr, bits, true
}

// etherAton reads the bytes of an Ethernet address in any of the forms
// the scanner takes: pairs of hex digits, separated or not.
func etherAton(s string) []byte {
	var out []byte
	for i := 0; i < len(s); {
		c := s[i]
		if c == ':' || c == '.' || c == '-' {
			i++
			continue
		}
		d := hexVal(c)
		i++
		if i < len(s) && isHex(s[i]) {
			d = d<<4 | hexVal(s[i])
			i++
		}
		out = append(out, d)
	}
	return out
}

func hexVal(c byte) byte {
	switch {
	case isDigit(c):
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// The files libpcap's name lookups read, through the C library.
var (
	servicesFile  = "/etc/services"
	protocolsFile = "/etc/protocols"
)

// dbEntry is a line of /etc/services or /etc/protocols.
type dbEntry struct {
	names []string
	num   int
	proto string // services: "tcp", "udp", ...
}

var (
	dbOnce     sync.Once
	servicesDB []dbEntry
	protocolDB []dbEntry
)

func loadDBs() {
	dbOnce.Do(func() {
		servicesDB = readDB(servicesFile, true)
		protocolDB = readDB(protocolsFile, false)
	})
}

func readDB(path string, services bool) []dbEntry {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []dbEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		e := dbEntry{names: append([]string{f[0]}, f[2:]...)}
		num := f[1]
		if services {
			slash := strings.IndexByte(num, '/')
			if slash < 0 {
				continue
			}
			num, e.proto = num[:slash], num[slash+1:]
		}
		n, err := strconv.Atoi(num)
		if err != nil {
			continue
		}
		e.num = n
		out = append(out, e)
	}
	return out
}

func lookupDB(db []dbEntry, name, proto string) (int, bool) {
	for _, e := range db {
		if proto != "" && e.proto != proto {
			continue
		}
		for _, n := range e.names {
			if n == name {
				return e.num, true
			}
		}
	}
	return 0, false
}

// nameToPort looks a port name up for TCP and UDP, as libpcap does: the
// TCP port, with protoUndef when UDP has the same one.
func nameToPort(name string) (port, proto int, ok bool) {
	loadDBs()
	tcp, okT := lookupDB(servicesDB, name, "tcp")
	udp, okU := lookupDB(servicesDB, name, "udp")
	switch {
	case okT && okU && tcp == udp:
		return tcp, protoUndef, true
	case okT:
		return tcp, protoTCP, true
	case okU:
		return udp, protoUDP, true
	}
	return 0, 0, false
}

// nameToPortrange reads "LO-HI", numbers or port names.
func nameToPortrange(name string) (lo, hi, proto int, ok bool) {
	if a, b, ok := scanRange(name); ok {
		return a, b, protoUndef, true
	}
	dash := strings.IndexByte(name, '-')
	if dash < 0 {
		return 0, 0, 0, false
	}
	lo, p1, ok1 := nameToPort(name[:dash])
	if !ok1 {
		return 0, 0, 0, false
	}
	hi, p2, ok2 := nameToPort(name[dash+1:])
	if !ok2 {
		return 0, 0, 0, false
	}
	proto = p2
	if p1 != p2 {
		proto = protoUndef
	}
	return lo, hi, proto, true
}

// scanRange is sscanf(s, "%d-%d").
func scanRange(s string) (a, b int, ok bool) {
	num := func(s string) (int, string, bool) {
		i := 0
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			i++
		}
		j := i
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		if j == i {
			return 0, s, false
		}
		n, err := strconv.Atoi(s[:j])
		return n, s[j:], err == nil
	}
	a, rest, ok := num(s)
	if !ok || !strings.HasPrefix(rest, "-") {
		return 0, 0, false
	}
	b, _, ok = num(rest[1:])
	return a, b, ok
}

var etherProtos = map[string]uint32{
	"aarp": ethAARP, "arp": ethARP, "atalk": ethATALK, "decnet": ethDN, "ip": ethIP,
	"ip6": ethIPv6, "lat": ethLAT, "loopback": ethLoopback, "mopdl": ethMOPDL,
	"moprc": ethMOPRC, "rarp": ethRARP, "sca": ethSCA,
}

var llcProtos = map[string]uint32{"iso": sapISONS, "stp": sap8021D, "ipx": sapIPX, "netbeui": sapNetBEUI}

// lookupProto is a protocol name after "proto".
func lookupProto(name string, proto uint8) (uint32, error) {
	switch proto {
	case qDefault, qIP, qIPV6:
		loadDBs()
		if n, ok := lookupDB(protocolDB, name, ""); ok {
			return uint32(n), nil
		}
		return 0, exprErrorf("unknown ip proto '%s'", name)
	case qLink:
		if v, ok := etherProtos[name]; ok {
			return v, nil
		}
		if v, ok := llcProtos[name]; ok {
			return v, nil
		}
		return 0, exprErrorf("unknown ether proto '%s'", name)
	case qISO:
		switch name {
		case "esis":
			return isoESIS, nil
		case "isis":
			return isoISIS, nil
		case "clnp":
			return isoCLNP, nil
		}
		return 0, exprErrorf("unknown osi proto '%s'", name)
	}
	return 0, exprErrorf("unknown protocol: %s", name)
}
