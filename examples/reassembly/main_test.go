package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/internal/cli/clitest"
	"github.com/rpsgo/rps/internal/sample"
	"github.com/rpsgo/rps/internal/synth"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// direction names one way of a connection: sender and receiver endpoints.
type direction struct{ src, dst string }

// truth is an independent count of the sample's TCP payload: every frame
// decoded with gopacket's full packet decoder (not the DecodingLayerParser
// the command uses) and summed per direction.
type truth struct {
	payload map[direction]int
	conns   map[connKey]bool
	bytes   int // all the payload
}

func decodeSample(t *testing.T) *truth {
	t.Helper()
	return decodeCapture(t, sample.Pcap)
}

// decodeCapture counts the payload of a capture's whole frames, up to its
// end or to where it was cut.
func decodeCapture(t *testing.T, capture []byte) *truth {
	t.Helper()
	r, err := pcapfile.NewReader(bytes.NewReader(capture))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tr := &truth{payload: map[direction]int{}, conns: map[connKey]bool{}}
	var b steer.Batch
	for {
		err := r.ReadBatch(context.Background(), &b)
		if errors.Is(err, io.EOF) || errors.Is(err, pcapfile.ErrTruncated) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := range b.Frames {
			pkt := gopacket.NewPacket(b.Frames[i].Data, layers.LayerTypeEthernet, gopacket.Default)
			tl, nl := plainTCP(pkt)
			if tl == nil || pkt.ErrorLayer() != nil {
				continue // not TCP the command decodes, or a malformed frame it skips too
			}
			nf, tf := nl.NetworkFlow(), tl.TransportFlow()
			d := direction{endpoint(nf.Src(), tf.Src()), endpoint(nf.Dst(), tf.Dst())}
			tr.payload[d] += len(tl.Payload)
			tr.bytes += len(tl.Payload)
			tr.conns[canonical(nf, tf)] = true
		}
		b.Release()
	}
	if len(tr.conns) == 0 {
		t.Fatal("no TCP connection in the sample")
	}
	return tr
}

// runReassembly runs the command's work and returns its result and every
// connection record it reported.
// plainTCP returns the TCP layer of a packet the command decodes as TCP,
// and the IP layer right before it: TCP after Ethernet, VLAN tags, IPv4 and
// IPv6 (IP in IP included) and IPv6 extension headers, and nothing else (not
// TCP inside a UDP or GRE tunnel, which the command counts as other frames).
func plainTCP(pkt gopacket.Packet) (*layers.TCP, gopacket.NetworkLayer) {
	var nl gopacket.NetworkLayer
	for _, l := range pkt.Layers() {
		switch t := l.LayerType(); t {
		case layers.LayerTypeEthernet, layers.LayerTypeDot1Q, layers.LayerTypeIPv6HopByHop,
			layers.LayerTypeIPv6Routing, layers.LayerTypeIPv6Destination:
		case layers.LayerTypeIPv4, layers.LayerTypeIPv6:
			nl = l.(gopacket.NetworkLayer)
		case layers.LayerTypeTCP:
			if nl == nil {
				return nil, nil
			}
			return l.(*layers.TCP), nl
		default:
			return nil, nil
		}
	}
	return nil, nil
}

func runReassembly(t *testing.T, o options) (*result, []*conn) {
	t.Helper()
	if o.idle == 0 {
		o.idle = 2 * time.Minute
	}
	if o.tick == 0 {
		o.tick = time.Second
	}
	if o.capacity == 0 {
		o.capacity = 1 << 16
	}
	var conns []*conn
	res, err := run(context.Background(), o, func(c *conn) error {
		conns = append(conns, c) // under the report's lock
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Conns != len(conns) {
		t.Errorf("the totals count %d connections, %d were reported", res.Conns, len(conns))
	}
	return res, conns
}

// TestEveryConnectionOnOneWorker: with symmetric hashing, every connection
// of the sample is reassembled once, both directions on one worker, with
// exactly the payload bytes the capture holds in each direction.
func TestEveryConnectionOnOneWorker(t *testing.T) {
	tr := decodeSample(t)
	for _, workers := range []int{1, 2, 4} {
		res, conns := runReassembly(t, options{workers: workers, symmetric: true})
		checkEveryConnection(t, fmt.Sprintf("%d workers", workers), tr, conns)
		for _, w := range res.Stats.Workstreams {
			if w.Drops() != 0 {
				t.Errorf("%d workers: worker %d dropped %d frames", workers, w.WSID, w.Drops())
			}
		}
	}
}

// checkEveryConnection checks that the records hold every connection of the
// sample once, both directions on one worker, with exactly the payload
// bytes the capture holds in each direction.
func checkEveryConnection(t *testing.T, what string, tr *truth, conns []*conn) {
	t.Helper()
	if len(conns) != len(tr.conns) {
		t.Errorf("%s: %d connections reassembled, the sample has %d", what, len(conns), len(tr.conns))
	}
	seen := map[connKey]bool{}
	{
		for _, c := range conns {
			if seen[c.key] {
				t.Errorf("%s: connection %v reassembled twice", what, c.key)
			}
			seen[c.key] = true
			if !tr.conns[c.key] {
				t.Errorf("%s: connection %v is not in the sample", what, c.key)
			}
			h0, h1 := c.halves[0], c.halves[1]
			if h1 == nil {
				t.Errorf("%s: %s <> %s: only one direction on worker %d", what, h0.src, h0.dst, c.worker)
				continue
			}
			for _, h := range c.halves {
				if !h.done {
					t.Errorf("%s: %s > %s not completed (FlushAll at close)", what, h.src, h.dst)
				}
				if want := tr.payload[direction{h.src, h.dst}]; h.bytes != want {
					t.Errorf("%s: %s > %s: %d bytes reassembled, %d payload bytes in the capture", what, h.src, h.dst, h.bytes, want)
				}
			}
		}
	}
}

// TestAsymmetricSplits shows why symmetric hashing is needed: without it,
// some connections are torn in halves across workers. The byte counts per
// direction still add up.
func TestAsymmetricSplits(t *testing.T) {
	tr := decodeSample(t)
	_, conns := runReassembly(t, options{workers: 4, symmetric: false})
	halves := 0
	got := map[direction]int{}
	for _, c := range conns {
		for _, h := range c.halves {
			if h != nil {
				got[direction{h.src, h.dst}] += h.bytes
			}
		}
		if c.halves[1] == nil {
			halves++
		}
	}
	if halves == 0 {
		t.Errorf("without symmetric hashing no connection was split over 4 workers")
	}
	for d, n := range tr.payload {
		if got[d] != n {
			t.Errorf("%s > %s: %d bytes, want %d", d.src, d.dst, got[d], n)
		}
	}
}

// TestIdleFlush uses an idle time shorter than the gaps inside some
// connections: the tick closes them by capture time, and later data opens a
// new stream; the bytes per direction still add up to the capture's.
func TestIdleFlush(t *testing.T) {
	tr := decodeSample(t)
	res, conns := runReassembly(t, options{workers: 2, symmetric: true, idle: time.Millisecond, tick: time.Millisecond})
	got := map[direction]int{}
	for _, c := range conns {
		if h0, h1 := c.halves[0], c.halves[1]; h1 != nil && (h1.src != h0.dst || h1.dst != h0.src) {
			t.Errorf("a connection record pairs %s > %s with %s > %s", h0.src, h0.dst, h1.src, h1.dst)
		}
		for _, h := range c.halves {
			if h != nil {
				got[direction{h.src, h.dst}] += h.bytes
				if !h.done {
					t.Errorf("%s > %s not completed", h.src, h.dst)
				}
			}
		}
	}
	for d, n := range tr.payload {
		if got[d] != n {
			t.Errorf("%s > %s: %d bytes, want %d", d.src, d.dst, got[d], n)
		}
	}
	t.Logf("%d connection records, %d closed on a tick", len(conns), res.Flushed)
}

func TestOutput(t *testing.T) {
	res, _ := runReassembly(t, options{workers: 2, symmetric: true, n: 3})
	var b bytes.Buffer
	if err := res.write(&b, 3); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{" TCP connections (", "first line \"", "... "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if got := strings.Count(out, " <> "); got != 3 {
		t.Errorf("-n 3 printed %d connections:\n%s", got, out)
	}
}

func TestQuoteLine(t *testing.T) {
	for in, want := range map[string]string{
		"GET / HTTP/1.1\r":  `"GET / HTTP/1.1"`,
		"\x16\x03\x01\x02x": "binary 16 03 01 02 78 ...",
		"":                  `""`,
	} {
		if got := quoteLine([]byte(in)); got != want {
			t.Errorf("quoteLine(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestBadOptions(t *testing.T) {
	for _, o := range []options{{idle: 0, tick: time.Second, capacity: 16}, {idle: time.Second, tick: time.Second, workers: -1, capacity: 16},
		{idle: time.Second, tick: 0, capacity: 16}, {idle: time.Second, tick: time.Second}, {idle: time.Second, tick: time.Second, n: -1, capacity: 16}} {
		if _, err := run(context.Background(), o, nil); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("run(%+v): %v; want a usage error", o, err)
		}
	}
	o := options{idle: time.Second, tick: time.Second, capacity: 16, file: "/nonexistent/trace.pcap"}
	if _, err := run(context.Background(), o, nil); err == nil || errors.Is(err, cli.ErrUsage) {
		t.Errorf("run(%+v): %v; want an error that is not a usage error", o, err)
	}
}

// TestCommandLine runs the command as main does: -h prints the command's own
// flags only (not those gopacket registers on flag.CommandLine) and
// reassembles nothing, a bad flag is a usage error, and the connections go
// to standard output.
func TestCommandLine(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := runMain(context.Background(), []string{"-h"}, &out, &errOut); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v, want flag.ErrHelp", err)
	}
	usage := errOut.String()
	if out.Len() != 0 || !strings.HasPrefix(usage, "Usage: reassembly [flags]\n") || !strings.Contains(usage, "steer.DefaultWorkers()") {
		t.Errorf("-h: standard output %q, standard error %q", out.String(), usage)
	}
	flag.CommandLine.VisitAll(func(f *flag.Flag) {
		if strings.Contains(usage, "-"+f.Name+" ") || strings.Contains(usage, "-"+f.Name+"\n") {
			t.Errorf("the usage shows -%s, a flag of flag.CommandLine (%s)", f.Name, f.Usage)
		}
	})
	for _, args := range [][]string{{"-idle", "0"}, {"-nosuchflag"}, {"extra"}, {"-assembly_debug_log"}} {
		out.Reset()
		errOut.Reset()
		if err := runMain(context.Background(), args, &out, &errOut); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
		if out.Len() != 0 || errOut.Len() != 0 {
			t.Errorf("%q: printed %q and %q; the error is for cli.Exit to print", args, out.String(), errOut.String())
		}
	}
	out.Reset()
	if err := runMain(context.Background(), []string{"-n", "1", "-workers", "2"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), " TCP connections (") {
		t.Errorf("standard output lacks the summary:\n%s", out.String())
	}
}

// TestWorkersDefault: with -workers 0 the command runs steer.DefaultWorkers()
// workers whatever GOMAXPROCS says, and reassembles every connection.
func TestWorkersDefault(t *testing.T) {
	tr := decodeSample(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	res, conns := runReassembly(t, options{symmetric: true})
	if res.Workers != steer.DefaultWorkers() {
		t.Errorf("%d workers, want steer.DefaultWorkers() = %d", res.Workers, steer.DefaultWorkers())
	}
	if len(conns) != len(tr.conns) {
		t.Errorf("%d connections reassembled, the sample has %d", len(conns), len(tr.conns))
	}
}

// synFlood delivers, after the frames of src, one SYN from each of n
// distinct clients (10.x.y.z:1024, x.y.z being its index, to
// 192.168.0.0:80), an hour after the capture: frames built on the fly, so
// that the source itself holds next to nothing whatever n is.
type synFlood struct {
	src     steer.Source
	n, next int
	t0      time.Time
}

func (s *synFlood) ReadBatch(ctx context.Context, b *steer.Batch) error {
	if s.src != nil {
		err := s.src.ReadBatch(ctx, b)
		if !errors.Is(err, io.EOF) {
			return err
		}
		s.src = nil
	}
	if s.next == s.n {
		return io.EOF
	}
	buf := make([]byte, steer.BatchSize*64)
	for ; len(buf) > 0 && s.next < s.n; buf = buf[64:] {
		f := buf[:64]
		synth.Build(f, 0, 1, false)
		binary.BigEndian.PutUint16(f[14+2:], 40) // no payload
		binary.BigEndian.PutUint32(f[14+12:], 0x0a000000|uint32(s.next))
		f[14+20+13] = 0x02 // SYN
		b.Frames = append(b.Frames, steer.Frame{Data: f, Timestamp: s.t0.Add(time.Duration(s.next) * time.Microsecond)})
		s.next++
	}
	return nil
}

func (s *synFlood) Close() error { return nil }

// floodIndex returns the index of a flood's client, or -1 for a connection
// of the sample.
func floodIndex(c *conn) int {
	h := c.halves[0]
	var a, b, d int
	if _, err := fmt.Sscanf(h.src, "10.%d.%d.%d:1024", &a, &b, &d); err != nil || h.dst != "192.168.0.0:80" {
		return -1
	}
	return a<<16 | b<<8 | d
}

// TestSYNFlood sends the sample, then a flood of SYNs from distinct clients
// through workers whose tables hold 1024 connections: the live heap must
// not grow with the flood (every connection once kept grew it by about 1 KB
// each), every flooding connection is reported once, and the sample's
// connections come out exactly as without the flood.
func TestSYNFlood(t *testing.T) {
	tr := decodeSample(t)
	const flows = 100_000
	const bound = 32 << 20 // generous: the tables, pools and page caches take about 12 MB
	src, err := pcapfile.NewReader(sample.Reader())
	if err != nil {
		t.Fatal(err)
	}
	var real []*conn
	seen := make([]bool, flows)
	reported, bad := 0, 0
	each := func(c *conn) error {
		i := floodIndex(c)
		switch {
		case i < 0:
			real = append(real, c)
		case i >= flows || seen[i] || c.halves[1] != nil || c.halves[0].bytes != 0:
			if bad++; bad <= 5 {
				t.Errorf("flood connection %s <> %s: reported twice, or with data", c.halves[0].src, c.halves[0].dst)
			}
		default:
			seen[i] = true
			reported++
		}
		return nil
	}
	o := options{workers: 2, symmetric: true, idle: 2 * time.Minute, tick: 10 * time.Millisecond, capacity: 1024}
	flood := &synFlood{src: src, n: flows, t0: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	var res *result
	grew := clitest.HeapGrowth(func() { res, err = reassemble(context.Background(), o, flood, each) })
	if err != nil {
		t.Fatal(err)
	}
	checkEveryConnection(t, "the sample before a SYN flood", tr, real)
	if reported != flows || res.Evicted < flows-2*1024 {
		t.Errorf("%d of %d flooding connections reported, %d evicted", reported, flows, res.Evicted)
	}
	t.Logf("%d SYNs: the live heap grew by %.1f MB at its peak; %d evicted", flows, float64(grew)/(1<<20), res.Evicted)
	if grew > bound {
		t.Errorf("%d SYNs with -capacity 1024: the live heap grew by %.1f MB, more than %d MB", flows, float64(grew)/(1<<20), bound>>20)
	}
}
