package steer

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/rpsgo/rps/hash"
)

// frag4 makes an IPv4 packet a fragment of datagram id at 8-byte offset
// off, with more fragments after it when more.
func frag4(ip []byte, id, off uint16, more bool) []byte {
	binary.BigEndian.PutUint16(ip[4:6], id)
	fo := off
	if more {
		fo |= 0x2000
	}
	binary.BigEndian.PutUint16(ip[6:8], fo)
	return ip
}

// TestClassifyFollowFragments: with FragmentsFollow a first fragment is
// hashed as the whole packet with its headers would be (never
// decapsulated), a later one by its addresses, and both are marked with
// their datagram's identity for the producer; with FragmentsTuple
// nothing changes.
func TestClassifyFollowFragments(t *testing.T) {
	udp := udpHdr(sport, dport, 'h', 'i')
	for _, tc := range []struct {
		name            string
		frame           []byte
		udp4, tun       bool
		ht, htTup       hash.HashType // FragmentsFollow's, FragmentsTuple's
		ports, portsTup bool          // the key has the ports
		frag            uint8
		id              uint32
		proto           uint8 // fragProto
		key, keyTup     uint8 // Key.Proto, and with FragmentsTuple when not key
		depth           uint8
	}{
		{name: "ipv4 tcp first", frame: ethFrame(etherTypeIPv4, frag4(ipv4Packet(a4, b4, protoTCP, 0, tcpHdr(sport, dport)), 0x1234, 0, true)),
			ht: hash.RSSTCPIPv4, htTup: hash.RSSIPv4, ports: true, frag: fragFirst, id: 0x1234, proto: protoTCP, key: protoTCP},
		{name: "ipv4 tcp later", frame: ethFrame(etherTypeIPv4, frag4(ipv4Packet(a4, b4, protoTCP, 0, rep(16, 1)), 0x1234, 185, true)),
			ht: hash.RSSIPv4, htTup: hash.RSSIPv4, frag: fragLater, id: 0x1234, proto: protoTCP, key: protoTCP},
		{name: "ipv4 udp last", udp4: true, frame: ethFrame(etherTypeIPv4, frag4(ipv4Packet(a4, b4, protoUDP, 0, rep(16, 1)), 7, 370, false)),
			ht: hash.RSSIPv4, htTup: hash.RSSIPv4, frag: fragLater, id: 7, proto: protoUDP, key: protoUDP},
		{name: "ipv4 udp first, 2-tuple type", frame: ethFrame(etherTypeIPv4, frag4(ipv4Packet(a4, b4, protoUDP, 0, udp), 7, 0, true)),
			ht: hash.RSSIPv4, htTup: hash.RSSIPv4, ports: true, frag: fragFirst, id: 7, proto: protoUDP, key: protoUDP},
		{name: "ipv4 udp first to vxlan, not opened", udp4: true, tun: true,
			frame: ethFrame(etherTypeIPv4, frag4(ipv4Packet(a4, b4, protoUDP, 0, udpHdr(sport, VXLANPort, vxlanHdr(1, inner4())...)), 9, 0, true)),
			ht:    hash.RSSUDPIPv4, htTup: hash.RSSIPv4, ports: true, frag: fragFirst, id: 9, proto: protoUDP, key: protoUDP},
		{name: "ipv6 udp first", udp4: true, frame: ip6frame(protoFragment, fragHdr(protoUDP, 0, true, udp)),
			ht: hash.RSSUDPIPv6, htTup: hash.RSSIPv6, ports: true, frag: fragFirst, id: 0xdeadbeef, key: protoUDP},
		{name: "ipv6 first, options after the fragment header", udp4: true,
			frame: ip6frame(protoHopByHop, optsHdr(protoFragment, 0, fragHdr(protoDstOpts, 0, true, optsHdr(protoUDP, 1, udp)))),
			ht:    hash.RSSUDPIPv6, htTup: hash.RSSIPv6, ports: true, frag: fragFirst, id: 0xdeadbeef, key: protoUDP, keyTup: protoDstOpts},
		{name: "ipv6 later", udp4: true, frame: ip6frame(protoFragment, fragHdr(protoUDP, 8, true, rep(16, 1))),
			ht: hash.RSSIPv6, htTup: hash.RSSIPv6, frag: fragLater, id: 0xdeadbeef, key: protoUDP},
		{name: "ipv6 atomic fragment", udp4: true, frame: ip6frame(protoFragment, fragHdr(protoUDP, 0, false, udp)),
			ht: hash.RSSUDPIPv6, htTup: hash.RSSUDPIPv6, ports: true, portsTup: true, key: protoUDP},
		{name: "first fragment inside vxlan", udp4: true, tun: true,
			frame: vxlan4(5, ethFrame(etherTypeIPv4, frag4(ipv4Packet(a4, b4, protoUDP, 0, udp), 3, 0, true))),
			ht:    hash.RSSUDPIPv4, htTup: hash.RSSIPv4, ports: true, frag: fragFirst, id: 3, proto: protoUDP, key: protoUDP, depth: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range []FragmentMode{FragmentsTuple, FragmentsFollow} {
				hc := HashConfig{UDP4Tuple: tc.udp4, Fragments: mode}
				if tc.tun {
					hc.Tunnels = TunnelsInner
				}
				c := tunnelClassifier(t, hc)
				var got Classification
				c.Classify(tc.frame, &got)
				ht, frag, ports, proto := tc.htTup, uint8(fragNone), tc.portsTup, tc.key
				if mode == FragmentsFollow {
					ht, frag, ports = tc.ht, tc.frag, tc.ports
				} else if tc.keyTup != 0 {
					proto = tc.keyTup
				}
				k := &got.Key
				if got.HashType != ht || got.Reason != ReasonOK || got.frag != frag || k.Proto != proto || k.Depth != tc.depth {
					t.Errorf("%v: %v %v frag %d proto %d depth %d, want %v ok frag %d proto %d depth %d",
						mode, got.HashType, got.Reason, got.frag, k.Proto, k.Depth, ht, frag, proto, tc.depth)
				}
				if (k.SrcPort != 0) != ports || k.Fragment != (tc.frag != fragNone) {
					t.Errorf("%v: ports %d %d, fragment %v", mode, k.SrcPort, k.DstPort, k.Fragment)
				}
				if frag != fragNone && (got.fragID != tc.id || got.fragProto != tc.proto) {
					t.Errorf("%v: id %#x proto %d, want %#x %d", mode, got.fragID, got.fragProto, tc.id, tc.proto)
				}
				checkHash(t, msHasher(t), &got, false)
			}
		})
	}
}

// handleAll dispatches frames through one input of a new dispatcher of
// cfg (one worker, so that the handler sees them in order), closes it, and
// returns the packets its handler got, copied, and the dispatcher.
func handleAll(t *testing.T, cfg Config, frames []Frame) ([]Packet, *Dispatcher) {
	t.Helper()
	var got []Packet
	d, err := New(cfg, func(p *Packet) { got = append(got, *p) })
	if err != nil {
		t.Fatal(err)
	}
	if err := d.NewInput().Dispatch(frames, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return got, d
}

// sameSet returns n fragment keys of one set of t.
func sameSet(t *fragTable, n int) []fragKey {
	bySet := map[*[fragWays]fragEntry][]fragKey{}
	for id := uint32(0); ; id++ {
		k := fragKey{src: a4.As16(), dst: b4.As16(), id: id, proto: protoUDP}
		s := t.set(&k)
		bySet[s] = append(bySet[s], k)
		if len(bySet[s]) == n {
			return bySet[s]
		}
	}
}

// TestFragTable: an entry is found until it expires (30 s of capture time
// for IPv4, 60 for IPv6; never without timestamps), and a full set gives
// up an empty entry first, then an expired one, then the one written
// longest ago.
func TestFragTable(t *testing.T) {
	tb := newFragTable()
	if n := len(tb.sets) * fragWays; n != fragmentTableSize {
		t.Fatalf("%d entries, want %d", n, fragmentTableSize)
	}
	k4 := fragKey{src: a4.As16(), dst: b4.As16(), id: 1, proto: protoUDP}
	k6 := fragKey{src: a6.As16(), dst: b6.As16(), id: 1, v6: true}
	const t0 = int64(1_700_000_000_000_000_000)
	tb.put(&k4, 11, hash.RSSUDPIPv4, t0)
	tb.put(&k6, 22, hash.RSSUDPIPv6, t0)
	other := k4
	other.proto = protoTCP
	if tb.get(&other, t0) != nil {
		t.Error("a key of another protocol was found")
	}
	for _, tc := range []struct {
		k     *fragKey
		at    time.Duration
		found bool
	}{{&k4, fragmentTimeout, true}, {&k6, fragmentTimeout6, true}, {&k4, -time.Hour, true},
		{&k4, fragmentTimeout + 1, false}, {&k6, fragmentTimeout6 + 1, false}} {
		e := tb.get(tc.k, t0+int64(tc.at))
		if (e != nil) != tc.found {
			t.Errorf("v6=%v at +%v: found %v", tc.k.v6, tc.at, e != nil)
		}
	}
	if tb.get(&k4, t0) != nil {
		t.Error("an expired entry was found again")
	}

	// Eviction in a set of four, all entries at time 0 (no timestamps),
	// which never age.
	ks := sameSet(tb, fragWays+2)
	for i, k := range ks[:fragWays] {
		tb.put(&k, uint32(100+i), hash.RSSUDPIPv4, 0)
	}
	tb.put(&ks[fragWays], 200, hash.RSSUDPIPv4, 0) // evicts the first written
	if tb.get(&ks[0], 0) != nil || tb.get(&ks[fragWays], 0) == nil || tb.get(&ks[1], 0) == nil {
		t.Error("a full set did not give up the entry written longest ago")
	}
	// An expired entry goes before an older one that is not.
	s := tb.set(&ks[0])
	for i := range s {
		if s[i].key == ks[2] {
			s[i].at = -int64(time.Hour) // ks[2] expires; ks[1] is older
		}
	}
	tb.put(&ks[fragWays+1], 300, hash.RSSUDPIPv4, 0)
	if tb.get(&ks[2], 0) != nil || tb.get(&ks[1], 0) == nil {
		t.Error("the expired entry was kept and a live one evicted")
	}
	// A first fragment seen again takes its own entry.
	tb.put(&ks[1], 400, hash.RSSUDPIPv4, 0)
	if e := tb.get(&ks[1], 0); e == nil || e.flowID != 400 || tb.get(&ks[3], 0) == nil {
		t.Error("a first fragment seen again took another entry")
	}
}

// TestFollowFragmentsInDispatcher: through a dispatcher's input, with
// UDP's 4-tuple, a first fragment gets the flowid of its datagram whole,
// and a later fragment after it the same flowid and hash type; a later
// fragment before its first, or after the first has expired, keeps the
// addresses' hash and is counted an orphan.
func TestFollowFragmentsInDispatcher(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v6=%v", v6), func(t *testing.T) {
			whole := func(sp uint16) []byte { return udpHdr(sp, dport, rep(40, 'x')...) }
			packet := func(l4 []byte, id, off uint16, more bool) []byte {
				if !v6 {
					return ethFrame(etherTypeIPv4, frag4(ipv4Packet(a4, b4, protoUDP, 0, l4), id, off, more))
				}
				f := ip6frame(protoFragment, fragHdr(protoUDP, off, more, l4))
				binary.BigEndian.PutUint32(f[ethHeaderLen+ipv6HeaderLen+4:], uint32(id))
				return f
			}
			first := func(id, sp uint16) []byte { return packet(whole(sp)[:24], id, 0, true) }
			later := func(id uint16) []byte { return packet(rep(24, 'x'), id, 3, false) }
			t0 := time.Unix(100, 0)
			frames := []Frame{
				{Data: first(1, 1000)}, {Data: later(1)}, // in order
				{Data: later(2)}, {Data: first(2, 2000)}, // the later one first: an orphan
				{Data: first(3, 3000), Timestamp: t0}, {Data: later(3), Timestamp: t0.Add(fragmentTimeout6 + time.Second)}, // expired
			}
			got, d := handleAll(t, Config{Workers: 1, Dispatch: DispatchDirect, Hash: HashConfig{Key: hash.MicrosoftKey[:], UDP4Tuple: true, Fragments: FragmentsFollow}}, frames)
			tuple := tunnelClassifier(t, HashConfig{UDP4Tuple: true})
			var c Classification
			for i, sp := range map[int]uint16{0: 1000, 3: 2000, 4: 3000} { // first fragments
				wholeFrame := ethFrame(etherTypeIPv4, ipv4Packet(a4, b4, protoUDP, 0, whole(sp)))
				if v6 {
					wholeFrame = ip6frame(protoUDP, whole(sp))
				}
				tuple.Classify(wholeFrame, &c)
				if got[i].FlowID != c.FlowID || got[i].HashType != c.HashType || got[i].Reason != ReasonOK {
					t.Errorf("first fragment %d: %#x %v %v, the datagram whole %#x %v", i, got[i].FlowID, got[i].HashType, got[i].Reason, c.FlowID, c.HashType)
				}
			}
			if got[1].FlowID != got[0].FlowID || got[1].HashType != got[0].HashType || got[1].Reason != ReasonOK {
				t.Errorf("later fragment: %#x %v %v, its first %#x %v", got[1].FlowID, got[1].HashType, got[1].Reason, got[0].FlowID, got[0].HashType)
			}
			for _, i := range []int{2, 5} {
				tuple.Classify(frames[i].Data, &c)
				if got[i].FlowID != c.FlowID || got[i].HashType != c.HashType || got[i].Reason != ReasonOrphanFragment {
					t.Errorf("frame %d: %#x %v %v, want the 2-tuple %#x %v and an orphan", i, got[i].FlowID, got[i].HashType, got[i].Reason, c.FlowID, c.HashType)
				}
			}
			if n := d.Stats().Reasons[ReasonOrphanFragment]; n != 2 {
				t.Errorf("%d orphans counted, want 2", n)
			}
		})
	}
}

// TestFragmentFloodBounded: a flood of first fragments, each of a datagram
// of its own, through an input neither grows its table past
// fragmentTableSize nor allocates, and a plain input makes no table.
func TestFragmentFloodBounded(t *testing.T) {
	d, err := New(Config{Workers: 2, Dispatch: DispatchDirect, Hash: HashConfig{UDP4Tuple: true, Fragments: FragmentsFollow}}, func(*Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	plain := d.NewInput()
	if err := plain.Dispatch([]Frame{{Data: tcp4(0)}, {Data: ip6frame(protoUDP, udpHdr(1, 2))}}, nil); err != nil {
		t.Fatal(err)
	}
	if plain.p.frags != nil {
		t.Error("an input without fragments made a table")
	}
	in := d.NewInput()
	batch := make([]Frame, BatchSize)
	for i := range batch {
		src := netip.AddrFrom4([4]byte{10, 0, byte(i), 1})
		batch[i].Data = ethFrame(etherTypeIPv4, frag4(ipv4Packet(src, b4, protoUDP, 0, udpHdr(1, 2, rep(16, 0)...)), 0, 0, true))
	}
	id := uint16(0)
	flood := func() {
		for i := range batch {
			id++
			binary.BigEndian.PutUint16(batch[i].Data[ethHeaderLen+4:], id) // a new datagram each
		}
		if err := in.Dispatch(batch, nil); err != nil {
			t.Fatal(err)
		}
	}
	flood()
	tb := in.p.frags
	if tb == nil {
		t.Fatal("no table after first fragments")
	}
	sets := &tb.sets[0]
	if allocs := testing.AllocsPerRun(2*fragmentTableSize/BatchSize, flood); allocs != 0 {
		t.Errorf("%.1f allocations a batch of new datagrams", allocs)
	}
	used := 0
	for i := range tb.sets {
		for j := range tb.sets[i] {
			if tb.sets[i][j].used {
				used++
			}
		}
	}
	if in.p.frags != tb || &tb.sets[0] != sets || len(tb.sets)*fragWays != fragmentTableSize || used > fragmentTableSize || tb.puts < 2*fragmentTableSize {
		t.Errorf("after %d first fragments: %d sets, %d used, the table replaced %v", tb.puts, len(tb.sets), used, in.p.frags != tb)
	}
}
