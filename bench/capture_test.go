package main

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rpsgo/rps/internal/cli"
)

// TestCaptureCases: at every offered rate the captures follow each other in
// one order, so that a run alternates them; a case the live experiment
// already has (one AF_PACKET socket at the sender's full rate) is not run
// twice; frames are a second's worth at the offered rate.
func TestCaptureCases(t *testing.T) {
	s := &suite{o: options{count: 1}}
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
// with the on-wire and handled rates and the medians of its runs, the most
// frames one run lost, the runs flagged sender-limited, and the zero-loss
// rate of its search.
func TestPrintCapture(t *testing.T) {
	run := func(src string, rate int, sent float64, lost uint64, rep int) Result {
		return Result{Experiment: expCapture, Impl: "rps", Source: src, Handler: handlerNone, FrameSize: 64,
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
		slow := run("afpacket", 500_000, 400_000, 0, rep)
		slow.Flag = "sender-limited"
		rs = append(rs, slow, run("afxdp", 500_000, 500_000, lost, rep))
		rs = append(rs, Result{Experiment: expZeroLoss, Impl: "rps", Source: "afxdp", Handler: handlerNone, FrameSize: 64,
			Workers: 2, Rep: rep, ZeroLossPPS: 300_000 + 10_000*float64(rep), Mpps: 0.3})
	}
	var b bytes.Buffer
	printCapture(&b, groups(rs))
	out := b.String()
	var rows []string
	for _, l := range strings.Split(out, "\n") {
		rows = append(rows, strings.Join(strings.Fields(l), " "))
	}
	for _, want := range []string{
		"rps afxdp 2 - 500kpps 500 ±0% 500 ±0% 5 - 610 900 0 3",
		"rps afpacket 2 - 500kpps 400 ±0% 400 ±0% 0 - 610 900 3 3",
		"zero-loss 310 ±3% 0 3",
	} {
		if !slices.Contains(rows, want) {
			t.Errorf("the capture table lacks the row %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "500kpps") || !strings.Contains(out, "total ns/f") || !strings.Contains(out, "on-wire kpps") {
		t.Errorf("the table lacks its rates or columns:\n%s", out)
	}
}

// TestXDPFlags: -xdp-unbatched adds an AF_XDP socket that hands frames
// over at once beside the batched one at every rate; -xdp-batch-timeout
// takes the library's range.
func TestXDPFlags(t *testing.T) {
	defer func() { benchXDPUnbatched, benchXDPBatch = false, 0 }()
	o, err := parseFlags([]string{"-xdp-unbatched", "-xdp-batch-timeout", "1ms"}, io.Discard)
	if err != nil || !benchXDPUnbatched || benchXDPBatch != time.Millisecond {
		t.Fatalf("-xdp-unbatched -xdp-batch-timeout 1ms: %+v, %v, %v, %v", o, benchXDPUnbatched, benchXDPBatch, err)
	}
	s := &suite{o: options{count: 1}}
	n := 0
	for _, c := range s.captureCases(2, nil) {
		if c.Source == "afxdp-unbatched" {
			n++
		}
	}
	if n != len(liveRates) {
		t.Errorf("%d unbatched AF_XDP cases, want one a rate (%d)", n, len(liveRates))
	}
	for _, bad := range []string{"2s", "-2s"} {
		if _, err := parseFlags([]string{"-xdp-batch-timeout", bad}, io.Discard); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("-xdp-batch-timeout %s: %v, want a usage error", bad, err)
		}
	}
}

// TestSearch: the zero-loss search brackets a receiver's limit to within
// the resolution, keeps the highest rate without loss, and flags a run
// whose receiver lost nothing even at the sender's top rate.
func TestSearch(t *testing.T) {
	receiver := func(limit float64, rates *[]int) func(int) (Result, error) {
		return func(rate int) (Result, error) {
			*rates = append(*rates, rate)
			r := Result{SendPPS: 1e6}
			offered := float64(rate)
			if rate == 0 {
				offered = 1e6
			} else {
				r.SendPPS = offered
			}
			if offered > limit {
				r.Lost = uint64(offered - limit)
			}
			return r, nil
		}
	}
	var rates []int
	var r Result
	if err := search(&r, receiver(437_000, &rates)); err != nil {
		t.Fatal(err)
	}
	if r.ZeroLossPPS > 437_000 || r.ZeroLossPPS < 437_000-searchResolution*1e6 || r.Flag != "" {
		t.Errorf("a receiver good to 437 kpps: zero loss at %v, flag %q, trials %v", r.ZeroLossPPS, r.Flag, rates)
	}
	if r.Trials != len(rates) || r.Trials > maxTrials || rates[0] != 0 || r.SendPPS != 1e6 {
		t.Errorf("trials %d %v, sender top %v", r.Trials, rates, r.SendPPS)
	}
	rates, r = nil, Result{}
	if err := search(&r, receiver(2e6, &rates)); err != nil {
		t.Fatal(err)
	}
	if r.ZeroLossPPS != 1e6 || r.Flag != "sender-limited" || len(rates) != 1 {
		t.Errorf("a receiver faster than the sender: %v, flag %q, trials %v", r.ZeroLossPPS, r.Flag, rates)
	}
}

// TestLiveCases: every zero-loss search and latency run has its
// single-queue baseline, and the captures are searched too.
func TestLiveCases(t *testing.T) {
	s := &suite{o: options{count: 1}}
	cs := s.liveCases(workerCounts())
	var rs []Result
	for _, c := range cs {
		rs = append(rs, c.result(0))
	}
	gs := groups(rs)
	searched := map[string]bool{}
	for _, g := range gs {
		r := g.first()
		switch r.Experiment {
		case expZeroLoss:
			searched[r.Impl+"/"+r.Source] = true
			fallthrough
		case expLiveLatency:
			if b := baseline(gs, g); b == nil || b.first().Impl != "single" {
				t.Errorf("%s %s/%s %s: no single-queue baseline", r.Experiment, r.Impl, r.Source, r.Handler)
			}
		}
	}
	for _, c := range s.captureCases(2, nil) {
		if !searched[c.Impl+"/"+c.Source] {
			t.Errorf("capture %s/%s is not searched", c.Impl, c.Source)
		}
	}
}
