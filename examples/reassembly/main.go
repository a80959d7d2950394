// Command reassembly puts TCP streams back together with gopacket's
// tcpassembly, one assembler per worker, and prints for each connection the
// bytes sent each way and the first line of each direction.
//
//	go run ./examples/reassembly                    # the sample capture
//	go run ./examples/reassembly -r trace.pcap -n 20
//	go run ./examples/reassembly -symmetric=false   # connections torn in halves
//
// It teaches symmetric steering. tcpassembly reassembles each direction of
// a connection as a stream of its own, and a program that wants a request
// beside its response needs both directions in one place. The default
// hash of A->B and of B->A differ, so the two directions of a connection
// usually reach different workers; Hash.Symmetric hashes the endpoints in
// a canonical order, so both get one flowid and meet on one worker. Run it
// with -symmetric=false to see connections printed as one-way halves.
//
// It also shows tcpassembly sharded, as its documentation recommends when
// a connection's packets always reach the same assembler: each worker's
// state (steer.NewPerWorker) holds an Assembler with a StreamPool of its
// own, so no lock is contended. At Dispatcher.Close each state's Close
// (io.Closer) runs in its worker and flushes what is still open. A program
// that runs for days would also flush quiet connections on the worker's
// tick (steer.Ticker, Assembler.FlushOlderThan) and forget finished ones.
//
// Look at shard (the per-worker state), its handle method, New (where the
// second direction of a connection finds the first), and run's config.
package main

import (
	"bytes"
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/tcpassembly"

	"github.com/rpsgo/rps/examples/sample"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// half is one direction of a connection: a tcpassembly.Stream.
type half struct {
	src, dst string // "addr:port"
	bytes    int    // payload bytes reassembled
	start    []byte // the first 60 bytes
}

// Reassembled implements tcpassembly.Stream.
func (h *half) Reassembled(rs []tcpassembly.Reassembly) {
	for _, r := range rs {
		h.bytes += len(r.Bytes)
		h.start = append(h.start, r.Bytes[:min(len(r.Bytes), 60-len(h.start))]...)
	}
}

// firstLine returns the start of the data up to its first line end.
func (h *half) firstLine() []byte {
	line, _, _ := bytes.Cut(h.start, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r"))
}

// ReassemblyComplete implements tcpassembly.Stream.
func (h *half) ReassemblyComplete() {}

// conn is a connection: the direction seen first and, when it reached the
// same worker, the other.
type conn struct {
	halves [2]*half
	first  time.Time // capture time of its first segment
	worker int
}

// shard is one worker's state. Only the worker's goroutine touches it while
// the dispatcher runs: the handler, tcpassembly's calls of New and of the
// streams from inside Assemble, and Close all run there.
type shard struct {
	worker  int
	eth     layers.Ethernet
	dot1q   layers.Dot1Q
	ip4     layers.IPv4
	ip6     layers.IPv6
	ext     layers.IPv6ExtensionSkipper
	tcp     layers.TCP
	parser  *gopacket.DecodingLayerParser
	decoded []gopacket.LayerType
	asm     *tcpassembly.Assembler
	now     time.Time                  // the capture time of the segment being assembled
	open    map[[2]gopacket.Flow]*conn // by the direction seen first (network, transport)
	conns   []*conn                    // every connection, in the order seen
}

func newShard(w *steer.Worker) *shard {
	s := &shard{worker: w.Index(), open: map[[2]gopacket.Flow]*conn{}}
	s.parser = gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &s.eth, &s.dot1q, &s.ip4, &s.ip6, &s.ext, &s.tcp)
	s.parser.IgnoreUnsupported = true // stop quietly at UDP, ARP, a TCP payload ...
	s.asm = tcpassembly.NewAssembler(tcpassembly.NewStreamPool(s))
	return s
}

// handle is the handler: it decodes frame p and gives its TCP segment, if
// it has one, to the worker's assembler.
func (s *shard) handle(p *steer.Packet) {
	if err := s.parser.DecodeLayers(p.Data, &s.decoded); err != nil {
		return // not TCP, or too malformed for gopacket
	}
	var netFlow gopacket.Flow
	for _, t := range s.decoded {
		switch t {
		case layers.LayerTypeIPv4:
			netFlow = s.ip4.NetworkFlow()
		case layers.LayerTypeIPv6:
			netFlow = s.ip6.NetworkFlow()
		case layers.LayerTypeTCP:
			s.now = p.Timestamp
			s.asm.AssembleWithTimestamp(netFlow, &s.tcp, p.Timestamp)
		}
	}
}

// New implements tcpassembly.StreamFactory: the assembler calls it for
// every new direction of a connection. The second direction finds the
// first here only if it reached the same worker.
func (s *shard) New(netFlow, tcpFlow gopacket.Flow) tcpassembly.Stream {
	h := &half{src: net.JoinHostPort(netFlow.Src().String(), tcpFlow.Src().String()),
		dst: net.JoinHostPort(netFlow.Dst().String(), tcpFlow.Dst().String())}
	if c := s.open[[2]gopacket.Flow{netFlow.Reverse(), tcpFlow.Reverse()}]; c != nil && c.halves[1] == nil {
		c.halves[1] = h
		return h
	}
	c := &conn{halves: [2]*half{h}, first: s.now, worker: s.worker}
	s.open[[2]gopacket.Flow{netFlow, tcpFlow}] = c
	s.conns = append(s.conns, c)
	return h
}

// Close implements io.Closer: Dispatcher.Close runs it in the worker after
// its last frame. It completes every stream still open.
func (s *shard) Close() error {
	s.asm.FlushAll()
	return nil
}

// run reassembles the capture file name (the sample when name is empty)
// over workers workers (0: one per CPU), and returns the connections by
// the time of their first segment.
func run(name string, workers int, symmetric bool) ([]*conn, error) {
	f, err := sample.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	src, err := pcapfile.NewReader(f)
	if err != nil {
		return nil, err
	}
	cfg := steer.Config{Workers: workers, Hash: steer.HashConfig{Symmetric: symmetric}}
	d, shards, err := steer.NewPerWorker(cfg, newShard, (*shard).handle)
	if err != nil {
		return nil, err
	}
	runErr := d.Run(context.Background(), src)
	if err := d.Close(context.Background()); err != nil {
		return nil, err
	}
	// The workers have exited: the shards may be read now.
	var conns []*conn
	for _, s := range shards {
		conns = append(conns, s.conns...)
	}
	slices.SortFunc(conns, func(a, b *conn) int {
		return cmp.Or(a.first.Compare(b.first), cmp.Compare(a.halves[0].src, b.halves[0].src))
	})
	return conns, runErr
}

// tally returns how many connections have both directions, and how many
// payload bytes they carried in all.
func tally(conns []*conn) (both, payload int) {
	for _, c := range conns {
		for _, h := range c.halves {
			if h != nil {
				payload += h.bytes
			}
		}
		if c.halves[1] != nil {
			both++
		}
	}
	return both, payload
}

func print(w io.Writer, conns []*conn, n int) {
	both, payload := tally(conns)
	fmt.Fprintf(w, "%d TCP connections, %d with both directions on one worker; %d payload bytes\n", len(conns), both, payload)
	for _, c := range conns[:min(n, len(conns))] {
		a := c.halves[0]
		note := ""
		if c.halves[1] == nil {
			note = " (the other direction went to another worker)"
		}
		fmt.Fprintf(w, "\n%s <> %s on worker %d%s\n", a.src, a.dst, c.worker, note)
		for _, h := range c.halves {
			if h != nil {
				fmt.Fprintf(w, "  %s > %s: %d bytes, first line %q\n", h.src, h.dst, h.bytes, h.firstLine())
			}
		}
	}
}

func main() {
	file := flag.String("r", "", "capture `file` to read (pcap or pcapng); default: the sample capture")
	workers := flag.Int("workers", 0, "`number` of workers (0: one per CPU)")
	symmetric := flag.Bool("symmetric", true, "hash both directions of a connection alike")
	n := flag.Int("n", 10, "print the first `n` connections")
	flag.Parse()
	conns, err := run(*file, *workers, *symmetric)
	if err != nil {
		fmt.Fprintln(os.Stderr, "reassembly:", err)
		os.Exit(1)
	}
	print(os.Stdout, conns, *n)
}
