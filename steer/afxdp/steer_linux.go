//go:build linux

package afxdp

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cilium/ebpf/link"

	"github.com/rpsgo/rps/internal/bpfsteer"
	"github.com/rpsgo/rps/internal/livesock"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/kgroup"
)

// NewSteering binds the group g to the dispatcher d (kgroup.New) and
// steers g's queue in XDP by the dispatcher's own hash: it loads the
// library's XDP steering program for d's configuration and table with one
// XSKMAP slot per socket, puts socket i in slot i, and attaches the
// program to the group's interface through a BPF link, in the mode g was
// opened with (Config.Attach: native, else generic). Socket i is read by
// worker i, and the program redirects each frame to the socket of the
// worker the user-space RSS policy would pick, Table()[FlowID &
// (buckets-1)]; those it cannot hash go to socket o.Fallback, or with
// o.PassUnhashed to the kernel stack. Frames of the interface's other
// receive queues go to the kernel stack, counted: a socket takes only
// frames of the queue it is bound to. The dispatcher's stats show each
// socket's XDP_STATISTICS as a source; the Steering's Stats.Kernel holds
// the program's counters (see the package documentation).
//
// Like Open, NewSteering must run in the network namespace the group was
// opened in (a goroutine that changed namespace keeps its OS thread
// locked): an interface index names another interface elsewhere. It needs
// the RSS policy, CAP_BPF and CAP_NET_ADMIN (or root). A group has one
// Steering at a time; its Close detaches the program and gives the group
// back.
func NewSteering(d *steer.Dispatcher, g *Group, o kgroup.Options) (*kgroup.Steering, error) {
	if g == nil {
		return nil, fmt.Errorf("afxdp: %w: nil group", steer.ErrConfig)
	}
	return kgroup.New(d, &xskKernel{g: g}, o)
}

// xskKernel is a group with its XDP program as a kgroup.Kernel.
type xskKernel struct {
	g    *Group
	x    *bpfsteer.XDP
	link link.Link // nil once detached
}

// Sockets returns the group's sockets.
func (k *xskKernel) Sockets() []kgroup.Socket {
	socks := make([]kgroup.Socket, len(k.g.sources))
	for i, s := range k.g.sources {
		socks[i] = member{s}
	}
	return socks
}

// Attach loads the program, fills its XSKMAP and attaches it.
func (k *xskKernel) Attach(cfg steer.Config, table []int, o kgroup.Options) (bool, error) {
	g := k.g
	first := g.sources[0]
	if first.cfg.Attach == AttachNone {
		return false, fmt.Errorf("afxdp: %w: the group was opened with AttachNone: a Steering attaches its program in the group's Config.Attach mode", steer.ErrConfig)
	}
	base := bpfsteer.Options{Hook: bpfsteer.HookXDP, PassUnhashed: o.PassUnhashed, Fallback: uint32(o.Fallback),
		Queue: uint32(first.cfg.Queue)}
	popts, err := bpfsteer.DispatcherOptions(cfg, table, base)
	if err != nil {
		return false, fmt.Errorf("afxdp: the XDP program cannot steer as the dispatcher's classifier does (change the configuration as said, or open one socket steered in user space): %w", err)
	}
	if g.closed.Load() {
		return false, fmt.Errorf("afxdp: steering: %w", ErrClosed)
	}
	if !g.steered.CompareAndSwap(false, true) {
		return false, fmt.Errorf("afxdp: %w: the group already has a Steering: close it first", steer.ErrConfig)
	}
	if err := k.attach(popts); err != nil {
		k.Close()
		return false, err
	}
	return true, nil
}

// attach loads the program, fills its XSKMAP and attaches it.
func (k *xskKernel) attach(popts bpfsteer.Options) error {
	g := k.g
	x, err := bpfsteer.NewXDP(popts, g.Len())
	if err != nil {
		return fmt.Errorf("afxdp: loading the steering program: %w", livesock.Explain(err, livesock.NeedBPF))
	}
	k.x = x
	for i, s := range g.sources {
		if err := s.withFD(func(fd int) error { return x.SetSocket(i, fd) }); err != nil {
			return fmt.Errorf("afxdp: steering: socket %d: %w", i, err)
		}
	}
	first := g.sources[0]
	l, mode, err := attachProgram(first.ns, x.Program(), first.ifindex, first.cfg.Attach)
	if err != nil {
		return fmt.Errorf("afxdp: steering %s queue %d: %w", first.ifname, first.cfg.Queue, livesock.Explain(err, livesock.NeedXDP))
	}
	k.link = l
	for _, s := range g.sources {
		s.setAttach(mode)
	}
	return nil
}

// Table returns the program's table.
func (k *xskKernel) Table() ([]int, error) {
	t, err := k.x.Table()
	if err != nil {
		return nil, fmt.Errorf("afxdp: %w", err)
	}
	out := make([]int, len(t))
	for i, w := range t {
		out[i] = int(w)
	}
	return out, nil
}

// Switch updates the program's table map, then waits for a grace period
// (bpfsteer.XDP.Sync): every run of the program that began before has
// ended, and with it the NAPI poll (or, on the generic hook, the receive)
// that published its frames in the RX rings, so every frame steered by
// the old table is in its socket's RX ring.
func (k *xskKernel) Switch(table []int) error {
	if err := k.x.SetTable(bpfsteer.WorkerTable(table)); err != nil {
		return fmt.Errorf("afxdp: switching the program's table: %w", err)
	}
	if err := k.x.Sync(); err != nil {
		return fmt.Errorf("afxdp: %w: %w", kgroup.ErrNoGracePeriod, err)
	}
	return nil
}

// StopIntake detaches the program (closes the link: the interface's
// frames go to the kernel stack again) and then waits for a grace period,
// so that when it returns every frame the program redirected is in its
// socket's RX ring or counted as the kernel's drop, and no frame follows.
// It detaches the program rather than emptying its XSKMAP, so that the
// program stops running on frames no socket will take and its counters
// keep their meaning. The sockets' Info().Attach is then AttachNone
// (their SourceStats keep the mode they received in).
func (k *xskKernel) StopIntake() error {
	if k.link == nil {
		return nil
	}
	err := k.link.Close()
	k.link = nil
	for _, s := range k.g.sources {
		s.setAttach(AttachNone)
	}
	if err != nil {
		return fmt.Errorf("afxdp: detaching the steering program: %w", err)
	}
	return k.x.Sync()
}

// The names of the program's counters in Stats.Kernel.
const (
	counterUnhashedPassed   = "unhashed_passed"
	counterUnhashedFallback = "unhashed_fallback"
	counterNoSocket         = "no_socket"
	counterOtherQueue       = "other_queue"
	counterRedirected       = "redirected_" // + the socket's index
)

// Counters returns the program's counters, summed over the CPUs.
func (k *xskKernel) Counters() ([]steer.KernelCounter, error) {
	c, err := k.x.Counters()
	if err != nil {
		return nil, fmt.Errorf("afxdp: %w", err)
	}
	out := make([]steer.KernelCounter, 0, 4+len(c.Redirected))
	for i, n := range c.Redirected {
		out = append(out, steer.KernelCounter{Name: counterRedirected + strconv.Itoa(i), Value: n})
	}
	return append(out,
		steer.KernelCounter{Name: counterUnhashedPassed, Value: c.UnhashedPassed},
		steer.KernelCounter{Name: counterUnhashedFallback, Value: c.UnhashedFallback},
		steer.KernelCounter{Name: counterNoSocket, Value: c.NoSocket},
		steer.KernelCounter{Name: counterOtherQueue, Value: c.OtherQueue}), nil
}

// Close detaches the program (the queue's frames go to the kernel stack
// again), empties its XSKMAP slots and unloads it, sets the sockets'
// Info.Attach back to AttachNone and gives the group back.
func (k *xskKernel) Close() error {
	var errs []error
	if k.link != nil {
		if err := k.link.Close(); err != nil {
			errs = append(errs, fmt.Errorf("afxdp: detaching the steering program: %w", err))
		}
		k.link = nil
	}
	if k.x != nil {
		for i := range k.g.sources {
			if err := k.x.ClearSocket(i); err != nil {
				errs = append(errs, fmt.Errorf("afxdp: %w", err))
			}
		}
		if err := k.x.Close(); err != nil {
			errs = append(errs, fmt.Errorf("afxdp: %w", err))
		}
		k.x = nil
	}
	for _, s := range k.g.sources {
		s.setAttach(AttachNone)
	}
	k.g.steered.Store(false)
	return errors.Join(errs...)
}

// member is a socket of a group as a kgroup.Socket.
type member struct{ *Source }

// Read reads a batch, waiting at most limit when it is positive, and
// returns the RX ring's consumer index.
func (m member) Read(ctx context.Context, b *steer.Batch, limit time.Duration) (uint32, error) {
	wait := m.cfg.PollTimeout
	if limit > 0 && (wait < 0 || wait > limit) {
		wait = limit
	}
	return m.readBatch(ctx, b, wait)
}

// Position returns the RX ring's producer index: the kernel publishes a
// frame's descriptor before it moves the index past it.
func (m member) Position() (uint32, bool) { return m.rxProduced() }

var _ kgroup.Kernel = (*xskKernel)(nil)
