// Command forwarder is a two-port software forwarder (a bump in the wire)
// built on the steer library: it receives every frame arriving on one
// interface with an AF_PACKET TPACKET_V3 ring, steers it by flow to one of
// N workers, lets the worker spend a fixed amount of CPU on it (standing in
// for inspection: a firewall, an IDS, a NAT), and transmits it unchanged on
// the other interface with an AF_PACKET socket. It does the same in the
// other direction, so two hosts on either side talk through it as through a
// cable.
//
// It shows what receive packet steering buys a single-queue NIC: with one
// worker every frame waits for the one CPU doing the work; with one worker
// per CPU the flows are spread, and because each flow stays on one worker
// its frames leave in the order they came, so TCP sees no reordering.
//
// Usage (as root, the two interfaces with offloads off so that no frame is
// larger than the MTU):
//
//	ethtool -K eth1 gro off tso off gso off
//	ethtool -K eth2 gro off tso off gso off
//	forwarder -in eth1 -out eth2 -workers 4 -work 20us
//	forwarder -in eth1 -out eth2 -workers 4 -xdp
//
// Flags:
//
//	-in, -out       the two interfaces
//	-workers N      worker goroutines (default 0: steer.DefaultWorkers(), one
//	                per CPU the process may run on); 1 is the single-queue
//	                baseline
//	-work D         CPU time spent per frame (default 0)
//	-oneway         forward only from -in to -out
//	-pin            pin worker i to the i-th allowed CPU
//	-block-timeout  how long a batch that is not full waits (an AF_PACKET ring
//	                block, or with -xdp the AF_XDP BatchTimeout)
//	                (default 1ms; it bounds the added latency at low rates)
//	-stats          print the dispatcher's netstat -Q-style report at exit
//	-xdp            receive and send through AF_XDP (see below)
//
// Ctrl-C (SIGINT) or SIGTERM stops it: the readers stop, the workers finish
// the frames already queued, and it prints how many frames it forwarded
// each way; a second one ends it at once. It has no data output: its status lines and the report go to
// standard error.
//
// With -xdp each port receives through an AF_XDP socket (package
// steer/afxdp) on its queue 0 instead of an AF_PACKET ring: an XDP program
// redirects the port's frames to the socket before the kernel builds an
// skb (on a driver with native XDP), and the kernel stack of the
// forwarder's host no longer sees them, which is what a bump in the wire
// wants. A multi-queue NIC must put every frame on queue 0 (ethtool -L
// IFACE combined 1), or the other queues' frames go to the stack and are
// not forwarded. Each port sends through an AF_XDP Sender (internal/xsk) on the same
// queue too, which shares the receiving socket's UMEM (the kernel allows
// one UMEM per device and queue; with -oneway the sending port has a
// Sender of its own): a worker's Send copies the frame into one of the
// Sender's 2048 chunks and hands it to the kernel. A Sender that finds
// every chunk in flight for 10ms drops the frame and counts it in
// tx_errors.
//
// Limits: 802.1Q tags that the kernel strips on receive are not put back
// on transmit (with -xdp the frame is sent as XDP saw it, with any tag the
// NIC left in it); frames longer than the snap length or the MTU (GRO/GSO
// super-frames when offloads are on) are counted as oversize and not sent.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/steer"
)

func main() {
	o, report, err := parseFlags(os.Args[1:], os.Stderr)
	if err == nil {
		ctx, stop := cli.NotifyContext(context.Background())
		defer stop()
		err = forward(ctx, o, report)
	}
	cli.Exit("forwarder", err)
}

// forward runs the forwarder until ctx ends. A value of its options that
// the library rejects (a worker count steer refuses, a ring setting
// afpacket refuses: every configuration error of the library wraps
// steer.ErrConfig) is a usage error.
func forward(ctx context.Context, o Options, report bool) error {
	err := run(ctx, o, report)
	if errors.Is(err, steer.ErrConfig) {
		return cli.UsageError(err)
	}
	return err
}

// parseFlags parses args into Options and the -stats flag. Its errors wrap
// cli.ErrUsage (or are flag.ErrHelp).
func parseFlags(args []string, stderr io.Writer) (o Options, stats bool, err error) {
	fs := cli.NewFlagSet("forwarder", "-in IFACE -out IFACE [flags]",
		"Forwards frames between two interfaces, steering each flow to one worker that\n"+
			"spends -work of CPU on it, as a bump in the wire.", stderr)
	fs.StringVar(&o.In, "in", "", "first `interface` (required)")
	fs.StringVar(&o.Out, "out", "", "second `interface` (required)")
	fs.IntVar(&o.Workers, "workers", 0, "`number` of worker goroutines; 0: steer.DefaultWorkers(), one per CPU this process may run on")
	fs.DurationVar(&o.Work, "work", 0, "CPU `time` spent on each frame")
	fs.BoolVar(&o.OneWay, "oneway", false, "forward only from -in to -out")
	fs.BoolVar(&o.Pin, "pin", false, "pin each worker to a CPU")
	fs.DurationVar(&o.BlockTimeout, "block-timeout", time.Millisecond, "how long a batch that is not full waits before it is handed over: the AF_PACKET ring block `timeout` (1ms and up), or with -xdp the AF_XDP sockets' BatchTimeout")
	fs.BoolVar(&stats, "stats", false, "print the dispatcher's report at exit")
	fs.BoolVar(&o.XDP, "xdp", false, "receive and send through AF_XDP sockets (queue 0 of each port) instead of AF_PACKET sockets")
	if err := cli.Parse(fs, args); err != nil {
		return o, false, err
	}
	switch {
	case o.In == "" || o.Out == "":
		return o, false, cli.Usagef("-in and -out are required")
	case o.In == o.Out:
		return o, false, cli.Usagef("-in and -out are both %q: want two interfaces", o.In)
	case o.Workers < 0:
		return o, false, cli.Usagef("-workers %d: want 0 or more", o.Workers)
	}
	return o, stats, nil
}

// Options configure a forwarder.
type Options struct {
	In, Out      string
	Workers      int
	Work         time.Duration
	OneWay       bool
	Pin          bool
	BlockTimeout time.Duration
	// XDP receives and sends through AF_XDP sockets instead of AF_PACKET
	// sockets.
	XDP bool
}

// Stats count what a forwarder did.
type Stats struct {
	InToOut, OutToIn uint64 // frames transmitted each way
	TxErrors         uint64 // transmissions that failed (ENOBUFS, a link down; with -xdp, a full Sender)
	Oversize         uint64 // frames truncated by the ring or larger than the MTU
	KernelDrops      uint64 // frames the rings had no room for
	QueueDrops       uint64 // frames the dispatcher dropped
}

// String prints the stats as key=value pairs.
func (s Stats) String() string {
	return fmt.Sprintf("in_to_out=%d out_to_in=%d tx_errors=%d oversize=%d kernel_drops=%d queue_drops=%d",
		s.InToOut, s.OutToIn, s.TxErrors, s.Oversize, s.KernelDrops, s.QueueDrops)
}

// spinner burns CPU for a calibrated time per call.
type spinner struct{ iters int }

func spinLoop(n int) uint64 {
	x := uint64(1)
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

func newSpinner(d time.Duration) spinner {
	if d <= 0 {
		return spinner{}
	}
	n := 1000
	for {
		start := time.Now()
		var x uint64
		for i := 0; i < 50; i++ {
			x += spinLoop(n)
		}
		runtime.KeepAlive(x)
		el := time.Since(start) / 50
		if el >= d/2 || n > 1<<28 {
			return spinner{iters: int(float64(n) * float64(d) / float64(max(el, 1)))}
		}
		n *= 4
	}
}

// spin returns a value so that the loop is not optimized away; the caller
// keeps it in a per-worker field.
func (s spinner) spin() uint64 {
	if s.iters == 0 {
		return 0
	}
	return spinLoop(s.iters)
}
