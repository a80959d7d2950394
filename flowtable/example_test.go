package flowtable_test

import (
	"fmt"
	"time"

	"github.com/rpsgo/rps/flowtable"
)

// This example meters flows the way a handler's per-worker state would:
// each packet looks its flow up by flowid and full key, eviction and the
// idle timeout end records, and All visits those still open at the end.
func Example() {
	type key struct{ src, dst string } // a handler's full key, such as steer.FlowKey
	type record struct {
		packets     int
		first, last time.Time
	}
	flows, err := flowtable.New(flowtable.Config[key, record]{
		Capacity: 2, // tiny, to show eviction
		Idle:     30 * time.Second,
		OnEvict: func(f flowtable.Flow[key], r *record, why flowtable.Reason) {
			fmt.Printf("ended %s->%s: %d packets (%v)\n", f.Key.src, f.Key.dst, r.packets, why)
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	packets := []struct {
		flowid uint32 // steer.Packet.FlowID
		key    key
		at     int // seconds into the capture: steer.Packet.Timestamp
	}{
		{0x1111, key{"a", "b"}, 0},
		{0x2222, key{"c", "d"}, 1},
		{0x1111, key{"a", "b"}, 2},
		{0x2222, key{"e", "f"}, 3},  // same flowid as c->d, another flow; the table is full
		{0x1111, key{"a", "b"}, 40}, // 38 s after its last packet: a new flow
	}
	for _, p := range packets {
		ts := start.Add(time.Duration(p.at) * time.Second)
		r, isNew := flows.Lookup(p.flowid, p.key, ts)
		if isNew {
			r.first = ts
		}
		r.packets++
		r.last = ts
	}
	flows.Expire(start.Add(60 * time.Second)) // a worker's tick
	for f, r := range flows.All() {
		fmt.Printf("open %s->%s: %d packets since %v\n", f.Key.src, f.Key.dst, r.packets, r.first.Sub(start))
	}
	st := flows.Stats()
	fmt.Printf("%d flows held, %d inserted, %d evicted, %d expired\n", st.Len, st.Inserts, st.Evictions, st.Expired)
	// Output:
	// ended c->d: 1 packets (evicted)
	// ended a->b: 2 packets (expired)
	// ended e->f: 1 packets (expired)
	// open a->b: 1 packets since 40s
	// 1 flows held, 4 inserted, 1 evicted, 2 expired
}
