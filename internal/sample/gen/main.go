// Command gen writes the sample captures that package synth builds:
// examples/sample embeds the first, internal/sample the second:
//
//	go run ./internal/sample/gen -o examples/sample/sample.pcap
//	go run ./internal/sample/gen -tunnels -o internal/sample/tunnels.pcap
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/rpsgo/rps/internal/synth"
	"github.com/rpsgo/rps/steer/pcapfile"
)

func main() {
	out := flag.String("o", "sample.pcap", "output file (- for standard output)")
	tunnels := flag.Bool("tunnels", false, "write the tunnels capture instead of the sample")
	flag.Parse()
	if err := run(*out, *tunnels); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(out string, tunnels bool) error {
	packets := synth.Sample
	if tunnels {
		packets = synth.SampleTunnels
	}
	ps, err := packets()
	if err != nil {
		return err
	}
	var b bytes.Buffer
	w, err := pcapfile.NewWriter(&b, pcapfile.LinkTypeEthernet, pcapfile.WriterOptions{SnapLen: synth.SampleSnapLen})
	if err != nil {
		return err
	}
	if err := synth.WriteAll(w, ps); err != nil {
		return err
	}
	if out == "-" {
		_, err := os.Stdout.Write(b.Bytes())
		return err
	}
	return os.WriteFile(out, b.Bytes(), 0o644)
}
