package main

import (
	"bytes"
	"testing"
)

// TestSymmetric reassembles the sample over four workers with and without
// a symmetric hash: with it, both directions of every connection meet on
// one worker, and requests are seen beside their responses; without it,
// some connections are torn in halves, which tcpassembly reassembles all
// the same, each on its own worker.
func TestSymmetric(t *testing.T) {
	sym, err := run("", 4, true)
	if err != nil {
		t.Fatal(err)
	}
	both, payload := tally(sym)
	if len(sym) == 0 || both != len(sym) || payload == 0 {
		t.Fatalf("symmetric: %d connections, %d with both directions, %d bytes", len(sym), both, payload)
	}
	exchange := false
	for _, c := range sym {
		req, resp := c.halves[0].firstLine(), c.halves[1].firstLine()
		exchange = exchange || bytes.HasPrefix(req, []byte("GET ")) && bytes.HasPrefix(resp, []byte("HTTP/1.1 "))
	}
	if !exchange {
		t.Error("no HTTP request beside its response")
	}

	asym, err := run("", 4, false)
	if err != nil {
		t.Fatal(err)
	}
	aboth, apayload := tally(asym)
	torn := len(asym) - aboth
	if torn == 0 || 2*aboth+torn != 2*len(sym) || apayload != payload {
		t.Errorf("not symmetric: %d connections with both directions and %d halves alone, %d bytes; want some halves alone, %d directions and %d bytes in all",
			aboth, torn, apayload, 2*len(sym), payload)
	}
}
