package bpfsteer

import (
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf/asm"
)

// HostMapName is the XDP program's hash map of the host's own addresses
// (Options.HostAddrs) with Options.PassHost: 16-byte keys, an IPv4
// address in its IPv4-mapped IPv6 form (netip.Addr.As16).
const HostMapName = "rps_host"

// MaxHostAddrs bounds Options.HostAddrs.
const MaxHostAddrs = 256

// Frame offsets and values the host check reads.
const (
	etARP       = 0x0806
	protoICMPv6 = 58
	icmpv6NDMin = 133 // router solicitation
	icmpv6NDMax = 137 // redirect; 135 and 136 are neighbour solicitation and advertisement
)

// checkHost checks o's host options; o.Hook is XDP.
func (o *Options) checkHost() error {
	if !o.PassHost {
		if len(o.HostAddrs) > 0 {
			return fmt.Errorf("bpfsteer: HostAddrs without PassHost: %w", ErrOptions)
		}
		return nil
	}
	if len(o.HostAddrs) > MaxHostAddrs {
		return fmt.Errorf("bpfsteer: %d host addresses, at most %d: %w", len(o.HostAddrs), MaxHostAddrs, ErrOptions)
	}
	for _, a := range o.HostAddrs {
		if !a.IsValid() {
			return fmt.Errorf("bpfsteer: an invalid host address: %w", ErrOptions)
		}
	}
	return nil
}

// hostKey is the host map's key for a.
func hostKey(a netip.Addr) [16]byte { return a.Unmap().As16() }

// hostCheck passes the frames the host itself needs to the kernel stack,
// counted (XDPStatHost): ARP; IPv6 neighbour discovery (ICMPv6 types 133
// to 137, the ICMPv6 header right after the IPv6 header, as RFC 4861
// sends it); and IPv4 or IPv6 packets whose destination is one of
// HostAddrs. It reads the untagged frame only (a VLAN's host addresses
// belong to the VLAN's interface, whose frames a tag marks). Any other
// frame, or one too short to tell, goes on to be steered, with rVal (the
// EtherType) and rOff as frameEtherType left them. It uses R0-R5, stHdr
// and stKey.
func (b *builder) hostCheck() {
	const key = stHdr + 24 // 16 bytes: the IPv6 destination, or the IPv4 one mapped
	b.emit(
		asm.JEq.Imm(rVal, etARP, "host"),
		asm.JEq.Imm(rVal, etIPv4, "host_v4"),
		asm.JNE.Imm(rVal, etIPv6, "host_no"),
	)
	// IPv6: neighbour discovery, else the destination.
	b.loadBytes(rOff, 0, stHdr, 40, "host_no")
	b.emit(
		asm.LoadMem(asm.R1, asm.RFP, stHdr+6, asm.Byte),
		asm.JNE.Imm(asm.R1, protoICMPv6, "host_addr"),
	)
	b.loadBytes(rOff, 40, stKey, 1, "host_addr")
	b.emit(
		asm.LoadMem(asm.R1, asm.RFP, stKey, asm.Byte),
		asm.JLT.Imm(asm.R1, icmpv6NDMin, "host_addr"),
		asm.JLE.Imm(asm.R1, icmpv6NDMax, "host"),
		asm.Ja.Label("host_addr"),
	)
	// IPv4: the destination, as an IPv4-mapped IPv6 address.
	b.label("host_v4")
	b.loadBytes(rOff, 0, stHdr, 20, "host_no")
	b.emit(
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.RFP, key, asm.R1, asm.DWord),
		asm.StoreMem(asm.RFP, key+8, asm.R1, asm.Word),
		asm.Mov.Imm(asm.R1, 0xff),
		asm.StoreMem(asm.RFP, key+10, asm.R1, asm.Byte),
		asm.StoreMem(asm.RFP, key+11, asm.R1, asm.Byte),
		asm.LoadMem(asm.R1, asm.RFP, stHdr+16, asm.Word),
		asm.StoreMem(asm.RFP, key+12, asm.R1, asm.Word),
	)
	b.label("host_addr")
	b.emit(
		asm.LoadMapPtr(asm.R1, 0).WithReference(HostMapName),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, key),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "host_no"),
	)
	b.label("host")
	b.passCounted(XDPStatHost)
	b.label("host_no")
}
