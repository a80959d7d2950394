package steer

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/rpsgo/rps/hash"
	"go.uber.org/goleak"
)

// maxOverMean returns the busiest worker's load over the mean.
func maxOverMean(load []uint64) float64 {
	var total, hi uint64
	for _, n := range load {
		total += n
		hi = max(hi, n)
	}
	if total == 0 {
		return 0
	}
	return float64(hi) * float64(len(load)) / float64(total)
}

func tableLoad(load []uint64, table []int, workers int) []uint64 {
	wl := make([]uint64, workers)
	for b, n := range load {
		wl[table[b]] += n
	}
	return wl
}

func TestPlanRebalance(t *testing.T) {
	cfg := RebalanceConfig{Threshold: 1.1, MaxMoves: 100, Cooldown: 2}
	// Even already: nothing to do.
	if m := planRebalance([]uint64{10, 10, 10, 10}, []int{0, 1, 0, 1}, 2, cfg, nil); len(m) != 0 {
		t.Errorf("balanced table: moves %v", m)
	}
	// Everything on worker 0: moves until within the threshold.
	rng := rand.New(rand.NewPCG(1, 2))
	load := make([]uint64, 64)
	for b := range load {
		load[b] = uint64(50 + rng.IntN(100))
	}
	table := make([]int, 64)
	moves := planRebalance(load, table, 4, cfg, nil)
	if r := maxOverMean(tableLoad(load, table, 4)); r > 1.1 {
		t.Errorf("after %d moves the busiest worker carries %.2fx the mean", len(moves), r)
	}
	for _, m := range moves {
		if m.From != 0 || table[m.Bucket] != m.To || m.Mask != 63 {
			t.Errorf("move %+v does not match the table", m)
		}
	}
	// MaxMoves bounds a round.
	table = make([]int, 64)
	if m := planRebalance(load, table, 4, RebalanceConfig{Threshold: 1.1, MaxMoves: 3}, nil); len(m) != 3 {
		t.Errorf("MaxMoves 3: %d moves", len(m))
	}
	// One bucket holding 70%: the best table leaves it alone on a worker,
	// and the rebalancer stops there.
	load = []uint64{700, 50, 50, 50, 50, 50, 50}
	table = []int{0, 0, 0, 0, 0, 0, 0}
	planRebalance(load, table, 2, cfg, nil)
	if wl := tableLoad(load, table, 2); wl[table[0]] != 700 {
		t.Errorf("worker loads %v (table %v), want the elephant's worker left with it alone", wl, table)
	}
	if m := planRebalance(load, table, 2, cfg, nil); len(m) != 0 {
		t.Errorf("moves %v with only the elephant over the threshold", m)
	}
	// Cooldown: a bucket moved in a round stays put for Cooldown rounds.
	r := &rebalancer{cooldown: make([]int, 4)}
	load = []uint64{100, 100, 100, 100}
	table = []int{0, 0, 0, 0}
	first := planRebalance(load, table, 2, RebalanceConfig{Threshold: 1.01, MaxMoves: 1, Cooldown: 2}, r)
	if len(first) != 1 {
		t.Fatalf("first round: %v", first)
	}
	table[first[0].Bucket] = 0 // an operator puts it back
	for round := 1; round <= 2; round++ {
		for _, m := range planRebalance(load, table, 2, RebalanceConfig{Threshold: 1.01, MaxMoves: 1, Cooldown: 2}, r) {
			if m.Bucket == first[0].Bucket {
				t.Errorf("round %d moved bucket %d again during its cooldown", round, m.Bucket)
			}
			table[m.Bucket] = 0
		}
	}
}

func TestRebalanceConfigErrors(t *testing.T) {
	for _, c := range []RebalanceConfig{{Interval: -1}, {Threshold: 0.5}} {
		if _, err := New(Config{Workers: 2, Rebalance: c, Queue: QueueConfig{Overflow: OverflowDrop}}, func(*Packet) {}); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", c, err)
		}
	}
}

// handledDelta returns each worker's Handled since prev.
func handledDelta(st Stats, prev []uint64) []uint64 {
	out := make([]uint64, len(st.Workstreams))
	for i, w := range st.Workstreams {
		out[i] = w.Handled
		if prev != nil {
			out[i] -= prev[i]
		}
	}
	return out
}

// TestRebalanceZipf: 10,000 flows whose sizes follow Zipf (s = 1.0) over 4
// workers and 128 buckets. The static round-robin table leaves the busiest
// worker far above the mean; after rebalancing rounds (on demand) it comes
// within 1.25x the mean for traffic of the same shape.
func TestRebalanceZipf(t *testing.T) {
	defer goleak.VerifyNone(t)
	const workers, flows = 4, 10000
	n := rfsScale(400_000, 100_000)
	d, err := New(Config{Workers: workers, Buckets: 128, Hash: HashConfig{Key: hash.MicrosoftKey[:]}, Queue: QueueConfig{Overflow: OverflowWait}}, func(*Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	frames := synthTraffic(42, flows, n, 1.0)
	half := n / 2
	in := d.NewInput()
	feed := func(fr []Frame) {
		for len(fr) > 0 {
			k := min(len(fr), BatchSize)
			if err := in.Dispatch(fr[:k], nil); err != nil {
				t.Fatal(err)
			}
			fr = fr[k:]
		}
	}
	feed(frames[:half])
	waitDrained(t, d)
	st := d.Stats()
	static := handledDelta(st, nil)
	staticRatio := maxOverMean(static)
	rounds, moved := 0, 0
	for ; rounds < 64; rounds++ {
		m := d.rebalance()
		if len(m) == 0 {
			break
		}
		moved += len(m)
	}
	feed(frames[half:])
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	st2 := checkAccounting(t, d, uint64(n))
	balanced := handledDelta(st2, static)
	balancedRatio := maxOverMean(balanced)
	t.Logf("static table:     per-worker frames %v, busiest %.2fx the mean", static, staticRatio)
	t.Logf("after %2d rounds:  per-worker frames %v, busiest %.2fx the mean (%d bucket moves, %d taken)",
		rounds, balanced, balancedRatio, moved, st2.BucketMoves)
	var rep strings.Builder
	st2.writeLoad(&rep, 1.25)
	t.Logf("\n%s", rep.String())
	if staticRatio <= 1.25 {
		t.Errorf("the static table already has the busiest worker at %.2fx the mean: the workload is not skewed", staticRatio)
	}
	if balancedRatio > 1.25 {
		t.Errorf("after rebalancing the busiest worker carries %.2fx the mean, want at most 1.25", balancedRatio)
	}
	if st2.BucketMoves != uint64(moved) {
		t.Errorf("%d moves planned, %d taken by the input", moved, st2.BucketMoves)
	}
	if len(st2.elephants(1.25)) != 0 {
		t.Errorf("elephants %+v reported for a balanceable workload", st2.elephants(1.25))
	}
}

// TestLiveRebalancer: the same workload fed over time, with the rebalancer
// running every few milliseconds; the last part of the traffic is balanced.
func TestLiveRebalancer(t *testing.T) {
	defer goleak.VerifyNone(t)
	const workers, flows = 4, 10000
	n := rfsScale(400_000, 100_000)
	d, err := New(Config{
		Workers:   workers,
		Rebalance: RebalanceConfig{Interval: 2 * time.Millisecond, Threshold: 1.1, MaxMoves: 8, Cooldown: 2},
		Hash:      HashConfig{Key: hash.MicrosoftKey[:]},
		Queue:     QueueConfig{Overflow: OverflowWait},
	}, func(*Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	frames := synthTraffic(42, flows, n, 1.0)
	chunk := n / 40
	var prev []uint64
	var last []uint64
	in := d.NewInput()
	for i := 0; i < 40; i++ {
		in.Dispatch(frames[i*chunk:(i+1)*chunk], nil)
		waitDrained(t, d)
		time.Sleep(3 * time.Millisecond) // let a round run
		st := d.Stats()
		if i >= 30 { // the last quarter
			if prev != nil {
				delta := handledDelta(st, prev)
				if last == nil {
					last = make([]uint64, workers)
				}
				for w := range delta {
					last[w] += delta[w]
				}
			}
		}
		prev = handledDelta(st, nil)
	}
	d.Close(context.Background())
	st := d.Stats()
	t.Logf("live rebalancer: %d bucket moves; last quarter per-worker frames %v, busiest %.2fx the mean", st.BucketMoves, last, maxOverMean(last))
	if st.BucketMoves == 0 {
		t.Error("the live rebalancer moved nothing")
	}
	if r := maxOverMean(last); r > 1.25 {
		t.Errorf("the live rebalancer left the busiest worker at %.2fx the mean", r)
	}
}

// TestElephantsReported: one flow carrying half of the traffic cannot be
// balanced over 4 workers; Elephants names it and its bucket, and the
// rebalancer leaves its worker to it alone.
func TestElephantsReported(t *testing.T) {
	defer goleak.VerifyNone(t)
	const workers = 4
	d, err := New(Config{Workers: workers, Queue: QueueConfig{Overflow: OverflowWait}, RFS: RFSConfig{Enabled: true}}, func(*Packet) {})
	if err != nil {
		t.Fatal(err)
	}
	ids := synthFlowIDs(d, 1000)
	frames := synthTraffic(7, 1000, 40000, 0)
	// Make every other frame one of flow 0's.
	for i := 0; i < len(frames); i += 2 {
		frames[i] = synthTraffic(8, 1, 1, 0)[0]
	}
	if err := d.Run(context.Background(), &SliceSource{Frames: frames}); err != nil {
		t.Fatal(err)
	}
	waitDrained(t, d)
	for range 64 {
		if len(d.rebalance()) == 0 {
			break
		}
	}
	d.Close(context.Background())
	st := d.Stats()
	els := st.elephants(1.25)
	var flow, bucket bool
	for _, e := range els {
		if e.Bucket < 0 && e.FlowID == ids[0] && e.Share > 0.45 {
			flow = true
		}
		if e.Bucket == int(ids[0]&uint32(st.Config.Buckets-1)) {
			bucket = true
		}
	}
	if !flow || !bucket {
		t.Errorf("elephants %+v lack flow 0 (flowid %#x) or its bucket", els, ids[0])
	}
	wl := st.workerLoad()
	eb := int(ids[0] & uint32(st.Config.Buckets-1))
	if ew := st.Table[eb]; wl[ew] != st.BucketFrames[eb] {
		t.Errorf("the elephant's worker %d carries %d frames besides its %d", ew, wl[ew]-st.BucketFrames[eb], st.BucketFrames[eb])
	}
	var rep strings.Builder
	st.writeLoad(&rep, 1.25)
	if !strings.Contains(rep.String(), "Elephants over 1.25x") || !strings.Contains(rep.String(), "flowid") {
		t.Errorf("writeLoad:\n%s", rep.String())
	}
	t.Logf("\n%s", rep.String())
}
