package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/cli"
	"github.com/rpsgo/rps/steer"
)

// TestCaptureCases: at every offered rate the captures follow each other in
// one order, so that a run alternates them; a case the live experiment
// already has (one AF_PACKET socket at trafgen's full rate) is not run
// twice; frames are a second's worth at the offered rate.
func TestCaptureCases(t *testing.T) {
	s := &suite{o: options{count: 1, scale: 1}}
	all := s.captureCases(2, nil)
	if len(all) == 0 {
		t.Fatal("no capture cases")
	}
	var order []string
	for _, c := range all {
		if c.Rate == all[0].Rate {
			order = append(order, c.Impl+"/"+c.Source)
		}
		if c.Experiment != "live" || c.Handler != handlerNone {
			t.Errorf("%s: want the live experiment with handler none", c.Name())
		}
		if c.Rate > 0 && c.Frames != c.Rate {
			t.Errorf("%s: %d frames, want a second's worth", c.Name(), c.Frames)
		}
	}
	for i, c := range all {
		if want := order[i%len(order)]; c.Impl+"/"+c.Source != want {
			t.Fatalf("case %d is %s, want %s: the captures do not alternate", i, c.Name(), want)
		}
	}
	if len(all) != len(order)*len(liveRates) {
		t.Errorf("%d cases for %d captures at %d rates", len(all), len(order), len(liveRates))
	}
	var have []Case
	for _, c := range all {
		if c.Rate == 0 && c.Impl == "rps" && c.Source == "afpacket" {
			have = append(have, c)
		}
	}
	if len(have) != 1 {
		t.Fatalf("%d cases of one AF_PACKET socket at full rate, want 1", len(have))
	}
	if got := s.captureCases(2, have); len(got) != len(all)-1 {
		t.Errorf("with that case already there, %d cases, want %d", len(got), len(all)-1)
	}
}

// TestPrintCapture: the capture table shows each configuration by rate,
// with the medians of its runs, and its highest rate without loss in any
// run: a rate where one run of three lost frames does not count.
func TestPrintCapture(t *testing.T) {
	run := func(src string, rate int, sent float64, lost uint64, rep int) Result {
		return Result{Experiment: "live", Impl: "rps", Source: src, Handler: handlerNone, FrameSize: 64,
			Workers: 2, Rate: rate, Rep: rep, Sent: 1000, Lost: lost, Frames: 1000 - lost, SendPPS: sent,
			Mpps: sent / 1e6, ReaderNs: 100 + float64(rate/1000) + []float64{0, 50, 10}[rep], TotalNs: 900}
	}
	var rs []Result
	for rep := range 3 {
		rs = append(rs, run("afpacket", 250_000, 250_000, 0, rep), run("afxdp", 250_000, 250_000, 0, rep))
		lost := uint64(0)
		if rep == 1 {
			lost = 5
		}
		rs = append(rs, run("afpacket", 500_000, 500_000, 0, rep), run("afxdp", 500_000, 500_000, lost, rep))
	}
	var b bytes.Buffer
	printCapture(&b, rs, medians(rs))
	out := b.String()
	var best, rows []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.Join(strings.Fields(l), " ")
		rows = append(rows, l)
		if strings.HasPrefix(l, "no loss up to") {
			best = append(best, l)
		}
	}
	want := []string{"no loss up to 500 0 610 900", "no loss up to 250 0 360 900"}
	if len(best) != 2 || best[0] != want[0] || best[1] != want[1] {
		t.Errorf("no-loss lines %q, want %q\n%s", best, want, out)
	}
	if !slices.Contains(rows, "rps afxdp 2 - 500kpps 500 5 - 610 900") {
		t.Errorf("the afxdp row at 500 kpps does not show the most one run lost (5) and the medians:\n%s", out)
	}
	if !strings.Contains(out, "500kpps") || !strings.Contains(out, "total ns/f") {
		t.Errorf("the table lacks its rates or columns:\n%s", out)
	}
}

// countedSource gives batches of the sizes in sizes, in turn.
type countedSource struct {
	sizes []int
	n     int
}

func (s *countedSource) ReadBatch(_ context.Context, b *steer.Batch) error {
	k := s.sizes[s.n%len(s.sizes)]
	s.n++
	b.Frames = b.Frames[:0]
	for range k {
		b.Frames = append(b.Frames, steer.Frame{Data: make([]byte, 64)})
	}
	return nil
}

func (s *countedSource) Close() error { return nil }

// TestWaitingSource: the -xdp-wait what-if waits before a read that
// follows a short one, and only then.
func TestWaitingSource(t *testing.T) {
	const wait = 50 * time.Millisecond
	ws := &waitingSource{Source: &countedSource{sizes: []int{3, steer.BatchSize, 0, steer.BatchSize}}, wait: wait}
	var b steer.Batch
	var took []time.Duration
	for range 5 {
		start := time.Now()
		if err := ws.ReadBatch(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	// Reads: 3 frames, then (after a wait) 64, then 0, 64 and 3 without one.
	if took[1] < wait {
		t.Errorf("the read after a 3-frame batch took %v, want a wait of %v", took[1], wait)
	}
	for _, i := range []int{0, 2, 3, 4} {
		if took[i] >= wait {
			t.Errorf("read %d took %v: it waited after a full or an empty batch", i, took[i])
		}
	}
	if _, err := parseFlags([]string{"-xdp-wait", "-1ms"}, io.Discard); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("-xdp-wait -1ms: %v, want a usage error", err)
	}
}
