//go:build linux

package bpfsteer

import (
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// membarrierCmdGlobal is MEMBARRIER_CMD_GLOBAL (include/uapi/linux/membarrier.h).
const membarrierCmdGlobal = 1

// membarrier waits for an RCU grace period the cheap way, without any
// privilege: membarrier(MEMBARRIER_CMD_GLOBAL) is synchronize_rcu()
// (kernel/sched/membarrier.c). The kernel refuses it (EINVAL) when it runs
// with nohz_full CPUs, or lacks it (ENOSYS) without CONFIG_MEMBARRIER.
func membarrier() error {
	for {
		_, _, e := unix.Syscall(unix.SYS_MEMBARRIER, membarrierCmdGlobal, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		return nil
	}
}

// grace waits for RCU grace periods: with membarrier, or where the kernel
// refuses it by updating an array of maps, created once with the one map
// it holds (creating maps needs CAP_BPF; updating them later needs only
// their descriptors). Updating an array of maps makes the kernel wait for
// every running BPF program before the update returns
// (kernel/bpf/syscall.c: map_update_elem, maybe_wait_bpf_programs,
// synchronize_rcu). Programs of every kind run in RCU read-side sections,
// and so does the receive path that runs them (a NAPI poll, a socket's
// packet hook), so when wait returns, every frame a program steered
// before the call has also been placed in its socket and counted there.
type grace struct {
	mu           sync.Mutex
	outer, inner *ebpf.Map
}

// newGrace creates the two maps.
func newGrace() (*grace, error) {
	spec := &ebpf.MapSpec{Name: "rps_sync_inner", Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1}
	inner, err := ebpf.NewMap(spec)
	if err != nil {
		return nil, fmt.Errorf("bpfsteer: creating the grace-period map: %w", err)
	}
	outer, err := ebpf.NewMap(&ebpf.MapSpec{Name: "rps_sync", Type: ebpf.ArrayOfMaps, KeySize: 4, ValueSize: 4, MaxEntries: 1, InnerMap: spec})
	if err != nil {
		inner.Close()
		return nil, fmt.Errorf("bpfsteer: creating the grace-period map: %w", err)
	}
	return &grace{outer: outer, inner: inner}, nil
}

// wait returns after an RCU grace period. It is safe to call from many
// goroutines at once, and with close: the wait holds references of its
// own to the maps, not the lock.
func (g *grace) wait() error {
	if g == nil {
		return fmt.Errorf("bpfsteer: sync: %w", ErrClosed)
	}
	g.mu.Lock()
	open := g.outer != nil
	g.mu.Unlock()
	if !open {
		return fmt.Errorf("bpfsteer: sync: %w", ErrClosed)
	}
	if membarrier() == nil {
		return nil
	}
	return g.update()
}

// update waits for a grace period by updating the array of maps.
func (g *grace) update() error {
	if g == nil {
		return fmt.Errorf("bpfsteer: sync: %w", ErrClosed)
	}
	g.mu.Lock()
	if g.outer == nil {
		g.mu.Unlock()
		return fmt.Errorf("bpfsteer: sync: %w", ErrClosed)
	}
	outer, err := g.outer.Clone()
	var inner *ebpf.Map
	if err == nil {
		if inner, err = g.inner.Clone(); err != nil {
			outer.Close()
		}
	}
	g.mu.Unlock()
	if err != nil {
		return fmt.Errorf("bpfsteer: sync: %w", err)
	}
	defer outer.Close()
	defer inner.Close()
	if err := outer.Put(uint32(0), uint32(inner.FD())); err != nil {
		return fmt.Errorf("bpfsteer: sync: %w", err)
	}
	return nil
}

// close frees the maps; it is idempotent and nil-safe.
func (g *grace) close() error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var err error
	if g.outer != nil {
		err = g.outer.Close()
		if e := g.inner.Close(); err == nil {
			err = e
		}
		g.outer, g.inner = nil, nil
	}
	return err
}

// GracePeriod returns after an RCU grace period: every BPF program run,
// and every frame a packet socket's hook was placing, that began before
// the call has ended. It uses membarrier(2), or where the kernel refuses
// that, maps made for the call (which needs CAP_BPF).
func GracePeriod() error {
	merr := membarrier()
	if merr == nil {
		return nil
	}
	g, err := newGrace()
	if err != nil {
		return fmt.Errorf("bpfsteer: waiting for a grace period: membarrier: %w; %w", merr, err)
	}
	defer g.close()
	return g.update()
}
