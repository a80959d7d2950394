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
// already has (one AF_PACKET socket at trafgen's full rate) is not run
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
	printCapture(&b, groups(rs))
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
