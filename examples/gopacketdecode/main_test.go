package main

import (
	"testing"

	"github.com/google/gopacket/layers"
)

// TestSample decodes the sample over three workers (under -race, a parser
// shared between workers would be reported): every frame is handled and
// decoded by one worker, TCP and UDP are decoded, and no flow is seen by
// two workers.
func TestSample(t *testing.T) {
	decoders, st, err := run("", 3)
	if err != nil {
		t.Fatal(err)
	}
	frames, seen := 0, map[flow]int{}
	for i, d := range decoders {
		frames += d.frames
		if d.layers[layers.LayerTypeTCP] == 0 || d.layers[layers.LayerTypeUDP] == 0 {
			t.Errorf("worker %d decoded no TCP or no UDP", i)
		}
		for f := range d.flows {
			if w, ok := seen[f]; ok {
				t.Errorf("flow %v seen by workers %d and %d", f, w, i)
			}
			seen[f] = i
		}
	}
	if frames == 0 || uint64(frames) != st.Frames || st.Handled() != st.Frames || len(seen) == 0 {
		t.Errorf("%d frames decoded, %d flows; the dispatcher took %d and handled %d", frames, len(seen), st.Frames, st.Handled())
	}
}
