package steer

import (
	"context"
	"testing"
	"time"
)

// alternateBlock is how many frames alternate feeds each input in turn.
const alternateBlock = 16 * BatchSize

// alternate is the timed part of an A/B benchmark of two dispatchers:
// it feeds the same frames to inOff, then to inOn, in turns of
// alternateBlock frames, b.N of them through each, calls between (when
// set) before each of inOn's turns with the count done, and reports
// off-ns/frame, on-ns/frame and their difference, added-ns/frame. Both
// inputs are warmed with every frame first.
func alternate(b *testing.B, frames []Frame, inOff, inOn *Input, between func(done int)) {
	run := func(in *Input, from, n int) {
		for n > 0 {
			k := min(n, BatchSize, len(frames)-from)
			in.Dispatch(frames[from:from+k], nil)
			from = (from + k) % len(frames)
			n -= k
		}
	}
	run(inOff, 0, len(frames))
	run(inOn, 0, len(frames))
	var tOff, tOn time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	pos := 0
	for done := 0; done < b.N; done += alternateBlock {
		k := min(alternateBlock, b.N-done)
		t0 := time.Now()
		run(inOff, pos, k)
		t1 := time.Now()
		if between != nil {
			between(done)
		}
		run(inOn, pos, k)
		tOn += time.Since(t1)
		tOff += t1.Sub(t0)
		pos = (pos + k) % len(frames)
	}
	b.StopTimer()
	offNs := float64(tOff.Nanoseconds()) / float64(b.N)
	onNs := float64(tOn.Nanoseconds()) / float64(b.N)
	b.ReportMetric(offNs, "off-ns/frame")
	b.ReportMetric(onNs, "on-ns/frame")
	b.ReportMetric(onNs-offNs, "added-ns/frame")
}

// BenchmarkRFSAddedCost measures what RFS adds to each frame on the
// dispatch path: two dispatchers, RFS off and on, DIRECT dispatch (the
// handler, a no-op, runs inline, so no queue or goroutine hand-off blurs the
// difference), fed the same frames in alternating blocks within one run.
// Every flow has a desired worker, set before the timed part; the flows have
// all moved there by then, so the timed part is the steady state: one flow
// table lookup, one desired-table read and the entry's counters per frame.
// Metrics: off-ns/frame, on-ns/frame and added-ns/frame (the goal is at
// most 10 ns with 10,000 active flows); allocs/op counts both dispatchers.
// An op is one frame through each dispatcher.
func BenchmarkRFSAddedCost(b *testing.B) {
	for _, bc := range []struct {
		name          string
		flows, frames int
		tableSize     int
		churn         bool // a desired worker changes before every block
	}{
		// The frames are few enough to stay in cache with the tables (a
		// ring's blocks are reused too); the 1M-flow case cannot fit. With
		// 1,000 flows frames and tables fit in L2: that case is the cost of
		// RFS's work with few cache misses.
		{"flows=10000", 10_000, 1 << 14, 1 << 14, false},
		{"flows=1000", 1000, 1 << 12, 1 << 14, false},
		{"flows=10000/table=65536", 10_000, 1 << 14, defaultRFSTableSize, false},
		// Entries keep their flows' desired workers until one changes
		// (rfstable.Desired.Gen). Here one changes every 1,024 frames, so
		// nearly every frame reads its flow's desired slot again.
		{"flows=10000/churn", 10_000, 1 << 14, 1 << 14, true},
		{"flows=1000000", 1_000_000, 1 << 21, 1 << 21, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			frames := synthTraffic(77, bc.flows, bc.frames, 0)
			noop := func(*Packet) {}
			off, err := New(Config{Workers: 4, Dispatch: DispatchDirect, Queue: QueueConfig{Overflow: OverflowDrop}}, noop)
			if err != nil {
				b.Fatal(err)
			}
			defer off.Close(context.Background())
			on, err := New(Config{Workers: 4, Dispatch: DispatchDirect, Queue: QueueConfig{Overflow: OverflowDrop}, RFS: RFSConfig{Enabled: true, TableSize: bc.tableSize}}, noop)
			if err != nil {
				b.Fatal(err)
			}
			defer on.Close(context.Background())
			ids := synthFlowIDs(on, bc.flows)
			for f, id := range ids {
				on.SetDesired(id, (f*7)%4)
			}
			inOff, inOn := off.NewInput(), on.NewInput()
			var between func(done int)
			if bc.churn {
				between = func(done int) {
					const block = alternateBlock
					f := (done / block) % len(ids)
					on.SetDesired(ids[f], (f*7+done/block/len(ids)+1)%4)
				}
			}
			alternate(b, frames, inOff, inOn, between)
			if st := on.Stats(); st.FlowMoves == 0 {
				b.Error("RFS moved no flow: the desired table was not read")
			}
		})
	}
}

// BenchmarkRFSReplayNewFlows is a replay through an input that waits for
// room (a file's) of 64k frames from 4,096 flows, each of whose consumers
// named a worker other than its policy worker before its first frame,
// with a handler that takes 200 ns a frame: RFS takes each new flow
// straight to its worker, with nothing queued to hold the move back.
func BenchmarkRFSReplayNewFlows(b *testing.B) {
	const flows = 4096
	frames := synthTraffic(5, flows, 1<<16, 0)
	spin := func(*Packet) {
		for end := time.Now().Add(200 * time.Nanosecond); time.Now().Before(end); {
		}
	}
	b.ResetTimer()
	var el time.Duration
	for range b.N {
		d, err := New(Config{Workers: 2, RFS: RFSConfig{Enabled: true}}, spin)
		if err != nil {
			b.Fatal(err)
		}
		ids := synthFlowIDs(d, flows)
		tab := d.Table()
		for _, id := range ids {
			d.SetDesired(id, 1-tab[int(id)&(len(tab)-1)])
		}
		start := time.Now()
		in := d.NewInput()
		for i := 0; i < len(frames); i += BatchSize {
			in.Dispatch(frames[i:i+BatchSize], nil)
		}
		d.Close(context.Background())
		el += time.Since(start)
	}
	b.ReportMetric(float64(el.Nanoseconds())/float64(b.N*len(frames)), "ns/frame")
}
