// Command idiomatic is the whole-process baseline for pcapsteer: the Go
// program most people would write to spread a capture's frames over
// goroutines by flow and count them. It reads a pcap file with gopacket's
// pcapgo reader, decodes each frame with a DecodingLayerParser (Ethernet,
// 802.1Q, IPv4, IPv6, TCP, UDP), picks a worker by the FastHash of the
// network and transport flows, sends the flow and the frame's length to
// that worker over a channel, one send per frame, and each worker counts
// frames and bytes per flow in a map of its own. At the end it prints the
// totals in the shape of pcapsteer's summary:
//
//	go run ./bench/idiomatic -r /tmp/100k.pcap -workers 2
//
// A flow is the pair of gopacket flows (network: the addresses; transport:
// the ports, typed TCP or UDP); frames it cannot decode to an IP layer
// share one flow. On plain TCP or UDP over IP this counts the flows
// pcapsteer counts. docs/performance.md times the two, and tcpdump,
// as whole processes.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "idiomatic:", err)
		os.Exit(1)
	}
}

// flowKey is a flow: its network and transport flows.
type flowKey struct {
	net, transport gopacket.Flow
}

// item is what the reader sends a worker for each frame.
type item struct {
	key    flowKey
	length int
}

// count is a flow's (or a worker's) frames and bytes.
type count struct{ frames, bytes uint64 }

// worker is one counting goroutine's state, read after it is done.
type worker struct {
	in    chan item
	flows map[flowKey]*count
	total count
}

func (w *worker) loop(wg *sync.WaitGroup) {
	defer wg.Done()
	for it := range w.in {
		c := w.flows[it.key]
		if c == nil {
			c = &count{}
			w.flows[it.key] = c
		}
		c.frames++
		c.bytes += uint64(it.length)
		w.total.frames++
		w.total.bytes += uint64(it.length)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("idiomatic", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("r", "", "read this pcap `file`")
	nw := fs.Int("workers", runtime.GOMAXPROCS(0), "`number` of counting goroutines")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" || *nw < 1 || fs.NArg() > 0 {
		return errors.New("usage: idiomatic -r FILE [-workers N]")
	}
	f, err := os.Open(*file)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		return fmt.Errorf("reading %s: %w", *file, err)
	}

	var (
		eth     layers.Ethernet
		dot1q   layers.Dot1Q
		ip4     layers.IPv4
		ip6     layers.IPv6
		tcp     layers.TCP
		udp     layers.UDP
		decoded = make([]gopacket.LayerType, 0, 8)
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &dot1q, &ip4, &ip6, &tcp, &udp)
	parser.IgnoreUnsupported = true

	workers := make([]*worker, *nw)
	var wg sync.WaitGroup
	for i := range workers {
		workers[i] = &worker{in: make(chan item, 512), flows: map[flowKey]*count{}}
		wg.Add(1)
		go workers[i].loop(&wg)
	}
	start := time.Now()
	var read uint64
	var readErr error
	for {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			if err != io.EOF {
				readErr = fmt.Errorf("reading %s: %w", *file, err)
			}
			break
		}
		read++
		_ = parser.DecodeLayers(data, &decoded) // what it decoded is in decoded
		var k flowKey
		for _, lt := range decoded {
			switch lt {
			case layers.LayerTypeIPv4:
				k.net = ip4.NetworkFlow()
			case layers.LayerTypeIPv6:
				k.net = ip6.NetworkFlow()
			case layers.LayerTypeTCP:
				k.transport = tcp.TransportFlow()
			case layers.LayerTypeUDP:
				k.transport = udp.TransportFlow()
			}
		}
		h := k.net.FastHash()*31 + k.transport.FastHash()
		workers[h%uint64(len(workers))].in <- item{key: k, length: ci.Length}
	}
	for _, w := range workers {
		close(w.in)
	}
	wg.Wait()
	writeSummary(stdout, workers, read, time.Since(start))
	return readErr
}

// writeSummary prints the totals as pcapsteer's summary does.
func writeSummary(out io.Writer, workers []*worker, read uint64, elapsed time.Duration) {
	var total count
	flows := 0
	for _, w := range workers {
		total.frames += w.total.frames
		total.bytes += w.total.bytes
		flows += len(w.flows)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Summary (counted by the workers):\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  frames read\t%d\tin %v\n", read, elapsed.Round(time.Microsecond))
	fmt.Fprintf(tw, "  frames handled\t%d\t%d bytes on the wire\n", total.frames, total.bytes)
	fmt.Fprintf(tw, "  flows\t%d\t\n", flows)
	tw.Flush()
	fmt.Fprintf(&b, "\nFrames per worker:\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "worker\tflows\tframes\tbytes\t\n")
	for i, w := range workers {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t\n", i, len(w.flows), w.total.frames, w.total.bytes)
	}
	tw.Flush()
	io.WriteString(out, b.String())
}
