package main

import "testing"

// TestRun runs the example end to end: run checks that consumers' claims
// moved flows, that per-flow state stayed exact across the moves, and that
// the counters add up, and returns an error otherwise.
func TestRun(t *testing.T) {
	if err := run(); err != nil {
		t.Fatal(err)
	}
}
