//go:build linux

package bpfsteer

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/cilium/ebpf"
)

// XDP is the loaded XDP steering program and its maps: the key's, the
// indirection table, the XSKMAP of the workers' AF_XDP sockets, the
// counters, and the map whose update waits for a grace period (Sync). Its
// methods are safe for concurrent use.
type XDP struct {
	mu      sync.Mutex
	prog    *ebpf.Program
	keyed   *ebpf.Map
	table   *ebpf.Map
	xsks    *ebpf.Map
	stats   *ebpf.Map
	frags   *ebpf.Map // FragMapName, with FollowFragments
	host    *ebpf.Map // Options.PassHost's addresses, nil without
	sync    *grace    // waits for running programs
	n       int       // indirection table length
	sockets int
}

// NewXDP builds the program for opts with the XDP hook (opts.Hook is
// taken as HookXDP), creates its maps, with an XSKMAP ([XSKMapName]) of
// sockets entries, and loads it as a BPF_PROG_TYPE_XDP program. Attach it
// to the device (a BPF link: cilium/ebpf's link.AttachXDP) once
// [XDP.SetSocket] has filled the slots; a frame whose slot is empty is
// passed to the kernel and counted (NoSocket), as is a frame of another
// receive queue than opts.Queue (OtherQueue).
//
// Every table entry, and Options.Fallback unless PassUnhashed, must be
// below sockets (else ErrOptions). Loading needs CAP_BPF (or root) and,
// for the counters and the XSKMAP, CAP_NET_ADMIN.
func NewXDP(opts Options, sockets int) (*XDP, error) {
	opts.Hook = HookXDP
	if sockets < 1 || sockets > MaxTableLen {
		return nil, fmt.Errorf("bpfsteer: %d sockets, want 1 to %d: %w", sockets, MaxTableLen, ErrOptions)
	}
	insns, err := Instructions(opts)
	if err != nil {
		return nil, err
	}
	if !opts.testReturn {
		if err := checkWorkers(opts.Table, sockets); err != nil {
			return nil, err
		}
		if !opts.PassUnhashed && int64(opts.Fallback) >= int64(sockets) {
			return nil, fmt.Errorf("bpfsteer: fallback socket %d of %d: %w", opts.Fallback, sockets, ErrOptions)
		}
	}
	x := &XDP{n: len(opts.Table), sockets: sockets}
	var name string
	x.keyed, name, err = newKeyedMap(&opts)
	if err != nil {
		return nil, err
	}
	if x.table, err = newTableMap(opts.Table); err != nil {
		x.Close()
		return nil, err
	}
	x.xsks, err = ebpf.NewMap(&ebpf.MapSpec{
		Name:       XSKMapName,
		Type:       ebpf.XSKMap,
		KeySize:    4,
		ValueSize:  4,
		MaxEntries: uint32(sockets),
	})
	if err != nil {
		x.Close()
		return nil, fmt.Errorf("bpfsteer: creating the XSKMAP: %w", err)
	}
	x.stats, err = ebpf.NewMap(&ebpf.MapSpec{
		Name:       XDPStatsMapName,
		Type:       ebpf.PerCPUArray,
		KeySize:    4,
		ValueSize:  8,
		MaxEntries: uint32(XDPStatSockets + sockets),
	})
	if err != nil {
		x.Close()
		return nil, fmt.Errorf("bpfsteer: creating the counter map: %w", err)
	}
	if x.sync, err = newGrace(); err != nil {
		x.Close()
		return nil, err
	}
	maps := map[string]*ebpf.Map{name: x.keyed, TableMapName: x.table, XSKMapName: x.xsks, XDPStatsMapName: x.stats}
	if x.frags, err = newFragMap(&opts, maps); err != nil {
		x.Close()
		return nil, err
	}
	if opts.PassHost {
		if x.host, err = newHostMap(opts.HostAddrs); err != nil {
			x.Close()
			return nil, err
		}
		maps[HostMapName] = x.host
	}
	if err := associate(insns, maps); err != nil {
		x.Close()
		return nil, err
	}
	x.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         XDPProgramName,
		Type:         ebpf.XDP,
		AttachType:   ebpf.AttachXDP,
		Instructions: insns,
		License:      "BSD",
	})
	if err != nil {
		x.Close()
		return nil, fmt.Errorf("bpfsteer: loading the XDP program: %w", err)
	}
	return x, nil
}

// newHostMap creates the host map (HostMapName) holding addrs, read-only
// from user space once filled.
func newHostMap(addrs []netip.Addr) (*ebpf.Map, error) {
	m, err := ebpf.NewMap(&ebpf.MapSpec{
		Name:       HostMapName,
		Type:       ebpf.Hash,
		KeySize:    16,
		ValueSize:  1,
		MaxEntries: uint32(max(len(addrs), 1)),
	})
	if err != nil {
		return nil, fmt.Errorf("bpfsteer: creating the host map: %w", err)
	}
	for _, a := range addrs {
		if err := m.Put(hostKey(a), uint8(1)); err != nil {
			m.Close()
			return nil, fmt.Errorf("bpfsteer: filling the host map with %v: %w", a, err)
		}
	}
	if err := m.Freeze(); err != nil && !errors.Is(err, ebpf.ErrNotSupported) {
		m.Close()
		return nil, fmt.Errorf("bpfsteer: freezing the host map: %w", err)
	}
	return m, nil
}

// checkWorkers checks that every table entry names one of the sockets.
func checkWorkers(table []uint32, sockets int) error {
	for i, w := range table {
		if int64(w) >= int64(sockets) {
			return fmt.Errorf("bpfsteer: table bucket %d names socket %d of %d: %w", i, w, sockets, ErrOptions)
		}
	}
	return nil
}

// Program returns the loaded program, to attach (link.AttachXDP). It is
// valid until Close; nil after.
func (x *XDP) Program() *ebpf.Program {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.prog
}

// ebpfProgram returns the loaded program, for tests.
func (x *XDP) ebpfProgram() *ebpf.Program { return x.Program() }

// Sockets returns the number of XSKMAP slots.
func (x *XDP) Sockets() int { return x.sockets }

// SetSocket puts the AF_XDP socket fd in slot i: worker i's frames are
// redirected to it from the next frame on. The kernel takes its own
// reference; the socket must have its RX ring and UMEM set up.
func (x *XDP) SetSocket(i, fd int) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.checkSlot("set socket", i); err != nil {
		return err
	}
	if err := x.xsks.Put(uint32(i), uint32(fd)); err != nil {
		return fmt.Errorf("bpfsteer: set socket %d: %w", i, err)
	}
	return nil
}

// checkSlot checks that x is open and i names one of its slots; x.mu is
// held.
func (x *XDP) checkSlot(op string, i int) error {
	if x.xsks == nil {
		return fmt.Errorf("bpfsteer: %s: %w", op, ErrClosed)
	}
	if i < 0 || i >= x.sockets {
		return fmt.Errorf("bpfsteer: %s %d of %d: %w", op, i, x.sockets, ErrOptions)
	}
	return nil
}

// ClearSocket empties slot i: its frames are passed to the kernel and
// counted (NoSocket). Clearing an empty slot is harmless.
func (x *XDP) ClearSocket(i int) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.checkSlot("clear socket", i); err != nil {
		return err
	}
	if err := x.xsks.Delete(uint32(i)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("bpfsteer: clear socket %d: %w", i, err)
	}
	return nil
}

// SetTable replaces the indirection table with one of the same length
// whose entries name sockets, in one map update: a frame steered after it
// sees the new table, one steered during it every entry old or new. Call
// Sync after it to know that no frame is still being steered by the old.
func (x *XDP) SetTable(table []uint32) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.table != nil {
		if err := checkWorkers(table, x.sockets); err != nil {
			return err
		}
	}
	return putTable(x.table, x.n, table)
}

// Table returns the indirection table the kernel currently uses.
func (x *XDP) Table() ([]uint32, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return getTable(x.table, x.n)
}

// Sync returns after an RCU grace period: every run of the program that
// began before the call has ended, so every frame steered from then on
// sees every map change made before the call (SetTable, SetSocket). It
// updates an array of maps: the kernel waits for running programs after
// a successful update of one (kernel/bpf/syscall.c, map_update_elem and
// maybe_wait_bpf_programs, synchronize_rcu; XDP programs run in RCU
// read-side sections). It takes a grace period, milliseconds, and is
// safe to call from many goroutines at once.
func (x *XDP) Sync() error {
	x.mu.Lock()
	g := x.sync
	x.mu.Unlock()
	return g.wait()
}

// Counters returns the program's counters, summed over the CPUs.
func (x *XDP) Counters() (XDPCounters, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.stats == nil {
		return XDPCounters{}, fmt.Errorf("bpfsteer: counters: %w", ErrClosed)
	}
	sum := func(entry int) (uint64, error) {
		var per []uint64
		if err := x.stats.Lookup(uint32(entry), &per); err != nil {
			return 0, fmt.Errorf("bpfsteer: counters: entry %d: %w", entry, err)
		}
		var n uint64
		for _, v := range per {
			n += v
		}
		return n, nil
	}
	var c XDPCounters
	var err error
	if c.UnhashedPassed, err = sum(XDPStatPassed); err != nil {
		return XDPCounters{}, err
	}
	if c.UnhashedFallback, err = sum(XDPStatFallback); err != nil {
		return XDPCounters{}, err
	}
	if c.NoSocket, err = sum(XDPStatNoSocket); err != nil {
		return XDPCounters{}, err
	}
	if c.OtherQueue, err = sum(XDPStatOtherQueue); err != nil {
		return XDPCounters{}, err
	}
	if c.HostPassed, err = sum(XDPStatHost); err != nil {
		return XDPCounters{}, err
	}
	c.Redirected = make([]uint64, x.sockets)
	for i := range c.Redirected {
		if c.Redirected[i], err = sum(XDPStatSockets + i); err != nil {
			return XDPCounters{}, err
		}
	}
	return c, nil
}

// Close unloads the program and its maps (a link that holds the program
// keeps it and the maps it uses alive until it is closed). Closing twice
// is harmless.
func (x *XDP) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	var errs []error
	if x.prog != nil {
		errs = append(errs, x.prog.Close())
	}
	for _, m := range []*ebpf.Map{x.keyed, x.table, x.xsks, x.stats, x.frags, x.host} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	errs = append(errs, x.sync.close())
	x.prog, x.keyed, x.table, x.xsks, x.stats, x.frags, x.host, x.sync = nil, nil, nil, nil, nil, nil, nil, nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bpfsteer: close: %w", err)
	}
	return nil
}
