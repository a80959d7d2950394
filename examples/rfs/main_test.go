package main

import "testing"

// TestRun replays the sample: flows move to their consumers' workers in
// both replays, every move carries the flow's count, no flow's count is
// split between workers, and most frames of claimed connections reach
// their consumer's worker once the consumers have claimed them.
func TestRun(t *testing.T) {
	res, err := run("")
	if err != nil {
		t.Fatal(err)
	}
	if res.flowMoves[0] == 0 || res.flowMoves[1] == 0 || uint64(res.movedIn) != res.flowMoves[0]+res.flowMoves[1] {
		t.Errorf("%v flow moves, %d counts handed over: want moves in both replays, each carrying a count", res.flowMoves, res.movedIn)
	}
	if !res.exact || res.frames == 0 {
		t.Errorf("the counts of %d frames are split between workers, or do not add up", res.frames)
	}
	if on, all := res.onConsumer[1], res.onConsumer[1]+res.off[1]; all == 0 || on < all*3/4 {
		t.Errorf("replay 2: %d of %d frames of claimed connections on their consumer's worker, want 3/4 or more", on, all)
	}
}
