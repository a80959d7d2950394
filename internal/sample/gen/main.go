// Command gen writes the sample captures: examples/sample embeds the first,
// internal/sample the second:
//
//	go run ./internal/sample/gen -o examples/sample/sample.pcap
//	go run ./internal/sample/gen -tunnels -o internal/sample/tunnels.pcap
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/rpsgo/rps/internal/sample/samplegen"
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
	var b bytes.Buffer
	generate := samplegen.Generate
	if tunnels {
		generate = samplegen.GenerateTunnels
	}
	if err := generate(&b); err != nil {
		return err
	}
	if out == "-" {
		_, err := os.Stdout.Write(b.Bytes())
		return err
	}
	return os.WriteFile(out, b.Bytes(), 0o644)
}
