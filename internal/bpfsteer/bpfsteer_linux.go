//go:build linux

package bpfsteer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/rpsgo/rps/internal/wire"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/rpsgo/rps/hash"
)

// Program is the loaded steering program, its two maps, and the maps
// whose update waits for a grace period (Sync). Its methods are safe for
// concurrent use.
type Program struct {
	mu    sync.Mutex
	prog  *ebpf.Program
	keyed *ebpf.Map // the Toeplitz table or the SipHash state
	table *ebpf.Map
	frags *ebpf.Map // FragMapName, with FollowFragments
	sync  *grace    // waits for running programs
	n     int       // indirection table length
}

// New builds the program for opts, creates its maps (the Toeplitz
// contribution table or the SipHash state, and the indirection table) and
// loads it as a BPF_PROG_TYPE_SOCKET_FILTER program. Attach it to a
// PACKET_FANOUT_EBPF group with setsockopt(PACKET_FANOUT_DATA, FD()).
// Loading needs CAP_BPF (or root): the program calls functions of its own.
//
// On kernels before 5.11 map memory is charged to RLIMIT_MEMLOCK; raise it
// (for example with cilium/ebpf's rlimit.RemoveMemlock) before calling New.
func New(opts Options) (*Program, error) {
	if opts.Hook != HookSocketFilter {
		return nil, fmt.Errorf("bpfsteer: New builds the socket filter, NewXDP the %v hook: %w", opts.Hook, ErrOptions)
	}
	insns, err := Instructions(opts)
	if err != nil {
		return nil, err
	}
	p := &Program{n: len(opts.Table)}
	var name string
	p.keyed, name, err = newKeyedMap(&opts)
	if err != nil {
		return nil, err
	}
	p.table, err = newTableMap(opts.Table)
	if err != nil {
		p.Close()
		return nil, err
	}
	if p.sync, err = newGrace(); err != nil {
		p.Close()
		return nil, err
	}
	maps := map[string]*ebpf.Map{name: p.keyed, TableMapName: p.table}
	if p.frags, err = newFragMap(&opts, maps); err != nil {
		p.Close()
		return nil, err
	}
	if err := associate(insns, maps); err != nil {
		p.Close()
		return nil, err
	}
	p.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         ProgramName,
		Type:         ebpf.SocketFilter,
		Instructions: insns,
		License:      "BSD",
	})
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("bpfsteer: loading the program: %w", err)
	}
	return p, nil
}

// newKeyedMap creates the map of the hash key, the Toeplitz contribution
// table or the SipHash state, fills and freezes it, and returns it with
// its name.
func newKeyedMap(opts *Options) (*ebpf.Map, string, error) {
	name, value := ToeplitzMapName, []byte(nil)
	if opts.Algorithm == hash.AlgorithmSipHash {
		v := sipState(opts.Key)
		name, value = SipHashMapName, encode64(v[:])
	} else {
		tab, err := toeplitzTable(opts.Key)
		if err != nil {
			return nil, "", err
		}
		value = encode(tab)
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{
		Name:       name,
		Type:       ebpf.Array,
		KeySize:    4,
		ValueSize:  uint32(len(value)),
		MaxEntries: 1,
	})
	if err != nil {
		return nil, "", fmt.Errorf("bpfsteer: creating the %s map: %w", name, err)
	}
	if err := m.Put(uint32(0), value); err != nil {
		m.Close()
		return nil, "", fmt.Errorf("bpfsteer: filling the %s map: %w", name, err)
	}
	// The key's map never changes: make it read-only from user space.
	if err := m.Freeze(); err != nil && !errors.Is(err, ebpf.ErrNotSupported) {
		m.Close()
		return nil, "", fmt.Errorf("bpfsteer: freezing the %s map: %w", name, err)
	}
	return m, name, nil
}

// newFragMap creates, with FollowFragments, the LRU hash map of the
// datagrams whose first fragment the program saw, and adds it to maps.
// The kernel holds wire.FragmentTableSize entries of a 40-byte key and a
// 16-byte value, with its own per-entry bookkeeping.
func newFragMap(opts *Options, maps map[string]*ebpf.Map) (*ebpf.Map, error) {
	if !opts.FollowFragments {
		return nil, nil
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{
		Name:       FragMapName,
		Type:       ebpf.LRUHash,
		KeySize:    fragKeyLen,
		ValueSize:  fragValueLen,
		MaxEntries: wire.FragmentTableSize,
	})
	if err != nil {
		return nil, fmt.Errorf("bpfsteer: creating the fragment map: %w", err)
	}
	maps[FragMapName] = m
	return m, nil
}

// newTableMap creates the indirection map, one value of len(table) words,
// holding table.
func newTableMap(table []uint32) (*ebpf.Map, error) {
	m, err := ebpf.NewMap(&ebpf.MapSpec{
		Name:       TableMapName,
		Type:       ebpf.Array,
		KeySize:    4,
		ValueSize:  uint32(4 * len(table)),
		MaxEntries: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("bpfsteer: creating the indirection map: %w", err)
	}
	if err := m.Put(uint32(0), encode(table)); err != nil {
		m.Close()
		return nil, fmt.Errorf("bpfsteer: filling the indirection map: %w", err)
	}
	return m, nil
}

// putTable replaces the contents of an indirection map of n buckets.
func putTable(m *ebpf.Map, n int, table []uint32) error {
	if m == nil {
		return fmt.Errorf("bpfsteer: set table: %w", ErrClosed)
	}
	if len(table) != n {
		return fmt.Errorf("bpfsteer: set table of %d buckets on a program built for %d: %w", len(table), n, ErrTableLength)
	}
	if err := m.Put(uint32(0), encode(table)); err != nil {
		return fmt.Errorf("bpfsteer: set table: %w", err)
	}
	return nil
}

// getTable reads an indirection map of n buckets.
func getTable(m *ebpf.Map, n int) ([]uint32, error) {
	if m == nil {
		return nil, fmt.Errorf("bpfsteer: table: %w", ErrClosed)
	}
	b := make([]byte, 4*n)
	if err := m.Lookup(uint32(0), b); err != nil {
		return nil, fmt.Errorf("bpfsteer: table: %w", err)
	}
	t := make([]uint32, n)
	for i := range t {
		t[i] = binary.NativeEndian.Uint32(b[4*i:])
	}
	return t, nil
}

// associate points every LoadMapPtr referring to a map name at that map.
func associate(insns asm.Instructions, maps map[string]*ebpf.Map) error {
	for i := range insns {
		ref := insns[i].Reference()
		if !insns[i].IsLoadFromMap() || ref == "" {
			continue
		}
		m, ok := maps[ref]
		if !ok {
			return fmt.Errorf("bpfsteer: instruction %d refers to unknown map %q", i, ref)
		}
		if err := insns[i].AssociateMap(m); err != nil {
			return fmt.Errorf("bpfsteer: associating map %q: %w", ref, err)
		}
	}
	return nil
}

func encode(v []uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.NativeEndian.PutUint32(b[4*i:], x)
	}
	return b
}

func encode64(v []uint64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.NativeEndian.PutUint64(b[8*i:], x)
	}
	return b
}

// FD returns the program's file descriptor, for PACKET_FANOUT_DATA. It is
// valid until Close; -1 after.
func (p *Program) FD() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.prog == nil {
		return -1
	}
	return p.prog.FD()
}

// ebpfProgram returns the loaded program, for tests.
func (p *Program) ebpfProgram() *ebpf.Program {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.prog
}

// SetTable replaces the indirection table with one of the same length,
// in one map update: the next frame the kernel steers sees the new table.
// (Each entry is a 32-bit word written by one copy; a frame steered during
// the update sees every entry either old or new.)
func (p *Program) SetTable(table []uint32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return putTable(p.table, p.n, table)
}

// Sync returns after an RCU grace period: every run of the program that
// began before the call has ended, and with it the fanout's delivery of
// the frame to the socket it picked (tpacket_rcv counts it in
// tp_packets), so every frame steered from then on sees every map change
// made before the call. It takes milliseconds, and is safe to call from
// many goroutines at once.
func (p *Program) Sync() error {
	p.mu.Lock()
	g := p.sync
	p.mu.Unlock()
	return g.wait()
}

// Table returns the indirection table the kernel currently uses.
func (p *Program) Table() ([]uint32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return getTable(p.table, p.n)
}

// Close unloads the program and its maps (a fanout group that holds the
// program keeps it alive until the group goes). Closing twice is harmless.
func (p *Program) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	if p.prog != nil {
		errs = append(errs, p.prog.Close())
	}
	if p.keyed != nil {
		errs = append(errs, p.keyed.Close())
	}
	if p.table != nil {
		errs = append(errs, p.table.Close())
	}
	if p.frags != nil {
		errs = append(errs, p.frags.Close())
	}
	errs = append(errs, p.sync.close())
	p.prog, p.keyed, p.table, p.frags, p.sync = nil, nil, nil, nil, nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bpfsteer: close: %w", err)
	}
	return nil
}
