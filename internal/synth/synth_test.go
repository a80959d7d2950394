package synth

import (
	"testing"
)

func TestFramesNumberEachFlowInOrder(t *testing.T) {
	for _, udp := range []bool{false, true} {
		fr := Frames(Spec{Flows: 10, Size: 128, UDP: udp, Seed: 1}, 1000)
		last := map[string]uint32{}
		for _, b := range fr {
			if len(b) != 128 {
				t.Fatalf("len %d", len(b))
			}
			k := string(b[26:38]) // addresses and ports
			s, ok := Seq(b, udp)
			if !ok || s != last[k]+1 {
				t.Fatalf("flow %x: seq %d after %d", k, s, last[k])
			}
			last[k] = s
		}
		if len(last) != 10 {
			t.Errorf("%d flows, want 10", len(last))
		}
	}
}

func TestZipfSkew(t *testing.T) {
	fr := Frames(Spec{Flows: 1000, Zipf: 1, Seed: 2}, 100000)
	counts := map[string]int{}
	for _, b := range fr {
		counts[string(b[26:38])]++
	}
	maxc := 0
	for _, c := range counts {
		maxc = max(maxc, c)
	}
	// With s = 1 over 1000 flows the largest has about 1/H(1000) = 13%.
	if maxc < 10000 || maxc > 16000 {
		t.Errorf("largest flow has %d of 100000 frames, want about 13400", maxc)
	}
}

// TestGeneratorMatchesFrames checks that the generator gives Frames'
// sequence, and that Cycle takes every flow in turn.
func TestGeneratorMatchesFrames(t *testing.T) {
	spec := Spec{Flows: 50, Size: 80, Zipf: 1, Seed: 3}
	fr := Frames(spec, 500)
	g := NewGenerator(spec)
	b := make([]byte, g.Size())
	for i, want := range fr {
		g.Next(b)
		if string(b) != string(want) {
			t.Fatalf("frame %d differs from Frames'", i)
		}
	}
	spec = Spec{Flows: 7, Cycle: true}
	g = NewGenerator(spec)
	seen := map[string]int{}
	for i := range 21 {
		if f := g.Next(b[:64]); f != i%7 {
			t.Fatalf("frame %d: flow %d, want %d", i, f, i%7)
		}
		seen[string(b[26:38])]++
	}
	if len(seen) != 7 {
		t.Errorf("%d distinct flows, want 7", len(seen))
	}
	for k, n := range seen {
		if n != 3 {
			t.Errorf("flow %x: %d frames, want 3", k, n)
		}
	}
}
