// Command gen writes the sample capture that package sample embeds:
//
//	go run ./internal/sample/gen -o internal/sample/sample.pcap
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
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	var b bytes.Buffer
	if err := samplegen.Generate(&b); err != nil {
		return err
	}
	if out == "-" {
		_, err := os.Stdout.Write(b.Bytes())
		return err
	}
	return os.WriteFile(out, b.Bytes(), 0o644)
}
