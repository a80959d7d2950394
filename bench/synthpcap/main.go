// Command synthpcap writes a synthetic capture: TCP (or UDP) over IPv4
// frames of a chosen size from a chosen number of flows (package
// internal/synth), as a classic pcap file, one frame every -gap of capture
// time. It makes the captures the whole-process comparisons in
// docs/performance.md read:
//
//	go run ./bench/synthpcap -w /tmp/100k.pcap -flows 100000 -frames 4000000
//	go run ./bench/synthpcap -w /tmp/10m.pcap -flows 10000000 -frames 20000000 -cycle
//
// The frames are drawn uniformly from the flows (-zipf s skews them); with
// -cycle the flows come in turn, so that -frames of at least -flows holds
// every flow. The same flags give the same file.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rpsgo/rps/internal/synth"
	"github.com/rpsgo/rps/steer/pcapfile"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "synthpcap:", err)
		os.Exit(1)
	}
}

// options are the parsed flags.
type options struct {
	out    string
	frames int
	spec   synth.Spec
	gap    time.Duration
	start  time.Time
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("synthpcap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.out, "w", "", "write the capture to `file` (\"-\": standard output)")
	fs.IntVar(&o.frames, "frames", 1_000_000, "`number` of frames")
	fs.IntVar(&o.spec.Flows, "flows", 100_000, "`number` of distinct flows")
	fs.IntVar(&o.spec.Size, "size", 64, "frame length in `bytes`, at least 64")
	fs.BoolVar(&o.spec.UDP, "udp", false, "UDP instead of TCP")
	fs.Float64Var(&o.spec.Zipf, "zipf", 0, "flow sizes follow Zipf with exponent `s` (0: uniform)")
	fs.BoolVar(&o.spec.Cycle, "cycle", false, "take the flows in turn instead of drawing them")
	fs.Uint64Var(&o.spec.Seed, "seed", 1, "random `seed`")
	fs.DurationVar(&o.gap, "gap", time.Microsecond, "capture time between two frames")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.out == "":
		return o, errors.New("-w: name the file to write")
	case o.frames < 0 || o.spec.Flows < 1 || o.spec.Size < 64 || o.gap < 0:
		return o, errors.New("-frames, -flows, -size and -gap want 0 or more frames, 1 or more flows, 64 or more bytes, a gap of 0 or more")
	}
	o.start = time.Unix(1_700_000_000, 0)
	return o, nil
}

func run(args []string, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	out := io.Writer(os.Stdout)
	var f *os.File
	if o.out != "-" {
		if f, err = os.Create(o.out); err != nil {
			return err
		}
		out = f
	}
	err = write(out, o)
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// write writes the capture o describes to out.
func write(out io.Writer, o options) error {
	bw := bufio.NewWriterSize(out, 1<<20)
	pw, err := pcapfile.NewWriter(bw, pcapfile.LinkTypeEthernet, pcapfile.WriterOptions{SnapLen: 65535})
	if err != nil {
		return err
	}
	g := synth.NewGenerator(o.spec)
	frame := make([]byte, g.Size())
	var rec []byte
	for i := range o.frames {
		g.Next(frame)
		if rec, err = pw.AppendPacket(rec[:0], o.start.Add(time.Duration(i)*o.gap), frame, 0); err != nil {
			return err
		}
		if _, err := bw.Write(rec); err != nil {
			return fmt.Errorf("writing %s: %w", o.out, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing %s: %w", o.out, err)
	}
	return nil
}
