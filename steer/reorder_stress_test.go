package steer

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/rpsgo/rps/hash"
	"go.uber.org/goleak"
)

// TestTableChangesUnderTinyQueues changes the indirection table every 50µs
// while one input feeds queues of 4 frames that hold it back: most bucket
// moves then meet frames of the bucket pending in a batch not yet handed
// over, whose queue positions exist only once it is, and no flow may be
// reordered. The variants take the paths that leave the plain one (flow
// limit, trace, RFS) and the rebalancer, which moves buckets too.
func TestTableChangesUnderTinyQueues(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, v := range []string{"plain", "flowlimit", "trace", "rfs", "rebalance", "buckets"} {
		t.Run(v, func(t *testing.T) {
			oc := newOrderChecker()
			flows := 64
			cfg := Config{Workers: 4, Buckets: 4, Hash: HashConfig{Key: hash.MicrosoftKey[:]},
				Queue: QueueConfig{Limit: 4, Overflow: OverflowWait}}
			switch v {
			case "flowlimit":
				cfg.Queue.FlowLimit = true
			case "trace":
				cfg.Trace = func(*Decision) {}
			case "rfs":
				cfg.RFS.Enabled = true
			case "rebalance":
				cfg.Rebalance = RebalanceConfig{Interval: time.Millisecond, Threshold: 1.01}
			case "buckets":
				// Many buckets and flows: most buckets' last frames are
				// older than the hand-overs an input remembers (tailRing).
				cfg.Buckets, flows = 1024, 4096
			}
			d, err := New(cfg, oc.handle)
			if err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(1, 2))
				tab := make([]int, cfg.Buckets)
				for {
					select {
					case <-stop:
						return
					default:
					}
					for i := range tab {
						tab[i] = rng.IntN(4)
					}
					if err := d.SetTable(tab); err != nil {
						t.Error(err)
						return
					}
					time.Sleep(50 * time.Microsecond)
				}
			}()
			rng := rand.New(rand.NewPCG(3, 4))
			const calls, per = 2000, 64
			frames := dtTraffic(rng, flows, calls*per)
			in := d.NewInput()
			for i := 0; i < calls; i++ {
				if err := in.Dispatch(frames[i*per:(i+1)*per], nil); err != nil {
					t.Fatal(err)
				}
			}
			in.Close()
			close(stop)
			wg.Wait()
			if err := d.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := checkAccounting(t, d, uint64(len(frames)))
			oc.mu.Lock()
			defer oc.mu.Unlock()
			for _, e := range oc.errs {
				t.Error(e)
			}
			if st.BucketMoves == 0 {
				t.Error("no bucket moved: the test did not test the rule")
			}
			t.Logf("%d frames, %d bucket moves, %d flow moves", st.Frames, st.BucketMoves, st.FlowMoves)
		})
	}
}
