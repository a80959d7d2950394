package bpfsteer

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/cilium/ebpf/asm"

	"github.com/rpsgo/rps/hash"
)

// Errors callers test with errors.Is.
var (
	// ErrNotSupported is returned on systems without eBPF socket filters.
	ErrNotSupported = errors.New("eBPF steering is not supported on this system")
	// ErrKeyLength is returned for a key shorter than MinKeyLen or longer
	// than hash.MaxKeyLen bytes.
	ErrKeyLength = errors.New("key must be 40 to 64 bytes (the IPv6 4-tuple is 36 bytes)")
	// ErrTableLength is returned for an indirection table whose length is
	// not a power of two between 1 and MaxTableLen, or, for SetTable, not
	// the length the program was built with.
	ErrTableLength = errors.New("indirection table length must be a power of two from 1 to 65536")
	// ErrClosed is returned by the methods of a closed Program.
	ErrClosed = errors.New("program closed")
)

// Limits on Options.
const (
	// MinKeyLen is the shortest key the program accepts: the 36-byte IPv6
	// 4-tuple needs 36+4 bytes of Toeplitz key.
	MinKeyLen = hash.IPv6Tuple4Len + 4
	// MaxTableLen is the longest indirection table (a power of two).
	MaxTableLen = 1 << 16
	// MaxVLANDepth is how many stacked VLAN tags the program walks, counting
	// a tag the kernel removed into skb->vlan_tci; it equals
	// steer.MaxVLANDepth (not imported: internal packages sit below steer).
	MaxVLANDepth = 4
	// maxExtHeaders is how many IPv6 extension headers the program walks,
	// as the user-space classifier does.
	maxExtHeaders = 8
)

// Map and program names, also the references in [Instructions].
const (
	// ToeplitzMapName is the array map holding the per-position Toeplitz
	// contribution table: one value of 36*256 u32, entry [i*256+v] being
	// the hash of byte value v at tuple position i.
	ToeplitzMapName = "rps_toeplitz"
	// TableMapName is the array map holding the indirection table: one value
	// of len(Table) u32, bucket -> worker (socket index in the fanout group).
	TableMapName = "rps_indir"
	// ProgramName is the program's name as bpftool shows it.
	ProgramName = "rps_steer"
)

// Options configure the steering program.
type Options struct {
	// Key is the Toeplitz key, 40 to 64 bytes (only the first 40 are used:
	// the longest tuple is 36 bytes).
	Key []byte
	// Table is the indirection table, bucket -> worker, of a power-of-two
	// length. A frame goes to socket Table[flowid & (len(Table)-1)] of the
	// fanout group (the kernel takes it modulo the group's size).
	Table []uint32
	// Symmetric puts the endpoints in canonical order before hashing, as the
	// user-space classifier's Symmetric option does.
	Symmetric bool
	// UDP4Tuple hashes UDP and SCTP over addresses and ports.
	UDP4Tuple bool
	// Fallback is the socket index for frames the user-space classifier
	// gives HashType NONE (non-IP, malformed link or IP header). User space
	// would place them with the SOURCE policy; the kernel has no such state,
	// so they all go to this one socket.
	Fallback uint32
}

// validate checks o and returns the table mask.
func (o *Options) validate() (uint32, error) {
	if len(o.Key) < MinKeyLen || len(o.Key) > hash.MaxKeyLen {
		return 0, fmt.Errorf("bpfsteer: key of %d bytes: %w", len(o.Key), ErrKeyLength)
	}
	return tableMask(len(o.Table))
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

// __sk_buff field offsets (include/uapi/linux/bpf.h).
const (
	skbLen         = 0  // skb->len: bytes from skb->data to the end
	skbPktType     = 4  // skb->pkt_type
	skbProtocol    = 16 // skb->protocol, network byte order in the low 16 bits
	skbVLANPresent = 20 // 1 when a VLAN tag was moved into skb->vlan_tci
)

// Frame offsets the program uses.
const (
	packetOutgoing = 4 // PACKET_OUTGOING: a transmitted frame, skb->data at the MAC header
	ethHeaderLen   = 14
)

// Stack layout (offsets from R10, the frame pointer). Stack accesses must
// be aligned to their size.
const (
	stTuple = -40 // 40 bytes: the tuple (36 used), zeroed at entry
	stHdr   = -80 // 40 bytes: the header being parsed (IPv6 is the longest)
	stKey   = -88 // 4 bytes: the map key 0
)

// Registers. R1-R5 are clobbered by helper calls; R6-R9 survive them.
const (
	rCtx = asm.R6 // the skb
	rOff = asm.R7 // offset of the current header, from skb->data
	rEnd = asm.R8 // end of the IP packet, from skb->data; the VLAN count before it
	rVal = asm.R9 // EtherType, next header, then the tuple length
)

// builder emits instructions with labels.
type builder struct {
	insns   asm.Instructions
	pending string
	opts    *Options
	mask    uint32
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

// loadBytes emits bpf_skb_load_bytes(skb, rOff+delta, R10+dst, n) and a
// jump to fail when it returns an error (the offset or length runs past
// skb->len). offReg holds the offset from skb->data.
func (b *builder) loadBytes(offReg asm.Register, delta int32, dst int16, n int32, fail string) {
	b.emit(
		asm.Mov.Reg(asm.R1, rCtx),
		asm.Mov.Reg(asm.R2, offReg),
	)
	if delta != 0 {
		b.emit(asm.Add.Imm(asm.R2, delta))
	}
	b.emit(
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, int32(dst)),
		asm.Mov.Imm(asm.R4, n),
		asm.FnSkbLoadBytes.Call(),
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

// loadBE32 loads the big-endian 32-bit value at R10+off into dst.
func (b *builder) loadBE32(dst asm.Register, off int16) {
	b.emit(
		asm.LoadMem(dst, asm.RFP, off, asm.Word),
		asm.HostTo(asm.BE, dst, asm.Word),
	)
}

// lookup0 emits bpf_map_lookup_elem(map, &0) and leaves the value pointer
// in R0, jumping to fallback when the lookup fails.
func (b *builder) lookup0(mapName string) {
	b.emit(
		asm.StoreImm(asm.RFP, stKey, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, 0).WithReference(mapName),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "fallback"),
	)
}

// Instructions returns the steering program for opts, with its two maps
// left as references named [ToeplitzMapName] and [TableMapName] (the
// LoadMapPtr instructions carry them; [New] associates the real maps).
// It needs no kernel and works on every system, for inspection and tests.
func Instructions(opts Options) (asm.Instructions, error) {
	mask, err := opts.validate()
	if err != nil {
		return nil, err
	}
	b := &builder{opts: &opts, mask: mask}
	b.label(ProgramName)
	b.prologue()
	b.vlans()
	b.ipv4()
	b.ipv6()
	b.transport()
	if opts.Symmetric {
		b.symmetric()
	}
	b.toeplitz()
	b.indirection()
	b.label("fallback")
	b.emit(
		asm.Mov.Imm32(asm.R0, int32(opts.Fallback)),
		asm.Return(),
	)
	return b.insns, nil
}

// prologue saves the context, zeroes the tuple and finds the EtherType
// and the offset of what follows the Ethernet header.
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
	b.emit(
		asm.Mov.Reg(rCtx, asm.R1),
		asm.Mov.Imm(asm.R1, 0),
	)
	for off := int16(stTuple); off < 0; off += 8 {
		b.emit(asm.StoreMem(asm.RFP, off, asm.R1, asm.DWord))
	}
	b.emit(
		asm.LoadMem(rVal, rCtx, skbPktType, asm.Word),
		asm.JNE.Imm(rVal, packetOutgoing, "rx"),
		asm.Mov.Imm(rOff, 12),
	)
	b.loadBytes(rOff, 0, stHdr, 2, "fallback")
	b.loadBE16(rVal, stHdr)
	b.emit(
		asm.Mov.Imm(rOff, ethHeaderLen),
		asm.Ja.Label("vlan"),
	)
	b.label("rx")
	b.emit(
		asm.LoadMem(rVal, rCtx, skbProtocol, asm.Word),
		asm.HostTo(asm.BE, rVal, asm.Half),
		asm.Mov.Imm(rOff, 0),
	)
}

// vlans walks inline 802.1Q/802.1ad tags, counting one the kernel moved
// into skb->vlan_tci, up to MaxVLANDepth; more tags, or a tag cut short,
// send the frame to the fallback socket (user space: HashType NONE).
func (b *builder) vlans() {
	b.label("vlan")
	b.emit(asm.LoadMem(rEnd, rCtx, skbVLANPresent, asm.Word))
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
	b.label("l3")
	b.emit(
		asm.JEq.Imm(rVal, 0x0800, "ipv4"),
		asm.JEq.Imm(rVal, 0x86dd, "ipv6"),
		asm.Ja.Label("fallback"),
	)
}

// ipv4 checks the IPv4 header as the user-space classifier does, copies
// the addresses into the tuple, and finds the transport header and the
// packet's end (the smaller of the total length and the frame).
func (b *builder) ipv4() {
	b.label("ipv4")
	b.loadBytes(rOff, 0, stHdr, 20, "fallback")
	b.emit(
		// version
		asm.LoadMem(asm.R1, asm.RFP, stHdr, asm.Byte),
		asm.Mov.Reg(asm.R2, asm.R1),
		asm.RSh.Imm(asm.R2, 4),
		asm.JNE.Imm(asm.R2, 4, "fallback"),
		// R1 = header length, at least 20 and within the frame
		asm.And.Imm(asm.R1, 0x0f),
		asm.LSh.Imm(asm.R1, 2),
		asm.JLT.Imm(asm.R1, 20, "fallback"),
		asm.LoadMem(asm.R2, rCtx, skbLen, asm.Word),
		asm.Sub.Reg(asm.R2, rOff), // R2 = bytes from the IP header to the frame's end
		asm.JGT.Reg(asm.R1, asm.R2, "fallback"),
	)
	// R3 = total length, at least the header length
	b.loadBE16(asm.R3, stHdr+2)
	b.emit(
		asm.JLT.Reg(asm.R3, asm.R1, "fallback"),
		// addresses
		asm.LoadMem(asm.R4, asm.RFP, stHdr+12, asm.Word),
		asm.StoreMem(asm.RFP, stTuple, asm.R4, asm.Word),
		asm.LoadMem(asm.R4, asm.RFP, stHdr+16, asm.Word),
		asm.StoreMem(asm.RFP, stTuple+4, asm.R4, asm.Word),
	)
	// a fragment: addresses only
	b.loadBE16(asm.R4, stHdr+6)
	b.emit(
		asm.And.Imm(asm.R4, 0x3fff),
		asm.JNE.Imm(asm.R4, 0, "v4_2tuple"),
		// the packet ends at min(total length, frame)
		asm.JLE.Reg(asm.R3, asm.R2, "v4_end"),
		asm.Mov.Reg(asm.R3, asm.R2),
	)
	b.label("v4_end")
	b.emit(
		asm.Mov.Reg(rEnd, rOff),
		asm.Add.Reg(rEnd, asm.R3),
		asm.Add.Reg(rOff, asm.R1),
		asm.LoadMem(rVal, asm.RFP, stHdr+9, asm.Byte),
		asm.Mov.Imm(asm.R5, hash.IPv4Tuple2Len),
		asm.Ja.Label("l4"),
	)
	b.label("v4_2tuple")
	b.emit(
		asm.Mov.Imm(rVal, hash.IPv4Tuple2Len),
		asm.Ja.Label("tuple"),
	)
}

// ipv6 checks the IPv6 header, copies the addresses into the tuple and
// walks the extension headers; a real fragment gets a 2-tuple.
func (b *builder) ipv6() {
	b.label("ipv6")
	b.loadBytes(rOff, 0, stHdr, 40, "fallback")
	b.emit(
		asm.LoadMem(asm.R1, asm.RFP, stHdr, asm.Byte),
		asm.RSh.Imm(asm.R1, 4),
		asm.JNE.Imm(asm.R1, 6, "fallback"),
	)
	for i := int16(0); i < 32; i += 8 {
		b.emit(
			asm.LoadMem(asm.R1, asm.RFP, stHdr+8+i, asm.DWord),
			asm.StoreMem(asm.RFP, stTuple+i, asm.R1, asm.DWord),
		)
	}
	// R2 = bytes from the IPv6 header to the frame's end, cut to 40 +
	// payload length when that is non-zero and shorter.
	b.emit(
		asm.LoadMem(asm.R2, rCtx, skbLen, asm.Word),
		asm.Sub.Reg(asm.R2, rOff),
	)
	b.loadBE16(asm.R3, stHdr+4)
	b.emit(
		asm.JEq.Imm(asm.R3, 0, "v6_end"),
		asm.Add.Imm(asm.R3, 40),
		asm.JGE.Reg(asm.R3, asm.R2, "v6_end"),
		asm.Mov.Reg(asm.R2, asm.R3),
	)
	b.label("v6_end")
	b.emit(
		asm.Mov.Reg(rEnd, rOff),
		asm.Add.Reg(rEnd, asm.R2),
		asm.LoadMem(rVal, asm.RFP, stHdr+6, asm.Byte),
		asm.Add.Imm(rOff, 40),
	)
	for n := 0; n <= maxExtHeaders; n++ {
		opt, ah, frag := fmt.Sprintf("ext%d_opt", n), fmt.Sprintf("ext%d_ah", n), fmt.Sprintf("ext%d_frag", n)
		next := fmt.Sprintf("ext%d", n+1)
		if n == maxExtHeaders {
			// one header too many: the chain is too long
			opt, ah, frag = "fallback", "fallback", "fallback"
		}
		b.emit(
			asm.JEq.Imm(rVal, 0, opt),
			asm.JEq.Imm(rVal, 43, opt),
			asm.JEq.Imm(rVal, 60, opt),
			asm.JEq.Imm(rVal, 51, ah),
			asm.JEq.Imm(rVal, 44, frag),
			asm.Ja.Label("v6_l4"),
		)
		if n == maxExtHeaders {
			break
		}
		// hop-by-hop, routing, destination options: (len+1)*8 bytes
		// AH: (len+2)*4 bytes; both need their first two bytes in the packet
		for _, isAH := range []bool{false, true} {
			if isAH {
				b.label(ah)
			} else {
				b.label(opt)
			}
			b.emit(
				asm.Mov.Reg(asm.R1, rOff),
				asm.Add.Imm(asm.R1, 2),
				asm.JGT.Reg(asm.R1, rEnd, "fallback"),
			)
			b.loadBytes(rOff, 0, stHdr, 2, "fallback")
			b.emit(asm.LoadMem(asm.R1, asm.RFP, stHdr+1, asm.Byte))
			if isAH {
				b.emit(asm.Add.Imm(asm.R1, 2), asm.LSh.Imm(asm.R1, 2))
			} else {
				b.emit(asm.Add.Imm(asm.R1, 1), asm.LSh.Imm(asm.R1, 3))
			}
			b.emit(
				asm.Mov.Reg(asm.R2, rEnd),
				asm.Sub.Reg(asm.R2, rOff),
				asm.JGT.Reg(asm.R1, asm.R2, "fallback"),
				asm.LoadMem(rVal, asm.RFP, stHdr, asm.Byte),
				asm.Add.Reg(rOff, asm.R1),
				asm.Ja.Label(next),
			)
		}
		// fragment header: 8 bytes; offset or M set is a real fragment
		b.label(frag)
		b.emit(
			asm.Mov.Reg(asm.R1, rOff),
			asm.Add.Imm(asm.R1, 8),
			asm.JGT.Reg(asm.R1, rEnd, "fallback"),
		)
		b.loadBytes(rOff, 0, stHdr, 8, "fallback")
		b.loadBE16(asm.R1, stHdr+2)
		b.emit(
			asm.And.Imm(asm.R1, 0xfff9),
			asm.JNE.Imm(asm.R1, 0, "v6_2tuple"),
			asm.LoadMem(rVal, asm.RFP, stHdr, asm.Byte),
			asm.Add.Imm(rOff, 8),
		)
		b.label(next)
	}
	b.label("v6_l4")
	b.emit(
		asm.Mov.Imm(asm.R5, hash.IPv6Tuple2Len),
		asm.Ja.Label("l4"),
	)
	b.label("v6_2tuple")
	b.emit(
		asm.Mov.Imm(rVal, hash.IPv6Tuple2Len),
		asm.Ja.Label("tuple"),
	)
}

// transport reads the ports of TCP (and, with UDP4Tuple, UDP and SCTP)
// into the tuple after the addresses. On entry rVal is the protocol, R5
// the 2-tuple length, rOff the transport header, rEnd the packet's end.
// On exit rVal is the tuple length.
func (b *builder) transport() {
	b.label("l4")
	b.emit(asm.JEq.Imm(rVal, 6, "ports"))
	if b.opts.UDP4Tuple {
		b.emit(
			asm.JEq.Imm(rVal, 17, "ports"),
			asm.JEq.Imm(rVal, 132, "ports"),
		)
	}
	b.emit(
		asm.Mov.Reg(rVal, asm.R5),
		asm.Ja.Label("tuple"),
	)
	b.label("ports")
	b.emit(
		asm.Mov.Reg(rVal, asm.R5),
		asm.Mov.Reg(asm.R1, rOff),
		asm.Add.Imm(asm.R1, 4),
		asm.JGT.Reg(asm.R1, rEnd, "tuple"), // truncated: 2-tuple
		// R3 = &tuple[rVal]: 8 or 32, both within the tuple
		asm.Mov.Reg(asm.R1, rCtx),
		asm.Mov.Reg(asm.R2, rOff),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, stTuple+hash.IPv4Tuple2Len),
		asm.JEq.Imm(rVal, hash.IPv4Tuple2Len, "ports_load"),
		asm.Add.Imm(asm.R3, hash.IPv6Tuple2Len-hash.IPv4Tuple2Len),
	)
	b.label("ports_load")
	b.emit(
		asm.Mov.Imm(asm.R4, 4),
		asm.FnSkbLoadBytes.Call(),
		asm.JNE.Imm(asm.R0, 0, "tuple"), // cannot happen after the bound check; 2-tuple
		asm.Add.Imm(rVal, 4),
	)
	b.label("tuple")
}

// symmetric swaps the two endpoints in the tuple when the source (address,
// port) is above the destination's, comparing big-endian. Unused port
// bytes are zero, so a 2-tuple compares its addresses only.
func (b *builder) symmetric() {
	b.emit(asm.JGE.Imm(rVal, hash.IPv6Tuple2Len, "sym6"))
	// IPv4
	b.loadBE32(asm.R1, stTuple)
	b.loadBE32(asm.R2, stTuple+4)
	b.emit(
		asm.JLT.Reg(asm.R1, asm.R2, "hash"),
		asm.JGT.Reg(asm.R1, asm.R2, "swap4"),
	)
	b.loadBE16(asm.R1, stTuple+8)
	b.loadBE16(asm.R2, stTuple+10)
	b.emit(asm.JLE.Reg(asm.R1, asm.R2, "hash"))
	b.label("swap4")
	b.emit(
		asm.LoadMem(asm.R1, asm.RFP, stTuple, asm.Word),
		asm.LoadMem(asm.R2, asm.RFP, stTuple+4, asm.Word),
		asm.StoreMem(asm.RFP, stTuple, asm.R2, asm.Word),
		asm.StoreMem(asm.RFP, stTuple+4, asm.R1, asm.Word),
		asm.LoadMem(asm.R1, asm.RFP, stTuple+8, asm.Half),
		asm.LoadMem(asm.R2, asm.RFP, stTuple+10, asm.Half),
		asm.StoreMem(asm.RFP, stTuple+8, asm.R2, asm.Half),
		asm.StoreMem(asm.RFP, stTuple+10, asm.R1, asm.Half),
		asm.Ja.Label("hash"),
	)
	// IPv6: four big-endian words of each address, then the ports
	b.label("sym6")
	for i := int16(0); i < 16; i += 4 {
		b.loadBE32(asm.R1, stTuple+i)
		b.loadBE32(asm.R2, stTuple+16+i)
		b.emit(
			asm.JLT.Reg(asm.R1, asm.R2, "hash"),
			asm.JGT.Reg(asm.R1, asm.R2, "swap6"),
		)
	}
	b.loadBE16(asm.R1, stTuple+32)
	b.loadBE16(asm.R2, stTuple+34)
	b.emit(asm.JLE.Reg(asm.R1, asm.R2, "hash"))
	b.label("swap6")
	for i := int16(0); i < 16; i += 8 {
		b.emit(
			asm.LoadMem(asm.R1, asm.RFP, stTuple+i, asm.DWord),
			asm.LoadMem(asm.R2, asm.RFP, stTuple+16+i, asm.DWord),
			asm.StoreMem(asm.RFP, stTuple+i, asm.R2, asm.DWord),
			asm.StoreMem(asm.RFP, stTuple+16+i, asm.R1, asm.DWord),
		)
	}
	b.emit(
		asm.LoadMem(asm.R1, asm.RFP, stTuple+32, asm.Half),
		asm.LoadMem(asm.R2, asm.RFP, stTuple+34, asm.Half),
		asm.StoreMem(asm.RFP, stTuple+32, asm.R2, asm.Half),
		asm.StoreMem(asm.RFP, stTuple+34, asm.R1, asm.Half),
	)
}

// toeplitz hashes the first rVal bytes of the tuple (8, 12, 32 or 36)
// into R5, one table load per byte, unrolled. The table value is 36 KiB;
// an instruction's offset field reaches 32 KiB, so positions 32 to 35 use
// a second base pointer 32 KiB in.
func (b *builder) toeplitz() {
	b.label("hash")
	b.lookup0(ToeplitzMapName)
	b.emit(
		asm.Mov.Reg(rOff, asm.R0),
		asm.Mov.Reg(rEnd, asm.R0),
		asm.Add.Imm(rEnd, 32*1024),
		asm.Mov.Imm(asm.R5, 0),
	)
	for i := 0; i < hash.MaxTupleLen; i++ {
		switch i {
		case hash.IPv4Tuple2Len, hash.IPv4Tuple4Len, hash.IPv6Tuple2Len:
			b.emit(asm.JEq.Imm(rVal, int32(i), "hashed"))
		}
		base, off := rOff, int16(i*1024)
		if i >= 32 {
			base, off = rEnd, int16((i-32)*1024)
		}
		b.emit(
			asm.LoadMem(asm.R1, asm.RFP, stTuple+int16(i), asm.Byte),
			asm.LSh.Imm(asm.R1, 2),
			asm.Add.Reg(asm.R1, base),
			asm.LoadMem(asm.R1, asm.R1, off, asm.Word),
			asm.Xor.Reg(asm.R5, asm.R1),
		)
	}
	b.label("hashed")
	b.emit(
		asm.Mov.Reg(rVal, asm.R5),
		asm.And.Imm(rVal, int32(b.mask)),
		asm.LSh.Imm(rVal, 2),
	)
}

// indirection returns table[flowid & mask].
func (b *builder) indirection() {
	b.lookup0(TableMapName)
	b.emit(
		asm.Add.Reg(asm.R0, rVal),
		asm.LoadMem(asm.R0, asm.R0, 0, asm.Word),
		asm.Return(),
	)
}
