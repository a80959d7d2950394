package steer

import (
	"github.com/rpsgo/rps/internal/wire"
	"hash/maphash"

	"github.com/rpsgo/rps/hash"
)

// Fragments. A datagram's first fragment carries the transport header, the
// others do not, so a hash over ports (TCP's by default, UDP's with
// HashConfig.UDP4Tuple) can give the first fragment and the datagram's
// unfragmented siblings one flowid and the other fragments another: they
// may reach another worker, and a handler that reassembles sees a datagram
// cut in two. FreeBSD (rss_mbuf_software_hash_v4) and Linux's flow
// dissector (without FLOW_DISSECTOR_F_PARSE_1ST_FRAG, as skb_get_hash
// calls it) hash every fragment, the first too, by its addresses; the
// flowid then differs from the unfragmented packets' whenever their
// protocol's 4-tuple type is in use. That is FragmentsTuple, the default,
// which keeps the flowid equal to a NIC's and FreeBSD's.
//
// FragmentsFollow keeps every fragment with its datagram's flow. The
// first fragment (offset zero, more fragments set) is hashed as an
// unfragmented packet with its headers would be, by its ports, and each
// input remembers the flowid and hash type it got, keyed by the
// datagram's identity as reassembly keys it (RFC 791's source,
// destination, protocol and identification for IPv4; RFC 8200's source,
// destination and identification for IPv6, whose fragments' next-header
// fields may differ). Every later fragment found there takes that flowid
// and hash type, and so the worker of the datagram's flow; its key still
// has no ports. A later fragment that finds no first fragment keeps its
// 2-tuple hash, as with FragmentsTuple, and gets
// [ReasonOrphanFragment], counted in Stats.Reasons: its first fragment
// comes later (fragments out of order), was lost, or was forgotten. No
// fragment is held back waiting for its first: that would delay the
// frames behind it on the input, or reorder them. A first fragment is
// never decapsulated, as no fragment is: its flow is the outer one.
//
// The memory is bounded: each input (and each worker that re-dispatches
// a fragment) keeps a table of [fragmentTableSize] datagrams, 64 bytes
// each (256 KiB), made when its first fragment arrives; an input that
// sees no fragment has none. An entry expires [fragmentTimeout] (IPv4) or
// [fragmentTimeout6] (IPv6) of capture time after its first fragment, the
// reassembly timeouts of Linux (net.ipv4.ipfrag_time,
// net.ipv6.ip6frag_time) and FreeBSD (net.inet.ip.fragttl); frames
// without a timestamp never age. The table is set-associative, four
// entries a set chosen by a hash of the datagram's identity keyed at
// random per table (hash/maphash): a first fragment takes an empty or
// expired entry of its set, or else the one written longest ago. A flood of first
// fragments so never grows the table; it evicts, and the later fragments
// of the datagrams evicted are counted orphans.
//
// One table per input, not one shared: an input's goroutine alone
// touches it, in the dispatching step, so it takes no lock and no
// contended cache line, and the frames of one datagram arrive on one
// input in every source the library has (a capture file, a ring; a fanout
// group spreads them by a hash of the addresses, which the fragments of a
// datagram share, or with this library's own program by the same rule).
// Order is kept per input anyway: a table shared across inputs could not
// order a first fragment on one input before a later one on another.
//
// The kernel programs of package internal/bpfsteer follow fragments the
// same way, with an LRU hash map of the same size.

// FragmentMode says how fragments are hashed ([HashConfig.Fragments]).
type FragmentMode uint8

// The fragment modes.
const (
	// FragmentsTuple hashes every fragment by its addresses, as FreeBSD and
	// Linux do, so a 4-tuple type may split a datagram from its flow.
	FragmentsTuple FragmentMode = iota
	// FragmentsFollow hashes a first fragment as its flow, and gives the
	// later ones its flowid, from a table per input.
	FragmentsFollow
)

var fragmentModeNames = []string{FragmentsTuple: "tuple", FragmentsFollow: "follow"}

// String returns "tuple" or "follow".
func (m FragmentMode) String() string { return name(fragmentModeNames, "FragmentMode", uint8(m)) }

// MarshalText encodes the mode by name.
func (m FragmentMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText parses "tuple" or "follow", in any case.
func (m *FragmentMode) UnmarshalText(b []byte) error {
	v, err := parseName(fragmentModeNames, "fragment mode", string(b))
	if err == nil {
		*m = FragmentMode(v)
	}
	return err
}

const (
	fragWays = 4 // entries per set

	fragmentTableSize = wire.FragmentTableSize
	fragmentTimeout   = wire.FragmentTimeout
	fragmentTimeout6  = wire.FragmentTimeout6
)

// What the classifier says of a fragment under FragmentsFollow
// (Classification.frag).
const (
	fragNone  = iota // not a fragment, or FragmentsTuple
	fragFirst        // a first fragment, hashed as a whole packet
	fragLater        // a later fragment, hashed by its addresses
)

// fragKey is a datagram's identity: its addresses, protocol (IPv4 only)
// and identification. It has no padding (zero fills it), so that it is
// hashed and compared as 40 bytes of memory, not field by field.
type fragKey struct {
	src, dst [16]byte
	id       uint32
	proto    uint8
	v6       bool
	//lint:ignore U1000 named, so that the key is plain memory to hash and compare
	zero [2]uint8
}

// fragEntry is one remembered datagram, 64 bytes. used is false in an
// empty entry.
type fragEntry struct {
	key    fragKey
	at     int64  // capture time of the first fragment, Unix nanoseconds (0 when unknown)
	seq    uint64 // the table's count of puts when it was written
	flowID uint32
	ht     hash.HashType
	used   bool
}

// fragTable is an input's table of datagrams (see FragmentsFollow).
type fragTable struct {
	seed maphash.Seed
	sets [][fragWays]fragEntry
	mask uint64
	puts uint64
}

func newFragTable() *fragTable {
	n := fragmentTableSize / fragWays
	return &fragTable{seed: maphash.MakeSeed(), sets: make([][fragWays]fragEntry, n), mask: uint64(n - 1)}
}

// set returns k's set.
func (t *fragTable) set(k *fragKey) *[fragWays]fragEntry {
	return &t.sets[maphash.Comparable(t.seed, *k)&t.mask]
}

// expired reports whether an entry is past its timeout at now. Times
// that go backwards (files merged out of order) do not age it.
func (e *fragEntry) expired(now int64) bool {
	limit := int64(fragmentTimeout)
	if e.key.v6 {
		limit = int64(fragmentTimeout6)
	}
	return now-e.at > limit
}

// put remembers the flowid and hash type of the datagram whose first
// fragment is k, seen at now: in its entry if it has one (a first
// fragment seen again), else in an empty or expired entry of its set,
// else in place of the one written longest ago.
func (t *fragTable) put(k *fragKey, flowID uint32, ht hash.HashType, now int64) {
	s := t.set(k)
	v := -1
	for i := range s {
		if s[i].used && s[i].key == *k {
			v = i
			break
		}
	}
	if v < 0 {
		v = 0
		for i := 1; i < fragWays; i++ {
			if s[i].evictsBefore(&s[v], now) {
				v = i
			}
		}
	}
	t.puts++
	s[v] = fragEntry{key: *k, at: now, seq: t.puts, flowID: flowID, ht: ht, used: true}
}

// evictsBefore reports whether e is to be replaced before o: an empty
// entry first, then an expired one, then the one written longest ago.
func (e *fragEntry) evictsBefore(o *fragEntry, now int64) bool {
	switch {
	case e.used != o.used:
		return !e.used
	case !e.used:
		return false
	}
	if ex, ox := e.expired(now), o.expired(now); ex != ox {
		return ex
	}
	return e.seq < o.seq
}

// get returns the entry of the datagram k, nil when it has none or it
// has expired (and is then freed).
func (t *fragTable) get(k *fragKey, now int64) *fragEntry {
	s := t.set(k)
	for i := range s {
		e := &s[i]
		if e.used && e.key == *k {
			if e.expired(now) {
				e.used = false
				return nil
			}
			return e
		}
	}
	return nil
}

// followFragment is the fragment rule of step 2 under FragmentsFollow, for
// a fragment c of frame f that the classifier marked: a first fragment's
// flowid and hash type are remembered, a later fragment takes them, or
// keeps its 2-tuple hash with ReasonOrphanFragment.
func (p *producer) followFragment(f *Frame, c *Classification) {
	t := p.frags
	if t == nil {
		t = newFragTable()
		p.frags = t
	}
	k := fragKey{src: c.Key.Src.As16(), dst: c.Key.Dst.As16(), id: c.fragID, proto: c.fragProto, v6: c.Key.Src.Is6()}
	var now int64
	if !f.Timestamp.IsZero() {
		now = f.Timestamp.UnixNano()
	}
	if c.frag == fragFirst {
		t.put(&k, c.FlowID, c.HashType, now)
		return
	}
	if e := t.get(&k, now); e != nil {
		c.FlowID, c.HashType = e.flowID, e.ht
		return
	}
	if c.Reason == ReasonOK {
		c.Reason = ReasonOrphanFragment
	}
}
