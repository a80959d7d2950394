// Command gopacketdecode is a gopacket program that steers: it captures
// with gopacket, steers the packets over workers with the library, and
// decodes each packet with gopacket in the worker that handles it.
//
//	go run ./examples/gopacketdecode                    # the embedded sample, read with pcapgo
//	go run ./examples/gopacketdecode -r trace.pcapng -workers 4
//	go run -tags rpsexample_pcap ./examples/gopacketdecode -i eth0 -f 'tcp port 443'
//
// The last form captures live through gopacket/pcap, that is libpcap, with
// its capture filters and devices. It is behind the build tag
// rpsexample_pcap because gopacket/pcap needs cgo and libpcap's headers
// (Debian's libpcap-dev) to build; without the tag the command reads files
// only, with pure-Go pcapgo, and -i says how to build it.
//
// What it teaches:
//
//   - Bringing an existing gopacket capture to the dispatcher: whatever
//     reads the packets (pcapgo.Reader, pcapgo.NgReader, pcap.Handle),
//     gopacketsrc.New makes it a steer.Source, copying each packet once into
//     an arena that the dispatcher releases per batch. A live handle is
//     marked WithLive, so a full worker queue drops (and counts) instead of
//     holding the capture back, and its read timeout lets Ctrl-C stop it.
//   - Decoding in the workers: a gopacket.DecodingLayerParser is not safe
//     for concurrent use, so each worker has its own, with its layers, as
//     its steer.NewPerWorker state. It decodes the frame in place: no copy,
//     no lock, and for most frames no allocation.
//
// The report gives, per worker, the frames handled and how far they
// decoded (IPv4, IPv6, TCP, UDP; frames gopacket could not decode), the
// TCP and UDP flows seen (each on one worker only: that is the steering),
// then what the source read and the dispatcher dropped.
//
// README line: gopacketdecode — a gopacket program steered: a pcapgo reader
// or (with -tags rpsexample_pcap) a libpcap handle as the source through
// steer/gopacketsrc, and a DecodingLayerParser per worker.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/gopacketsrc"
)

// options are the command's flags.
type options struct {
	file    string // capture to read; "" means the embedded sample
	device  string // live capture device (-tags rpsexample_pcap)
	filter  string // capture filter for -i, in tcpdump's syntax
	snaplen int    // bytes kept of each packet, for -i
	workers int    // 0: steer.DefaultWorkers()
	dur     time.Duration
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cli.Exit("gopacketdecode", runMain(ctx, os.Args[1:], os.Stdout))
}

// runMain is the command: it parses args, steers and decodes the capture
// and prints the report to stdout.
func runMain(ctx context.Context, args []string, stdout io.Writer) error {
	o, err := parseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	src, done, err := open(o)
	if err != nil {
		return err
	}
	defer done()
	rep, err := run(ctx, o, src)
	if err != nil {
		return err
	}
	rep.write(stdout)
	return nil
}

// parseFlags parses args with a flag set of its own, so that the flags
// gopacket registers on flag.CommandLine stay out of the usage.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := cli.NewFlagSet("gopacketdecode", "[flags]",
		"Steers a gopacket capture over workers and decodes every packet with a\n"+
			"DecodingLayerParser in the worker that handles it.", stderr)
	fs.StringVar(&o.file, "r", "", "capture `file` to read with pcapgo (pcap or pcapng, \"-\" for standard input); default: the embedded sample")
	fs.StringVar(&o.device, "i", "", "capture live on `device` with libpcap (needs a build with -tags rpsexample_pcap)")
	fs.StringVar(&o.filter, "f", "", "capture filter `expression` for -i, in tcpdump's syntax")
	fs.IntVar(&o.snaplen, "s", 65535, "`bytes` kept of each packet, for -i")
	fs.DurationVar(&o.dur, "duration", 0, "stop after this `long` (0: at the end of the file, or Ctrl-C)")
	fs.IntVar(&o.workers, "workers", 0, "`number` of worker goroutines; 0: steer.DefaultWorkers(), one per CPU this process may run on")
	if err := cli.Parse(fs, args); err != nil {
		return o, err
	}
	switch {
	case o.file != "" && o.device != "":
		return o, cli.Usagef("-r and -i: give one source")
	case o.filter != "" && o.device == "":
		return o, cli.Usagef("-f needs -i (a file is read whole)")
	case o.workers < 0:
		return o, cli.Usagef("-workers %d: want 0 or more", o.workers)
	case o.snaplen < 1 || o.snaplen > gopacketsrc.MaxPacketLen:
		return o, cli.Usagef("-s %d: want 1 to %d", o.snaplen, gopacketsrc.MaxPacketLen)
	case o.dur < 0:
		return o, cli.Usagef("-duration %v: want 0 or more", o.dur)
	}
	return o, nil
}

// open returns the source the options name and what to call when done
// with it.
func open(o options) (*gopacketsrc.Source, func(), error) {
	if o.device == "" {
		return openFile(o.file)
	}
	if openLive == nil {
		return nil, nil, cli.Usagef("-i: this build has no live capture; build with -tags rpsexample_pcap (needs cgo and libpcap's headers)")
	}
	return openLive(o)
}

// openLive opens a live capture with libpcap; it is set only in a build
// with the rpsexample_pcap tag.
var openLive func(o options) (*gopacketsrc.Source, func(), error)

// run steers src over the workers, each decoding what it handles, and
// returns the report once src ends, the duration passes or ctx ends.
func run(ctx context.Context, o options, src *gopacketsrc.Source) (*report, error) {
	d, decoders, err := steer.NewPerWorker(steer.Config{Workers: o.workers}, newDecoder, (*decoder).decode)
	if err != nil {
		if errors.Is(err, steer.ErrConfig) {
			err = cli.UsageError(err)
		}
		return nil, err
	}
	if o.dur > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.dur)
		defer cancel()
	}
	runErr := d.Run(ctx, src)
	// Close drains the queues; after it the workers' states can be read.
	if err := d.Close(context.Background()); err != nil {
		return nil, fmt.Errorf("closing the dispatcher: %w", err)
	}
	if runErr != nil && ctx.Err() == nil {
		return nil, runErr
	}
	return &report{decoders: decoders, stats: d.Stats(), source: src.Stats()}, nil
}
