// Command bench measures the steering library against single-queue
// baselines. Run it with `go run ./bench`, or run the Go benchmarks with
// `go test -bench . ./bench`.
package main

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/rpsgo/rps/steer"
)

func main() {
	flag.Parse()
	fs := frames64()
	fmt.Println("case                         ns/frame      Mpps  allocs/op")
	for _, w := range []int{1, 2, 4} {
		r := testing.Benchmark(func(b *testing.B) { dispatchCase(b, fs, steer.Config{Workers: w}, func(*steer.Packet) {}) })
		fmt.Printf("rps dispatch, %d workers     %8.1f  %8.2f  %9d\n", w, r.Extra["ns/frame"], r.Extra["Mpps"], r.AllocsPerOp())
		r = testing.Benchmark(func(b *testing.B) { idiomaticCase(b, fs, w, func([]byte) {}) })
		fmt.Printf("idiomatic Go, %d workers     %8.1f  %8.2f  %9d\n", w, r.Extra["ns/frame"], r.Extra["Mpps"], r.AllocsPerOp())
	}
	os.Exit(0)
}
