package steer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpsgo/rps/hash"
	"go.uber.org/goleak"
)

// TestStress runs rounds of a randomized configuration, each mixing what the
// dispatcher promises to keep apart: every dispatch mode and policy, RFS,
// the flow limit, a trace, the rebalancer, Mover states, re-dispatch from
// handlers, table and desired-worker changes, panicking callbacks (handler,
// Trace, CPUFunc, MoveOut, MoveIn, release), Stats read concurrently, inputs
// fed from several goroutines or one source a worker (RunOnWorkers), and a
// Close at a random moment with a random deadline. Every round checks, for
// every frame: no flow reordered within its input, every frame handled,
// dropped or panicked (the counters add up, and match the handler's calls),
// every batch released exactly once, and no goroutine left behind.
//
// STEER_STRESS_ROUNDS sets the number of rounds (default 12, 150 under CI);
// STEER_STRESS_SEED the first seed. A failure names the seed and the
// configuration, so that one round can be run again alone.
func TestStress(t *testing.T) {
	rounds := 12
	if os.Getenv("CI") != "" {
		rounds = 150
	}
	if testing.Short() {
		rounds = 4
	}
	if s := os.Getenv("STEER_STRESS_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("STEER_STRESS_ROUNDS=%q: %v", s, err)
		}
		rounds = n
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("STEER_STRESS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("STEER_STRESS_SEED=%q: %v", s, err)
		}
		seed = n
	}
	var frames uint64
	for r := 0; r < rounds; r++ {
		sd := seed + uint64(r)
		st := runStressRound(t, sd)
		if t.Failed() {
			t.Fatalf("round %d failed: rerun it alone with STEER_STRESS_SEED=%d STEER_STRESS_ROUNDS=1", r, sd)
		}
		frames += st
	}
	t.Logf("%d rounds from seed %d, %d frames", rounds, seed, frames)
	goleak.VerifyNone(t)
}

// stressConfig is one round's configuration, printed when it fails.
type stressConfig struct {
	cfg          Config
	inputs       int  // feeding goroutines (with onWorkers: one source a worker)
	onWorkers    bool // RunOnWorkers instead of inputs
	run          bool // input 0 is a source Run reads
	movers       bool
	redispatch   bool
	panics       bool // handlers, Trace, CPUFunc, hooks and releases panic now and then
	tableChanges bool
	closeAfter   time.Duration
	closeTimeout time.Duration // 0: wait for the drain
}

func (c stressConfig) String() string {
	return fmt.Sprintf("workers %d buckets %d %s %s qlimit %d %s flowlimit %v rfs %v trace %v rebalance %v; "+
		"inputs %d onWorkers %v run %v movers %v redispatch %v panics %v tableChanges %v close after %v within %v",
		c.cfg.Workers, c.cfg.Buckets, c.cfg.Dispatch, c.cfg.Policy, c.cfg.Queue.Limit, c.cfg.Queue.Overflow,
		c.cfg.Queue.FlowLimit, c.cfg.RFS.Enabled, c.cfg.Trace != nil, c.cfg.Rebalance.Interval > 0,
		c.inputs, c.onWorkers, c.run, c.movers, c.redispatch, c.panics, c.tableChanges, c.closeAfter, c.closeTimeout)
}

// stressState is a per-worker state; with movers it implements Mover.
type stressState struct{}

type stressMover struct {
	panics bool
	rng    *rand.Rand // the worker's own: hooks run under the state's rule
}

func (s *stressMover) MoveOut(m Move) any {
	if s.panics && s.rng.IntN(20) == 0 {
		panic("stress: MoveOut")
	}
	return m
}

func (s *stressMover) MoveIn(m Move, carried any) {
	if s.panics && s.rng.IntN(20) == 0 {
		panic("stress: MoveIn")
	}
}

// stressCheck is what a round's handlers record.
type stressCheck struct {
	mu          sync.Mutex
	last        map[[2]int]uint32 // (input, flow) -> last sequence number handled
	errs        []string
	calls       atomic.Uint64 // handler calls, panicked ones included
	redispatchs atomic.Uint64 // Redispatch calls that returned (every one is a frame handed in)
}

func (c *stressCheck) errorf(format string, args ...any) {
	c.mu.Lock()
	if len(c.errs) < 10 {
		c.errs = append(c.errs, fmt.Sprintf(format, args...))
	}
	c.mu.Unlock()
}

func runStressRound(t *testing.T, seed uint64) (frames uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x57e55))
	sc := stressConfig{inputs: 1 + rng.IntN(3)}
	cfg := &sc.cfg
	cfg.Workers = 1 + rng.IntN(4)
	cfg.Buckets = max(4<<rng.IntN(3), 1)
	for cfg.Buckets < cfg.Workers {
		cfg.Buckets *= 2
	}
	cfg.Hash.Key = hash.MicrosoftKey[:]
	cfg.Dispatch = []DispatchMode{DispatchDeferred, DispatchDeferred, DispatchHybrid, DispatchDirect}[rng.IntN(4)]
	cfg.Policy = []Policy{PolicyRSS, PolicyRSS, PolicyRSS, PolicyFlow, PolicySource, PolicyCPU}[rng.IntN(6)]
	cfg.Queue.Limit = []int{0, 4, 16, 64}[rng.IntN(4)]
	cfg.Queue.Overflow = []Overflow{OverflowAuto, OverflowWait, OverflowDrop}[rng.IntN(3)]
	cfg.Queue.FlowLimit = rng.IntN(3) == 0
	cfg.RFS.Enabled = rng.IntN(3) == 0
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	sc.onWorkers = cfg.Dispatch == DispatchDirect && rng.IntN(2) == 0
	sc.run = !sc.onWorkers && rng.IntN(2) == 0
	sc.movers = rng.IntN(2) == 0
	sc.redispatch = rng.IntN(2) == 0
	sc.panics = rng.IntN(3) == 0
	sc.tableChanges = rng.IntN(3) != 0
	if rng.IntN(3) == 0 {
		cfg.Rebalance = RebalanceConfig{Interval: time.Millisecond, Threshold: 1.01}
	}
	if rng.IntN(5) == 0 {
		cfg.Trace = func(*Decision) {
			if sc.panics && rand.IntN(50) == 0 {
				panic("stress: Trace")
			}
		}
	}
	if cfg.Policy == PolicyCPU {
		cfg.CPUFunc = func(flowid uint32, _ hash.HashType) (int, bool) {
			if sc.panics && flowid%31 == 0 {
				panic("stress: CPUFunc")
			}
			return int(flowid%7) - 2, flowid%5 != 0 // out of range now and then, or declined
		}
	}
	sc.closeAfter = time.Duration(rng.IntN(30)) * time.Millisecond
	if rng.IntN(3) == 0 {
		sc.closeTimeout = time.Duration(1+rng.IntN(20)) * time.Millisecond
	}

	chk := &stressCheck{last: map[[2]int]uint32{}}
	handler := func(p *Packet) {
		chk.calls.Add(1)
		tcp := p.Data[14+20:]
		seq := binary.BigEndian.Uint32(tcp[4:])
		if binary.BigEndian.Uint16(tcp[2:]) == 80 { // not a re-dispatched copy
			k := [2]int{p.InputID, int(binary.BigEndian.Uint16(tcp[0:]))}
			chk.mu.Lock()
			if last := chk.last[k]; seq <= last && len(chk.errs) < 10 {
				chk.errs = append(chk.errs, fmt.Sprintf("input %d flow %d: seq %d handled after %d", k[0], k[1], seq, last))
			}
			chk.last[k] = seq
			chk.mu.Unlock()
			if sc.redispatch && seq%3 == 0 {
				cp := append([]byte(nil), p.Data...)
				binary.BigEndian.PutUint16(cp[14+20+2:], 81)
				if err := p.Redispatch(cp); err != nil && !errors.Is(err, ErrRedispatchDepth) {
					chk.errorf("Redispatch: %v", err)
				}
				chk.redispatchs.Add(1)
			}
		}
		if seq%16 == 0 {
			runtime.Gosched()
		}
		if sc.panics && seq%53 == 0 {
			panic("stress: handler")
		}
	}
	var d *Dispatcher
	var err error
	if sc.movers {
		d, _, err = NewPerWorker(*cfg, func(w *Worker) *stressMover {
			return &stressMover{panics: sc.panics, rng: rand.New(rand.NewPCG(seed, uint64(w.Index())))}
		}, func(_ *stressMover, p *Packet) { handler(p) })
	} else {
		d, _, err = NewPerWorker(*cfg, func(w *Worker) *stressState { return &stressState{} },
			func(_ *stressState, p *Packet) { handler(p) })
	}
	if err != nil {
		t.Fatalf("seed %d: %v: %v", seed, sc, err)
	}

	// Releases: every Dispatch call's callback must run exactly once.
	var releases sync.Map // call id -> *atomic.Int32
	var calls atomic.Int64
	release := func() func() {
		id := calls.Add(1)
		n := new(atomic.Int32)
		releases.Store(id, n)
		return func() {
			n.Add(1)
			if sc.panics && id%17 == 0 {
				panic("stress: release")
			}
		}
	}
	var handedIn atomic.Uint64 // frames of Dispatch calls that returned nil
	feed := func(in *Input, src int) {
		frng := rand.New(rand.NewPCG(seed, uint64(100+src)))
		flows := 16 + frng.IntN(64)
		seq := make([]uint32, flows)
		for {
			n := 1 + frng.IntN(80)
			batch := make([]Frame, n)
			for i := range batch {
				f := src*1000 + frng.IntN(flows)
				seq[f-src*1000]++
				batch[i] = Frame{Data: dtFrame(f, seq[f-src*1000]), IfIndex: 1}
			}
			err := in.Dispatch(batch, release())
			if err != nil {
				if !errors.Is(err, ErrClosed) {
					chk.errorf("Dispatch: %v", err)
				}
				return
			}
			handedIn.Add(uint64(n))
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var srcFrames []*countingSource
	if sc.onWorkers {
		srcs := make([]Source, cfg.Workers)
		for i := range srcs {
			frng := rand.New(rand.NewPCG(seed, uint64(200+i)))
			fr := dtTraffic(frng, 16+frng.IntN(48), 4000)
			for k := range fr {
				binary.BigEndian.PutUint16(fr[k].Data[14+20:], uint16(5000+i*100)+binary.BigEndian.Uint16(fr[k].Data[14+20:])%100)
			}
			cs := &countingSource{SliceSource: SliceSource{Frames: fr, BatchLen: 1 + frng.IntN(64)}}
			srcFrames = append(srcFrames, cs)
			srcs[i] = cs
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.RunOnWorkers(ctx, srcs); err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, context.Canceled) {
				chk.errorf("RunOnWorkers: %v", err)
			}
		}()
	} else {
		if sc.run {
			// Input 0 is a source Run reads (in worker 0 under HYBRID).
			gs := &genSource{seed: seed, release: release}
			srcFrames = append(srcFrames, &gs.countingSource)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := d.Run(ctx, gs); err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, context.Canceled) {
					chk.errorf("Run: %v", err)
				}
			}()
		}
		for i := 0; i < sc.inputs; i++ {
			if sc.run && i == 0 {
				continue
			}
			in := d.NewInput()
			wg.Add(1)
			go func(src int) {
				defer wg.Done()
				defer in.Close()
				feed(in, src)
			}(i)
		}
	}
	// Meddlers: table and desired-worker changes, Stats.
	meddle := make(chan struct{})
	var mwg sync.WaitGroup
	mwg.Add(1)
	go func() {
		defer mwg.Done()
		mrng := rand.New(rand.NewPCG(seed, 0x3ed))
		tab := make([]int, cfg.Buckets)
		for {
			select {
			case <-meddle:
				return
			default:
			}
			if sc.tableChanges {
				for i := range tab {
					tab[i] = mrng.IntN(cfg.Workers)
				}
				if err := d.SetTable(tab); err != nil && !errors.Is(err, ErrClosed) {
					chk.errorf("SetTable: %v", err)
				}
			}
			if cfg.RFS.Enabled {
				var c Classification
				d.cls.Classify(dtFrame(mrng.IntN(64), 1), &c)
				if err := d.SetDesired(c.FlowID, mrng.IntN(cfg.Workers)); err != nil && !errors.Is(err, ErrClosed) {
					chk.errorf("SetDesired: %v", err)
				}
			}
			if mrng.IntN(8) == 0 {
				d.Stats()
			}
			time.Sleep(time.Duration(20+mrng.IntN(200)) * time.Microsecond)
		}
	}()

	watchdog := time.AfterFunc(60*time.Second, func() {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		panic(fmt.Sprintf("stress round seed %d wedged: %v\n%s", seed, sc, buf))
	})
	defer watchdog.Stop()

	time.Sleep(sc.closeAfter)
	cctx := context.Background()
	if sc.closeTimeout > 0 {
		var ccancel context.CancelFunc
		cctx, ccancel = context.WithTimeout(cctx, sc.closeTimeout)
		defer ccancel()
	}
	firstErr := d.Close(cctx)
	cancel()
	wg.Wait()
	close(meddle)
	mwg.Wait()
	if err := d.Close(context.Background()); err != nil && sc.closeTimeout == 0 {
		t.Errorf("seed %d: %v: second Close: %v (first: %v)", seed, sc, err, firstErr)
	}
	if firstErr != nil && sc.closeTimeout == 0 && !errors.Is(firstErr, ErrCloseInHandler) {
		// A Close that may wait returns only the states' errors: none here.
		t.Errorf("seed %d: %v: Close: %v", seed, sc, firstErr)
	}

	st := d.Stats()
	// A worker reading its own source drops its last batch unread when the
	// dispatcher has closed meanwhile: that batch was never handed in.
	want := handedIn.Load() + chk.redispatchs.Load()
	var unsure uint64
	for _, s := range srcFrames {
		want += s.read.Load()
		unsure += s.last.Load()
	}
	if st.Frames > want || st.Frames < want-unsure {
		t.Errorf("seed %d: %v: Frames %d, want %d handed in (re-dispatches included; up to %d read by workers after Close)",
			seed, sc, st.Frames, want, unsure)
	}
	if sum := st.Handled() + st.Dropped() + st.Panicked(); sum != st.Frames {
		t.Errorf("seed %d: %v: handled %d + dropped %d + panicked %d = %d, want Frames %d",
			seed, sc, st.Handled(), st.Dropped(), st.Panicked(), sum, st.Frames)
	}
	if c := chk.calls.Load(); c != st.Handled()+st.Panicked() {
		t.Errorf("seed %d: %v: the handler ran %d times, want handled %d + panicked %d", seed, sc, c, st.Handled(), st.Panicked())
	}
	releases.Range(func(k, v any) bool {
		if n := v.(*atomic.Int32).Load(); n != 1 {
			t.Errorf("seed %d: %v: Dispatch call %d released %d times", seed, sc, k, n)
		}
		return true
	})
	chk.mu.Lock()
	for _, e := range chk.errs {
		t.Errorf("seed %d: %v: %s", seed, sc, e)
	}
	chk.mu.Unlock()
	return st.Frames
}

// genSource makes batches of frames of its flows for ever, each with a
// release callback from release, and counts them as countingSource does.
type genSource struct {
	countingSource
	seed    uint64
	release func() func()
	rng     *rand.Rand
	seq     []uint32
}

func (s *genSource) ReadBatch(ctx context.Context, b *Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.rng == nil {
		s.rng = rand.New(rand.NewPCG(s.seed, 99))
		s.seq = make([]uint32, 16+s.rng.IntN(64))
	}
	n := 1 + s.rng.IntN(80)
	frames := make([]Frame, n)
	for i := range frames {
		f := s.rng.IntN(len(s.seq))
		s.seq[f]++
		frames[i] = Frame{Data: dtFrame(9000+f, s.seq[f]), IfIndex: 1}
	}
	b.Frames, b.Release = frames, s.release()
	s.read.Add(uint64(n))
	s.last.Store(uint64(n))
	return nil
}

// countingSource is a SliceSource that counts the frames it handed out,
// and those of its last batch.
type countingSource struct {
	SliceSource
	read, last atomic.Uint64
}

func (s *countingSource) ReadBatch(ctx context.Context, b *Batch) error {
	err := s.SliceSource.ReadBatch(ctx, b)
	s.read.Add(uint64(len(b.Frames)))
	s.last.Store(uint64(len(b.Frames)))
	return err
}
