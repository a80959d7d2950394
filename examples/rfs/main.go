// Command rfs shows receive flow steering (RFS): consumers claim flows, and
// the dispatcher moves each flow to the worker where its consumer runs
// without ever reordering it.
//
// Run it with no arguments (it takes no flags; -h prints its usage):
//
//	go run ./examples/rfs
//
// It builds synthetic TCP traffic (2,000 flows to seven destination ports,
// 80 to 86) and steers it over four workers in three phases:
//
//  1. No consumer has claimed anything: the RSS indirection table spreads
//     every port's flows over all four workers.
//  2. Consumers claim their flows: "worker w consumes every flow whose
//     destination port is 80+k", with w = k % 4. When a frame of a flow
//     reaches a handler, the handler records the flow's consumer with
//     Dispatcher.SetDesired, as Linux's socket layer does with
//     rps_record_sock_flow when an application reads from a socket.
//  3. The consumer of port 83 migrates from worker 3 to worker 0, as a
//     thread would; its flows follow it.
//
// What it teaches, in Linux's words:
//
//   - rps_sock_flow_table: the table of desired workers (the dispatcher's),
//     one global table that any goroutine may write; SetDesired and
//     ClearDesired write it.
//   - rps_dev_flow_table: each input's own table of per-flow state
//     (one per input): the worker the flow goes to now and last_qtail.
//   - last_qtail: a flow may only leave its worker once that worker has
//     handled the last frame of the flow queued to it. Every worker counts
//     frames queued (tail) and handled (head); the entry remembers the tail
//     position of the flow's last frame; while head < last_qtail the
//     flow's frames keep going to the old worker. The example prints two
//     traced decisions, one move held back by the rule and one allowed.
//   - Per-flow state follows its flow: each worker's state (steer.NewPerWorker)
//     is a frame count per flow in a plain map of its own (no locks), and it
//     implements steer.Mover: MoveOut runs in the old worker after its last
//     frame of the flow and hands the count over; MoveIn receives it in the
//     new worker before its first frame. The example checks at the end that
//     every flow's count equals the frames sent.
//
// The report shows, per phase, the frames each worker handled and, per
// port, the workers its frames went to; then FlowMoves, the busiest flows
// (Stats.TopFlows, with each flow's worker and desired worker) and the
// netstat -Q-style report.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/internal/synth"
	"github.com/rpsgo/rps/steer"
)

const (
	workers   = 4
	flows     = 2000
	perPhase  = 200_000
	firstPort = 80
	ports     = 7 // synth's destination ports are 80 + flow % 7
)

func main() {
	fs := cli.NewFlagSet("rfs", "",
		"Shows receive flow steering: consumers claim flows, and the dispatcher moves each\n"+
			"flow to its consumer's worker without reordering it. It takes no flags.", os.Stderr)
	err := cli.Parse(fs, os.Args[1:])
	if err == nil {
		err = run(os.Stdout)
	}
	cli.Exit("rfs", err)
}

// flowCounts is one worker's state: frames handled, by flowid. Only the
// worker's own goroutine touches it: the handler, and MoveOut and MoveIn,
// which run in the worker.
type flowCounts struct {
	n          map[uint32]uint64
	handedOver int // counts received from another worker
}

// MoveOut implements steer.Mover: it hands over the counts of the moved
// flows.
func (c *flowCounts) MoveOut(m steer.Move) any {
	out := map[uint32]uint64{}
	for id, n := range c.n {
		if m.Contains(id) {
			out[id] = n
			delete(c.n, id)
		}
	}
	return out
}

// MoveIn implements steer.Mover: it takes the counts in.
func (c *flowCounts) MoveIn(_ steer.Move, carried any) {
	for id, n := range carried.(map[uint32]uint64) {
		c.n[id] += n
		c.handedOver++
	}
}

// phaseCounts is what the handlers saw in one phase.
type phaseCounts struct {
	perWorker [workers]atomic.Uint64
	perPort   [ports][workers]atomic.Uint64
}

// run runs the three phases and writes the report to out.
func run(out io.Writer) error {
	// owner[k] is the worker whose consumer reads port 80+k; -1 before the
	// consumers start (phase 1).
	var owner [ports]atomic.Int32
	for k := range owner {
		owner[k].Store(-1)
	}
	var phase atomic.Pointer[phaseCounts]
	phase.Store(new(phaseCounts))

	// Two traced decisions to print: a move held by last_qtail, and one
	// allowed.
	var traceMu sync.Mutex
	var held, allowed bytes.Buffer

	var d *steer.Dispatcher
	cfg := steer.Config{
		Workers: workers,
		RFS:     steer.RFSConfig{Enabled: true},
		Trace: func(dc *steer.Decision) {
			if !dc.Moving {
				return
			}
			traceMu.Lock()
			defer traceMu.Unlock()
			switch {
			case !dc.Moved && held.Len() == 0:
				dc.WriteTo(&held)
			case dc.Moved && dc.Desired >= 0 && allowed.Len() == 0:
				dc.WriteTo(&allowed)
			}
		},
	}
	// d is set before the first frame is dispatched, so every handler sees it.
	d, state, err := steer.NewPerWorker(cfg,
		func(*steer.Worker) *flowCounts { return &flowCounts{n: map[uint32]uint64{}} },
		func(c *flowCounts, p *steer.Packet) {
			c.n[p.FlowID]++
			k := int(p.Key().DstPort) - firstPort
			if k < 0 || k >= ports {
				return
			}
			pc := phase.Load()
			pc.perWorker[p.Worker].Add(1)
			pc.perPort[k][p.Worker].Add(1)
			// The consumer of this port reads the frame on its worker and so
			// records where the flow should go (rps_record_sock_flow).
			if w := owner[k].Load(); w >= 0 {
				d.SetDesired(p.FlowID, int(w)) // a no-op when it is already so
			}
		})
	if err != nil {
		return err
	}

	frames := synth.Frames(synth.Spec{Flows: flows, Zipf: 0.9, Seed: 1}, 3*perPhase)
	sent := map[uint32]uint64{}
	var c steer.Classification
	for _, f := range frames {
		d.Classifier().Classify(f, &c)
		sent[c.FlowID]++
	}
	in := d.NewInput()
	feed := func(fr [][]byte) error {
		batch := make([]steer.Frame, 0, steer.BatchSize)
		for len(fr) > 0 {
			batch = batch[:0]
			for _, b := range fr[:min(len(fr), steer.BatchSize)] {
				batch = append(batch, steer.Frame{Data: b})
			}
			fr = fr[len(batch):]
			if err := in.Dispatch(batch, nil); err != nil {
				return err
			}
		}
		return nil
	}

	titles := []string{
		"Phase 1: no consumer has claimed a flow; the RSS table spreads each port over all workers",
		"Phase 2: worker w consumes every flow to port 80+k with w = k % 4; handlers call SetDesired",
		"Phase 3: the consumer of port 83 migrates from worker 3 to worker 0",
	}
	for ph := range 3 {
		switch ph {
		case 1:
			for k := range owner {
				owner[k].Store(int32(k % workers))
			}
		case 2:
			owner[3].Store(0)
		}
		pc := new(phaseCounts)
		phase.Store(pc)
		before := d.Stats().FlowMoves
		if err := feed(frames[ph*perPhase : (ph+1)*perPhase]); err != nil {
			return err
		}
		// Wait for the phase's frames to be handled before counting.
		for {
			st := d.Stats()
			var h uint64
			for _, w := range st.Workstreams {
				h += w.Handled
			}
			if h == uint64((ph+1)*perPhase) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		fmt.Fprintf(out, "\n%s\n", titles[ph])
		printPhase(out, pc, &owner, d.Stats().FlowMoves-before)
	}
	if err := d.Close(context.Background()); err != nil {
		return err
	}

	st := d.Stats()
	fmt.Fprintf(out, "\nThe last_qtail rule at work (two traced decisions):\n%s%s", held.String(), allowed.String())

	handedOver := 0
	exact, holders := true, map[uint32]int{}
	total := map[uint32]uint64{}
	for _, c := range state {
		handedOver += c.handedOver
		for id, n := range c.n {
			total[id] += n
			holders[id]++
		}
	}
	fmt.Fprintf(out, "\nFlow moves: %d (RFS moves, each under the last_qtail rule); per-flow state handed over %d times by MoveOut/MoveIn\n",
		st.FlowMoves, handedOver)
	for id, n := range sent {
		if total[id] != n || holders[id] != 1 {
			exact = false
		}
	}
	fmt.Fprintf(out, "Per-flow state exact (each flow's count in one worker, equal to the frames sent): %v\n", exact)

	fmt.Fprintln(out, "\nTop flows (Stats.TopFlows):")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "flowid\tworker\tdesired\tpackets\t\n")
	for _, f := range st.TopFlows {
		fmt.Fprintf(tw, "0x%08x\t%d\t%d\t%d\t\n", f.FlowID, f.Worker, f.Desired, f.Packets)
	}
	tw.Flush()
	fmt.Fprintln(out)
	if err := st.WriteReport(out); err != nil {
		return err
	}
	switch {
	case !exact:
		return errors.New("per-flow state did not follow its flows")
	case st.FlowMoves == 0:
		return errors.New("the consumers' claims moved no flow")
	case st.Frames != st.Handled()+st.Dropped()+st.Panicked():
		return fmt.Errorf("%d frames in, %d handled + %d dropped + %d panicked", st.Frames, st.Handled(), st.Dropped(), st.Panicked())
	}
	return nil
}

func printPhase(out io.Writer, pc *phaseCounts, owner *[ports]atomic.Int32, moves uint64) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "port\tconsumer\t")
	for w := range workers {
		fmt.Fprintf(tw, "worker %d\t", w)
	}
	fmt.Fprintln(tw)
	for k := range ports {
		who := "-"
		if w := owner[k].Load(); w >= 0 {
			who = fmt.Sprintf("worker %d", w)
		}
		fmt.Fprintf(tw, "%d\t%s\t", firstPort+k, who)
		for w := range workers {
			fmt.Fprintf(tw, "%d\t", pc.perPort[k][w].Load())
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintf(tw, "handled\t\t")
	for w := range workers {
		fmt.Fprintf(tw, "%d\t", pc.perWorker[w].Load())
	}
	fmt.Fprintln(tw)
	tw.Flush()
	fmt.Fprintf(out, "flow moves in this phase: %d\n", moves)
	if owner[0].Load() >= 0 {
		fmt.Fprintln(out, "(frames off a port's consumer are flows' first frames, steered by the table until a handler\n"+
			" records the consumer, and frames sent while last_qtail held a move back)")
	}
}
