//go:build linux

package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/rpsgo/rps/internal/affinity"
	"github.com/rpsgo/rps/internal/xsk"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/afpacket"
	"github.com/rpsgo/rps/steer/afxdp"
	"golang.org/x/sys/unix"
)

// port is one side of the forwarder: a receive socket and a send socket on
// the same interface.
type port struct {
	name    string
	ifindex int
	mtu     int
	rx      receiver    // nil for a port that only sends
	tx      int         // AF_PACKET socket bound to the interface, protocol 0 (sends only); -1 with -xdp
	xtx     *xsk.Sender // with -xdp: the AF_XDP socket that sends; nil for a port that only receives
}

// xdpSendFrames is the UMEM chunks a port's AF_XDP Sender has: the frames
// it may have in flight.
const xdpSendFrames = 2048

// xdpHeadroom is the room the kernel leaves before a frame in its UMEM
// chunk (XDP_PACKET_HEADROOM).
const xdpHeadroom = 256

// receiver is a port's receive socket: an AF_PACKET ring, or an AF_XDP
// socket with -xdp.
type receiver interface {
	ReadBatch(ctx context.Context, b *steer.Batch) error
	Close() error
	// drops is the frames the kernel dropped for lack of room.
	drops() (uint64, error)
}

// packetRx is an AF_PACKET ring as a receiver.
type packetRx struct{ *afpacket.Source }

func (r packetRx) drops() (uint64, error) {
	st, err := r.Stats()
	return st.Drops, err
}

// xdpRx is an AF_XDP socket as a receiver.
type xdpRx struct{ *afxdp.Source }

func (r xdpRx) drops() (uint64, error) {
	st, err := r.Stats()
	return st.RxDropped + st.RxRingFull, err
}

// workerState is a worker's own counters and send addresses
// (steer.NewPerWorker); only that worker touches it while the forwarder runs.
type workerState struct {
	f        *forwarder
	sent     [2]uint64 // by output port
	txErrors uint64
	oversize uint64
	sink     uint64
	sll      [2]unix.SockaddrLinklayer // by output port (Sendto writes into it)
	one      [1][]byte                 // the frame handed to an AF_XDP Send
	_        [64]byte
}

// forwarder receives on its ports, steers frames to workers, and sends
// each on the other port.
type forwarder struct {
	ports   [2]*port
	rx      []int // the ports read (both, or only ports[0] with OneWay)
	d       *steer.Dispatcher
	inputs  []*steer.Input
	outFor  map[int]int // input id -> output port
	outByID []int       // the same, as a slice indexed by input id
	workers []*workerState
	sp      spinner
}

// openForwarder opens the sockets in the caller's network namespace (a
// goroutine that changed namespace must keep its thread locked) and starts
// the workers. Run it, then Close it.
func openForwarder(o Options) (f *forwarder, err error) {
	if o.In == o.Out {
		return nil, fmt.Errorf("-in and -out are both %q", o.In)
	}
	f = &forwarder{sp: newSpinner(o.Work)}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	bt := o.BlockTimeout
	if bt <= 0 {
		bt = time.Millisecond
	}
	// Small blocks with a short timeout: a forwarder cares about latency,
	// and a TPACKET_V3 block is handed over when full or timed out.
	rcfg := afpacket.Config{BlockSize: 64 << 10, NumBlocks: 64, BlockTimeout: bt, PollTimeout: 50 * time.Millisecond,
		IgnoreOutgoing: true, Promisc: true}
	var xcfg *afxdp.Config
	if o.XDP {
		// AF_XDP sees received frames only, never the ones sent on the
		// port; a batch is handed over full or after the same timeout as
		// an AF_PACKET block. A forwarder's ports are given over to it: it
		// takes every frame, the host's included.
		xcfg = &afxdp.Config{PollTimeout: 50 * time.Millisecond, BatchTimeout: bt, Host: afxdp.HostTake}
	}
	for i, name := range []string{o.In, o.Out} {
		p, err := openPort(name, rcfg, xcfg, i == 0 || !o.OneWay, i == 1 || !o.OneWay)
		f.ports[i] = p
		if err != nil {
			return f, err
		}
	}
	f.rx = []int{0, 1}
	if o.OneWay {
		f.rx = []int{0}
	}
	// Inputs the forwarder feeds wait on a full queue (OverflowAuto): the
	// rings, not the queues, absorb a burst.
	cfg := steer.Config{Workers: o.Workers, Hash: steer.HashConfig{Symmetric: true}}
	if o.Pin {
		if cfg.CPUs, err = affinity.Allowed(); err != nil {
			return f, fmt.Errorf("listing CPUs: %w", err)
		}
	}
	newState := func(*steer.Worker) *workerState {
		w := &workerState{f: f}
		for out, p := range f.ports {
			w.sll[out] = unix.SockaddrLinklayer{Ifindex: p.ifindex, Halen: 6}
		}
		return w
	}
	f.d, f.workers, err = steer.NewPerWorker(cfg, newState, (*workerState).handle)
	if err != nil {
		return f, fmt.Errorf("starting the dispatcher: %w", err)
	}
	f.outFor = map[int]int{}
	for _, i := range f.rx {
		in := f.d.NewInput()
		f.inputs = append(f.inputs, in)
		f.outFor[in.ID()] = 1 - i
	}
	maxID := 0
	for id := range f.outFor {
		maxID = max(maxID, id)
	}
	f.outByID = make([]int, maxID+1)
	for id, out := range f.outFor {
		f.outByID[id] = out
	}
	return f, nil
}

// openPort opens a port's receive socket when receive is set and its send
// socket: with xcfg, AF_XDP sockets (the Sender sharing the receiving
// Source's UMEM and queue, as the kernel requires), else an AF_PACKET ring
// and an AF_PACKET socket. With xcfg, a port opens a Sender only when send
// is set.
func openPort(name string, cfg afpacket.Config, xcfg *afxdp.Config, receive, send bool) (*port, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("interface %q: %w", name, err)
	}
	p := &port{name: name, ifindex: ifi.Index, mtu: ifi.MTU, tx: -1}
	switch {
	case xcfg != nil:
		xc := *xcfg
		if ifi.MTU+18 > afxdp.DefaultFrameSize-xdpHeadroom {
			// A frame of the MTU, with a tag, must fit in a chunk after
			// the kernel's headroom: take page-sized chunks.
			xc.FrameSize = os.Getpagesize()
		}
		switch {
		case receive:
			if send {
				xc.SendFrames = xdpSendFrames
			}
			var src *afxdp.Source
			if src, err = afxdp.Open(name, xc); err != nil {
				return p, err
			}
			p.rx = xdpRx{src}
			if send {
				p.xtx, err = xsk.SharedSender(src, xsk.SenderConfig{})
			}
		case send:
			p.xtx, err = xsk.OpenSender(name, xsk.SenderConfig{NumFrames: xdpSendFrames, FrameSize: xc.FrameSize})
		}
		return p, err
	case receive:
		src, err := afpacket.Open(name, cfg)
		if err != nil {
			return p, err
		}
		p.rx = packetRx{src}
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return p, fmt.Errorf("send socket on %q: %w", name, err)
	}
	p.tx = fd
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifi.Index}); err != nil {
		return p, fmt.Errorf("binding the send socket to %q: %w", name, err)
	}
	// Best effort: hand frames straight to the driver, skipping the qdisc.
	_ = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1)
	return p, nil
}

// handle is the worker's job: the inspection stand-in, then the send.
func (w *workerState) handle(p *steer.Packet) {
	f := w.f
	w.sink += f.sp.spin()
	out := f.outByID[p.InputID]
	port := f.ports[out]
	if p.WireLen > len(p.Data) || len(p.Data) > port.mtu+14 || len(p.Data) < 14 {
		w.oversize++
		return
	}
	if port.xtx != nil {
		// Send copies the frame into the Sender's UMEM: the batch may be
		// released as soon as the handler returns.
		w.one[0] = p.Data
		n, err := port.xtx.Send(w.one[:])
		w.one[0] = nil
		if err != nil || n != 1 {
			w.txErrors++
			return
		}
		w.sent[out]++
		return
	}
	sll := &w.sll[out]
	sll.Protocol = htons(binary.BigEndian.Uint16(p.Data[12:14]))
	if err := unix.Sendto(port.tx, p.Data, 0, sll); err != nil {
		w.txErrors++
		return
	}
	w.sent[out]++
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Run forwards until ctx ends, then lets the workers finish what is queued.
func (f *forwarder) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(f.rx))
	for k, i := range f.rx {
		src, in, name := f.ports[i].rx, f.inputs[k], f.ports[i].name
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b steer.Batch
			for {
				b.Frames, b.Release = b.Frames[:0], nil
				err := src.ReadBatch(ctx, &b)
				if len(b.Frames) > 0 || b.Release != nil {
					if derr := in.Dispatch(b.Frames, b.Release); derr != nil {
						errs <- derr
						return
					}
				}
				if err != nil {
					if ctx.Err() == nil {
						errs <- fmt.Errorf("reading %s: %w", name, err)
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := f.d.Close(cctx)
	for e := range errs {
		err = errors.Join(err, e)
	}
	return err
}

// Stats adds up the workers' counters; call it after Run returned.
func (f *forwarder) Stats() Stats {
	var s Stats
	for _, w := range f.workers {
		s.InToOut += w.sent[1]
		s.OutToIn += w.sent[0]
		s.TxErrors += w.txErrors
		s.Oversize += w.oversize
	}
	for _, p := range f.ports {
		if p != nil && p.rx != nil {
			if n, err := p.rx.drops(); err == nil {
				s.KernelDrops += n
			}
		}
	}
	if f.d != nil {
		st := f.d.Stats()
		s.QueueDrops = st.Dropped()
	}
	return s
}

// Close closes the dispatcher (if Run did not) and the sockets.
func (f *forwarder) Close() error {
	var err error
	if f.d != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if cerr := f.d.Close(ctx); cerr != nil && !errors.Is(cerr, steer.ErrClosed) {
			err = cerr
		}
		cancel()
	}
	for _, p := range f.ports {
		if p == nil {
			continue
		}
		if p.rx != nil {
			err = errors.Join(err, p.rx.Close())
		}
		if p.xtx != nil {
			err = errors.Join(err, p.xtx.Close())
		}
		if p.tx >= 0 {
			err = errors.Join(err, unix.Close(p.tx))
			p.tx = -1
		}
	}
	return err
}

// run is main's body on Linux.
func run(ctx context.Context, o Options, report bool) error {
	f, err := openForwarder(o)
	if err != nil {
		return err
	}
	defer f.Close()
	dir := "<->"
	if o.OneWay {
		dir = "->"
	}
	fmt.Fprintf(os.Stderr, "forwarder: forwarding %s %s %s with %d workers, %v of work per frame\n",
		o.In, dir, o.Out, len(f.workers), o.Work)
	err = f.Run(ctx)
	fmt.Fprintf(os.Stderr, "forwarder: stats %v\n", f.Stats())
	if report {
		st := f.d.Stats()
		st.WriteReport(os.Stderr)
	}
	return err
}
