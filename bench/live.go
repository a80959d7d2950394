package main

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/rpsgo/rps/steer"
)

// The live experiment has three parts, each an experiment of its own in
// the results:
//
//	live-zeroloss  RFC 2544's throughput: the highest offered rate at which
//	               a receiver loses no frame, found by binary search, for
//	               the single-queue baseline, the library and the kernel's
//	               fanout, with handlers none and spin1us
//	live           the capture comparison at fixed offered rates: loss and
//	               CPU a frame of tcpdump and the library's captures
//	live-latency   the latency from the kernel's receive time to the end of
//	               the handler, at fixed offered rates below saturation, for
//	               the single-queue baseline and the library alike
const (
	expZeroLoss    = "live-zeroloss"
	expCapture     = "live"
	expLiveLatency = "live-latency"
)

// Live trials: a zero-loss search's trial offers trialFrames(rate) frames
// (half a second's worth), its first trial as fast as the sender goes; it
// stops when the bracket is narrower than searchResolution of the sender's
// top rate, or after maxTrials.
const (
	searchResolution = 0.03
	maxTrials        = 8
	topFrames        = 1 << 19
)

func trialFrames(rate int) int { return max(rate/2, 10_000) }

// liveLatencyRates are the offered rates of the live latency runs: below
// what the single-queue baseline takes without loss with the spin1us
// handler on a veth pair.
var liveLatencyRates = []int{100_000, 250_000}

// liveCases are the live experiment's configurations: the zero-loss
// searches, the capture comparison and the latency runs.
func (s *suite) liveCases(ws []int) []Case {
	nCPU := ws[len(ws)-1]
	base := Case{Source: "afpacket", Size: 64, Flows: 1 << 24, Dispatch: steer.DispatchDeferred, Policy: steer.PolicyRSS}
	var cs []Case
	for _, h := range []string{handlerNone, handlerSpin} {
		c := base
		c.Experiment, c.Handler = expZeroLoss, h
		c.Impl, c.Workers = "single", 1
		cs = append(cs, c)
		for _, w := range ws {
			c.Impl, c.Workers = "rps", w
			cs = append(cs, c)
		}
		c.Workers = nCPU
		c.Impl, c.Source = "rps-fanout", "fanout-hash"
		cs = append(cs, c)
		c.Impl = "kernel-fanout"
		cs = append(cs, c)
		if h == handlerNone {
			// The captures of the comparison, searched too.
			for _, cc := range s.captureCases(nCPU, nil) {
				if cc.Rate == liveRates[0] && !slices.ContainsFunc(cs, func(x Case) bool {
					return x.Impl == cc.Impl && x.Source == cc.Source && x.Workers == cc.Workers && x.Handler == h
				}) {
					cc.Experiment, cc.Rate, cc.Frames = expZeroLoss, 0, 0
					cs = append(cs, cc)
				}
			}
		}
	}
	cs = append(cs, s.captureCases(nCPU, nil)...)
	c := base
	c.Experiment, c.Handler = expLiveLatency, handlerSpin
	return append(cs, latencyCases(c, liveLatencyRates, nCPU)...)
}

// runSearch finds c's zero-loss rate (see search), each trial a live run.
func runSearch(ctx context.Context, e *liveEnv, c Case, sp spinner, rep int) (Result, error) {
	r := c.result(rep)
	err := search(&r, func(rate int) (Result, error) {
		tc := c
		tc.Experiment, tc.Rate, tc.Frames = expCapture, rate, trialFrames(rate)
		if rate == 0 {
			tc.Frames = topFrames
		}
		return runLive(ctx, e, tc, sp, rep)
	})
	return r, err
}

// search finds a zero-loss rate with trial, which runs one trial at an
// offered rate (0: as fast as the sender goes): a first trial at full
// speed gives the sender's top rate on the wire; when nothing was lost
// there, that is the result, flagged sender-limited (the receiver was not
// the limit); otherwise a binary search between 0 and the top rate keeps
// the highest offered rate without loss, to searchResolution of the top or
// maxTrials. It sets r's ZeroLossPPS and Mpps to that rate, SendPPS to the
// sender's top, Lost to the most a failed trial lost, and Trials.
func search(r *Result, trial func(rate int) (Result, error)) error {
	r.Trials = 1
	top, err := trial(0)
	if err != nil {
		return err
	}
	r.SendPPS, r.SenderCPU, r.Capture = top.SendPPS, top.SenderCPU, top.Capture
	lo, hi := 0.0, top.SendPPS
	if top.Lost == 0 {
		lo, r.Flag = hi, "sender-limited"
	}
	var worst uint64
	for r.Trials < maxTrials && hi-lo > searchResolution*top.SendPPS {
		rate := int(math.Round((lo+hi)/2/1000)) * 1000
		r.Trials++
		t, err := trial(rate)
		if err != nil {
			return err
		}
		if t.Lost == 0 {
			lo = float64(rate)
		} else {
			hi = float64(rate)
			worst = max(worst, t.Lost)
		}
	}
	r.ZeroLossPPS, r.Mpps = lo, lo/1e6
	r.Lost = worst
	r.Note = fmt.Sprintf("sender top %.0f kpps (lost %d there), %d trials", top.SendPPS/1e3, top.Lost, r.Trials)
	return nil
}
