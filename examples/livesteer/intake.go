package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rpsgo/rps/internal/capture"
	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/afpacket"
	"github.com/rpsgo/rps/steer/afxdp"
	"github.com/rpsgo/rps/steer/filter"
	"github.com/rpsgo/rps/steer/kgroup"
)

// sockets are the sockets a capture reads, AF_PACKET or AF_XDP, seen by
// what the command does beyond reading them: stop them, wait until their
// rings are dry, add up their counters.
type sockets interface {
	// stop makes the kernel pass no more frames to the sockets; the frames
	// already in their rings stay there to be read.
	stop() error
	// pending is what the rings hold that the readers have not taken
	// yet, zero when they are dry: a count of frames (AF_PACKET), or of
	// rings that are not empty (AF_XDP, whose rings do not say how much
	// they hold).
	pending() (uint64, error)
	// totals adds up the sockets' counters.
	totals() kernel
}

// intake is the opened sockets and what the reports say about them.
type intake struct {
	socks sockets
	// srcs are read by one reader (Dispatcher.Run) with -fanout none, one
	// per worker (RunOnWorkers) otherwise.
	srcs    []steer.Source
	closers []func() error // in the order of opening
	// steering is the report's line about the kernel's steering, nil when
	// user space steers.
	steering   func() string
	steered    *kgroup.Steering // the group's, nil when user space steers
	keepsFlows func() bool
	// note is how frames reach the sockets, for the status line.
	note string
	xdp  *capture.LiveXDP // nil for AF_PACKET
}

// close closes what the intake opened, the last opened first.
func (in *intake) close() error {
	var first error
	for i := len(in.closers) - 1; i >= 0; i-- {
		if err := in.closers[i](); err != nil && first == nil {
			first = err
		}
	}
	in.closers = nil
	return first
}

// sockConfig is the sockets' configuration, AF_PACKET's or AF_XDP's, the
// capture filter compiled for the one in use.
type sockConfig struct {
	packet afpacket.Config
	xdp    afxdp.Config
	// filterLen is the filter's instruction count, 0 without one.
	filterLen int
}

// sockConfig builds the sockets' configuration from the options. The
// filter is compiled for AF_PACKET as tcpdump -i IFACE would attach it (in
// the interface's namespace, run in the kernel), for AF_XDP as for a file
// (run in user space over the frame's bytes, VLAN tags included). Its
// errors are the command's (capture.FilterError).
func (o options) sockConfig() (sockConfig, error) {
	c := sockConfig{
		packet: afpacket.Config{SnapLen: o.snaplen, Promisc: !o.noPromisc},
		xdp: afxdp.Config{SnapLen: o.snaplen, Queue: o.xdpQueue, Attach: o.xdpAttach, Bind: o.xdpBind,
			Promisc: !o.noPromisc, PassUnhashed: o.xdpPass, Host: o.xdpHost},
	}
	if o.filter == "" {
		return c, nil
	}
	var err error
	if o.xdp {
		if c.xdp.Filter, err = filter.Compile(filter.Options{}, o.filter); err == nil {
			c.filterLen = c.xdp.Filter.Len()
		}
	} else {
		err = o.enter(func() (err error) { c.packet.Filter, err = afpacket.CompileFilter(o.iface, o.filter); return err })
		c.filterLen = len(c.packet.Filter)
	}
	if err != nil {
		return c, capture.FilterError(err)
	}
	return c, nil
}

// openIntake opens the sockets the options name, in the interface's
// namespace, for d: one AF_PACKET or AF_XDP socket with -fanout none, else
// one per worker, steered by the kernel (a fanout group, or the XDP
// program with -xdp). On error nothing stays open.
func openIntake(o options, d *steer.Dispatcher, c sockConfig) (*intake, error) {
	if o.xdp {
		return openXDP(o, d, c.xdp)
	}
	in := &intake{note: "AF_PACKET"}
	if o.fanout == "none" {
		var src *afpacket.Source
		if err := o.enter(func() (err error) { src, err = afpacket.Open(o.iface, c.packet); return err }); err != nil {
			return nil, err
		}
		in.socks = packetSockets{srcs: []*afpacket.Source{src}}
		in.srcs = []steer.Source{src}
		in.closers = append(in.closers, src.Close)
		in.keepsFlows = func() bool { return true }
		return in, nil
	}
	mode, _ := afpacket.ParseFanoutMode(o.fanout) // checked
	var g *afpacket.Group
	if err := o.enter(func() (err error) { g, err = afpacket.OpenGroup(o.iface, d.Workers(), c.packet, mode, 0); return err }); err != nil {
		return nil, err
	}
	in.closers = append(in.closers, g.Close)
	st, err := afpacket.NewSteering(d, g, kgroup.Options{})
	if err != nil {
		in.close()
		return nil, steeringError(err)
	}
	in.socks = packetSockets{srcs: g.Sources(), stopIntake: st.StopIntake}
	in.closers = append(in.closers, st.Close)
	in.srcs = st.Sources()
	in.steering, in.steered = steeringLine(fmt.Sprintf("fanout %s, keeps flows on one worker: %v", mode, mode.KeepsFlows()), st), st
	in.keepsFlows = mode.KeepsFlows
	return in, nil
}

// openXDP opens the AF_XDP intake: with -fanout none one socket with a
// program that redirects every frame of its queue to it, steered in user
// space; with -fanout ebpf one socket per worker sharing one UMEM, and the
// XDP steering program that redirects each frame to its worker's socket
// (frames it cannot hash, such as ARP, to socket 0). With
// -xdp-pass-unhashed both modes pass the frames they cannot hash to the
// kernel stack instead.
func openXDP(o options, d *steer.Dispatcher, cfg afxdp.Config) (*intake, error) {
	in := &intake{keepsFlows: func() bool { return true }}
	if o.fanout == "none" {
		var src *afxdp.Source
		if err := o.enter(func() (err error) { src, err = afxdp.Open(o.iface, cfg); return err }); err != nil {
			return nil, hostError(err)
		}
		in.socks = xdpSockets{srcs: []*afxdp.Source{src}, stopIntake: src.StopIntake}
		in.srcs, in.closers = []steer.Source{src}, []func() error{src.Close}
		in.describeXDP(src.Info())
		return in, nil
	}
	var g *afxdp.Group
	var st *kgroup.Steering
	err := o.enter(func() (err error) {
		if g, err = afxdp.OpenGroup(o.iface, d.Workers(), cfg); err != nil {
			return hostError(err)
		}
		if st, err = afxdp.NewSteering(d, g, kgroup.Options{PassUnhashed: o.xdpPass}); err != nil {
			g.Close()
			return steeringError(err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	in.socks = xdpSockets{srcs: g.Sources(), stopIntake: st.StopIntake}
	in.srcs, in.closers = st.Sources(), []func() error{g.Close, st.Close}
	in.steering, in.steered = steeringLine("XDP program", st), st
	in.describeXDP(g.Info())
	return in, nil
}

// hostError returns an error of afxdp.Open or OpenGroup as the command
// reports it: an interface with addresses and -xdp-host refuse is a usage
// error that names the flag.
func hostError(err error) error {
	if errors.Is(err, afxdp.ErrHostAddrs) {
		return cli.UsageError(fmt.Errorf("%w (with livesteer: -xdp-host pass or -xdp-host take)", err))
	}
	return err
}

// steeringLine returns the report's line about a kernel-steered group:
// what steers it, the table changes, and the program's own counters.
func steeringLine(what string, st *kgroup.Steering) func() string {
	return func() string {
		ss := st.Stats()
		var b strings.Builder
		fmt.Fprintf(&b, "Kernel steering (%s): table changes %d, held frames %d", what, ss.TableChanges, ss.HeldFrames)
		for i, k := range ss.Kernel {
			sep := ", "
			if i == 0 {
				sep = "; "
			}
			fmt.Fprintf(&b, "%s%s %d", sep, k.Name, k.Value)
		}
		return b.String()
	}
}

// steeringCounters returns the group's counters for the JSON report, nil
// when user space steers.
func (in *intake) steeringCounters() map[string]uint64 {
	if in.steered == nil {
		return nil
	}
	ss := in.steered.Stats()
	m := map[string]uint64{"table_changes": ss.TableChanges, "buckets_moved": ss.BucketsMoved, "held_frames": ss.HeldFrames,
		"hold_timeouts": ss.HoldTimeouts, "hold_overflows": ss.HoldOverflows}
	for _, k := range ss.Kernel {
		m[k.Name] = k.Value
	}
	return m
}

// describeXDP fills the intake's note and live report from the sockets'
// Info.
func (in *intake) describeXDP(info afxdp.Info) {
	in.note = fmt.Sprintf("AF_XDP queue %d, %s attach, %s mode", info.Queue, info.Attach, info.Mode())
	in.xdp = &capture.LiveXDP{Queue: info.Queue, Attach: info.Attach.String(), ZeroCopy: info.ZeroCopy}
}

// packetSockets are AF_PACKET sockets: one of afpacket.Open, or a group's.
type packetSockets struct {
	srcs []*afpacket.Source
	// stopIntake is the group's Steering's StopIntake, nil for one socket.
	stopIntake func() error
}

// pending is the frames the kernel passed to the rings (received less
// dropped) that the readers have not handed out.
func (ps packetSockets) pending() (uint64, error) {
	var left uint64
	for _, s := range ps.srcs {
		st, err := s.Stats()
		if err != nil {
			return 0, err
		}
		left += st.Packets - st.Drops - st.Delivered
	}
	return left, nil
}

func (ps packetSockets) totals() kernel {
	var k kernel
	for _, sock := range ps.srcs {
		st, err := sock.Stats()
		if err != nil {
			k.err = err
			return k
		}
		k.received += st.Packets
		k.dropped += st.Drops
		k.delivered += st.Delivered
	}
	return k
}

// xdpSockets are AF_XDP sockets: one of afxdp.Open, or a group's.
type xdpSockets struct {
	srcs []*afxdp.Source
	// stopIntake is the socket's StopIntake, or the group's Steering's.
	stopIntake func() error
}

// stop detaches the XDP program that feeds the sockets and waits until no
// frame can reach their rings any more (StopIntake): the queue's frames go
// to the kernel stack again, and those already in the rings stay there to
// be read.
func (xs xdpSockets) stop() error {
	if err := xs.stopIntake(); err != nil {
		return fmt.Errorf("stopping intake: %w", err)
	}
	return nil
}

// totals: an AF_XDP socket's received frames are those it read, filtered
// in user space, or the kernel dropped for it (afxdp.Stats.Received).
func (xs xdpSockets) totals() kernel {
	var k kernel
	for _, sock := range xs.srcs {
		st, err := sock.Stats()
		if err != nil {
			k.err = err
			return k
		}
		k.received += st.Received()
		k.dropped += st.RxDropped + st.RxRingFull
		k.delivered += st.Delivered
		k.filtered += st.Filtered
	}
	return k
}

// drain waits, for at most timeout, until every socket has handed out
// every frame its ring received, on two reads in a row.
func drain(socks sockets, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	dry := 0
	for {
		left, err := socks.pending()
		if err != nil {
			return fmt.Errorf("reading the rings dry: %w", err)
		}
		if left == 0 {
			if dry++; dry == 2 {
				return nil
			}
		} else {
			dry = 0
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("reading the rings dry: not dry after %v (%d left)", timeout, left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
