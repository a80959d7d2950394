// Command reassembly puts TCP streams back together with gopacket's
// tcpassembly, one assembler per worker, and prints for every connection the
// bytes sent each way and the first line of each direction.
//
//	go run ./examples/reassembly                    # the embedded sample capture
//	go run ./examples/reassembly -r trace.pcap -n 20 -idle 30s
//	go run ./examples/reassembly -symmetric=false   # see connections torn in halves
//
// What it teaches:
//
//   - Symmetric steering. tcpassembly reassembles each direction of a
//     connection as a stream of its own; a program that wants to see a
//     request beside its response needs both directions in one place.
//     Config.Symmetric hashes the two endpoints in canonical order, so A->B
//     and B->A get one flowid and meet on one worker, whatever the key. With
//     -symmetric=false the two directions usually land on different workers,
//     and every such connection is printed as two one-way halves.
//   - The sharded pattern tcpassembly's documentation recommends: when the
//     packets of a connection always reach the same assembler, give every
//     assembler its own StreamPool, and no lock is contended. Here each
//     worker owns a shard, made by steer.NewPerWorker in the worker's
//     goroutine: an Assembler, a StreamPool, a DecodingLayerParser and its
//     connection table, touched only from the handler and the shard's own
//     Tick and Close, all in the worker's goroutine (DEFERRED dispatch, the
//     default). Nobody sizes anything by a worker count.
//   - Flushing by capture time on the worker tick (steer.Ticker):
//     FlushOlderThan(clock - idle) closes the connections that have been
//     quiet for -idle, where the worker's clock is the latest capture
//     timestamp it has handled (a file replays much faster than it was
//     recorded; a live capture would use the wall clock, Tick's now).
//     At Dispatcher.Close each shard's Close (io.Closer) runs FlushAll in
//     its worker, so every connection still open is completed before the
//     dispatcher returns.
//
// A frame is decoded only as far as TCP (Ethernet, 802.1Q/802.1ad tags,
// IPv4, IPv6 and its extension headers); everything else is counted and
// skipped. Bytes are the reassembled payload bytes; bytes that never arrived
// (a frame cut by the snap length, a segment lost before the tap) are
// counted as skipped.
//
// README line: reassembly — TCP stream reassembly with gopacket's
// tcpassembly, one assembler and stream pool per worker, with symmetric
// hashing so both directions of a connection meet on one worker, flushed by
// capture time.
package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/tcpassembly"

	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/internal/sample"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// options are the command's flags.
type options struct {
	file      string        // capture to read; "" means the embedded sample
	workers   int           // 0: steer.DefaultWorkers()
	idle      time.Duration // close connections quiet for this long (capture time)
	tick      time.Duration // worker tick (wall clock)
	symmetric bool          // Config.Hash.Symmetric
	n         int           // connections to print; 0 all
}

func main() {
	cli.Exit("reassembly", runMain(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// runMain is the command: it parses args, reassembles the capture and prints
// the connections to stdout.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	res, err := run(ctx, o)
	if err != nil {
		return err
	}
	return res.write(stdout, o.n)
}

// parseFlags parses args with a flag set of its own, so that the flags
// gopacket registers on flag.CommandLine stay out of the usage. Its errors
// wrap cli.ErrUsage (or are flag.ErrHelp).
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := cli.NewFlagSet("reassembly", "[flags]",
		"Reassembles TCP streams with one tcpassembly assembler per worker and prints\n"+
			"every connection's bytes and first line each way.", stderr)
	fs.StringVar(&o.file, "r", "", "capture `file` to read (pcap or pcapng, \"-\" for standard input); default: the embedded sample")
	fs.IntVar(&o.workers, "workers", 0, "`number` of worker goroutines; 0: steer.DefaultWorkers(), one per CPU this process may run on")
	fs.DurationVar(&o.idle, "idle", 2*time.Minute, "close a connection with no data for this `long`, in capture time")
	fs.DurationVar(&o.tick, "tick", time.Second, "how `often` each worker flushes idle connections (wall clock)")
	fs.BoolVar(&o.symmetric, "symmetric", true, "hash both directions of a connection alike (Config.Hash.Symmetric)")
	fs.IntVar(&o.n, "n", 0, "print only the first `n` connections (0: all)")
	if err := cli.Parse(fs, args); err != nil {
		return o, err
	}
	return o, o.check()
}

// check returns a usage error for options that cannot work.
func (o options) check() error {
	switch {
	case o.idle <= 0:
		return cli.Usagef("-idle %v: want a positive duration", o.idle)
	case o.workers < 0:
		return cli.Usagef("-workers %d: want 0 or more", o.workers)
	case o.tick <= 0:
		return cli.Usagef("-tick %v: want a positive duration", o.tick)
	case o.n < 0:
		return cli.Usagef("-n %d: want 0 or more", o.n)
	}
	return nil
}

// firstLineMax bounds the first line kept of each direction.
const firstLineMax = 72

// half is one direction of a connection: a tcpassembly.Stream.
type half struct {
	c       *conn
	src     string // "addr:port" of the sender
	dst     string // "addr:port" of the receiver
	bytes   int    // payload bytes reassembled
	skipped int    // bytes known to be missing (-1 markers are not counted)
	line    []byte // the start of the data, up to the first newline
	lineEnd bool   // line holds a whole line (or firstLineMax bytes)
	done    bool   // ReassemblyComplete was called
}

// Reassembled implements tcpassembly.Stream.
func (h *half) Reassembled(rs []tcpassembly.Reassembly) {
	for i := range rs {
		r := &rs[i]
		if r.Skip > 0 {
			h.skipped += r.Skip
		}
		h.bytes += len(r.Bytes)
		if !h.lineEnd && len(r.Bytes) > 0 {
			b := r.Bytes
			if j := bytes.IndexByte(b, '\n'); j >= 0 {
				b, h.lineEnd = b[:j], true
			}
			h.line = append(h.line, b[:min(len(b), firstLineMax-len(h.line))]...)
			if len(h.line) >= firstLineMax {
				h.lineEnd = true
			}
		}
		if !r.Seen.IsZero() && (h.c.first.IsZero() || r.Seen.Before(h.c.first)) {
			h.c.first = r.Seen
		}
	}
}

// ReassemblyComplete implements tcpassembly.Stream.
func (h *half) ReassemblyComplete() { h.done = true }

// conn is a connection: the half seen first (usually the client's) and the
// other one.
type conn struct {
	key    connKey
	halves [2]*half
	worker int
	first  time.Time // capture time of its first data
	order  int       // creation order in its worker, to sort ties
}

// connKey names a connection by its endpoints in canonical order.
type connKey struct{ net, tcp gopacket.Flow }

func canonical(netFlow, tcpFlow gopacket.Flow) connKey {
	a := connKey{netFlow, tcpFlow}
	b := connKey{netFlow.Reverse(), tcpFlow.Reverse()}
	c := bytes.Compare(netFlow.Src().Raw(), netFlow.Dst().Raw())
	if c == 0 {
		c = bytes.Compare(tcpFlow.Src().Raw(), tcpFlow.Dst().Raw())
	}
	if c > 0 {
		return b
	}
	return a
}

// shard is one worker's reassembly state (steer.NewPerWorker). Only that
// worker's goroutine touches it while the dispatcher runs.
type shard struct {
	index int
	idle  time.Duration

	// Decoding, reused for every frame.
	eth     layers.Ethernet
	dot1q   layers.Dot1Q
	ip4     layers.IPv4
	ip6     layers.IPv6
	ext     layers.IPv6ExtensionSkipper
	tcp     layers.TCP
	parser  *gopacket.DecodingLayerParser
	decoded []gopacket.LayerType

	asm   *tcpassembly.Assembler
	open  map[connKey]*conn // connections waiting for their other half
	all   []*conn
	clock time.Time // the latest capture time handled

	segments int // TCP segments assembled
	other    int // frames that are not TCP (or could not be decoded)
	flushed  int // connections closed by the idle flush on the tick
}

// New implements tcpassembly.StreamFactory: tcpassembly calls it, from this
// worker's Assemble, for every new direction of a connection.
func (s *shard) New(netFlow, tcpFlow gopacket.Flow) tcpassembly.Stream {
	k := canonical(netFlow, tcpFlow)
	src := endpoint(netFlow.Src(), tcpFlow.Src())
	c := s.open[k]
	// A new stream in the direction c already has (the old one was closed
	// by a FIN, a RST or the idle flush, and the connection came back)
	// starts a new connection record.
	if c == nil || c.halves[0].src == src {
		c = &conn{key: k, worker: s.index, order: len(s.all)}
		s.open[k] = c
		s.all = append(s.all, c)
	}
	h := &half{c: c, src: src, dst: endpoint(netFlow.Dst(), tcpFlow.Dst())}
	if c.halves[0] == nil {
		c.halves[0] = h
	} else {
		c.halves[1] = h
		delete(s.open, k) // both halves are here
	}
	return h
}

func endpoint(addr, port gopacket.Endpoint) string {
	a := addr.String()
	if len(addr.Raw()) == 16 {
		a = "[" + a + "]"
	}
	return a + ":" + port.String()
}

func newShard(index int, idle time.Duration) *shard {
	s := &shard{index: index, idle: idle, open: map[connKey]*conn{}}
	s.parser = gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet,
		&s.eth, &s.dot1q, &s.ip4, &s.ip6, &s.ext, &s.tcp)
	s.parser.IgnoreUnsupported = true // stop quietly at UDP, ARP, the TCP payload ...
	s.asm = tcpassembly.NewAssembler(tcpassembly.NewStreamPool(s))
	return s
}

// handle is the handler: it decodes one frame and feeds its TCP segment to
// the worker's assembler.
func (s *shard) handle(p *steer.Packet) {
	if p.Timestamp.After(s.clock) {
		s.clock = p.Timestamp
	}
	s.decoded = s.decoded[:0]
	if err := s.parser.DecodeLayers(p.Data, &s.decoded); err != nil {
		s.other++
		return
	}
	var netFlow gopacket.Flow
	tcp := false
	for _, t := range s.decoded {
		switch t {
		case layers.LayerTypeIPv4:
			netFlow = s.ip4.NetworkFlow()
		case layers.LayerTypeIPv6:
			netFlow = s.ip6.NetworkFlow()
		case layers.LayerTypeTCP:
			tcp = true
		}
	}
	if !tcp {
		s.other++
		return
	}
	s.segments++
	s.asm.AssembleWithTimestamp(netFlow, &s.tcp, p.Timestamp)
}

// Tick implements steer.Ticker: it closes the connections quiet for the idle
// time by the worker's capture clock (the wall-clock now is not used).
func (s *shard) Tick(time.Time) {
	if s.clock.IsZero() {
		return
	}
	_, closed := s.asm.FlushOlderThan(s.clock.Add(-s.idle))
	s.flushed += closed
}

// Close implements io.Closer: Dispatcher.Close runs it in the worker after
// its last frame, and it completes every connection still open.
func (s *shard) Close() error {
	s.asm.FlushAll()
	return nil
}

// result is what a run reassembled.
type result struct {
	Conns    []*conn
	Workers  int
	Segments int
	Other    int
	Flushed  int // closed on a tick (depends on timing)
	Stats    steer.Stats
}

// run reassembles the capture o names.
func run(ctx context.Context, o options) (*result, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	var src *pcapfile.Reader
	var err error
	if o.file == "" {
		src, err = pcapfile.NewReader(sample.Reader())
	} else {
		src, err = pcapfile.Open(o.file)
	}
	if err != nil {
		return nil, err
	}
	defer src.Close()

	// A file can wait: the default overflow holds the reader back on a full
	// queue, so a replay drops nothing.
	cfg := steer.Config{
		Workers:      o.workers,
		Hash:         steer.HashConfig{Symmetric: o.symmetric},
		TickInterval: o.tick,
	}
	d, shards, err := steer.NewPerWorker(cfg,
		func(w *steer.Worker) *shard { return newShard(w.Index(), o.idle) },
		(*shard).handle)
	if err != nil {
		return nil, err
	}
	runErr := d.Run(ctx, src)
	if err := d.Close(ctx); err != nil && runErr == nil {
		runErr = err
	}
	if runErr != nil {
		return nil, runErr
	}

	// The workers have exited (each shard's Close flushed its assembler):
	// the shards may be read now.
	res := &result{Workers: len(shards), Stats: d.Stats()}
	for _, s := range shards {
		res.Conns = append(res.Conns, s.all...)
		res.Segments += s.segments
		res.Other += s.other
		res.Flushed += s.flushed
	}
	slices.SortFunc(res.Conns, func(a, b *conn) int {
		if c := a.first.Compare(b.first); c != 0 {
			return c
		}
		if c := cmp.Compare(a.halves[0].src, b.halves[0].src); c != 0 {
			return c
		}
		return cmp.Compare(a.order, b.order)
	})
	return res, nil
}

// quoteLine shows a first line: quoted when it is printable ASCII text,
// else as its first bytes in hex (TLS records, compressed data).
func quoteLine(b []byte) string {
	b = bytes.TrimSuffix(b, []byte("\r"))
	for _, c := range b {
		if (c < 0x20 || c > 0x7e) && c != '\t' {
			return fmt.Sprintf("binary % x ...", b[:min(len(b), 8)])
		}
	}
	return strconv.Quote(string(b))
}

// write prints the summary and every connection (the first n when n > 0).
func (r *result) write(out io.Writer, n int) error {
	both, total := 0, 0
	for _, c := range r.Conns {
		if c.halves[1] != nil {
			both++
		}
		for _, h := range c.halves {
			if h != nil {
				total += h.bytes
			}
		}
	}
	if _, err := fmt.Fprintf(out, "%d TCP connections (%d with both directions on one worker), %d payload bytes from %d segments, on %d workers; %d other frames\n",
		len(r.Conns), both, total, r.Segments, r.Workers, r.Other); err != nil {
		return err
	}
	for i, c := range r.Conns {
		if n > 0 && i == n {
			fmt.Fprintf(out, "... %d more\n", len(r.Conns)-n)
			break
		}
		h0 := c.halves[0]
		fmt.Fprintf(out, "\n%s <> %s  worker %d, from %s\n", h0.src, h0.dst, c.worker, c.first.Format("15:04:05.000000"))
		for _, h := range c.halves {
			if h == nil {
				fmt.Fprintf(out, "  %s > %s: not seen on this worker\n", h0.dst, h0.src)
				continue
			}
			skipped := ""
			if h.skipped > 0 {
				skipped = fmt.Sprintf(" (%d skipped)", h.skipped)
			}
			if _, err := fmt.Fprintf(out, "  %s > %s: %d bytes%s, first line %s\n", h.src, h.dst, h.bytes, skipped, quoteLine(h.line)); err != nil {
				return err
			}
		}
	}
	return nil
}
