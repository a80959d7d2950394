//go:build linux

package afxdp

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/bpfsteer"
	"github.com/rpsgo/rps/internal/livesock"
	"github.com/rpsgo/rps/internal/xsk"

	"github.com/rpsgo/rps/steer"
)

// XDP actions (enum xdp_action) and the offset of rx_queue_index in
// struct xdp_md.
const (
	xdpPass           = 2
	xdpMDRxQueueIndex = 16
)

// redirect is the program Open attaches: every frame of one queue goes to
// the socket in slot 0 of its XSKMAP, frames of other queues (and every
// frame while the slot is empty) to the kernel stack. Without
// Config.PassUnhashed it is a program of a few instructions (xsks, prog);
// with it, the library's steering program (x) with a one-bucket table,
// which passes the frames it cannot hash to the kernel stack and counts
// them.
type redirect struct {
	xsks *ebpf.Map
	prog *ebpf.Program
	x    *bpfsteer.XDP
	link link.Link
	mode AttachMode
}

// redirectInstructions returns the program for queue: if the frame's
// rx_queue_index is queue, return bpf_redirect_map(&xsks, 0, XDP_PASS),
// else XDP_PASS. The redirect's flags are the action when the slot is
// empty.
func redirectInstructions(xsks *ebpf.Map, queue int) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, xdpMDRxQueueIndex, asm.Word),
		asm.JNE.Imm(asm.R2, int32(queue), "pass"),
		asm.LoadMapPtr(asm.R1, xsks.FD()),
		asm.Mov.Imm(asm.R2, 0),
		asm.Mov.Imm(asm.R3, xdpPass),
		asm.FnRedirectMap.Call(),
		asm.Return(),
		asm.Mov.Imm(asm.R0, xdpPass).WithSymbol("pass"),
		asm.Return(),
	}
}

// attachRedirect loads the redirect program for the socket fd bound to
// cfg.Queue (the steering program with cfg.PassUnhashed or HostPass, host
// the addresses it passes) and attaches it to the interface through a BPF
// link, in cfg.Attach's mode (AttachAuto: native, else generic).
func attachRedirect(ns xsk.NetNS, ifindex, fd int, cfg Config, host []netip.Addr) (*redirect, error) {
	queue, mode := cfg.Queue, cfg.Attach
	if cfg.PassUnhashed || cfg.Host == HostPass {
		return attachPassing(ns, ifindex, fd, cfg, host)
	}
	r := &redirect{}
	var err error
	r.xsks, err = ebpf.NewMap(&ebpf.MapSpec{
		Name:       "afxdp_xsks",
		Type:       ebpf.XSKMap,
		KeySize:    4,
		ValueSize:  4,
		MaxEntries: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the XSKMAP: %w", livesock.Explain(err, livesock.NeedBPF))
	}
	if err := r.xsks.Put(uint32(0), uint32(fd)); err != nil {
		r.close()
		return nil, fmt.Errorf("putting the socket into the XSKMAP: %w", err)
	}
	r.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "afxdp_redirect",
		Type:         ebpf.XDP,
		Instructions: redirectInstructions(r.xsks, queue),
		License:      "BSD",
	})
	if err != nil {
		r.close()
		return nil, fmt.Errorf("loading the redirect program: %w", livesock.Explain(err, livesock.NeedBPF))
	}
	r.link, r.mode, err = attachProgram(ns, r.prog, ifindex, mode)
	if err != nil {
		r.close()
		return nil, livesock.Explain(err, livesock.NeedXDP)
	}
	return r, nil
}

// attachPassing loads bpfsteer's XDP program with one socket and a
// one-bucket table (so the key does not matter: every hashed frame goes
// to slot 0), passing the frames it cannot hash to the kernel stack with
// cfg.PassUnhashed and the host's with HostPass, and attaches it as
// attachRedirect does.
func attachPassing(ns xsk.NetNS, ifindex, fd int, cfg Config, host []netip.Addr) (*redirect, error) {
	opts := bpfsteer.Options{Key: hash.MicrosoftKey[:], Table: []uint32{0}, PassUnhashed: cfg.PassUnhashed, Queue: uint32(cfg.Queue),
		PassHost: cfg.Host == HostPass, HostAddrs: host}
	x, err := bpfsteer.NewXDP(opts, 1)
	if err != nil {
		return nil, fmt.Errorf("loading the XDP program: %w", livesock.Explain(err, livesock.NeedBPF))
	}
	r := &redirect{x: x}
	if err := x.SetSocket(0, fd); err != nil {
		r.close()
		return nil, err
	}
	r.link, r.mode, err = attachProgram(ns, x.Program(), ifindex, cfg.Attach)
	if err != nil {
		r.close()
		return nil, livesock.Explain(err, livesock.NeedXDP)
	}
	return r, nil
}

// passed returns the frames the program passed to the kernel stack, for
// want of a hash or as the host's: zero for the tiny program, which
// passes none.
func (r *redirect) passed() (uint64, error) {
	if r == nil || r.x == nil {
		return 0, nil
	}
	c, err := r.x.Counters()
	if err != nil {
		return 0, fmt.Errorf("reading the XDP program's counters: %w", err)
	}
	return c.UnhashedPassed + c.HostPassed, nil
}

// errOtherNetNS is returned by an attach from another network namespace
// than the socket's: an interface index means another interface there.
var errOtherNetNS = errors.New("the calling thread is not in the network namespace the sockets were opened in")

// attachProgram attaches prog to the interface ifindex of namespace ns
// through a BPF link in mode and returns the mode it got. It refuses to
// attach from another namespace, where ifindex names another interface.
func attachProgram(ns xsk.NetNS, prog *ebpf.Program, ifindex int, mode AttachMode) (link.Link, AttachMode, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if cur, err := xsk.CurrentNetNS(); err != nil {
		return nil, AttachNone, err
	} else if cur != ns {
		return nil, AttachNone, fmt.Errorf("afxdp: %w: %w", steer.ErrConfig, errOtherNetNS)
	}
	try := func(m AttachMode) (link.Link, error) {
		flags := link.XDPDriverMode
		if m == AttachGeneric {
			flags = link.XDPGenericMode
		}
		l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex, Flags: flags})
		if err != nil {
			return nil, fmt.Errorf("attaching the XDP program (%v): %w", m, err)
		}
		return l, nil
	}
	switch mode {
	case AttachNative, AttachGeneric:
		l, err := try(mode)
		return l, mode, err
	}
	l, nerr := try(AttachNative)
	if nerr == nil {
		return l, AttachNative, nil
	}
	l, gerr := try(AttachGeneric)
	if gerr == nil {
		return l, AttachGeneric, nil
	}
	return nil, AttachNone, errors.Join(nerr, gerr)
}

// close detaches and frees what r holds; it is idempotent.
func (r *redirect) close() error {
	if r == nil {
		return nil
	}
	var errs []error
	if r.link != nil {
		if err := r.link.Close(); err != nil {
			errs = append(errs, fmt.Errorf("detaching the XDP program: %w", err))
		}
		r.link = nil
	}
	if r.prog != nil {
		r.prog.Close()
		r.prog = nil
	}
	if r.xsks != nil {
		r.xsks.Close()
		r.xsks = nil
	}
	if r.x != nil {
		if err := r.x.ClearSocket(0); err != nil {
			errs = append(errs, err)
		}
		if err := r.x.Close(); err != nil {
			errs = append(errs, err)
		}
		r.x = nil
	}
	return errors.Join(errs...)
}
