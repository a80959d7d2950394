// Command rfs shows receive flow steering (RFS): the application's
// consumers claim the flows they read, the dispatcher moves each flow to
// its consumer's worker without reordering it, and per-flow state follows
// the flow.
//
//	go run ./examples/rfs                  # the sample capture
//	go run ./examples/rfs -r trace.pcap
//
// It replays the capture twice over four workers, with Config.RFS on. The
// application stands for a server host's services, each read by a consumer
// on one worker: SSH (port 22) on worker 0, HTTP (80) on 1, TLS (443) on 2
// and PostgreSQL (5432) on 3. When a frame of a TCP connection to one of
// them reaches a handler, the consumer records the worker it runs on with
// Dispatcher.SetDesired, as Linux's socket layer does with
// rps_record_sock_flow when a thread reads a socket. Before the second
// replay the HTTP consumer moves to worker 3, as a thread would, and its
// flows follow it.
//
// A flow leaves its worker only once that worker has handled every frame
// of it already queued (Linux's last_qtail rule), so it is never
// reordered; until then its frames keep going to the old worker. A file is
// read far faster than a link delivers, and with the default queue limit
// the reader would queue most of a connection before a handler saw its
// first frame, so few flows could move: Queue.Limit 1 makes the reader wait
// for the workers, as traffic slower than the workers would. The replays go
// through one Input, since each Input keeps its own flow state (Linux's
// rps_dev_flow_table, one per receive queue).
//
// Each worker's state (steer.NewPerWorker) counts frames per flow in a map
// of its own, with no lock, and implements steer.Mover: MoveOut runs in the
// old worker after its last frame of the flow and hands the count over, and
// MoveIn takes it in the new worker before its first frame.
//
// Look at the handler in run (SetDesired), at MoveOut and MoveIn, and at
// the config.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/rpsgo/rps/examples/sample"
	"github.com/rpsgo/rps/steer"
	"github.com/rpsgo/rps/steer/pcapfile"
)

// plan is where each service's consumer runs during one replay.
type plan struct {
	replay    int
	consumers map[uint16]int // service port to worker
}

var plans = [2]plan{
	{0, map[uint16]int{22: 0, 80: 1, 443: 2, 5432: 3}},
	{1, map[uint16]int{22: 0, 80: 3, 443: 2, 5432: 3}}, // HTTP's consumer has moved
}

// counts is one worker's state. Only the worker's goroutine touches it
// while the dispatcher runs: the handler, MoveOut and MoveIn run there.
type counts struct {
	frames          map[uint32]uint64 // frames handled, by flowid
	onConsumer, off [2]uint64         // per replay, frames of claimed flows handled on their consumer's worker, and elsewhere
	movedIn         int               // flows whose count came from another worker
	err             error             // SetDesired's first error
}

// MoveOut implements steer.Mover: it hands over the counts of the moved flows.
func (c *counts) MoveOut(m steer.Move) any {
	out := map[uint32]uint64{}
	for id, n := range c.frames {
		if m.Contains(id) {
			out[id] = n
			delete(c.frames, id)
		}
	}
	return out
}

// MoveIn implements steer.Mover: it takes the counts in.
func (c *counts) MoveIn(_ steer.Move, carried any) {
	for id, n := range carried.(map[uint32]uint64) {
		c.frames[id] += n
		c.movedIn++
	}
}

// result is what a run saw.
type result struct {
	onConsumer, off [2]uint64 // per replay: see counts
	flowMoves       [2]uint64 // per replay
	movedIn         int
	exact           bool   // every flow's count is in one worker, and the counts add up to the frames
	frames          uint64 // frames handled
}

// run replays the capture file name (the sample when name is empty) twice.
func run(name string) (*result, error) {
	var cur atomic.Pointer[plan]
	cur.Store(&plans[0])
	cfg := steer.Config{
		Workers: 4,
		RFS:     steer.RFSConfig{Enabled: true},
		Queue:   steer.QueueConfig{Limit: 1}, // the reader waits for the workers
	}
	var d *steer.Dispatcher
	d, states, err := steer.NewPerWorker(cfg,
		func(*steer.Worker) *counts { return &counts{frames: map[uint32]uint64{}} },
		func(c *counts, p *steer.Packet) {
			c.frames[p.FlowID]++
			k := p.Key()
			pl := cur.Load()
			w, claimed := pl.consumers[min(k.SrcPort, k.DstPort)]
			if k.Proto != 6 || !claimed {
				return
			}
			if p.Worker == w {
				c.onConsumer[pl.replay]++
			} else {
				c.off[pl.replay]++
			}
			if err := d.SetDesired(p.FlowID, w); err != nil && c.err == nil { // the consumer reads on worker w
				c.err = err
			}
		})
	if err != nil {
		return nil, err
	}
	res := &result{}
	in := d.NewInput()
	for i := range plans {
		cur.Store(&plans[i])
		before := d.Stats().FlowMoves
		if err := replay(d, in, name); err != nil {
			d.Close(context.Background())
			return nil, err
		}
		res.flowMoves[i] = d.Stats().FlowMoves - before
	}
	in.Close()
	if err := d.Close(context.Background()); err != nil {
		return nil, err
	}
	// The workers have exited: their states may be read now.
	st := d.Stats()
	res.frames, res.exact = st.Handled(), true
	holders, total := map[uint32]int{}, uint64(0)
	for _, c := range states {
		if c.err != nil {
			return nil, c.err
		}
		for i := range 2 {
			res.onConsumer[i] += c.onConsumer[i]
			res.off[i] += c.off[i]
		}
		res.movedIn += c.movedIn
		for id, n := range c.frames {
			holders[id]++
			res.exact = res.exact && holders[id] == 1
			total += n
		}
	}
	res.exact = res.exact && total == res.frames
	return res, nil
}

// replay dispatches the capture once through in, and waits until every
// frame is handled.
func replay(d *steer.Dispatcher, in *steer.Input, name string) error {
	f, err := sample.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	src, err := pcapfile.NewReader(f)
	if err != nil {
		return err
	}
	for err == nil {
		var b steer.Batch
		err = src.ReadBatch(context.Background(), &b)
		if derr := in.Dispatch(b.Frames, b.Release); derr != nil {
			return derr
		}
	}
	if err != io.EOF {
		return err
	}
	for st := d.Stats(); st.Handled() < st.Frames; st = d.Stats() {
		time.Sleep(time.Millisecond)
	}
	return nil
}

func (r *result) print(w io.Writer) {
	titles := [2]string{"consumers: SSH on worker 0, HTTP on 1, TLS on 2, PostgreSQL on 3", "HTTP's consumer moved to worker 3"}
	for i, t := range titles {
		fmt.Fprintf(w, "replay %d, %s:\n  %d of %d frames of claimed connections handled on their consumer's worker; %d flow moves\n",
			i+1, t, r.onConsumer[i], r.onConsumer[i]+r.off[i], r.flowMoves[i])
	}
	fmt.Fprintf(w, "per-flow counts handed over by MoveOut and MoveIn: %d\n", r.movedIn)
	fmt.Fprintf(w, "every flow's count in one worker, the counts adding up to the %d frames handled: %v\n", r.frames, r.exact)
}

func main() {
	file := flag.String("r", "", "capture `file` to read (pcap or pcapng); default: the sample capture")
	flag.Parse()
	res, err := run(*file)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rfs:", err)
		os.Exit(1)
	}
	res.print(os.Stdout)
}
