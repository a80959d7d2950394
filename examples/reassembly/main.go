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
//   - Bounded state. Each worker keeps its connections in a flowtable.Table
//     of -capacity entries, keyed by a hash of the connection's endpoints
//     that both directions share. When a flood of new connections fills the
//     table, the least recently seen ones are evicted and closed in the
//     assembler too, so that its StreamPool frees them:
//     tcpassembly closes connections only by time, so the worker gathers
//     evictions and, every -capacity/16 of them and on its tick, flushes the
//     assembler up to the latest time an evicted connection was seen
//     (FlushWithOptions with CloseAll), which closes the evicted ones and
//     any quieter still. Out-of-order data waits in at most 4096 pages of
//     the assembler's (MaxBufferedPagesTotal, about 8 MB a worker) and 64 of
//     one connection's (MaxBufferedPagesPerConnection); past them the oldest
//     is pushed on, its gap counted as skipped. A connection that is done
//     (every direction completed and out of the table) is not kept either:
//     the worker hands it to one report, which adds it to the totals and
//     keeps the -n that started first, or prints it at once with -n 0. So
//     memory stays bounded by -capacity however many connections a capture
//     holds.
//   - Flushing by capture time on the worker tick (steer.Ticker):
//     FlushOlderThan(clock - idle) closes the connections that have been
//     quiet for -idle, where the worker's clock is the latest capture
//     timestamp it has handled (a file replays much faster than it was
//     recorded; a live capture would use the wall clock, Tick's now), and
//     the table expires them by the same clock. At Dispatcher.Close each
//     shard's Close (io.Closer) runs FlushAll in its worker, so every
//     connection still open is completed before the dispatcher returns.
//
// A frame is decoded only as far as TCP (Ethernet, 802.1Q/802.1ad tags,
// IPv4, IPv6 and its extension headers); everything else is counted and
// skipped. Bytes are the reassembled payload bytes; bytes that never arrived
// (a frame cut by the snap length, a segment lost before the tap, data
// pushed on past a gap when a buffer limit is reached) are counted as
// skipped.
//
// It prints a summary line, then the -n connections that started first (by
// the capture time of their first data), then how many more there were.
// With -n 0 it prints every connection as it is done, in that order (by
// worker, in chunks; not sorted), and the summary line last.
//
// Ctrl-C (or SIGTERM) stops the reading, even of a pipe that delivers
// nothing; it prints the connections of every frame read until then and
// exits with status 1. A capture cut short does the same for the frames
// before the cut. A second Ctrl-C ends it at once.
//
// README line: reassembly — TCP stream reassembly with gopacket's
// tcpassembly, one assembler and stream pool per worker, with symmetric
// hashing so both directions of a connection meet on one worker, flushed by
// capture time, its connections in bounded flow tables.
package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/tcpassembly"

	"github.com/rpsgo/rps/flowtable"
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
	n         int           // connections to print; 0 all, as they are done
	capacity  int           // connections each worker holds at most
}

func main() {
	ctx, stop := cli.NotifyContext(context.Background())
	defer stop()
	cli.Exit("reassembly", runMain(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// runMain is the command: it parses args, reassembles the capture and prints
// the connections to stdout. When the reading stops early (ctx ended, or the
// capture is cut short), it prints what it has, then returns the error.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	var each func(*conn) error
	if o.n == 0 {
		each = func(c *conn) error { return c.write(stdout) }
	}
	res, err := run(ctx, o, each)
	if res != nil {
		if werr := res.write(stdout, o.n); werr != nil && err == nil {
			err = werr
		}
	}
	return err
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
	fs.IntVar(&o.n, "n", 20, "print the `n` connections that started first (0: every connection, as each is done, unsorted)")
	fs.IntVar(&o.capacity, "capacity", 1<<16, "open `connections` each worker holds at most; past it the least recently seen one is closed (still reported)")
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
	case o.capacity < 1 || o.capacity > flowtable.MaxCapacity:
		return cli.Usagef("-capacity %d: want 1 to %d", o.capacity, flowtable.MaxCapacity)
	}
	return nil
}

// firstLineMax bounds the first line kept of each direction.
const firstLineMax = 72

// The assembler's bounds on out-of-order data, in pages of about 1.9 KB:
// past them the oldest waiting data is pushed on and its gap skipped.
const (
	maxPagesTotal   = 4096 // a worker's assembler
	maxPagesPerConn = 64   // one direction of a connection
)

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
func (h *half) ReassemblyComplete() {
	h.done = true
	h.c.open--
	h.c.s.finish(h.c)
}

// conn is a connection record: the half seen first (usually the client's)
// and the other one.
type conn struct {
	key     connKey
	halves  [2]*half
	worker  int
	first   time.Time // capture time of its first data
	order   int       // creation order in its worker, to sort ties
	open    int       // halves not completed
	inTable bool      // its table entry still holds it: another half may come
	s       *shard
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

// entry is a connection's place in its worker's table.
type entry struct {
	c    *conn     // the record its next stream joins; nil before the first
	last time.Time // when the connection was last seen
}

// doneBatch is how many done connections a worker holds before it hands
// them to the report.
const doneBatch = 256

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
	conns *flowtable.Table[connKey, entry]
	cur   *entry    // the entry of the segment being assembled, for New
	clock time.Time // the latest capture time handled

	// Evicted connections wait to be closed in the assembler.
	evictBatch  int       // evictions that make the worker flush the assembler
	evictions   int       // evictions since the last flush
	evictedUpTo time.Time // the latest time an evicted connection was seen

	rep     *report
	done    []*conn // done connections not yet handed to rep
	created int     // connection records created

	segments int // TCP segments assembled
	other    int // frames that are not TCP (or could not be decoded)
	flushed  int // connections closed by the idle flush on the tick
	evicted  int // connections evicted from the full table
}

func newShard(index int, o options, rep *report) (*shard, error) {
	s := &shard{index: index, idle: o.idle, rep: rep,
		evictBatch: max(o.capacity/16, 1), done: make([]*conn, 0, doneBatch)}
	s.parser = gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet,
		&s.eth, &s.dot1q, &s.ip4, &s.ip6, &s.ext, &s.tcp)
	s.parser.IgnoreUnsupported = true // stop quietly at UDP, ARP, the TCP payload ...
	s.asm = tcpassembly.NewAssembler(tcpassembly.NewStreamPool(s))
	s.asm.MaxBufferedPagesTotal = maxPagesTotal
	s.asm.MaxBufferedPagesPerConnection = maxPagesPerConn
	var err error
	s.conns, err = flowtable.New(flowtable.Config[connKey, entry]{
		Capacity: o.capacity,
		Idle:     o.idle,
		OnEvict: func(_ flowtable.Flow[connKey], e *entry, why flowtable.Reason) {
			if why == flowtable.Evicted {
				s.evicted++
				s.evictions++
				if e.last.After(s.evictedUpTo) {
					s.evictedUpTo = e.last
				}
			}
			s.leave(e.c)
		},
	})
	return s, err
}

// New implements tcpassembly.StreamFactory: tcpassembly calls it, from this
// worker's Assemble, for every new direction of a connection, which joins
// the record of its table entry or starts a new one.
func (s *shard) New(netFlow, tcpFlow gopacket.Flow) tcpassembly.Stream {
	src := endpoint(netFlow.Src(), tcpFlow.Src())
	e := s.cur
	var c *conn
	if e != nil {
		c = e.c
	}
	// A new stream in a direction c already has (the old one was closed by
	// a FIN, a RST or a flush, and the connection came back), or a third
	// one, starts a new connection record.
	if c == nil || c.halves[1] != nil || c.halves[0].src == src {
		s.leave(c)
		c = &conn{key: canonical(netFlow, tcpFlow), worker: s.index, order: s.created, s: s}
		s.created++
		if e != nil {
			e.c, c.inTable = c, true
		}
	}
	h := &half{c: c, src: src, dst: endpoint(netFlow.Dst(), tcpFlow.Dst())}
	if c.halves[0] == nil {
		c.halves[0] = h
	} else {
		c.halves[1] = h
	}
	c.open++
	return h
}

// leave takes c (if any) out of its table entry: no stream joins it any
// more, and it is done once its halves are.
func (s *shard) leave(c *conn) {
	if c != nil && c.inTable {
		c.inTable = false
		s.finish(c)
	}
}

// finish hands c to the report if it is done: every half completed, and no
// other half can join it.
func (s *shard) finish(c *conn) {
	if c.open > 0 || c.inTable {
		return
	}
	s.done = append(s.done, c)
	if len(s.done) == doneBatch {
		s.handOver()
	}
}

// handOver hands the done connections to the report.
func (s *shard) handOver() {
	if len(s.done) > 0 {
		s.rep.add(s.done)
		clear(s.done)
		s.done = s.done[:0]
	}
}

func endpoint(addr, port gopacket.Endpoint) string {
	a := addr.String()
	if len(addr.Raw()) == 16 {
		a = "[" + a + "]"
	}
	return a + ":" + port.String()
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
	s.track(netFlow, p.Timestamp)
	s.asm.AssembleWithTimestamp(netFlow, &s.tcp, p.Timestamp)
	s.cur = nil
	if s.evictions >= s.evictBatch {
		s.closeEvicted()
	}
}

// track looks the segment's connection up in the table, as the assembler
// will: a segment that can start a stream (a SYN, or data) starts an entry,
// any other one (a FIN, a RST, a bare ACK the assembler ignores) only
// refreshes one that exists.
func (s *shard) track(netFlow gopacket.Flow, ts time.Time) {
	tcpFlow := s.tcp.TransportFlow()
	k := canonical(netFlow, tcpFlow)
	// Not p.FlowID: a fragment or a cut header gets a flowid of the
	// addresses alone, and without symmetric hashing the two directions get
	// two; gopacket's FastHash gives both directions one.
	id := uint32(netFlow.FastHash()*31 + tcpFlow.FastHash())
	if !s.tcp.SYN && len(s.tcp.Payload) == 0 && s.conns.Get(id, k) == nil {
		return
	}
	e, _ := s.conns.Lookup(id, k, ts)
	e.last = ts
	s.cur = e
}

// closeEvicted closes the evicted connections in the assembler, so that its
// pool frees them: tcpassembly closes connections only by time, so it
// closes every connection not seen since the latest evicted one was (which,
// the table evicting the least recently seen first, are the evicted ones,
// and any quieter still).
func (s *shard) closeEvicted() {
	if s.evictions > 0 {
		s.asm.FlushWithOptions(tcpassembly.FlushOptions{T: s.evictedUpTo.Add(time.Nanosecond), CloseAll: true})
		s.evictions = 0
	}
}

// Tick implements steer.Ticker: it closes the evicted connections and those
// quiet for the idle time by the worker's capture clock (the wall-clock now
// is not used), and hands the done ones to the report.
func (s *shard) Tick(time.Time) {
	s.closeEvicted()
	if !s.clock.IsZero() {
		_, closed := s.asm.FlushOlderThan(s.clock.Add(-s.idle))
		s.flushed += closed
		s.conns.Expire(s.clock)
	}
	s.handOver()
}

// Close implements io.Closer: Dispatcher.Close runs it in the worker after
// its last frame. It completes every connection still open and hands every
// record to the report.
func (s *shard) Close() error {
	s.asm.FlushAll()
	for _, e := range s.conns.All() {
		s.leave(e.c)
	}
	s.handOver()
	return nil
}

// report receives every connection record as it is done, from every worker,
// in chunks: it adds it to the totals and keeps the n that started first,
// or passes it to each. It holds no other record.
type report struct {
	mu       sync.Mutex
	n        int
	first    []*conn // the n that started first so far, by byStart
	conns    int
	both     int // with both directions
	payload  int // bytes reassembled
	each     func(*conn) error
	eachErrs error // each's first error, after which it is not called
}

// add takes a chunk of done connections. It may be called from any
// goroutine.
func (r *report) add(cs []*conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		r.conns++
		if c.halves[1] != nil {
			r.both++
		}
		for _, h := range c.halves {
			if h != nil {
				r.payload += h.bytes
			}
		}
		if r.n > 0 && (len(r.first) < r.n || byStart(c, r.first[len(r.first)-1]) < 0) {
			j, _ := slices.BinarySearchFunc(r.first, c, byStart)
			r.first = slices.Insert(r.first, j, c)
			r.first = r.first[:min(len(r.first), r.n)]
		}
		if r.each != nil && r.eachErrs == nil {
			r.eachErrs = r.each(c)
		}
	}
}

// byStart orders connections by the capture time of their first data, then
// by their first sender, worker and creation, so that which connections
// are printed does not depend on the order they are done in.
func byStart(a, b *conn) int {
	if c := a.first.Compare(b.first); c != 0 {
		return c
	}
	if c := cmp.Compare(a.halves[0].src, b.halves[0].src); c != 0 {
		return c
	}
	if c := cmp.Compare(a.worker, b.worker); c != 0 {
		return c
	}
	return cmp.Compare(a.order, b.order)
}

// result is what a run reassembled.
type result struct {
	Conns    int     // connection records
	Both     int     // with both directions on one worker
	Payload  int     // payload bytes reassembled
	First    []*conn // the first -n, by byStart
	Workers  int
	Segments int
	Other    int
	Flushed  int // closed on a tick (depends on timing)
	Evicted  int // connections evicted from a full table
	Stats    steer.Stats
}

// run reassembles the capture o names, passing every connection to each
// (when not nil) as it is done. It returns the result for every frame read,
// also with an error when the reading stopped early: ctx ended (an error
// wrapping cli.ErrInterrupted) or the capture is cut short.
func run(ctx context.Context, o options, each func(*conn) error) (*result, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	in, name, err := cli.OpenInput(ctx, o.file, sample.Reader(), "the embedded sample")
	if err != nil {
		return nil, err
	}
	defer in.Close()
	src, err := pcapfile.NewReader(in)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w before the capture's header arrived", cli.ErrInterrupted)
		}
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	defer src.Close()
	res, err := reassemble(ctx, o, src, each)
	if res == nil {
		return nil, err
	}
	return res, cli.ReadError(ctx, name, err, "the connections")
}

// reassemble runs src through a dispatcher whose workers reassemble its
// connections. When the reading failed, it returns the result for the
// frames before the failure with the error; when the dispatcher could not
// be started or closed, no result.
func reassemble(ctx context.Context, o options, src steer.Source, each func(*conn) error) (*result, error) {
	// A file can wait: the default overflow holds the reader back on a full
	// queue, so a replay drops nothing.
	cfg := steer.Config{
		Workers:      o.workers,
		Hash:         steer.HashConfig{Symmetric: o.symmetric},
		TickInterval: o.tick,
	}
	rep := &report{n: o.n, each: each}
	d, shards, err := steer.NewPerWorker(cfg,
		func(w *steer.Worker) *shard {
			s, err := newShard(w.Index(), o, rep)
			if err != nil {
				panic(err) // check validated the capacity, the table's only setting that can fail
			}
			return s
		},
		(*shard).handle)
	if err != nil {
		err = fmt.Errorf("starting the dispatcher: %w", err)
		if errors.Is(err, steer.ErrConfig) {
			err = cli.UsageError(err) // a flag's value the library rejects
		}
		return nil, err
	}
	runErr := d.Run(ctx, src)
	// Close drains the queues (with a context of its own: ctx may have
	// ended), and each shard's Close completes its connections.
	closeCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.Close(closeCtx); err != nil {
		return nil, err
	}

	// The workers have exited: the shards may be read now.
	res := &result{Workers: len(shards), Stats: d.Stats(),
		Conns: rep.conns, Both: rep.both, Payload: rep.payload, First: rep.first}
	for _, s := range shards {
		res.Segments += s.segments
		res.Other += s.other
		res.Flushed += s.flushed
		res.Evicted += s.evicted
	}
	if runErr == nil && rep.eachErrs != nil {
		runErr = rep.eachErrs
	}
	return res, runErr
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

// write prints the summary and the first connections kept (all of them
// were printed as they were done when n is 0: the summary comes last).
func (r *result) write(out io.Writer, n int) error {
	summary := func() error {
		_, err := fmt.Fprintf(out, "%d TCP connections (%d with both directions on one worker), %d payload bytes from %d segments, on %d workers; %d other frames\n",
			r.Conns, r.Both, r.Payload, r.Segments, r.Workers, r.Other)
		return err
	}
	if n == 0 {
		return summary()
	}
	if err := summary(); err != nil {
		return err
	}
	for _, c := range r.First {
		if err := c.write(out); err != nil {
			return err
		}
	}
	if r.Conns > len(r.First) {
		_, err := fmt.Fprintf(out, "... %d more\n", r.Conns-len(r.First))
		return err
	}
	return nil
}

// write prints one connection.
func (c *conn) write(out io.Writer) error {
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
	return nil
}
