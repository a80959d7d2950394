package bpfsteer

import (
	"fmt"

	"github.com/cilium/ebpf/asm"
)

// xdp_md field offsets (include/uapi/linux/bpf.h).
const (
	xdpIngressIfindex = 12 // xdp_md->ingress_ifindex
	xdpRxQueueIndex   = 16 // xdp_md->rx_queue_index
)

// XDP actions (enum xdp_action).
const (
	xdpPass     = 2
	xdpRedirect = 4
)

// XDPCounters are the XDP program's counters, summed over the CPUs. Every
// frame the program sees is counted once in Redirected, UnhashedPassed,
// HostPassed, NoSocket or OtherQueue; UnhashedFallback counts the frames
// not hashed that were sent towards Options.Fallback (each also counted
// where the redirect ended).
type XDPCounters struct {
	// Redirected[i] counts the frames redirected to socket i (the XSKMAP's
	// entry i), hashed or sent there as the fallback.
	Redirected []uint64
	// UnhashedPassed counts frames not hashed (user space: HashType NONE)
	// passed to the kernel stack, with Options.PassUnhashed.
	UnhashedPassed uint64
	// UnhashedFallback counts frames not hashed sent to Options.Fallback.
	UnhashedFallback uint64
	// HostPassed counts the frames the host needs (ARP, neighbour
	// discovery, packets to its addresses) passed to the kernel stack,
	// with Options.PassHost.
	HostPassed uint64
	// NoSocket counts frames whose XSKMAP slot held no socket: the
	// redirect failed and the frame was passed to the kernel stack.
	NoSocket uint64
	// OtherQueue counts frames that arrived on another receive queue
	// than Options.Queue, passed to the kernel stack unexamined.
	OtherQueue uint64
}

// Total is the number of frames the program has seen.
func (c XDPCounters) Total() uint64 {
	n := c.UnhashedPassed + c.HostPassed + c.NoSocket + c.OtherQueue
	for _, r := range c.Redirected {
		n += r
	}
	return n
}

// xdpPrologue passes a frame of another receive queue than Options.Queue
// ("other_queue"), then saves the context, zeroes the tuple and reads the
// EtherType: an XDP program sees the frame from its MAC header, every
// VLAN tag inline. The queue is compared as the 32-bit value it is.
func (b *builder) xdpPrologue() {
	b.emit(
		asm.LoadMem(asm.R2, asm.R1, xdpRxQueueIndex, asm.Word),
		asm.JNE.Imm32(asm.R2, int32(b.opts.Queue), "other_queue"),
	)
	b.entry()
	b.frameEtherType()
	if b.opts.PassHost {
		b.hostCheck()
	}
}

// xdpLength sets r to the frame's length, linear and paged parts
// (bpf_xdp_get_buff_len), cut to 32 bits as skb->len is. It uses R1-R5.
func (b *builder) xdpLength(r asm.Register) {
	b.emit(
		asm.Mov.Reg(asm.R1, rCtx),
		asm.FnXdpGetBuffLen.Call(),
		asm.Mov.Reg32(r, asm.R0),
	)
}

// xdpTail ends the XDP program, the bucket's offset in rVal: the worker
// from the indirection table, then bpf_redirect_map(&rps_xsks, worker,
// XDP_PASS), whose result the program returns, counted; frames of another
// queue ("other_queue") are passed to the kernel, counted; frames not
// hashed ("fallback") go to Options.Fallback the same way, or with
// PassUnhashed are passed to the kernel.
func (b *builder) xdpTail() {
	b.lookup0(TableMapName, "fallback")
	b.emit(
		asm.Add.Reg(asm.R0, rVal),
		asm.LoadMem(rVal, asm.R0, 0, asm.Word),
	)
	b.label("redirect")
	if b.opts.testReturn {
		b.emit(
			asm.Mov.Reg(asm.R0, rVal),
			asm.Return(),
		)
	} else {
		b.emit(
			asm.LoadMapPtr(asm.R1, 0).WithReference(XSKMapName),
			asm.Mov.Reg(asm.R2, rVal),
			asm.Mov.Imm(asm.R3, xdpPass),
			asm.FnRedirectMap.Call(),
			asm.JNE.Imm(asm.R0, xdpRedirect, "no_socket"),
			asm.Mov.Reg(asm.R1, rVal),
			asm.Add.Imm(asm.R1, XDPStatSockets),
		)
		b.count(asm.R1)
		b.emit(
			asm.Mov.Imm(asm.R0, xdpRedirect),
			asm.Return(),
		)
		b.label("no_socket")
		b.passCounted(XDPStatNoSocket)
	}
	b.label("other_queue")
	b.passCounted(XDPStatOtherQueue)
	b.label("fallback")
	if b.opts.PassUnhashed {
		b.passCounted(XDPStatPassed)
		return
	}
	b.countImm(XDPStatFallback)
	b.emit(
		asm.Mov.Imm32(rVal, int32(b.opts.Fallback)),
		asm.Ja.Label("redirect"),
	)
}

// passCounted counts the frame in entry and returns XDP_PASS.
func (b *builder) passCounted(entry int32) {
	b.countImm(entry)
	b.emit(
		asm.Mov.Imm(asm.R0, xdpPass),
		asm.Return(),
	)
}

func (b *builder) countImm(entry int32) {
	b.emit(asm.Mov.Imm(asm.R1, entry))
	b.count(asm.R1)
}

// count adds one to this CPU's value of the counter whose entry is in r,
// atomically (a test run may be interrupted on its CPU by a frame). It
// uses R0-R5.
func (b *builder) count(r asm.Register) {
	b.counts++
	skip := fmt.Sprintf("counted%d", b.counts)
	b.emit(
		asm.StoreMem(asm.RFP, stKey, r, asm.Word),
		asm.LoadMapPtr(asm.R1, 0).WithReference(XDPStatsMapName),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, skip),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
	)
	b.label(skip)
}
