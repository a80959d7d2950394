// Command pcapsteer replays a capture file through the steering library and
// shows where every frame went: the library's main job, and the quickest way
// to see software RSS at work.
//
//	go run ./examples/pcapsteer                       # the embedded sample capture
//	go run ./examples/pcapsteer -r trace.pcapng -workers 4 -flows flows.csv
//	tcpdump -w - -c 1000 | go run ./examples/pcapsteer -r -
//	go run ./examples/pcapsteer -key microsoft -trace 5  # every step for 5 frames
//	go run ./examples/pcapsteer -r trace.pcap -c 1000 tcp port 80
//	go run ./examples/pcapsteer -r trace.pcap -w 'worker-%d.pcap'  # a file per worker: a flow in one, many flows in each
//	go run ./examples/pcapsteer -r trace.pcap -json | jq .totals
//	go run ./examples/pcapsteer -sample tunnels -tunnels inner   # hash the flows inside the tunnels
//	go run ./examples/pcapsteer -r mirror.pcap -tunnels inner -vxlan-ports 4789,8472
//
// It reads pcap or pcapng (link types Ethernet, Linux cooked SLL and SLL2,
// raw IP, and BSD loopback; package steer/pcapfile turns them all into
// Ethernet), steers each frame to a worker goroutine with a [steer.Dispatcher],
// and prints the dispatcher's report in the shape of FreeBSD's `netstat -Q`,
// then a summary of what the handlers saw: frames by classification reason,
// by encapsulation and by hash type, flows and frames per worker, and
// totals that add up (every frame read is handled, dropped or, had the
// handler panicked, panicked). With no -r it reads a sample capture
// embedded in the repository (internal/sample): the main one, mixed
// traffic, or with -sample tunnels traffic between tunnel endpoints. The
// report goes to
// standard output, or to standard error when -flows - puts the CSV there.
// Ctrl-C stops the reading, even of a pipe that delivers nothing, and the
// report still covers every frame read; a second Ctrl-C ends the program at
// once.
//
// What it teaches:
//
//   - The configuration knobs of the steering (policy, dispatch mode, key,
//     symmetric hashing, hash function and types, tunnels, indirection
//     buckets, queue limit) as flags, and what each changes in the report.
//   - Per-worker state without locks: steer.NewPerWorker gives every worker
//     a tally of its own, the handler receives its worker's, and the tallies
//     are merged only after Dispatcher.Close (see tally.go). Nothing here
//     moves a flow between workers, so each flow's record is in one
//     worker's table (see Flow records below, and flows.go).
//   - Accounting: frames read == handled + dropped + panicked, checked at
//     the end. A file can wait, so by default (-overflow auto) a full queue
//     holds the reader back and nothing is dropped; -overflow drop drops at
//     the tail as a live source would.
//   - The decision trace (-trace N): each step, from ether_demux to the
//     worker, for the first N frames, and the layers the classifier walked:
//     the Ethernet header and its VLAN tags, each shim and tunnel, the outer
//     IP header of a tunnel, the tuple hashed. With tunnels closed, a
//     tunnelled frame's trace also says what -tunnels inner would hash.
//   - Tunnels (see below).
//
// # Tunnels
//
// By default (-tunnels outer) a tunnelled frame is hashed by its outer
// header, as a NIC's RSS and FreeBSD do, so the flowid is theirs. Traffic
// between a few tunnel endpoints then lands on a few workers, however many
// flows it carries: cloud traffic mirroring (VXLAN or GENEVE), SPAN copies
// over ERSPAN, a mobile core's GTP-U. -tunnels inner opens VXLAN (UDP to
// the -vxlan-ports, default 4789; Linux's legacy port is 8472), GENEVE, GRE
// with its key (NVGRE, ERSPAN types I, II and III, Cisco MetaData), GTP-U,
// IP in IP and MPLS over UDP, up to steer.MaxTunnelDepth deep, and hashes
// the innermost flow. MPLS label stacks (with pseudowires), PPPoE sessions
// and Cisco MetaData are walked either way. The
// summary counts frames per encapsulation, with tunnels closed too (a
// tunnelled frame is then marked "not opened", never counted as plain),
// and a run with tunnels closed that saw tunnelled frames says so in one
// line, with how many and the flag that spreads them. The embedded sample -sample tunnels is a minute of TCP
// connections between a few tunnel endpoints, most of them in VXLAN
// (internal/sample); with tunnels closed one worker of four gets nearly
// two thirds of the frames, with them opened each gets about a quarter:
//
//	$ go run ./examples/pcapsteer -sample tunnels -key microsoft -workers 4
//	Frames handled, by encapsulation (outermost first; -tunnels outer):
//	  encapsulation             frames  bytes   share
//	  vxlan (not opened)        670     151516  56.1%
//	  gre (not opened)          96      14994   8.0%
//	  geneve (not opened)       80      25186   6.7%
//	  gtpu (not opened)         77      21716   6.4%
//	  pppoe                     62      10266   5.2%
//	  mpls                      52      9575    4.4%
//	  vxlan+gre (not opened)    34      12173   2.8%
//	  vxlan+vlan (not opened)   32      7045    2.7%
//	  gre+erspan2 (not opened)  28      7552    2.3%
//	  ipip (not opened)         28      2627    2.3%
//	  mpls+pw                   28      5426    2.3%
//	  plain                     8       5244    0.7%
//	Hint: 1041 of 1195 frames (87.1%) are tunnelled (vxlan 734, geneve 80, gre 124, gtpu 75, ipip 28) and were hashed by their outer headers: -tunnels inner would spread them by their inner flows.
//	...
//	Frames per worker:
//	  worker  flows  frames   bytes  share
//	       0     11      67   11708   5.6%
//	       1     12     135   33867  11.3%
//	       2     11     230   47894  19.2%
//	       3    108     763  179851  63.8%
//
//	$ go run ./examples/pcapsteer -sample tunnels -key microsoft -workers 4 -tunnels inner
//	Frames handled, by encapsulation (outermost first; -tunnels inner):
//	  encapsulation  frames  bytes   share
//	  vxlan          670     151516  56.1%
//	  gre            96      14994   8.0%
//	  geneve         80      25186   6.7%
//	  gtpu           77      21716   6.4%
//	  pppoe          62      10266   5.2%
//	  mpls           52      9575    4.4%
//	  vxlan+gre      34      12173   2.8%
//	  vxlan+vlan     32      7045    2.7%
//	  gre+erspan2    28      7552    2.3%
//	  ipip           28      2627    2.3%
//	  mpls+pw        28      5426    2.3%
//	  plain          8       5244    0.7%
//	  1041 frames hashed by a flow inside a tunnel
//	...
//	Frames per worker:
//	  worker  flows  frames  bytes  share
//	       0     41     293  73019  24.5%
//	       1     39     289  60474  24.2%
//	       2     46     338  76368  28.3%
//	       3     36     275  63459  23.0%
//
// Endpoints that set the outer UDP source port from the inner flow, as RFC
// 7348 asks of VXLAN, let -udp4tuple spread their UDP tunnels by the outer
// header too, but the flowid is then not the inner flow's (its two
// directions, or one flow in two tunnels, differ), and GRE, ERSPAN and IP
// in IP have no ports: -tunnels inner is the way to hash by the flow.
// Which tuple is hashed is -hashtypes, a set of FreeBSD's RSS hash types
// (ipv4, tcp_ipv4, udp_ipv4, ipv6, tcp_ipv6, udp_ipv6; ipv4,ipv6 hashes by
// IP pair only), -udp4tuple its one-flag form for UDP; the function is -hash
// toeplitz (the default) or siphash, keyed, which an attacker who sees
// collisions cannot aim. With a 4-tuple type a datagram's fragments, which
// carry no ports after the first, are hashed by their addresses, as
// FreeBSD and Linux hash them (-fragments tuple, the default), and may
// leave their flow's worker; -fragments follow hashes a first fragment by
// its ports and sends the later ones after it (steer.FragmentsFollow).
//
// The key is random by default, drawn anew for each run (as a NIC's driver
// draws one at boot), so the flowids, and with them the buckets, the
// workers and the flow rows, change from run to run. The report says so
// and prints the key: -key with it repeats a run, and -key microsoft gives
// the flowids a NIC computes with its default key (the examples above use
// it, so that their figures repeat).
//
// It has tcpdump's habits where they fit. A capture filter follows the flags
// as tcpdump takes it (pcapsteer -r f.pcap tcp port 80), or comes with -f
// EXPR or -F FILE; it is a pcap-filter(7) expression, compiled in Go (by
// tcpdump only for what that compiler leaves to it, such as host names), or
// a program as `tcpdump -dd` prints it (see package steer/filter). The
// program runs in user space before the dispatcher: the frames it rejects
// are counted as filtered, neither handled nor dropped, and -d prints the
// program as tcpdump -d does instead of running. -c N stops after N frames have passed the filter; the
// file is read 64 frames at a time, and the rest of the read that reached
// N is counted as past -c, read and not steered. -w FILE writes
// the steered frames as pcap, with the input's snap length and link type
// Ethernet (every input is steered as Ethernet frames: a raw IP or cooked
// capture gets an Ethernet header, and the snap length 14 bytes more),
// in one file or, with a %d in the name, one file per worker, each
// written by its worker alone. One file is in capture time order: each
// worker writes a spool beside it, and the spools are merged by time at
// the end (for an input in time order that is its order), so nothing
// reaches the file, or standard output with -w -, before the run ends. -json prints the
// report on standard output as one JSON document (field names in
// internal/capture's Report), the text report then going to standard
// error; so do -w - and -flows -. -version prints the version.
//
// # Flow records
//
// Each worker keeps the flows it handles in a bounded table of its own
// (package flowtable): a record per flow key, counting its frames and
// bytes from its first frame until the flow ends, as a NetFlow exporter's
// cache does. A flow ends when it has had no frame for -idle (default a
// minute), when it has lasted -active (default 30 minutes; its next frame
// starts a new record), when its worker's table is full and it is the
// least recently seen (to within -idle/16, as package flowtable keeps
// recency; ended early, for lack of room), or with the capture. The clock is the frames' capture times, not the wall clock: a
// capture replayed in a second ends its flows where they ended when it was
// recorded. The tables hold -flow-table flows in all (default 262144,
// shared among the workers; plain flows and flows with VLAN tags or
// encapsulations have a table each, of about 120 and 215 bytes a flow), so
// memory stays bounded however many flows the capture holds: a long or
// crowded-out flow is split in time, never lost. The summary counts the
// records (its flows line), those ended idle, active and early, and, with
// -flows, those written. With -symmetric a record is a connection, both
// directions counted together (steer.FlowKey.Canonical).
//
// The -flows CSV has a header row and one row per flow record, written as
// the record ends (those open at the end last, worker by worker): src,
// dst, sport, dport, proto, hashtype, flowid, bucket, worker, packets,
// bytes, encap, first, last, ended. The tuple columns are the tuple that
// was hashed, the innermost one when a tunnel was opened, with -symmetric
// in the direction of the connection's first frame; hashtype is the
// M_HASHTYPE_* name; flowid is 0x-prefixed hex; bucket is flowid &
// (buckets-1), the RSS indirection-table slot; bytes are frame lengths on
// the wire; frames with no ports give 0. encap names the encapsulations
// walked, outermost first, as steer.FlowKey.Encapsulation does: the VLAN
// tags, MPLS labels, PPPoE sessions and tunnels with their identifiers,
// such as vlan:7+vxlan:42, mpls:1600 or gre:key=9+ipip, and is empty for a
// plain frame: two copies of a flow in two VLANs or VNIs are two rows with
// one flowid. first and last are the capture times of the record's first
// and last frames (RFC 3339, UTC); ended is idle, active, early or end
// (open when the capture ended). Every handled frame is in exactly one
// row; dropped frames (only with -overflow drop) are in none.
// Frames that were not hashed (hash type NONE) have flowid 0x00000000 and an
// empty bucket, and the SOURCE policy placed them. Those without IP
// addresses (ARP, LLDP, frames too short or too malformed to reach the
// addresses) are not skipped: they share one flow per encapsulation with
// empty src and dst and zero ports and protocol. A malformed IP frame whose addresses
// were read (an IPv4 header with a bad IHL) keeps them in its row.
//
// -cpuprofile FILE writes a CPU profile of the run for go tool pprof.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/rpsgo/rps/internal/capture"
	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/internal/sample"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/filter"
	"github.com/rpsgo/rps/steer/pcapfile"
)

func main() {
	// The first interrupt stops the reading (run still prints the report);
	// a second one ends the program at once.
	ctx, stop := cli.NotifyContext(context.Background())
	defer stop()
	cli.Exit("pcapsteer", run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// options are the parsed command-line flags.
type options struct {
	read     string
	sample   string // -sample: "main" or "tunnels", "" for main
	workers  int
	cpus     []int
	policy   steer.Policy
	dispatch steer.DispatchMode
	hash     steer.HashConfig // -key, -symmetric and capture.HashFlags
	buckets  int
	qlimit   int
	overflow steer.Overflow
	rfs      bool
	verify   bool // -verify-checksums
	flows    string
	flowCfg  flowConfig // -flow-table, -idle, -active and -symmetric
	trace    int
	progress bool

	filter      string // the capture filter's text, "" for none
	count       int64  // -c: stop after this many frames; 0: no limit
	write       string // -w: pcap file or %d pattern
	json        bool
	version     bool
	showProgram bool   // -d
	cpuProfile  string // -cpuprofile: write a CPU profile of the run here
}

// parseFlags parses args. Its errors wrap cli.ErrUsage (or are flag.ErrHelp).
func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := cli.NewFlagSet("pcapsteer", "[flags] [filter expression]",
		"Steers the frames of a capture file over worker goroutines, as FreeBSD's netisr\n"+
			"and RSS do in the kernel, and prints a netstat -Q-like report. A capture filter\n"+
			"in tcpdump's syntax may follow the flags, as tcpdump takes it.", stderr)
	fs.StringVar(&o.read, "r", "", "read this pcap or pcapng `file` (\"-\" for standard input); default: an embedded sample capture (-sample)")
	fs.StringVar(&o.sample, "sample", "", "without -r, read this embedded sample `capture`: main (mixed traffic, the default) or tunnels (TCP connections in VXLAN, GENEVE, GRE, ERSPAN, GTP-U, IP in IP, MPLS and PPPoE between a few tunnel endpoints)")
	fs.IntVar(&o.workers, "workers", 0, "`number` of worker goroutines (workstreams); 0: one per -cpus entry, else steer.DefaultWorkers(), one per CPU this process may run on")
	cpus := fs.String("cpus", "", "pin worker i to CPU list[i % len], a `list` such as \"0,1\" or \"0-3\" (Linux only); default unpinned")
	policy := fs.String("policy", "rss", "steering `policy`: rss (indirection table), flow (flowid % workers) or source (input + ifindex)")
	dispatch := fs.String("dispatch", "deferred", "dispatch `mode`: deferred (queue to the worker), direct (handle in the reading goroutine), or hybrid (the reader is worker 0 and handles its own frames inline when it is idle)")
	key := fs.String("key", "random", capture.KeyUsage)
	symmetric := fs.Bool("symmetric", false, "hash both directions of a connection alike (canonical order)")
	var hf capture.HashFlags
	hf.Register(fs)
	fs.IntVar(&o.buckets, "buckets", steer.DefaultBuckets, "indirection table size, a power of two (RSS policy: bucket = flowid & (`n`-1))")
	fs.IntVar(&o.qlimit, "qlimit", 0, fmt.Sprintf("each worker's queue limit in `frames`, at most %d; 0: %d while the reading waits for room (twice the library's default for a file: a replay runs faster), the library's default with -overflow drop", steer.MaxQLimit, replayQLimit))
	fs.TextVar(&o.overflow, "overflow", steer.OverflowAuto, "what a full queue does to the reader: auto (wait: a file can wait), wait, or drop at the tail as a live source would")
	fs.BoolVar(&o.rfs, "rfs", false, "keep the RFS flow table (no consumer moves flows here; the report then lists the top flows)")
	fs.BoolVar(&o.verify, "verify-checksums", false, "verify each frame's IPv4 header, TCP and UDP checksums in the workers; a bad one is counted as the reason bad-checksum")
	fs.StringVar(&o.flows, "flows", "", "write one CSV row per flow record to `file` as the records end (\"-\": standard output, and the report goes to standard error)")
	fs.IntVar(&o.flowCfg.capacity, "flow-table", defaultFlowTable, "the flow records all the workers hold at once, in `flows`, shared among them: memory about 215 bytes a flow; past it the least recently seen flow's record ends early")
	fs.DurationVar(&o.flowCfg.idle, "idle", defaultIdle, "idle timeout: a flow with no frame for this `long`, in capture time, ends its record")
	fs.DurationVar(&o.flowCfg.active, "active", defaultActive, "active timeout: a flow that lasts this `long`, in capture time, ends its record and continues in a new one; 0: never")
	fs.IntVar(&o.trace, "trace", 0, "print every step of the steering decision for the first `n` frames")
	fs.BoolVar(&o.progress, "progress", true, "show a progress bar on standard error when it is a terminal")
	var ff capture.FilterFlags
	ff.Register(fs)
	fs.Int64Var(&o.count, "c", 0, "stop after `n` frames have passed the filter, as tcpdump -c; 0: read everything")
	fs.StringVar(&o.write, "w", "", "write the steered frames as pcap to `file` (\"-\": standard output), in capture time order (the workers' spools merged when the run ends), with the input's snap length and link type Ethernet (the frames as steered); a name with %d, such as worker-%d.pcap, writes one file per worker")
	fs.BoolVar(&o.json, "json", false, "print the report on standard output as one JSON document (the text report goes to standard error)")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.BoolVar(&o.showProgram, "d", false, "print the compiled capture filter, as tcpdump -d, and exit")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to `file`, for go tool pprof")
	rest, err := cli.ParseWithArgs(fs, args)
	if err != nil {
		return nil, err
	}
	if o.filter, err = ff.Text(rest); err != nil {
		return nil, err
	}
	if o.count < 0 {
		return nil, cli.Usagef("-c %d is negative", o.count)
	}
	switch {
	case o.sample != "" && o.read != "":
		return nil, cli.Usagef("-r and -sample both name the input: choose one")
	case o.sample != "" && o.sample != "main" && o.sample != "tunnels":
		return nil, cli.Usagef("-sample %q: want main or tunnels", o.sample)
	}
	stdouts := 0
	for _, b := range []bool{o.json, o.write == "-", o.flows == "-"} {
		if b {
			stdouts++
		}
	}
	if stdouts > 1 {
		return nil, cli.Usagef("-json, -w - and -flows - all write to standard output: choose one")
	}
	if o.showProgram && o.filter == "" {
		return nil, cli.Usagef("-d prints the capture filter's program: give a filter")
	}
	if o.cpus, err = parseCPUList(*cpus); err != nil {
		return nil, cli.Usagef("-cpus: %v", err)
	}
	switch *policy {
	case "rss", "flow", "source":
		_ = o.policy.UnmarshalText([]byte(*policy)) // one of the names
	default:
		return nil, cli.Usagef("-policy %q: want rss, flow or source", *policy)
	}
	if err = o.dispatch.UnmarshalText([]byte(*dispatch)); err != nil {
		return nil, cli.Usagef("-dispatch: %v", err)
	}
	k, err := capture.ParseKey(*key, hf.Algorithm)
	if err != nil {
		return nil, cli.Usagef("-key: %v", err)
	}
	if o.hash, err = hf.Config(k, *symmetric); err != nil {
		return nil, err
	}
	if o.workers < 0 {
		return nil, cli.Usagef("-workers %d is negative", o.workers)
	}
	if o.trace < 0 {
		return nil, cli.Usagef("-trace %d is negative", o.trace)
	}
	switch c := &o.flowCfg; {
	case c.capacity < 1 || c.capacity > maxFlowTable:
		return nil, cli.Usagef("-flow-table %d: want 1 to %d flows", c.capacity, maxFlowTable)
	case c.idle <= 0:
		return nil, cli.Usagef("-idle %v: want a positive duration", c.idle)
	case c.active < 0:
		return nil, cli.Usagef("-active %v: want a positive duration, or 0 for none", c.active)
	}
	o.flowCfg.symmetric = o.hash.Symmetric
	return o, nil
}

// The flow records' defaults: classic NetFlow's active timeout (30
// minutes); an idle timeout of a minute, longer than NetFlow's 15 seconds
// so that a connection paced by keepalives stays one record; and tables of
// about 56 MB in all (some 215 bytes a flow), however many flows the
// capture holds.
const (
	defaultFlowTable = 1 << 18
	defaultIdle      = time.Minute
	defaultActive    = 30 * time.Minute
	// maxFlowTable bounds -flow-table (tens of gigabytes), well within
	// what flowtable.New accepts.
	maxFlowTable = 1 << 28
)

// replayQLimit is the queue limit a replay that waits for room gets by
// default: twice steer.DefaultWaitQLimit. A worker wakes the waiting
// reader once its queue has room for a run of frames (384), and a deeper
// queue still holds more then (640 frames, not 128): the reader refills
// it, and the other workers' queues, before any runs dry. A replay of 4M
// small frames with 2 workers on 2 CPUs took 0.93 of the time, and 0.96
// of that again once steer woke the reader at that level rather than at a
// quarter of the queue (docs/performance.md). The library keeps the
// shorter queue, which costs its no-op dispatch to 4 workers on 2 CPUs
// less.
const replayQLimit = 2 * steer.DefaultWaitQLimit

// queueLimit is Config.Queue.Limit: -qlimit, or by default replayQLimit
// unless the reading drops at the tail (-overflow drop), which keeps the
// library's latency bound.
func queueLimit(o *options) int {
	if o.qlimit == 0 && o.overflow != steer.OverflowDrop {
		return replayQLimit
	}
	return o.qlimit
}

// workerCount returns how many workers the dispatcher will start, as steer
// counts them: -workers, else one per -cpus entry, else
// steer.DefaultWorkers(). The flow tables share -flow-table among them.
func workerCount(o *options) int {
	switch {
	case o.workers > 0:
		return o.workers
	case len(o.cpus) > 0:
		return len(o.cpus)
	}
	return steer.DefaultWorkers()
}

// parseCPUList parses a CPU list as taskset and /sys print them: comma
// separated CPU numbers and ranges, such as "0,2" or "0-3,8". The empty
// string is the empty list.
func parseCPUList(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var cpus []int
	seen := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.Atoi(lo)
		if err != nil || first < 0 {
			return nil, fmt.Errorf("%q: %q is not a CPU number", s, lo)
		}
		last := first
		if isRange {
			if last, err = strconv.Atoi(hi); err != nil || last < first {
				return nil, fmt.Errorf("%q: bad range %q", s, part)
			}
		}
		for c := first; c <= last; c++ {
			if seen[c] {
				return nil, fmt.Errorf("%q: CPU %d is listed twice", s, c)
			}
			seen[c] = true
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// input is the opened capture.
type input struct {
	name   string
	reader *pcapfile.Reader
	count  *countingReader // bytes read so far, for the progress bar
	size   int64           // total bytes, or 0 when unknown (a pipe)
	close  func() error
}

// openInput opens the capture named by -r: a file, "-" for standard input,
// or, when path is empty, the embedded sample named by -sample. Reads from
// anything but a regular file or a sample (a pipe, a terminal, a FIFO) end
// when ctx ends, even while no data arrives.
func openInput(ctx context.Context, path, sampleName string) (*input, error) {
	var (
		rd   io.Reader
		in   = &input{name: path, close: func() error { return nil }}
		what = path
	)
	switch {
	case path == "" && sampleName == "tunnels":
		in.name, what = sample.TunnelsName+" (embedded sample)", "the embedded tunnels sample"
		rd, in.size = sample.TunnelsReader(), int64(len(sample.Tunnels))
	case path == "":
		in.name, what = sample.Name+" (embedded sample)", "the embedded sample"
		rd, in.size = sample.Reader(), int64(len(sample.Pcap))
	default:
		if path == "-" {
			in.name, what = "standard input", "standard input"
		} else if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
			in.size = fi.Size()
		}
		rc, err := cli.Open(ctx, path)
		if err != nil {
			return nil, err // names the file already
		}
		rd, in.close = rc, rc.Close
	}
	in.count = &countingReader{r: rd}
	r, err := pcapfile.NewReader(in.count)
	if err != nil {
		in.close()
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	in.reader = r
	return in, nil
}

// run is the whole program, callable from tests: it parses args, steers the
// capture until it ends or ctx does, writes the report to stdout (to stderr
// when the flow CSV, the pcap or the JSON report goes to stdout) and returns
// the first error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.cpuProfile != "" {
		stop, err := startCPUProfile(o.cpuProfile)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, stop()) }()
	}
	if o.version {
		return capture.WriteVersion(stdout, "pcapsteer")
	}
	var prog *filter.Program
	if o.filter != "" {
		if prog, err = filter.Compile(filter.Options{}, o.filter); err != nil {
			return capture.FilterError(err)
		}
		if o.showProgram {
			_, err := io.WriteString(stdout, prog.Disassemble())
			return err
		}
	}
	report := stdout
	if o.flows == "-" || o.write == "-" || o.json {
		report = stderr // standard output carries the CSV, the pcap or the JSON alone
	}
	// The outputs first, so that a path that cannot be written fails before
	// the input is read (a pipe may deliver its header late, or never);
	// they are removed again if the run fails before it steers.
	var dump *capture.Dump
	if o.write != "" {
		if dump, err = capture.OpenDump(o.write, capture.DumpOptions{TimeOrder: true}, stdout); err != nil {
			return err
		}
		defer dump.Close()
	}
	var flows *flowWriter
	if o.flows != "" {
		if flows, err = createFlows(o.flows, stdout); err != nil {
			dump.Abort()
			return err
		}
		defer flows.close()
	}
	steering := false
	defer func() {
		if !steering {
			dump.Abort()
			flows.abort()
		}
	}()

	in, err := openInput(ctx, o.read, o.sample)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w before the capture's header arrived", cli.ErrInterrupted)
		}
		return err
	}
	defer in.close()
	// The header is printed once the dispatcher took the configuration:
	// a value it refuses is a usage error, with nothing on the report.
	header := fmt.Sprintf("Input: %s, %s, link type %s\n", in.name, in.reader.Format(), in.reader.LinkType())

	// The source: the file, then the filter, then the -c limit.
	var src steer.Source = in.reader
	if prog != nil {
		fsrc, err := filter.NewSource(src, prog)
		if err != nil {
			return capture.FilterError(err)
		}
		src = fsrc
		header += fmt.Sprintf("Filter: %s (%d instructions, run in user space)\n", prog, prog.Len())
	}
	var limit *capture.Limit
	if o.count > 0 {
		limit, _ = capture.NewLimit(o.count) // count checked
		src = limit.Source(src, false)
	}
	if dump != nil {
		dump.SetSnapLen(outputSnapLen(in.reader))
	}

	// Each worker counts into a tally of its own, and writes its own
	// frames (see tally.go).
	cfg := steer.Config{
		Workers:  workerCount(o),
		CPUs:     o.cpus,
		Policy:   o.policy,
		Dispatch: o.dispatch,
		Buckets:  o.buckets,
		Hash:     o.hash,
		Queue:    steer.QueueConfig{Limit: queueLimit(o), Overflow: o.overflow},
		RFS:      steer.RFSConfig{Enabled: o.rfs},

		VerifyChecksums: o.verify,
	}
	encaps, err := capture.NewEncapCounter(o.hash)
	if err != nil {
		return err
	}
	var tr *tracer
	if o.trace > 0 {
		tr = &tracer{out: report, n: o.trace}
		cfg.Trace = tr.trace
	}
	tally := &tally{flowCfg: o.flowCfg, out: flows}
	tally.flowCfg.workers = cfg.Workers
	d, workers, err := steer.NewPerWorker(cfg, func(w *steer.Worker) *workerTally {
		t := newWorkerTally(w, tally.flowCfg, flows, &tally.buckets)
		t.encaps = encaps.NewTally()
		if dump != nil {
			t.dump = dump.Worker(w.Index())
		}
		return t
	}, (*workerTally).handle)
	if err != nil {
		err = fmt.Errorf("starting the dispatcher: %w", err)
		if errors.Is(err, steer.ErrConfig) {
			err = cli.UsageError(err) // a flag's value the library refuses
		}
		return err
	}
	if tr != nil {
		if err := tr.init(d.Config().Hash); err != nil {
			d.Close(context.Background())
			return err
		}
	}
	tally.workers, tally.buckets = workers, d.Config().Buckets
	key := d.Config().Hash.Key // a random key as drawn
	fmt.Fprintf(report, "%sHash: %s\n%s", header, capture.HashSummary(o.hash), keyNote(o.hash.Key == nil, key))

	var bar *progress
	if o.progress && isTerminal(stderr) {
		bar = startProgress(stderr, in, 200*time.Millisecond, 500*time.Millisecond)
	}
	start := time.Now()
	steering = true
	runErr := d.Run(ctx, src)
	// Close drains the queues: every frame read is handled (or dropped) once
	// it returns, and the workers' tallies may be read. It closes the
	// workers' pcap writers too, and returns their errors.
	closeCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	closeErr := d.Close(closeCtx)
	cancel()
	if dump != nil {
		if err := dump.Close(); err != nil && closeErr == nil {
			closeErr = err
		}
	}
	tally.endOpen()
	if flows != nil {
		if err := flows.close(); err != nil && closeErr == nil {
			closeErr = err
		}
	}
	elapsed := time.Since(start)
	bar.stop()

	st := d.Stats()
	counts := tallyCounts{read: in.reader.Stats().Records}
	for _, s := range st.Sources {
		counts.filtered += s.Filtered
	}
	if limit != nil {
		counts.afterCount, counts.count = limit.Over(), o.count
	}
	if dump != nil {
		counts.written, counts.writtenTo = tally.written(), o.write
	}
	fmt.Fprintln(report)
	if err := st.WriteReport(report); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	if err := tally.writeSummary(report, &st, counts, elapsed); err != nil {
		return err
	}
	interrupted := runErr != nil && ctx.Err() != nil
	if o.json {
		r := capture.NewReport("pcapsteer", &st)
		r.Input, r.Filter, r.Interrupted, r.ElapsedSeconds = in.name, o.filter, interrupted, elapsed.Seconds()
		r.Totals.Read, r.Totals.AfterCount, r.Totals.Written = counts.read, counts.afterCount, counts.written
		r.Totals.Balanced = tally.check(&st, counts) == nil
		r.Config.KeyRandom, r.Config.KeyHex = o.hash.Key == nil, capture.KeyHex(key)
		r.Encapsulations = tally.encaps().Report()
		r.FlowRecords = tally.flowReport()
		if err := r.Write(stdout); err != nil {
			return err
		}
	}
	switch {
	case interrupted:
		return fmt.Errorf("%w; the report covers the frames read until then", cli.ErrInterrupted)
	case runErr != nil:
		return fmt.Errorf("reading %s: %w (the report covers the frames before the error)", in.name, runErr)
	case closeErr != nil:
		return closeErr
	}
	return tally.check(&st, counts)
}

// keyNote is the header's line on a random key, empty for a key the user
// chose: a random key is drawn for each run, so the flowids, and with them
// the buckets, workers and flow rows, change from run to run; it says how
// to repeat the run.
func keyNote(random bool, key []byte) string {
	if !random {
		return ""
	}
	return fmt.Sprintf("Key: random, drawn for this run: flowids, buckets and workers change from run to run.\n"+
		"  To repeat this run: -key %s; for the flowids a NIC computes by default: -key microsoft.\n", capture.KeyHex(key))
}

// outputSnapLen is the snap length of the -w file for input r: the
// input's, with room for the Ethernet header the reader puts in front of
// a frame of another link type (a raw IP record grows by 14 bytes); zero,
// the default, when the input does not say.
func outputSnapLen(r *pcapfile.Reader) int {
	n := r.SnapLen()
	if n > 0 && r.LinkType() != pcapfile.LinkTypeEthernet {
		n += 14
	}
	return n
}

// startCPUProfile starts the CPU profile of -cpuprofile, written to path,
// and returns the function that stops it and closes the file.
func startCPUProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		return nil
	}, nil
}

// tracer is the Config.Trace function of -trace n: it prints the decisions
// for the first n frames, each with the layers its classification walked.
// It runs in the goroutine that reads the capture (the one calling
// Dispatcher.Run), one frame after the other, so plain fields are enough.
// The dispatcher still fills a Decision for every frame while Trace is
// set, which is why the flag defaults to off.
type tracer struct {
	out     io.Writer
	n, seen int
	// other classifies as the run does with the other tunnel mode: with
	// tunnels opened it reads the outer header of a tunnelled frame, with
	// them closed the flow inside.
	other   *steer.Classifier
	tunnels steer.TunnelMode
	c       steer.Classification
}

// init readies the tracer for a dispatcher that hashes as hc does (its
// normalized configuration, key included).
func (t *tracer) init(hc steer.HashConfig) error {
	t.tunnels = hc.Tunnels
	hc.Tunnels = steer.TunnelsInner
	if t.tunnels == steer.TunnelsInner {
		hc.Tunnels = steer.TunnelsOuter
	}
	var err error
	if t.other, err = steer.NewClassifier(hc); err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	return nil
}

func (t *tracer) trace(dc *steer.Decision) {
	if t.seen >= t.n {
		return
	}
	t.seen++
	fmt.Fprintf(t.out, "\nTrace %d: ", t.seen)
	dc.WriteTo(t.out)
	if t.other != nil {
		if dc.Frame.HasVLAN {
			t.other.ClassifyVLAN(dc.Frame.Data, dc.Frame.VLAN, &t.c)
		} else {
			t.other.Classify(dc.Frame.Data, &t.c)
		}
		var outer *steer.FlowKey
		if t.tunnels == steer.TunnelsInner {
			outer = &t.c.Key
		}
		fmt.Fprintf(t.out, "  headers, outermost first:\n")
		for _, l := range layers(dc.Class, outer) {
			fmt.Fprintf(t.out, "    %s\n", l)
		}
		if in := &t.c; t.tunnels == steer.TunnelsOuter && in.Key.Depth > 0 {
			fmt.Fprintf(t.out, "  tunnel not opened (-tunnels outer): -tunnels inner would hash %s, encapsulation %s (flowid 0x%08x, %s)\n",
				tupleText(&in.Key), in.Key.Encapsulation(), in.FlowID, in.HashType)
		}
	}
	if r := dc.Class.Reason; r != steer.ReasonOK {
		fmt.Fprintf(t.out, "  not fully classified (%s): %s\n", r, reasonHelp(r))
	}
}

// layers names the headers c's classification walked, outermost first:
// the Ethernet header with its VLAN tags, then each shim and tunnel of the
// key, with an IP header before each tunnel, the tuple hashed last (or
// before the tunnel whose inside could not be hashed). outer, when not nil,
// is the key of the same frame with tunnels closed: its tuple is the outer
// IP header. The IP headers between two tunnels are not in either key.
func layers(c *steer.Classification, outer *steer.FlowKey) []string {
	k := &c.Key
	eth := "ethernet"
	for _, id := range k.VLANs[:min(int(k.NVLAN), steer.MaxVLANDepth)] {
		eth += fmt.Sprintf(", vlan %d", id)
	}
	out := []string{eth}
	hashed := func() string {
		if !k.Src.IsValid() {
			return fmt.Sprintf("not IP: ethertype 0x%04x, no hash (%s)", c.EtherType, c.HashType)
		}
		return tupleText(k) + fmt.Sprintf(": hashed (%s)", c.HashType)
	}
	tunnels, done := 0, false
	for _, e := range k.Encaps[:min(int(k.NEncap), steer.MaxEncaps)] {
		if !e.Kind.Tunnel() {
			out = append(out, e.String())
			continue
		}
		tunnels++
		switch {
		case tunnels == int(k.Depth)+1:
			out = append(out, hashed())
			done = true
		case tunnels == 1 && outer != nil && outer.Src.IsValid():
			out = append(out, tupleText(outer)+" (the outer header)")
		case tunnels == 1:
			out = append(out, "ip (the outer header)")
		default:
			out = append(out, fmt.Sprintf("ip (inside tunnel %d, not in the flow key)", tunnels-1))
		}
		if tunnels > int(k.Depth) {
			out = append(out, e.String()+" (entered; what it carries was not hashed)")
		} else {
			out = append(out, e.String())
		}
	}
	if !done {
		out = append(out, hashed())
	}
	return out
}

// tupleText prints a key's IP header: addresses, protocol, ports.
func tupleText(k *steer.FlowKey) string {
	v := "ipv4"
	if k.Src.Is6() {
		v = "ipv6"
	}
	s := fmt.Sprintf("%s %s > %s, proto %d", v, k.Src, k.Dst, k.Proto)
	switch {
	case k.Fragment:
		s += ", fragment"
	case k.SrcPort != 0 || k.DstPort != 0:
		s += fmt.Sprintf(", ports %d > %d", k.SrcPort, k.DstPort)
	}
	return s
}

// reasonHelp says in words why a frame got its classification reason and
// what followed.
func reasonHelp(r steer.Reason) string {
	cause, then := reasonCause(r)
	if r == steer.ReasonOK {
		return cause
	}
	return cause + "; " + then
}

// tunnelCauses are the reasons a tunnel the classifier opened gives: the
// frame keeps the hash of the IP header outside it.
var tunnelCauses = map[steer.Reason]string{
	steer.ReasonTunnelNonIP: "the tunnel carries no IP packet (ARP in VXLAN, a GTP-U echo)",
	steer.ReasonBadVXLAN:    "a VXLAN header cut short, or its I flag clear",
	steer.ReasonBadGENEVE:   "a GENEVE header or its options cut short, or not version 0",
	steer.ReasonBadGRE:      "a GRE header cut short, not version 0, or with routing",
	steer.ReasonBadERSPAN:   "an ERSPAN header cut short, or of the wrong version",
	steer.ReasonBadGTPU:     "a GTP-U header or its extension headers cut short or malformed",
}

// reasonCause returns the cause of a classification reason, and what the
// dispatcher did with such a frame.
func reasonCause(r steer.Reason) (cause, then string) {
	switch r {
	case steer.ReasonOK:
		return "fully classified", "hashed"
	case steer.ReasonShortTransport:
		return "the TCP/UDP/SCTP header is cut short", "2-tuple hash of the addresses"
	case steer.ReasonBadChecksum:
		return "an IPv4 header, TCP or UDP checksum does not hold (-verify-checksums)", "hashed as classified"
	case steer.ReasonOrphanFragment:
		return "a fragment whose first fragment was not seen before it (-fragments follow)", "2-tuple hash of the addresses"
	case steer.ReasonTooDeep:
		return fmt.Sprintf("more than %d shims and tunnel headers, or tunnels nested more than %d deep", steer.MaxEncaps, steer.MaxTunnelDepth),
			"the deepest IP header reached, if any, else no hash"
	}
	if cause = tunnelCauses[r]; cause != "" {
		return cause, "the hash of the IP header outside the tunnel"
	}
	cause = map[steer.Reason]string{
		steer.ReasonNonIP:         "not IPv4 or IPv6 (ARP, LLDP, PPPoE discovery, ...)",
		steer.ReasonShortEthernet: "shorter than an Ethernet header",
		steer.ReasonShortVLAN:     "a VLAN tag runs past the end of the frame",
		steer.ReasonTooManyVLANs:  fmt.Sprintf("more than %d stacked VLAN tags", steer.MaxVLANDepth),
		steer.ReasonShortIPv4:     "fewer than 20 bytes of IPv4 header",
		steer.ReasonBadIPVersion:  "the IP version field disagrees with the EtherType",
		steer.ReasonBadIHL:        "IPv4 header length below 5 words or past the frame",
		steer.ReasonBadIPLength:   "IPv4 total length below the header length (and not zero)",
		steer.ReasonShortIPv6:     "fewer than 40 bytes of IPv6 header",
		steer.ReasonBadExtHeader:  "an IPv6 extension header runs past the packet, or too many",
		steer.ReasonBadPPPoE:      "a PPPoE session header cut short, or not version 1 type 1 code 0",
		steer.ReasonPPPNonIP:      "PPPoE carrying PPP other than IPv4 or IPv6 (LCP, IPCP, ...)",
		steer.ReasonBadMPLS:       "an MPLS label stack or pseudowire control word cut short",
		steer.ReasonMPLSNonIP:     "no IPv4, IPv6 or pseudowire under the MPLS labels",
		steer.ReasonBadCMD:        "a Cisco MetaData header cut short",
	}[r]
	if cause == "" {
		cause = "unknown reason"
	}
	return cause, "no hash (NONE): SOURCE policy"
}
