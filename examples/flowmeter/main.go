// Command flowmeter counts packets, bytes and duration per flow, with each
// worker keeping its own flows and no locks at all.
//
//	go run ./examples/flowmeter                      # the embedded sample capture
//	go run ./examples/flowmeter -r trace.pcap -top 20 -idle 15s
//	go run ./examples/flowmeter -rotate 500 -workers 3  # flows change worker; their state follows
//	go run ./examples/flowmeter -r big.pcap -records - > records.csv
//
// A flow is a 5-tuple: the classifier's key without its VLAN IDs
// (steer.FlowKey.Flow). Frames without IP addresses (ARP, LLDP, frames too
// malformed to read) share one flow, shown as "non-IP". With -symmetric a
// flow is a connection: the hash is symmetric, so both directions reach
// one worker, and the record is keyed by steer.FlowKey.Canonical, so they
// count in one record, shown in the direction of its first frame.
//
// What it teaches:
//
//   - Per-worker state without locks. Steering guarantees that a flow is
//     handled by one worker at a time, in order, so each worker keeps its
//     open flows in a flowtable.Table of its own, in a shard made by
//     steer.NewPerWorker in the worker's goroutine and handed to the handler
//     with every packet,
//     touched only from the handler and the shard's own Tick, MoveOut and
//     MoveIn, which all run in that worker's goroutine. Nobody sizes
//     anything by a worker count. The handler must run in the worker:
//     DEFERRED dispatch, the default (with DIRECT every handler would run in
//     the reading goroutine, concurrently with the workers' ticks).
//   - State that follows its flow. When a flow changes worker (here, when
//     -rotate reprograms the indirection table; in general also an RFS move
//     or the rebalancer), the shard's MoveOut (steer.Mover) runs in the old
//     worker after its last frame of the moved flows and hands over the
//     records whose flowid the move contains (steer.Move.Contains); MoveIn
//     runs in the new worker before its first frame of them and takes them
//     in. Frames without a hash (HashType NONE) are placed by the SOURCE
//     policy and never move with a bucket, so their records stay.
//   - Expiry by capture time. A flow is idle when it has had no frame for
//     -idle of capture time. The clock is the capture time, not the wall
//     clock, because a file is replayed far faster than it was recorded:
//     the table's Lookup, given each frame's timestamp, ends the flows gone
//     idle by then as the replay goes (flowtable), and a frame that
//     arrives after a gap longer than -idle starts a new record, so the
//     records do not depend on how fast the file is read. The worker tick
//     (steer.Ticker) ends what is left idle by the worker's clock, the
//     latest timestamp it has handled; a worker never expires a flow whose
//     next frame it has not yet reached. (On a live capture the wall clock,
//     Tick's now, would do.) A worker whose traffic stops keeps its clock,
//     so its flows wait for the end of the capture, where every record
//     still open is labelled by the capture's last timestamp.
//   - Bounded state. The table holds at most -capacity open flows per
//     worker, all its memory allocated up front; a flood of new flows ends
//     the least recently seen records early (evicted, still reported)
//     instead of growing the worker's memory. A record that ends is not
//     kept either: the worker buffers up to 256 ended records and hands
//     them, on its tick or when the buffer is full, to one shared report
//     under a lock (one lock a chunk, not a record). The report adds them to
//     the totals, keeps the -top busiest and writes each to the -records
//     CSV, so memory stays bounded by the tables' capacity however many
//     flows a capture holds.
//
// At the end it prints the totals and the -top flows by packets (ties: by
// bytes, then the earlier start). With -records FILE it also writes every
// flow record, as it ends, as a CSV row: src, dst, sport, dport, proto,
// hashtype, flowid, worker, packets, bytes, first, last, state. Addresses
// are empty for frames without IP addresses ("non-IP"); hashtype is the
// M_HASHTYPE_* name, flowid 0x-prefixed hex, bytes frame lengths on the
// wire, first and last the capture times of the record's first and last
// frames (RFC 3339, UTC); state is idle (ended by -idle), evicted (ended
// because the worker's table was full) or active (open when the capture
// ended). Rows come in the order the records reach the report: by worker
// in chunks, not sorted. "-records -" writes the CSV to standard output and
// the totals to standard error.
//
// Ctrl-C (or SIGTERM) stops the reading, even of a pipe that delivers
// nothing; it prints the totals and the records of every frame read until
// then and exits with status 1. A capture cut short does the same for the
// frames before the cut. A second Ctrl-C ends it at once.
//
// README line: flowmeter — a per-flow meter (packets, bytes, duration) whose
// workers keep their flows in bounded flow tables of their own, without
// locks, handing them over when a flow moves and expiring them by capture
// time on the worker tick.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/rpsgo/rps/flowtable"
	"github.com/rpsgo/rps/hash"
	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/internal/sample"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// options are the command's flags.
type options struct {
	file     string        // capture to read; "" means the embedded sample
	workers  int           // 0: steer.DefaultWorkers()
	idle     time.Duration // inactivity timeout, in capture time
	top      int           // flows to print
	rotate   int           // reprogram the table every this many frames; 0 never
	key      string        // "random" or "microsoft"
	tick     time.Duration // worker tick interval (wall clock)
	capacity int           // open flows each worker holds at most
	records  string        // write every record to this CSV file ("-": stdout); "" none
	sym      bool          // a record per connection: symmetric hash, canonical keys
}

func main() {
	ctx, stop := cli.NotifyContext(context.Background())
	defer stop()
	cli.Exit("flowmeter", runMain(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// runMain is the command: it parses args, meters the capture and prints the
// totals and the top flows to stdout (to stderr when -records - puts the
// CSV there). When the reading stops early (ctx ended, or the capture is
// cut short), it prints what it has, then returns the error.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	out := stdout
	var rows *recordWriter
	var each func(*record) error
	if o.records != "" {
		if rows, err = createRecords(o.records, stdout); err != nil {
			return err
		}
		each = rows.write
		if o.records == "-" {
			out = stderr
		}
	}
	res, err := run(ctx, o, each)
	if rows != nil {
		err = errors.Join(err, rows.close())
	}
	if res != nil {
		if werr := res.write(out, o.top); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}

// parseFlags parses args. Its errors wrap cli.ErrUsage (or are flag.ErrHelp).
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := cli.NewFlagSet("flowmeter", "[flags]",
		"Counts packets, bytes and duration per flow, each worker keeping its own flows\n"+
			"without locks, and prints the totals and the busiest flows.", stderr)
	fs.StringVar(&o.file, "r", "", "capture `file` to read (pcap or pcapng, \"-\" for standard input); default: the embedded sample")
	fs.IntVar(&o.workers, "workers", 0, "`number` of worker goroutines; 0: steer.DefaultWorkers(), one per CPU this process may run on")
	fs.DurationVar(&o.idle, "idle", 30*time.Second, "a flow with no frame for this `long`, in capture time, is expired")
	fs.IntVar(&o.top, "top", 10, "print the `n` flows with the most packets")
	fs.IntVar(&o.rotate, "rotate", 0, "every `n` frames, point every indirection bucket at the next worker (0: never)")
	fs.StringVar(&o.key, "key", "random", "Toeplitz `key`: random or microsoft")
	fs.DurationVar(&o.tick, "tick", time.Second, "how `often` each worker expires idle flows (wall clock)")
	fs.IntVar(&o.capacity, "capacity", 1<<16, "open `flows` each worker holds at most; past it the least recently seen flow's record ends (evicted, still reported)")
	fs.BoolVar(&o.sym, "symmetric", false, "meter connections: hash both directions alike and count them in one record")
	fs.StringVar(&o.records, "records", "", "write every flow record, as it ends, as a CSV row to `file` (\"-\": standard output, and the totals go to standard error)")
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
	case o.rotate < 0:
		return cli.Usagef("-rotate %d: want 0 or more frames", o.rotate)
	case o.workers < 0:
		return cli.Usagef("-workers %d: want 0 or more", o.workers)
	case o.tick <= 0:
		return cli.Usagef("-tick %v: want a positive duration", o.tick)
	case o.capacity < 1 || o.capacity > flowtable.MaxCapacity:
		return cli.Usagef("-capacity %d: want 1 to %d", o.capacity, flowtable.MaxCapacity)
	case o.key != "random" && o.key != "microsoft":
		return cli.Usagef("-key %q: want random or microsoft", o.key)
	}
	return nil
}

// record is one flow's meter: from its first frame until it ends (expired
// after -idle, or still active when the capture ends).
type record struct {
	Key         steer.FlowKey
	FlowID      uint32
	HashType    hash.HashType
	Packets     uint64
	Bytes       uint64 // frame lengths on the wire
	First, Last time.Time
	Worker      int  // the worker holding the record when it ended
	Idle        bool // ended by the idle timeout (else active at the end, or evicted)
	Evicted     bool // ended early because the worker's table was full
	// Reversed says the record's first frame went from Key.Dst to
	// Key.Src: with -symmetric, Key is the connection's canonical key.
	Reversed bool
}

// flow returns the record's key in the direction of its first frame.
func (r *record) flow() steer.FlowKey {
	k := r.Key
	if r.Reversed {
		k.Src, k.Dst, k.SrcPort, k.DstPort = k.Dst, k.Src, k.DstPort, k.SrcPort
	}
	return k
}

// flushEvery is how many ended records a worker holds before it hands them
// to the report.
const flushEvery = 256

// shard is one worker's state (steer.NewPerWorker): only that worker's
// goroutine touches it while the dispatcher runs; run reads it after Close.
// Its open records are in a flowtable.Table of bounded size: a flood of new
// flows evicts the least recently seen ones (each still reported) instead
// of growing the worker's memory. Records that end wait in ended, at most
// flushEvery of them, until they are handed to the shared report.
type shard struct {
	index   int
	idle    time.Duration
	flows   *flowtable.Table[steer.FlowKey, record]
	rep     *report
	ended   []record  // ended records not yet handed to rep
	clock   time.Time // the latest capture time this worker has handled
	sym     bool      // key records by FlowKey.Canonical
	ticks   int       // ticks that expired at least one flow
	movedIn int       // records received from other workers
	evicted int       // records ended early because the table was full
}

func newShard(index int, idle time.Duration, capacity int, rep *report) (*shard, error) {
	s := &shard{index: index, idle: idle, rep: rep, ended: make([]record, 0, flushEvery)}
	var err error
	s.flows, err = flowtable.New(flowtable.Config[steer.FlowKey, record]{
		Capacity: capacity,
		Idle:     idle,
		OnEvict: func(_ flowtable.Flow[steer.FlowKey], r *record, why flowtable.Reason) {
			e := *r
			e.Idle, e.Evicted, e.Worker = why == flowtable.Expired, why == flowtable.Evicted, s.index
			if e.Evicted {
				s.evicted++
			}
			s.end(e)
		},
	})
	return s, err
}

// end takes a record that has ended, handing the buffer to the report when
// it is full.
func (s *shard) end(r record) {
	s.ended = append(s.ended, r)
	if len(s.ended) == flushEvery {
		s.flush()
	}
}

// flush hands the ended records to the report.
func (s *shard) flush() {
	if len(s.ended) > 0 {
		s.rep.add(s.ended)
		s.ended = s.ended[:0]
	}
}

// handle is the handler: it runs in the goroutine of the worker s belongs to.
func (s *shard) handle(p *steer.Packet) {
	s.count(p.Key().Flow(), p.FlowID, p.HashType, p.Timestamp, p.Length)
}

// count adds one frame of flow k. A frame after a gap longer than the idle
// timeout starts a new record (the table ends the old one as Expired),
// whether or not a tick has noticed the gap yet.
func (s *shard) count(k steer.FlowKey, flowid uint32, ht hash.HashType, ts time.Time, length int) {
	if ts.After(s.clock) {
		s.clock = ts
	}
	rev := false
	if s.sym {
		k, rev = k.Canonical()
	}
	r, isNew := s.flows.Lookup(flowid, k, ts)
	if isNew {
		*r = record{Key: k, FlowID: flowid, HashType: ht, First: ts, Reversed: rev}
	}
	r.Packets++
	r.Bytes += uint64(length)
	r.Last = ts
}

// Tick implements steer.Ticker: it ends the flows idle for longer than the
// timeout by the worker's capture clock, and hands the records ended so far
// to the report. The wall-clock now is not used (see the package comment).
func (s *shard) Tick(time.Time) {
	s.expire()
	s.flush()
}

func (s *shard) expire() {
	if s.flows.Expire(s.clock) > 0 {
		s.ticks++
	}
}

// MoveOut implements steer.Mover. It runs in the old worker after its last
// frame of the moved flows and hands over their records.
func (s *shard) MoveOut(mv steer.Move) any {
	var out []record
	s.flows.DeleteFunc(func(f flowtable.Flow[steer.FlowKey], r *record) bool {
		if r.HashType.IsHash() && mv.Contains(f.ID) {
			out = append(out, *r)
			return true
		}
		return false
	})
	return out
}

// MoveIn implements steer.Mover. It runs in the new worker before its first
// frame of the moved flows.
func (s *shard) MoveIn(_ steer.Move, carried any) {
	recs, _ := carried.([]record)
	for _, r := range recs {
		v, isNew := s.flows.Lookup(r.FlowID, r.Key, r.Last)
		if !isNew {
			// Cannot happen while the dispatcher keeps its promise (the flow
			// had no frame here), but merging loses nothing if it did.
			v.Packets += r.Packets
			v.Bytes += r.Bytes
			if r.First.Before(v.First) {
				v.First = r.First
			}
			continue
		}
		*v = r
		s.movedIn++
	}
}

// endOpen ends the records still open, as the capture ends at end, and
// hands every record the shard holds to the report. It runs after the
// dispatcher has closed.
func (s *shard) endOpen(end time.Time) {
	for _, v := range s.flows.All() {
		r := *v
		r.Worker = s.index
		r.Idle = end.Sub(r.Last) > s.idle
		s.end(r)
	}
	s.flush()
}

// report receives every record as it ends, from every worker, in chunks:
// it adds it to the totals, keeps it if it is among the top busiest, and
// passes it to each. It holds no other record, so its memory does not grow
// with the number of flows.
type report struct {
	mu      sync.Mutex
	top     int
	best    []record // the top busiest records so far, at most top, by byPackets
	records int
	idle    int
	packets uint64
	bytes   uint64
	each    func(*record) error // nil: none
	err     error               // each's first error, after which it is not called (its owner reports it)
}

func newReport(top int, each func(*record) error) *report {
	return &report{top: max(top, 0), best: make([]record, 0, max(top, 0)+1), each: each}
}

// add takes a chunk of ended records. It may be called from any goroutine.
func (r *report) add(recs []record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range recs {
		rec := &recs[i]
		r.records++
		r.packets += rec.Packets
		r.bytes += rec.Bytes
		if rec.Idle {
			r.idle++
		}
		if r.top > 0 && (len(r.best) < r.top || byPackets(rec, &r.best[len(r.best)-1]) < 0) {
			j, _ := slices.BinarySearchFunc(r.best, rec, func(a record, b *record) int { return byPackets(&a, b) })
			r.best = slices.Insert(r.best, j, *rec)
			r.best = r.best[:min(len(r.best), r.top)]
		}
		if r.each != nil && r.err == nil {
			r.err = r.each(rec)
		}
	}
}

// byPackets orders records for the top list: most packets first, then most
// bytes, the earlier start, the flow and the worker, so that which records
// make the list does not depend on the order they end in.
func byPackets(a, b *record) int {
	if c := cmp.Compare(b.Packets, a.Packets); c != 0 {
		return c
	}
	if c := cmp.Compare(b.Bytes, a.Bytes); c != 0 {
		return c
	}
	if c := a.First.Compare(b.First); c != 0 {
		return c
	}
	if a.Key != b.Key {
		if c := cmp.Compare(flowString(a.Key), flowString(b.Key)); c != 0 {
			return c
		}
	}
	return cmp.Compare(a.Worker, b.Worker)
}

// result is what a run measured.
type result struct {
	Frames     uint64    // frames the dispatcher took in
	Records    int       // flow records, ended or still open at the end
	Idle       int       // records ended by the idle timeout
	Packets    uint64    // frames in the records
	Bytes      uint64    // their wire lengths
	Top        []record  // the busiest records, by byPackets
	End        time.Time // the capture's last timestamp
	Moves      uint64    // bucket moves (with -rotate)
	MovedIn    int       // records handed over between workers
	TickExpiry int       // ticks that expired flows (depends on timing)
	Evicted    int       // records ended because a worker's table was full
	Workers    int
	Stats      steer.Stats
}

// run meters the capture o names, passing every record to each (when not
// nil) as it ends. It returns the result for every frame read, also with an
// error when the reading stopped early: ctx ended (an error wrapping
// cli.ErrInterrupted) or the capture is cut short.
func run(ctx context.Context, o options, each func(*record) error) (*result, error) {
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
	res, err := meter(ctx, o, src, each)
	if res == nil {
		return nil, err
	}
	return res, cli.ReadError(ctx, name, err, "the totals")
}

// meter runs src through a dispatcher whose workers meter the flows, and
// returns what they measured. When the reading failed, it returns the
// result for the frames before the failure with the error; when the
// dispatcher could not be started or closed, no result.
func meter(ctx context.Context, o options, src steer.Source, each func(*record) error) (*result, error) {
	cfg := steer.Config{Workers: o.workers, TickInterval: o.tick, Hash: steer.HashConfig{Symmetric: o.sym}}
	if o.key == "microsoft" {
		cfg.Hash.Key = hash.MicrosoftKey[:]
	}
	rep := newReport(o.top, each)
	d, shards, err := steer.NewPerWorker(cfg,
		func(w *steer.Worker) *shard {
			s, err := newShard(w.Index(), o.idle, o.capacity, rep)
			if err != nil {
				panic(err) // check validated the capacity, the table's only setting that can fail
			}
			s.sym = o.sym
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
	feedErr := feed(ctx, d, src, o.rotate)
	// Close drains the queues (with a context of its own: ctx may have
	// ended), so that every frame read is in a record.
	closeCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.Close(closeCtx); err != nil {
		return nil, err
	}

	// The workers have exited: their shards may be read now.
	res := &result{Workers: len(shards), Stats: d.Stats()}
	res.Frames = res.Stats.Frames
	res.Moves = res.Stats.BucketMoves
	for _, s := range shards {
		if s.clock.After(res.End) {
			res.End = s.clock
		}
	}
	for _, s := range shards {
		s.flush()
	}
	for _, s := range shards {
		s.endOpen(res.End)
		res.MovedIn += s.movedIn
		res.Evicted += s.evicted
		res.TickExpiry += s.ticks
	}
	res.Records, res.Idle, res.Packets, res.Bytes, res.Top = rep.records, rep.idle, rep.packets, rep.bytes, rep.best
	return res, feedErr
}

// feed reads src into d through one Input, reprogramming the indirection
// table every rotate frames.
func feed(ctx context.Context, d *steer.Dispatcher, src steer.Source, rotate int) error {
	in := d.NewInput()
	var b steer.Batch
	since := 0
	for {
		b.Frames, b.Release = b.Frames[:0], nil
		err := src.ReadBatch(ctx, &b)
		if len(b.Frames) > 0 || b.Release != nil {
			if derr := in.Dispatch(b.Frames, b.Release); derr != nil {
				return derr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		since += len(b.Frames)
		if rotate > 0 && since >= rotate {
			since = 0
			t := d.Table()
			for i := range t {
				t[i] = (t[i] + 1) % d.Workers()
			}
			if err := d.SetTable(t); err != nil {
				return err
			}
		}
	}
}

// flowString prints a flow key on one line.
func flowString(k steer.FlowKey) string {
	if !k.Src.IsValid() {
		return "non-IP"
	}
	proto := fmt.Sprintf("proto %d", k.Proto)
	switch k.Proto {
	case 1:
		proto = "icmp"
	case 6:
		proto = "tcp"
	case 17:
		proto = "udp"
	case 58:
		proto = "icmp6"
	case 132:
		proto = "sctp"
	}
	if k.Fragment {
		proto += " fragments"
	}
	if k.SrcPort == 0 && k.DstPort == 0 {
		return fmt.Sprintf("%s > %s %s", k.Src, k.Dst, proto)
	}
	return fmt.Sprintf("%s > %s %s",
		netipPort(k.Src.String(), k.Src.Is6(), k.SrcPort), netipPort(k.Dst.String(), k.Dst.Is6(), k.DstPort), proto)
}

func netipPort(addr string, v6 bool, port uint16) string {
	if v6 {
		return fmt.Sprintf("[%s]:%d", addr, port)
	}
	return fmt.Sprintf("%s:%d", addr, port)
}

// write prints the totals and the top flows.
func (r *result) write(out io.Writer, top int) error {
	if _, err := fmt.Fprintf(out, "%d frames, %d bytes, %d flow records (%d ended idle, %d active at the end) on %d workers\n",
		r.Packets, r.Bytes, r.Records, r.Idle, r.Records-r.Idle, r.Workers); err != nil {
		return err
	}
	if r.Moves > 0 {
		fmt.Fprintf(out, "%d bucket moves handed %d flow records to their new worker\n", r.Moves, r.MovedIn)
	}
	if r.Evicted > 0 {
		fmt.Fprintf(out, "%d flow records ended early: a worker's table (-capacity) was full\n", r.Evicted)
	}
	if r.Frames != r.Packets {
		fmt.Fprintf(out, "warning: the dispatcher took in %d frames, the records hold %d\n", r.Frames, r.Packets)
	}
	if top <= 0 {
		return nil
	}
	fmt.Fprintf(out, "\n%8s %10s %12s %6s %-6s  %s\n", "packets", "bytes", "duration", "worker", "state", "flow")
	for i := range r.Top[:min(top, len(r.Top))] {
		rec := &r.Top[i]
		state := "active"
		if rec.Idle {
			state = "idle"
		}
		if _, err := fmt.Fprintf(out, "%8d %10d %12s %6d %-6s  %s\n", rec.Packets, rec.Bytes,
			rec.Last.Sub(rec.First).Round(time.Millisecond), rec.Worker, state, flowString(rec.flow())); err != nil {
			return err
		}
	}
	return nil
}
