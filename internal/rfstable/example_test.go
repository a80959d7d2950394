package rfstable_test

import (
	"fmt"
	"sync/atomic"

	"github.com/rpsgo/rps/internal/rfstable"
)

// This example walks one flow through the RFS decision a dispatcher makes
// per frame: look the flow up, read its desired worker, and move it only
// when its current worker has finished its last queued frame.
func Example() {
	const workers = 2
	var head, tail [workers]atomic.Uint64 // frames finished / enqueued per worker

	desired, _ := rfstable.NewDesired(1024)
	table, _ := rfstable.New(1024, func(e *rfstable.Entry) bool {
		// Frames of the flow still queued on its current worker?
		return e.Current >= 0 && head[e.Current].Load() < e.LastTail
	})

	stateless := func(flowid uint32) int32 { return int32(flowid % workers) }
	steer := func(flowid uint32, now int64) int32 {
		table.Lock()
		defer table.Unlock()
		e, _ := table.Lookup(flowid, now)
		if e == nil {
			return stateless(flowid) // no entry to be had: steer statelessly
		}
		if e.Current < 0 { // new entry: earlier frames went the stateless way
			e.Current = stateless(flowid)
			e.LastTail = tail[e.Current].Load()
		}
		if w, ok := desired.Get(flowid); ok {
			e.Desired = int32(w)
			if e.Desired != e.Current && head[e.Current].Load() >= e.LastTail {
				e.Current = e.Desired // the old worker is done with the flow
			}
		}
		e.LastTail = tail[e.Current].Add(1) // enqueue the frame
		e.Packets++
		return e.Current
	}

	const flow = 0x2a // stateless worker 0
	fmt.Println("frame 1 to worker", steer(flow, 1))
	_ = desired.Set(flow, 1) // the flow's consumer runs on worker 1
	fmt.Println("frame 2 to worker", steer(flow, 2), "(frame 1 still queued)")
	head[0].Store(tail[0].Load()) // worker 0 drains its queue
	fmt.Println("frame 3 to worker", steer(flow, 3))
	e, _ := table.Get(flow)
	fmt.Println("packets", e.Packets, "current", e.Current)
	// Output:
	// frame 1 to worker 0
	// frame 2 to worker 0 (frame 1 still queued)
	// frame 3 to worker 1
	// packets 3 current 1
}
