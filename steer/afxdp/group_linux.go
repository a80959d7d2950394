//go:build linux

package afxdp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf/link"

	"github.com/rpsgo/rps/internal/bpfsteer"
	"github.com/rpsgo/rps/internal/livesock"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/kgroup"
)

// Group is n AF_XDP sockets bound to one queue of one interface, sharing
// one UMEM (XDP_SHARED_UMEM): the first socket registered it and owns its
// FILL and COMPLETION rings, the others bind with its descriptor. Each
// socket has an RX ring of its own, read by its own Source; every Source's
// releases go back to the one FILL ring, one at a time. No program is
// attached: a Steering attaches one that picks the socket of each frame by
// its XSKMAP slot.
type Group struct {
	sources []*Source
	host    []netip.Addr // with Config.Host HostPass, the addresses the program passes
	promisc *promisc     // Config.Promisc's, held until Close
	closed  atomic.Bool
	steered atomic.Bool // a Steering has it
}

// OpenGroup opens n sockets (1 to MaxGroupSize) on queue cfg.Queue of the
// interface named ifname, sharing one UMEM of cfg.NumFrames chunks. As for
// Open, the caller must be in the interface's network namespace, and an
// interface that has addresses is refused unless cfg.Host says what to do
// with the host's frames (ErrHostAddrs). cfg.Attach and cfg.Host are not
// used here otherwise: they are how a Steering attaches its program.
func OpenGroup(ifname string, n int, cfg Config) (*Group, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := validateGroup(n); err != nil {
		return nil, err
	}
	runtime.LockOSThread() // one namespace for the lookup and every socket
	defer runtime.UnlockOSThread()
	ifi, err := livesock.Interface(ifname)
	if err != nil {
		return nil, fmt.Errorf("afxdp: %w", err)
	}
	host, err := hostAddrs(ifi, cfg)
	if err != nil {
		return nil, err
	}
	g := &Group{sources: make([]*Source, 0, n), host: host}
	for i := 0; i < n; i++ {
		var shared *Source
		if i > 0 {
			shared = g.sources[0]
		}
		s, err := openSocket(ifi, cfg, shared)
		if err != nil {
			g.Close()
			return nil, fmt.Errorf("afxdp: group of %d on %q queue %d: socket %d: %w", n, ifname, cfg.Queue, i, err)
		}
		s.name = fmt.Sprintf("afxdp:%s:%d/%d", ifi.Name, cfg.Queue, i)
		s.grouped = true
		g.sources = append(g.sources, s)
	}
	if cfg.Promisc {
		if g.promisc, err = openPromisc(ifi.Index); err != nil {
			g.Close()
			return nil, fmt.Errorf("afxdp: group of %d on %q queue %d: %w", n, ifname, cfg.Queue, err)
		}
	}
	return g, nil
}

// Len returns the number of sockets.
func (g *Group) Len() int { return len(g.sources) }

// Source returns socket i, or nil if i is out of range.
func (g *Group) Source(i int) *Source {
	if i < 0 || i >= len(g.sources) {
		return nil
	}
	return g.sources[i]
}

// Sources returns the sockets in order (a new slice).
func (g *Group) Sources() []*Source { return append([]*Source(nil), g.sources...) }

// Info returns the first socket's Info (every socket of the group has the
// same interface, queue and mode).
func (g *Group) Info() Info { return g.sources[0].Info() }

// Stats returns the sum of the sockets' counters. RxFillRingEmptyDescs is
// the one FILL ring's count, which the first socket alone reports.
func (g *Group) Stats() (Stats, error) {
	var sum Stats
	var errs []error
	for _, s := range g.sources {
		st, err := s.Stats()
		if err != nil {
			errs = append(errs, err)
		}
		sum = sum.Add(st)
	}
	return sum, errors.Join(errs...)
}

// Close closes every socket (see Source.Close) and, with Config.Promisc,
// gives the interface's promiscuous mode back. The UMEM, its rings and
// the first socket stay until the last batch of every socket is released.
// Close is idempotent.
func (g *Group) Close() error {
	if !g.closed.CompareAndSwap(false, true) {
		return nil
	}
	var errs []error
	for _, s := range g.sources {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := g.promisc.close(); err != nil {
		errs = append(errs, fmt.Errorf("afxdp: close: %w", err))
	}
	return errors.Join(errs...)
}

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
	k := &xskKernel{g: g, socks: make([]kgroup.Socket, len(g.sources))}
	for i, s := range g.sources {
		k.socks[i] = member{s}
	}
	return kgroup.New(d, k, o)
}

// xskKernel is a group with its XDP program as a kgroup.Kernel.
type xskKernel struct {
	g     *Group
	socks []kgroup.Socket
	x     *bpfsteer.XDP
	link  link.Link // nil once detached
}

// Sockets returns the group's sockets.
func (k *xskKernel) Sockets() []kgroup.Socket { return k.socks }

// Attach loads the program, fills its XSKMAP and attaches it.
func (k *xskKernel) Attach(cfg steer.Config, table []int, o kgroup.Options) (kgroup.Program, error) {
	g := k.g
	first := g.sources[0]
	if first.cfg.Attach == AttachNone {
		return nil, fmt.Errorf("afxdp: %w: the group was opened with AttachNone: a Steering attaches its program in the group's Config.Attach mode", steer.ErrConfig)
	}
	base := bpfsteer.Options{Hook: bpfsteer.HookXDP, PassUnhashed: o.PassUnhashed, Fallback: uint32(o.Fallback),
		Queue: uint32(first.cfg.Queue), PassHost: first.cfg.Host == HostPass, HostAddrs: g.host}
	popts, err := bpfsteer.DispatcherOptions(cfg, table, base)
	if err != nil {
		return nil, fmt.Errorf("afxdp: the XDP program cannot steer as the dispatcher's classifier does (change the configuration as said, or open one socket steered in user space): %w", err)
	}
	if g.closed.Load() {
		return nil, fmt.Errorf("afxdp: steering: %w", ErrClosed)
	}
	if !g.steered.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("afxdp: %w: the group already has a Steering: close it first", steer.ErrConfig)
	}
	if err := k.attach(popts); err != nil {
		k.Close()
		return nil, err
	}
	// The program's Sync is a grace period after which every frame it
	// steered by the old table is in its socket's RX ring: every run that
	// began before has ended, and with it the NAPI poll (or, on the
	// generic hook, the receive) that published its frames.
	return k.x, nil
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
	counterHostPassed       = "host_passed"
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
	out := make([]steer.KernelCounter, 0, 5+len(c.Redirected))
	for i, n := range c.Redirected {
		out = append(out, steer.KernelCounter{Name: counterRedirected + strconv.Itoa(i), Value: n})
	}
	return append(out,
		steer.KernelCounter{Name: counterUnhashedPassed, Value: c.UnhashedPassed},
		steer.KernelCounter{Name: counterHostPassed, Value: c.HostPassed},
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
	return m.readBatch(ctx, b, livesock.Cap(m.cfg.PollTimeout, limit))
}

// Position returns the RX ring's producer index: the kernel publishes a
// frame's descriptor before it moves the index past it.
func (m member) Position() (uint32, bool) { return m.rxProduced() }

var _ kgroup.Kernel = (*xskKernel)(nil)
