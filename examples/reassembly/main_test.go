package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/internal/sample"
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
}

func decodeSample(t *testing.T) *truth {
	t.Helper()
	r, err := pcapfile.NewReader(sample.Reader())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tr := &truth{payload: map[direction]int{}, conns: map[connKey]bool{}}
	var b steer.Batch
	for {
		err := r.ReadBatch(context.Background(), &b)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := range b.Frames {
			pkt := gopacket.NewPacket(b.Frames[i].Data, layers.LayerTypeEthernet, gopacket.Default)
			tl, ok := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
			nl := pkt.NetworkLayer()
			if !ok || nl == nil || pkt.ErrorLayer() != nil {
				continue // not TCP, or a malformed frame the command skips too
			}
			nf, tf := nl.NetworkFlow(), tl.TransportFlow()
			d := direction{endpoint(nf.Src(), tf.Src()), endpoint(nf.Dst(), tf.Dst())}
			tr.payload[d] += len(tl.Payload)
			tr.conns[canonical(nf, tf)] = true
		}
		b.Release()
	}
	if len(tr.conns) == 0 {
		t.Fatal("no TCP connection in the sample")
	}
	return tr
}

func runReassembly(t *testing.T, o options) *result {
	t.Helper()
	if o.idle == 0 {
		o.idle = 2 * time.Minute
	}
	if o.tick == 0 {
		o.tick = time.Second
	}
	res, err := run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestEveryConnectionOnOneWorker: with symmetric hashing, every connection
// of the sample is reassembled once, both directions on one worker, with
// exactly the payload bytes the capture holds in each direction.
func TestEveryConnectionOnOneWorker(t *testing.T) {
	tr := decodeSample(t)
	for _, workers := range []int{1, 2, 4} {
		res := runReassembly(t, options{workers: workers, symmetric: true})
		if len(res.Conns) != len(tr.conns) {
			t.Errorf("%d workers: %d connections reassembled, the sample has %d", workers, len(res.Conns), len(tr.conns))
		}
		seen := map[connKey]bool{}
		for _, c := range res.Conns {
			if seen[c.key] {
				t.Errorf("%d workers: connection %v reassembled twice", workers, c.key)
			}
			seen[c.key] = true
			if !tr.conns[c.key] {
				t.Errorf("%d workers: connection %v is not in the sample", workers, c.key)
			}
			h0, h1 := c.halves[0], c.halves[1]
			if h1 == nil {
				t.Errorf("%d workers: %s <> %s: only one direction on worker %d", workers, h0.src, h0.dst, c.worker)
				continue
			}
			for _, h := range c.halves {
				if !h.done {
					t.Errorf("%d workers: %s > %s not completed (FlushAll at close)", workers, h.src, h.dst)
				}
				if want := tr.payload[direction{h.src, h.dst}]; h.bytes != want {
					t.Errorf("%d workers: %s > %s: %d bytes reassembled, %d payload bytes in the capture", workers, h.src, h.dst, h.bytes, want)
				}
			}
		}
		for _, w := range res.Stats.Workstreams {
			if w.Drops() != 0 {
				t.Errorf("%d workers: worker %d dropped %d frames", workers, w.WSID, w.Drops())
			}
		}
	}
}

// TestAsymmetricSplits shows why symmetric hashing is needed: without it,
// some connections are torn in halves across workers. The byte counts per
// direction still add up.
func TestAsymmetricSplits(t *testing.T) {
	tr := decodeSample(t)
	res := runReassembly(t, options{workers: 4, symmetric: false})
	halves := 0
	got := map[direction]int{}
	for _, c := range res.Conns {
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
	res := runReassembly(t, options{workers: 2, symmetric: true, idle: time.Millisecond, tick: time.Millisecond})
	got := map[direction]int{}
	for _, c := range res.Conns {
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
	t.Logf("%d connection records, %d closed on a tick", len(res.Conns), res.Flushed)
}

func TestOutput(t *testing.T) {
	res := runReassembly(t, options{workers: 2, symmetric: true})
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
	for _, o := range []options{{idle: 0, tick: time.Second}, {idle: time.Second, tick: time.Second, workers: -1},
		{idle: time.Second, tick: 0}} {
		if _, err := run(context.Background(), o); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("run(%+v): %v; want a usage error", o, err)
		}
	}
	o := options{idle: time.Second, tick: time.Second, file: "/nonexistent/trace.pcap"}
	if _, err := run(context.Background(), o); err == nil || errors.Is(err, cli.ErrUsage) {
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
	res := runReassembly(t, options{symmetric: true})
	if res.Workers != steer.DefaultWorkers() {
		t.Errorf("%d workers, want steer.DefaultWorkers() = %d", res.Workers, steer.DefaultWorkers())
	}
	if len(res.Conns) != len(tr.conns) {
		t.Errorf("%d connections reassembled, the sample has %d", len(res.Conns), len(tr.conns))
	}
}
