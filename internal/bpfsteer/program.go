package bpfsteer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/rpsgo/rps/internal/wire"
	"math/bits"
	"net/netip"

	"github.com/cilium/ebpf/asm"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/steer"
)

// Errors callers test with errors.Is.
var (
	// ErrNotSupported is returned on systems without eBPF socket filters.
	ErrNotSupported = errors.New("eBPF steering is not supported on this system")
	// ErrKeyLength is returned for a Toeplitz key shorter than MinKeyLen or
	// longer than hash.MaxKeyLen bytes, or a SipHash key that is not
	// hash.SipHashKeyLen bytes.
	ErrKeyLength = errors.New("key must be 40 to 64 bytes for Toeplitz (the IPv6 4-tuple is 36 bytes), 16 for SipHash")
	// ErrTableLength is returned for an indirection table whose length is
	// not a power of two between 1 and MaxTableLen, or, for SetTable, not
	// the length the program was built with.
	ErrTableLength = errors.New("indirection table length must be a power of two from 1 to 65536")
	// ErrOptions is returned for options the program cannot honour: an
	// unknown hash algorithm, a hash-type set without both 2-tuple types,
	// a VXLAN port list longer than MaxVXLANPorts or naming port 0, the
	// GENEVE, the GTP-U or the MPLS-over-UDP port.
	ErrOptions = errors.New("steering options the program cannot honour")
	// ErrClosed is returned by the methods of a closed Program.
	ErrClosed = errors.New("program closed")
)

// Limits on Options, and the classifier's limits and tunnel ports the
// program keeps: those are steer's constants of the same names, so the
// program walks as far as the classifier does.
const (
	// MinKeyLen is the shortest Toeplitz key the program accepts: the
	// 36-byte IPv6 4-tuple needs 36+4 bytes of key.
	MinKeyLen = hash.IPv6Tuple4Len + 4
	// MaxTableLen is the longest indirection table (a power of two).
	MaxTableLen = 1 << 16
	// MaxVXLANPorts is the longest Options.VXLANPorts list: each port is
	// one comparison in the program.
	MaxVXLANPorts = 16
	// VXLANPort, GENEVEPort, GTPUPort and MPLSUDPPort are the UDP
	// destination ports of the UDP tunnels.
	VXLANPort   = steer.VXLANPort
	GENEVEPort  = wire.GENEVEPort
	GTPUPort    = wire.GTPUPort
	MPLSUDPPort = wire.MPLSUDPPort
	// MaxVLANDepth is how many stacked VLAN tags the program walks in one
	// Ethernet header, counting, in the outermost, a tag the kernel removed
	// into skb->vlan_tci.
	MaxVLANDepth = steer.MaxVLANDepth
	// MaxEncaps is how many shim and tunnel headers a frame may have (MPLS
	// labels, PPPoE sessions, pseudowires, the VLAN tags of inner Ethernet
	// frames, tunnel and ERSPAN headers, counted together).
	MaxEncaps = steer.MaxEncaps
	// MaxTunnelDepth is how many tunnels, one inside another, the program
	// opens with Options.Tunnels.
	MaxTunnelDepth = steer.MaxTunnelDepth
	// maxExtHeaders is how many IPv6 extension headers the program walks,
	// as the user-space classifier does.
	maxExtHeaders = 8
	// maxGTPUExtHeaders is how many GTP-U extension headers it skips.
	maxGTPUExtHeaders = 8
)

// Map and program names, also the references in [Instructions].
const (
	// ToeplitzMapName is the array map holding the per-position Toeplitz
	// contribution table: one value of 36*256 u32, entry [i*256+v] being
	// the hash of byte value v at tuple position i.
	ToeplitzMapName = "rps_toeplitz"
	// SipHashMapName is the array map holding, with AlgorithmSipHash, the
	// SipHash state after the key is loaded: one value of four u64 (v0 to
	// v3, native byte order).
	SipHashMapName = "rps_siphash"
	// TableMapName is the array map holding the indirection table: one value
	// of len(Table) u32, bucket -> worker (socket index in the fanout group).
	TableMapName = "rps_indir"
	// ProgramName is the program's name as bpftool shows it.
	ProgramName = "rps_steer"
	// XDPProgramName is the XDP program's name as bpftool and ip link
	// show it.
	XDPProgramName = "rps_steer_xdp"
	// XSKMapName is the XDP program's XSKMAP: entry i is the AF_XDP socket
	// of worker i.
	XSKMapName = "rps_xsks"
	// FragMapName is the LRU hash map of the datagrams whose first
	// fragment the program has seen, with Options.FollowFragments: the key
	// a datagram's identity (40 bytes), the value the first fragment's
	// flowid and the kernel time it was seen (16 bytes).
	FragMapName = "rps_frags"
	// XDPStatsMapName is the XDP program's per-CPU array of counters: the
	// entries XDPStatPassed, XDPStatFallback, XDPStatNoSocket,
	// XDPStatOtherQueue and XDPStatHost, then one per socket from
	// XDPStatSockets (frames redirected to it).
	XDPStatsMapName = "rps_xdp_stats"
)

// Hook is where the steering program runs.
type Hook int

const (
	// HookSocketFilter is a BPF_PROG_TYPE_SOCKET_FILTER program for a
	// PACKET_FANOUT_EBPF group: it returns the socket index ([New]).
	HookSocketFilter Hook = iota
	// HookXDP is a BPF_PROG_TYPE_XDP program: it redirects each frame to
	// the AF_XDP socket of its worker through an XSKMAP ([NewXDP]).
	HookXDP
)

// String names the hook.
func (h Hook) String() string {
	switch h {
	case HookSocketFilter:
		return "socket-filter"
	case HookXDP:
		return "xdp"
	}
	return fmt.Sprintf("hook(%d)", int(h))
}

// The entries of the XDP program's counter map ([XDPStatsMapName]).
const (
	// XDPStatPassed counts frames not hashed that were passed to the
	// kernel stack (Options.PassUnhashed).
	XDPStatPassed = 0
	// XDPStatFallback counts frames not hashed that were sent to
	// Options.Fallback (each also counted where its redirect ended: in
	// the fallback socket's entry, or XDPStatNoSocket).
	XDPStatFallback = 1
	// XDPStatNoSocket counts frames whose slot in the XSKMAP held no
	// socket: the redirect failed and they were passed to the kernel.
	XDPStatNoSocket = 2
	// XDPStatOtherQueue counts frames that arrived on another receive
	// queue than Options.Queue: passed to the kernel, not looked at.
	XDPStatOtherQueue = 3
	// XDPStatHost counts the frames the host needs, passed to the kernel
	// (Options.PassHost).
	XDPStatHost = 4
	// XDPStatSockets is the entry of socket 0; socket i's is
	// XDPStatSockets+i.
	XDPStatSockets = 5
)

// Options configure the steering program: the fields of steer.HashConfig
// it honours, the indirection table and the socket for frames it cannot
// hash.
type Options struct {
	// Algorithm is the hash function: hash.AlgorithmToeplitz (the default)
	// or hash.AlgorithmSipHash.
	Algorithm hash.Algorithm
	// Key is the hash key: 40 to 64 bytes for Toeplitz (only the first 40
	// are used: the longest tuple is 36 bytes), 16 for SipHash.
	Key []byte
	// Table is the indirection table, bucket -> worker, of a power-of-two
	// length. A frame goes to socket Table[flowid & (len(Table)-1)] of the
	// fanout group (the kernel takes it modulo the group's size).
	Table []uint32
	// Symmetric puts the endpoints in canonical order before hashing, as the
	// user-space classifier's Symmetric option does.
	Symmetric bool
	// Types is the set of RSS hash types, as steer.HashConfig.Types: TCP
	// and UDP (SCTP with UDP) get their 4-tuple when their type is in the
	// set. Zero means hash.DefaultTypes; the set must hold hash.TypeIPv4
	// and hash.TypeIPv6.
	Types hash.Types
	// UDP4Tuple adds hash.TypeUDPIPv4 and hash.TypeUDPIPv6 to Types.
	UDP4Tuple bool
	// Tunnels decapsulates VXLAN, GENEVE, GRE (with transparent Ethernet,
	// ERSPAN and Cisco MetaData), GTP-U, IP in IP and MPLS over UDP and
	// hashes the innermost IP header, as steer.TunnelsInner does.
	Tunnels bool
	// VXLANPorts are the UDP destination ports taken for VXLAN with
	// Tunnels. Nil means VXLANPort; at most MaxVXLANPorts.
	VXLANPorts []uint16
	// FollowFragments keeps every fragment with its datagram's flow, as
	// steer.FragmentsFollow does: a first fragment is hashed by its ports
	// and its flowid kept in an LRU hash map ([FragMapName]) of
	// wire.FragmentTableSize datagrams, which a later fragment takes; a
	// later fragment not found there, or found older than
	// wire.FragmentTimeout (IPv4) or wire.FragmentTimeout6 (IPv6) of
	// kernel time (bpf_ktime_get_ns), keeps its 2-tuple hash.
	FollowFragments bool
	// Fallback is the socket index for frames the user-space classifier
	// gives HashType NONE (non-IP, malformed link or IP header). User space
	// would place them with the SOURCE policy; the kernel has no such state,
	// so they all go to this one socket.
	Fallback uint32
	// Hook is where the program runs: a socket filter (the zero value) or
	// XDP. [New] builds the first, [NewXDP] the second.
	Hook Hook
	// PassUnhashed, with HookXDP only, passes the frames that Fallback
	// would get to the kernel stack instead (XDP_PASS).
	PassUnhashed bool
	// Queue, with HookXDP only, is the device's receive queue the AF_XDP
	// sockets are bound to. The program sees every queue's frames, and
	// the kernel drops a frame redirected to a socket of another queue,
	// so a frame whose xdp_md.rx_queue_index is not Queue is passed to
	// the kernel stack first thing, unexamined, and counted
	// (XDPCounters.OtherQueue).
	Queue uint32
	// PassHost, with HookXDP only, passes the frames the host itself
	// needs to the kernel stack first thing, counted
	// (XDPCounters.HostPassed): ARP, IPv6 neighbour discovery, and
	// packets to one of HostAddrs, the addresses of the interface the
	// program is attached to. An AF_XDP socket takes the frames
	// redirected to it away from the stack; with PassHost the host keeps
	// its own traffic on that interface. Untagged frames only.
	PassHost bool
	// HostAddrs are the host's addresses for PassHost, at most
	// MaxHostAddrs; taken when the program is built.
	HostAddrs []netip.Addr

	// testReturn, with HookXDP, makes the program return the socket index
	// it would redirect to instead of redirecting (for BPF_PROG_TEST_RUN
	// agreement tests); XDP_PASS stays XDP_PASS.
	testReturn bool
}

// validate checks o and returns the table mask.
func (o *Options) validate() (uint32, error) {
	switch o.Hook {
	case HookSocketFilter:
		if o.PassUnhashed {
			return 0, fmt.Errorf("bpfsteer: PassUnhashed is for the XDP hook: %w", ErrOptions)
		}
		if o.Queue != 0 {
			return 0, fmt.Errorf("bpfsteer: Queue is for the XDP hook: %w", ErrOptions)
		}
		if o.PassHost || len(o.HostAddrs) > 0 {
			return 0, fmt.Errorf("bpfsteer: PassHost is for the XDP hook: %w", ErrOptions)
		}
	case HookXDP:
		if err := o.checkHost(); err != nil {
			return 0, err
		}
	default:
		return 0, fmt.Errorf("bpfsteer: %v: %w", o.Hook, ErrOptions)
	}
	switch o.Algorithm {
	case hash.AlgorithmToeplitz:
		if len(o.Key) < MinKeyLen || len(o.Key) > hash.MaxKeyLen {
			return 0, fmt.Errorf("bpfsteer: Toeplitz key of %d bytes: %w", len(o.Key), ErrKeyLength)
		}
	case hash.AlgorithmSipHash:
		if len(o.Key) != hash.SipHashKeyLen {
			return 0, fmt.Errorf("bpfsteer: SipHash key of %d bytes: %w", len(o.Key), ErrKeyLength)
		}
	default:
		return 0, fmt.Errorf("bpfsteer: hash algorithm %d: %w", o.Algorithm, ErrOptions)
	}
	if t := o.types(); t&^hash.AllTypes != 0 || !t.Has(hash.TypeIPv4|hash.TypeIPv6) {
		return 0, fmt.Errorf("bpfsteer: hash types %v: want a set of %v holding ipv4 and ipv6: %w", t, hash.AllTypes, ErrOptions)
	}
	if o.Tunnels {
		if len(o.VXLANPorts) > MaxVXLANPorts {
			return 0, fmt.Errorf("bpfsteer: %d VXLAN ports, at most %d: %w", len(o.VXLANPorts), MaxVXLANPorts, ErrOptions)
		}
		for _, p := range o.VXLANPorts {
			if p == 0 || p == GENEVEPort || p == GTPUPort || p == MPLSUDPPort {
				return 0, fmt.Errorf("bpfsteer: VXLAN port %d: %w", p, ErrOptions)
			}
		}
	}
	return tableMask(len(o.Table))
}

// types is the hash-type set in use.
func (o *Options) types() hash.Types {
	t := o.Types
	if t == 0 {
		t = hash.DefaultTypes
	}
	if o.UDP4Tuple {
		t |= hash.TypeUDPIPv4 | hash.TypeUDPIPv6
	}
	return t
}

// vxlanPorts is the VXLAN port list in use.
func (o *Options) vxlanPorts() []uint16 {
	if o.VXLANPorts == nil {
		return []uint16{VXLANPort}
	}
	return o.VXLANPorts
}

func tableMask(n int) (uint32, error) {
	if n < 1 || n > MaxTableLen || bits.OnesCount(uint(n)) != 1 {
		return 0, fmt.Errorf("bpfsteer: table of %d buckets: %w", n, ErrTableLength)
	}
	return uint32(n - 1), nil
}

// toeplitzTable returns the contents of the Toeplitz map for key: entry
// i*256+v is the hash of a tuple whose only non-zero byte is v at
// position i. The Toeplitz hash is linear over GF(2), so the hash of a
// tuple is the XOR of its bytes' entries.
func toeplitzTable(key []byte) ([]uint32, error) {
	h, err := hash.NewToeplitz(key)
	if err != nil {
		return nil, fmt.Errorf("bpfsteer: toeplitz key: %w", err)
	}
	const n = hash.MaxTupleLen
	t := make([]uint32, n*256)
	var buf [n]byte
	for i := 0; i < n; i++ {
		for v := 0; v < 256; v++ {
			buf[i] = byte(v)
			t[i*256+v] = h.Sum(buf[:i+1])
		}
		buf[i] = 0
	}
	return t, nil
}

// sipState returns the contents of the SipHash map for a 16-byte key: the
// state v0..v3 after the key is loaded (the key's halves read as
// little-endian words k0 and k1, XORed with the algorithm's constants).
func sipState(key []byte) [4]uint64 {
	k0 := binary.LittleEndian.Uint64(key[0:8])
	k1 := binary.LittleEndian.Uint64(key[8:16])
	return [4]uint64{
		k0 ^ 0x736f6d6570736575,
		k1 ^ 0x646f72616e646f6d,
		k0 ^ 0x6c7967656e657261,
		k1 ^ 0x7465646279746573,
	}
}

// __sk_buff field offsets (include/uapi/linux/bpf.h).
const (
	skbLen         = 0  // skb->len: bytes from skb->data to the end
	skbPktType     = 4  // skb->pkt_type
	skbProtocol    = 16 // skb->protocol, network byte order in the low 16 bits
	skbVLANPresent = 20 // 1 when a VLAN tag was moved into skb->vlan_tci
)

// Frame offsets, EtherTypes and protocol numbers the program uses.
const (
	packetOutgoing = 4 // PACKET_OUTGOING: a transmitted frame, skb->data at the MAC header
	ethHeaderLen   = 14

	etIPv4    = 0x0800
	etIPv6    = 0x86dd
	etPPPoE   = 0x8864
	etMPLS    = 0x8847
	etMPLSMC  = 0x8848
	etCMD     = 0x8909 // Cisco MetaData
	etTEB     = 0x6558 // transparent Ethernet bridging
	etERSPAN2 = 0x88be // ERSPAN types I and II
	etERSPAN3 = 0x22eb
	// kindEthernet in the state's EtherType field says that an Ethernet
	// frame starts at the offset (the payload of VXLAN, GENEVE or GRE
	// with 0x6558, ERSPAN, an MPLS pseudowire). It is no EtherType, so
	// that 0x6558 read from a frame is told apart: that is not IP.
	kindEthernet = 0x10000

	protoIPIP = 4
	protoTCP  = 6
	protoUDP  = 17
	protoIPv6 = 41
	protoGRE  = 47
	protoSCTP = 132
)

// The main program's stack (offsets from R10, the frame pointer). Stack
// accesses must be aligned to their size.
const (
	stHdr   = -40  // 40 bytes: the header being parsed, in the main program; a fragment's map value
	stKey   = -48  // 4 bytes: the map key 0, in the main program and fnHash
	stState = -192 // 144 bytes: the parse state the functions share, fields f*
)

// Fields of the parse state, from stState. A function gets a pointer to
// it in R2 and keeps it in rSt.
const (
	fOff   = 0  // offset of the next header from skb->data
	fEnd   = 8  // end of the packet or payload the header is in
	fEt    = 16 // what the next header is: an EtherType, or kindEthernet
	fNEnc  = 24 // shim and tunnel headers walked (FlowKey.NEncap)
	fTLen  = 32 // the tuple's length: 8, 12, 32 or 36
	fFam   = 40 // the tuple's family: its 2-tuple length, 8 or 32
	fSaved = 48 // the flowid of the IP header around the current tunnel
	fTuple = 56 // 40 bytes: the tuple of the IP header being parsed (36 used)
	// With FollowFragments: the hashed header's fragment kind (fragNone,
	// fragFirst, fragLater) and its datagram's identity, FragMapName's key
	// (40 bytes: source and destination addresses, an IPv4 address in the
	// first 4 of 16; the identification, native order; the IPv4 protocol,
	// 0 for IPv6; the family, 4 or 6; zeros).
	fFrag = 96
	fFKey = 104
)

// Fragment kinds in fFrag, and the key's and the value's layout.
const (
	fragNone  = 0
	fragFirst = 1
	fragLater = 2

	fragKeyLen   = 40
	fragKeyID    = 32
	fragKeyProto = 36
	fragKeyFam   = 37
	fragValueLen = 16 // the flowid (4 bytes, 4 zero), the kernel time in ns (8)
)

// Registers of the main program and fnHash. R1-R5 are clobbered by
// helper and function calls; R6-R9 survive them.
const (
	rCtx = asm.R6 // the skb, in every function
	rOff = asm.R7 // offset of the current header, from skb->data; the Toeplitz table
	rEnd = asm.R8 // the VLAN count; the tuple length; the Toeplitz table's second base
	rVal = asm.R9 // the EtherType, then the bucket; the tuple's family
)

// Registers of the parsing functions.
const (
	rSt  = asm.R7 // the parse state (in the main program's stack)
	rPos = asm.R8 // offset of the header being parsed (fOff)
	rLim = asm.R9 // end of the packet it is in (fEnd)
)

// The functions, and what they return in R0.
const (
	fnSeg  = "rps_seg"  // EtherType or Ethernet frame to an IP header: retFail, 4, 6
	fnEth  = "rps_eth"  // an inner Ethernet header and its VLAN tags: retFail or the EtherType
	fnIP   = "rps_ip"   // an IP header to its tuple: retFail, retHashed, or a tunnel
	fnTun  = "rps_tun"  // a tunnel header: retFail or retNext
	fnHash = "rps_hash" // the tuple's flowid

	retFail   = 0 // the header cannot be walked: the IP header around it is hashed
	retHashed = 1 // the tuple is complete and the packet is no tunnel to open
	retNext   = 1 // the state names the next header
	retIPIP4  = 2 // IP in IP: IPv4 follows
	retIPIP6  = 3 // IP in IP: IPv6 follows
	retGRE    = 4
	retVXLAN  = 5 // UDP to a VXLAN port
	retGENEVE = 6
	retGTPU   = 7
	retMPLS   = 8 // UDP to MPLSUDPPort
)

// builder emits instructions with labels.
type builder struct {
	insns   asm.Instructions
	pending string
	opts    *Options
	mask    uint32
	types   hash.Types
	xdp     bool // HookXDP: an xdp_md context, offsets from the MAC header
	follow  bool // FollowFragments
	counts  int  // count calls emitted, for their labels
}

func (b *builder) emit(ins ...asm.Instruction) {
	for _, in := range ins {
		if b.pending != "" {
			in = in.WithSymbol(b.pending)
			b.pending = ""
		}
		b.insns = append(b.insns, in)
	}
}

// label names the next instruction.
func (b *builder) label(name string) {
	if b.pending != "" {
		// Two labels on one instruction: give the first a jump of zero.
		b.emit(asm.Ja.Label(name))
	}
	b.pending = name
}

// loadBytes emits bpf_skb_load_bytes(skb, offReg+delta, R10+dst, n) and a
// jump to fail when it returns an error (the offset or length runs past
// skb->len). offReg holds the offset from skb->data; it may be R2, not R1.
// With HookXDP it is bpf_xdp_load_bytes, of the same arguments, the
// offset from the MAC header.
func (b *builder) loadBytes(offReg asm.Register, delta int32, dst int16, n int32, fail string) {
	fn := asm.FnSkbLoadBytes
	if b.xdp {
		fn = asm.FnXdpLoadBytes
	}
	b.emit(asm.Mov.Reg(asm.R1, rCtx))
	if offReg != asm.R2 {
		b.emit(asm.Mov.Reg(asm.R2, offReg))
	}
	if delta != 0 {
		b.emit(asm.Add.Imm(asm.R2, delta))
	}
	b.emit(
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, int32(dst)),
		asm.Mov.Imm(asm.R4, n),
		fn.Call(),
		asm.JNE.Imm(asm.R0, 0, fail),
	)
}

// loadBE16 loads the big-endian 16-bit value at R10+off into dst.
func (b *builder) loadBE16(dst asm.Register, off int16) {
	b.emit(
		asm.LoadMem(dst, asm.RFP, off, asm.Half),
		asm.HostTo(asm.BE, dst, asm.Half),
	)
}

// hiNibble loads the high four bits of the byte at R10+off into dst: an
// IP version, an ERSPAN version, the first nibble of an MPLS payload.
func (b *builder) hiNibble(dst asm.Register, off int16) {
	b.emit(
		asm.LoadMem(dst, asm.RFP, off, asm.Byte),
		asm.RSh.Imm(dst, 4),
	)
}

// lookup0 emits bpf_map_lookup_elem(map, &0) and leaves the value pointer
// in R0, jumping to fail when the lookup fails (it cannot: the maps are
// arrays of one value, but the verifier wants the check).
func (b *builder) lookup0(mapName, fail string) {
	b.emit(
		asm.StoreImm(asm.RFP, stKey, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, 0).WithReference(mapName),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, fail),
	)
}

// call calls a parsing function with the skb and the parse state.
func (b *builder) call(fn string) {
	b.emit(
		asm.Mov.Reg(asm.R1, rCtx),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stState),
		asm.Call.Label(fn),
	)
}

// Instructions returns the steering program for opts, with its maps left
// as references named [ToeplitzMapName] (or [SipHashMapName]) and
// [TableMapName] (the LoadMapPtr instructions carry them; [New]
// associates the real maps). The main program comes first, then the
// functions it calls. It needs no kernel and works on every system, for
// inspection and tests.
func Instructions(opts Options) (asm.Instructions, error) {
	mask, err := opts.validate()
	if err != nil {
		return nil, err
	}
	b := &builder{opts: &opts, mask: mask, types: opts.types(), xdp: opts.Hook == HookXDP, follow: opts.FollowFragments}
	b.label(ProgramName)
	if b.xdp {
		b.xdpPrologue()
	} else {
		b.prologue()
	}
	b.vlans()
	b.walk()
	b.label("tuple")
	b.call(fnHash)
	if b.follow {
		b.followFragment()
	}
	if opts.Tunnels {
		b.emit(asm.Ja.Label("bucket"))
		b.label("restore")
		b.emit(asm.LoadMem(asm.R0, asm.RFP, stState+fSaved, asm.DWord))
	}
	b.label("bucket")
	b.bucket(asm.R0)
	if b.xdp {
		b.xdpTail()
	} else {
		b.indirection()
		b.label("fallback")
		b.emit(
			asm.Mov.Imm32(asm.R0, int32(opts.Fallback)),
			asm.Return(),
		)
	}
	b.hashFunc()
	b.segFunc()
	b.ethFunc()
	b.ipFunc()
	if opts.Tunnels {
		b.tunFunc()
	}
	return b.insns, nil
}

// prologue saves the context, zeroes the tuple, and
// finds the EtherType and the offset of what follows the Ethernet header.
//
// On receive, eth_type_trans has pulled the MAC header and
// __netif_receive_skb_core has moved an outermost VLAN tag into
// skb->vlan_tci, so skb->data is 14 bytes past the MAC header (the frame
// user space reads from the ring) and skb->protocol is the EtherType at
// frame offset 12. On a transmitted frame (PACKET_OUTGOING, seen by taps
// from dev_queue_xmit_nit) skb->data is the MAC header itself and
// skb->protocol is whatever the sender set, so the EtherType is read from
// the frame. BPF_PROG_TEST_RUN builds a receive-like skb with
// eth_type_trans and no VLAN untagging.
func (b *builder) prologue() {
	b.entry()
	b.emit(
		asm.LoadMem(rVal, rCtx, skbPktType, asm.Word),
		asm.JNE.Imm(rVal, packetOutgoing, "rx"),
	)
	b.frameEtherType()
	b.emit(asm.Ja.Label("vlan"))
	b.label("rx")
	b.emit(
		asm.LoadMem(rVal, rCtx, skbProtocol, asm.Word),
		asm.HostTo(asm.BE, rVal, asm.Half),
		asm.Mov.Imm(rOff, 0),
	)
}

// entry saves the context and zeroes the tuple. The tuple's bytes are
// read past what an IPv4 header writes (by 8-byte loads, and into the
// hash as zero ports); every other field is written before it is read.
func (b *builder) entry() {
	b.emit(
		asm.Mov.Reg(rCtx, asm.R1),
		asm.Mov.Imm(asm.R1, 0),
	)
	for off := int16(0); off < 40; off += 8 {
		b.emit(asm.StoreMem(asm.RFP, stState+fTuple+off, asm.R1, asm.DWord))
	}
	if b.follow { // no fragment yet, and a key the verifier sees written
		b.emit(asm.StoreMem(asm.RFP, stState+fFrag, asm.R1, asm.DWord))
		for off := int16(0); off < fragKeyLen; off += 8 {
			b.emit(asm.StoreMem(asm.RFP, stState+fFKey+off, asm.R1, asm.DWord))
		}
	}
}

// frameEtherType reads the EtherType at frame offset 12 into rVal and
// sets rOff to the header after it, for a context whose offsets start at
// the MAC header (a transmitted skb, an XDP frame).
func (b *builder) frameEtherType() {
	b.emit(asm.Mov.Imm(rOff, 12))
	b.loadBytes(rOff, 0, stHdr, 2, "fallback")
	b.loadBE16(rVal, stHdr)
	b.emit(asm.Mov.Imm(rOff, ethHeaderLen))
}

// vlans walks inline 802.1Q/802.1ad tags, counting one the kernel moved
// into skb->vlan_tci, up to MaxVLANDepth; more tags, or a tag cut short,
// send the frame to the fallback socket (user space: HashType NONE).
func (b *builder) vlans() {
	b.label("vlan")
	if b.xdp {
		b.emit(asm.Mov.Imm(rEnd, 0)) // XDP sees every tag inline
	} else {
		b.emit(asm.LoadMem(rEnd, rCtx, skbVLANPresent, asm.Word))
	}
	for i := 0; i <= MaxVLANDepth; i++ {
		tag := fmt.Sprintf("vlan_tag%d", i)
		b.emit(
			asm.JEq.Imm(rVal, 0x8100, tag),
			asm.JEq.Imm(rVal, 0x88a8, tag),
			asm.JEq.Imm(rVal, 0x9100, tag),
			asm.Ja.Label("l3"),
		)
		b.label(tag)
		if i == MaxVLANDepth {
			b.emit(asm.Ja.Label("fallback"))
			break
		}
		b.emit(asm.JGE.Imm(rEnd, MaxVLANDepth, "fallback"))
		b.loadBytes(rOff, 0, stHdr, 4, "fallback")
		b.loadBE16(rVal, stHdr+2)
		b.emit(
			asm.Add.Imm(rOff, 4),
			asm.Add.Imm(rEnd, 1),
		)
	}
}

// walk fills the parse state for the header after the outer VLAN tags and
// walks the frame to the IP header to hash, one depth of tunnels at a
// time (MaxTunnelDepth with Tunnels, else none): the shims to an IP
// header (fnSeg), the IP header to its tuple (fnIP), and, when it is a
// tunnel and the depth allows, the tunnel header (fnTun), which first
// saves the flowid of the IP header around it. A walk that fails at depth
// 0 goes to the fallback socket; deeper, the saved flowid is the answer
// ("restore"), as user space hashes the deepest IP header read whole.
//
// The offset and the header count start from a zero the verifier cannot
// see through (opaqueZero). Known, every path through the headers would
// carry its own constants, and the verifier, which prunes a path only
// when its state matches one already followed, would follow each on its
// own: a million instructions and more. Nothing needs them known: every
// packet read is bpf_skb_load_bytes, checked at run time.
func (b *builder) walk() {
	b.label("l3")
	b.opaqueZero(asm.R1)
	b.emit(
		asm.StoreMem(asm.RFP, stState+fNEnc, asm.R1, asm.DWord),
		asm.Add.Reg(rOff, asm.R1),
		asm.StoreMem(asm.RFP, stState+fOff, rOff, asm.DWord),
	)
	if b.xdp {
		b.xdpLength(asm.R1)
	} else {
		b.emit(asm.LoadMem(asm.R1, rCtx, skbLen, asm.Word))
	}
	b.emit(
		asm.StoreMem(asm.RFP, stState+fEnd, asm.R1, asm.DWord),
		asm.StoreMem(asm.RFP, stState+fEt, rVal, asm.DWord),
	)
	depth := 0
	if b.opts.Tunnels {
		depth = MaxTunnelDepth
	}
	for d := 0; d <= depth; d++ {
		fail := "restore"
		if d == 0 {
			fail = "fallback"
		}
		if d == 0 {
			// A plain frame's IP header needs no walk to it.
			b.emit(
				asm.Mov.Imm(asm.R3, 4),
				asm.JEq.Imm(rVal, etIPv4, "d0_ip"),
				asm.Mov.Imm(asm.R3, 6),
				asm.JEq.Imm(rVal, etIPv6, "d0_ip"),
			)
		}
		b.call(fnSeg)
		b.emit(
			asm.JEq.Imm(asm.R0, retFail, fail),
			asm.Mov.Reg(asm.R3, asm.R0),
		)
		if d == 0 {
			b.label("d0_ip")
		}
		b.call(fnIP)
		b.emit(asm.JEq.Imm(asm.R0, retFail, fail))
		if d == depth {
			// Too deep for another tunnel: this header is hashed.
			b.emit(asm.Ja.Label("tuple"))
			break
		}
		b.emit(
			asm.JEq.Imm(asm.R0, retHashed, "tuple"),
			asm.Mov.Reg(asm.R3, asm.R0),
		)
		b.call(fnTun)
		b.emit(asm.JEq.Imm(asm.R0, retFail, "restore"))
	}
}

// opaqueZero sets r to zero in a way the verifier does not follow:
// skb->len minus skb->len, read twice, is to it any value within ±2^32
// (with HookXDP, xdp_md->ingress_ifindex, another 32-bit field the
// verifier knows nothing of). It uses R2.
func (b *builder) opaqueZero(r asm.Register) {
	field := int16(skbLen)
	if b.xdp {
		field = xdpIngressIfindex
	}
	b.emit(
		asm.LoadMem(r, rCtx, field, asm.Word),
		asm.LoadMem(asm.R2, rCtx, field, asm.Word),
		asm.Sub.Reg(r, asm.R2),
	)
}

// rTup points fnHash at its copy of the tuple, hTuple in its own stack.
// Hashed in place, a tuple put in canonical order would stay so in the
// parse state, a difference the verifier would carry to every depth.
const (
	rTup   = asm.R7
	hTuple = -40
)

// hashFunc emits fnHash: the flowid of the tuple in the parse state (fFam
// its family, fTLen its length), returned in R0. It copies the tuple, puts
// the copy in canonical order with Symmetric, and hashes it with Toeplitz
// or SipHash.
func (b *builder) hashFunc() {
	b.label(fnHash)
	b.emit(
		asm.LoadMem(rVal, asm.R2, fFam, asm.DWord),
		asm.LoadMem(rEnd, asm.R2, fTLen, asm.DWord),
	)
	for i := int16(0); i < 40; i += 8 {
		b.emit(
			asm.LoadMem(asm.R1, asm.R2, fTuple+i, asm.DWord),
			asm.StoreMem(asm.RFP, hTuple+i, asm.R1, asm.DWord),
		)
	}
	b.emit(
		asm.Mov.Reg(rTup, asm.RFP),
		asm.Add.Imm(rTup, hTuple),
	)
	if b.opts.Symmetric {
		b.symmetric()
	}
	b.label("hash")
	if b.opts.Algorithm == hash.AlgorithmSipHash {
		b.siphash()
	} else {
		b.toeplitz()
	}
	b.emit(asm.Return())
	b.label("hash_null")
	b.emit(
		asm.Mov.Imm(asm.R0, 0),
		asm.Return(),
	)
}

// tupBE16 and tupBE32 load the big-endian value at the tuple's byte off.
func (b *builder) tupBE16(dst asm.Register, off int16) {
	b.emit(
		asm.LoadMem(dst, rTup, off, asm.Half),
		asm.HostTo(asm.BE, dst, asm.Half),
	)
}

func (b *builder) tupBE32(dst asm.Register, off int16) {
	b.emit(
		asm.LoadMem(dst, rTup, off, asm.Word),
		asm.HostTo(asm.BE, dst, asm.Word),
	)
}

// symmetric swaps the two endpoints in the tuple when the source (address,
// port) is above the destination's, comparing big-endian. A 2-tuple
// compares its addresses only: when they are equal, swapping the ports
// behind it changes no byte that is hashed.
func (b *builder) symmetric() {
	b.emit(asm.JGE.Imm(rVal, hash.IPv6Tuple2Len, "sym6"))
	// IPv4
	b.tupBE32(asm.R1, 0)
	b.tupBE32(asm.R2, 4)
	b.emit(
		asm.JLT.Reg(asm.R1, asm.R2, "hash"),
		asm.JGT.Reg(asm.R1, asm.R2, "swap4"),
	)
	b.tupBE16(asm.R1, 8)
	b.tupBE16(asm.R2, 10)
	b.emit(asm.JLE.Reg(asm.R1, asm.R2, "hash"))
	b.label("swap4")
	b.emit(
		asm.LoadMem(asm.R1, rTup, 0, asm.Word),
		asm.LoadMem(asm.R2, rTup, 4, asm.Word),
		asm.StoreMem(rTup, 0, asm.R2, asm.Word),
		asm.StoreMem(rTup, 4, asm.R1, asm.Word),
		asm.LoadMem(asm.R1, rTup, 8, asm.Half),
		asm.LoadMem(asm.R2, rTup, 10, asm.Half),
		asm.StoreMem(rTup, 8, asm.R2, asm.Half),
		asm.StoreMem(rTup, 10, asm.R1, asm.Half),
		asm.Ja.Label("hash"),
	)
	// IPv6: four big-endian words of each address, then the ports
	b.label("sym6")
	for i := int16(0); i < 16; i += 4 {
		b.tupBE32(asm.R1, i)
		b.tupBE32(asm.R2, 16+i)
		b.emit(
			asm.JLT.Reg(asm.R1, asm.R2, "hash"),
			asm.JGT.Reg(asm.R1, asm.R2, "swap6"),
		)
	}
	b.tupBE16(asm.R1, 32)
	b.tupBE16(asm.R2, 34)
	b.emit(asm.JLE.Reg(asm.R1, asm.R2, "hash"))
	b.label("swap6")
	for i := int16(0); i < 16; i += 8 {
		b.emit(
			asm.LoadMem(asm.R1, rTup, i, asm.DWord),
			asm.LoadMem(asm.R2, rTup, 16+i, asm.DWord),
			asm.StoreMem(rTup, i, asm.R2, asm.DWord),
			asm.StoreMem(rTup, 16+i, asm.R1, asm.DWord),
		)
	}
	b.emit(
		asm.LoadMem(asm.R1, rTup, 32, asm.Half),
		asm.LoadMem(asm.R2, rTup, 34, asm.Half),
		asm.StoreMem(rTup, 32, asm.R2, asm.Half),
		asm.StoreMem(rTup, 34, asm.R1, asm.Half),
	)
}

// toeplitz hashes the tuple, one table load per byte, unrolled, into R0.
// An IPv4
// tuple (rVal 8) is hashed over 12 bytes, an IPv6 one over 36: the ports
// of a 2-tuple are zero, and a zero byte adds nothing to a Toeplitz hash
// (so the program branches on the family, not on the tuple's length,
// which would leave the verifier four times the paths to follow). The
// table value is 36 KiB; an instruction's offset field reaches 32 KiB, so
// positions 32 to 35 use a second base pointer 32 KiB in.
func (b *builder) toeplitz() {
	b.lookup0(ToeplitzMapName, "hash_null")
	b.emit(
		asm.Mov.Reg(asm.R6, asm.R0),
		asm.Mov.Reg(rEnd, asm.R0),
		asm.Add.Imm(rEnd, 32*1024),
		asm.Mov.Imm(asm.R5, 0),
	)
	for i := 0; i < hash.MaxTupleLen; i++ {
		if i == hash.IPv4Tuple4Len {
			b.emit(asm.JEq.Imm(rVal, hash.IPv4Tuple2Len, "hashed"))
		}
		base, off := asm.R6, int16(i*1024)
		if i >= 32 {
			base, off = rEnd, int16((i-32)*1024)
		}
		b.emit(
			asm.LoadMem(asm.R1, rTup, int16(i), asm.Byte),
			asm.LSh.Imm(asm.R1, 2),
			asm.Add.Reg(asm.R1, base),
			asm.LoadMem(asm.R1, asm.R1, off, asm.Word),
			asm.Xor.Reg(asm.R5, asm.R1),
		)
	}
	b.label("hashed")
	b.emit(asm.Mov.Reg(asm.R0, asm.R5))
}

// bucket leaves in rVal the offset in the indirection table of the bucket
// of the flowid in r (its low 32 bits).
func (b *builder) bucket(r asm.Register) {
	b.emit(
		asm.Mov.Reg(rVal, r),
		asm.And.Imm(rVal, int32(b.mask)),
		asm.LSh.Imm(rVal, 2),
	)
}

// indirection returns table[flowid & mask].
func (b *builder) indirection() {
	b.lookup0(TableMapName, "fallback")
	b.emit(
		asm.Add.Reg(asm.R0, rVal),
		asm.LoadMem(asm.R0, asm.R0, 0, asm.Word),
		asm.Return(),
	)
}

// followFragment emits, with FollowFragments, the fragment rule after the
// hash (flowid in R0, left there): a first fragment's flowid is written to
// FragMapName with the kernel time; a later fragment found there, not
// older than the timeout of its family, takes the flowid written; any
// other frame keeps its own.
func (b *builder) followFragment() {
	const flowid = rOff // the walk is over: rOff and rEnd are free
	b.emit(
		asm.Mov.Reg(flowid, asm.R0),
		asm.LoadMem(asm.R1, asm.RFP, stState+fFrag, asm.Word),
		asm.JEq.Imm(asm.R1, fragNone, "frag_done"),
		asm.JEq.Imm(asm.R1, fragFirst, "frag_put"),
		asm.LoadMapPtr(asm.R1, 0).WithReference(FragMapName),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stState+fFKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "frag_done"),
		asm.Mov.Reg(rEnd, asm.R0),
		asm.FnKtimeGetNs.Call(),
		asm.LoadMem(asm.R1, rEnd, 8, asm.DWord),
		asm.Sub.Reg(asm.R0, asm.R1), // the entry's age
		asm.LoadImm(asm.R2, int64(wire.FragmentTimeout), asm.DWord),
		asm.LoadMem(asm.R3, asm.RFP, stState+fFKey+fragKeyFam, asm.Byte),
		asm.JNE.Imm(asm.R3, 6, "frag_age"),
		asm.LoadImm(asm.R2, int64(wire.FragmentTimeout6), asm.DWord),
	)
	b.label("frag_age")
	b.emit(
		asm.JGT.Reg(asm.R0, asm.R2, "frag_done"), // expired
		asm.LoadMem(flowid, rEnd, 0, asm.Word),
		asm.Ja.Label("frag_done"),
	)
	b.label("frag_put")
	b.emit(
		asm.FnKtimeGetNs.Call(),
		asm.StoreMem(asm.RFP, stHdr+8, asm.R0, asm.DWord),
		asm.StoreMem(asm.RFP, stHdr, flowid, asm.Word),
		asm.StoreImm(asm.RFP, stHdr+4, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, 0).WithReference(FragMapName),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stState+fFKey),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, stHdr),
		asm.Mov.Imm(asm.R4, 0), // BPF_ANY
		asm.FnMapUpdateElem.Call(),
	)
	b.label("frag_done")
	b.emit(asm.Mov.Reg(asm.R0, flowid))
}
