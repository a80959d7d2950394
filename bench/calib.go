package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/rpsgo/rps/steer"
)

// spinner is the fixed-work handler body: a loop of a fixed number of
// dependent multiply-adds, the stand-in for a handler that inspects each
// frame. Its iteration count is chosen once per machine (see calibration)
// so that results of different invocations compare: the work is the same,
// only its cost may drift, and the harness checks that it did not.
type spinner struct{ iters int }

var spinSink atomic.Uint64

func spinWork(n int) uint64 {
	x := uint64(1)
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

func (s spinner) spin() { spinSink.Add(spinWork(s.iters)) }

// spinCost measures what one call of s costs: trials rounds of calls
// lasting about 200 µs each, half a millisecond apart so that one busy
// stretch of the machine does not cover them all, and returns the cheapest
// round's and the median round's time per call in nanoseconds. The
// cheapest is the cost of the work itself (a round that another process
// interrupted is slower, never faster); the median shows how much the
// machine took away.
func spinCost(s spinner, trials int) (minNs, medNs float64) {
	calls := max(1, int(200e3/max(float64(s.iters)*1.5, 1)))
	per := make([]float64, trials)
	for t := range per {
		if t > 0 {
			time.Sleep(500 * time.Microsecond)
		}
		start := time.Now()
		for i := 0; i < calls; i++ {
			s.spin()
		}
		per[t] = float64(time.Since(start).Nanoseconds()) / float64(calls)
	}
	return slices.Min(per), median(per)
}

// classifyCost is what the library's classifier (classification and
// hash) costs a frame on fs's frames alone, no loop around it but the
// walk over the frames: the cheapest of 20 rounds over all of them, in
// nanoseconds. The single-queue baseline with a handler that does nothing
// cannot cost less a frame, since it does that work too.
func classifyCost(fs *frameSet) float64 {
	cls := newClassifier(false)
	var c steer.Classification
	best := 0.0
	for t := 0; t < 20; t++ {
		var sum uint32
		start := time.Now()
		for _, b := range fs.raw {
			cls.Classify(b, &c)
			sum += c.FlowID
		}
		ns := float64(time.Since(start).Nanoseconds()) / float64(len(fs.raw))
		spinSink.Add(uint64(sum))
		if t == 0 || ns < best {
			best = ns
		}
	}
	return best
}

// calibrateSpinner returns the iteration count whose cheapest call takes
// about d.
func calibrateSpinner(d time.Duration) spinner {
	probe := spinner{iters: 1000}
	for {
		minNs, _ := spinCost(probe, 30)
		if minNs >= 200 || probe.iters >= 1<<28 {
			perIter := minNs / float64(probe.iters)
			return spinner{iters: max(1, int(float64(d.Nanoseconds())/perIter+0.5))}
		}
		probe.iters *= 4
	}
}

// Calibration is the spin1us handler's iteration count for one machine, as
// saved between invocations.
type Calibration struct {
	CPU       string    `json:"cpu"` // the machine's CPU model: another model recalibrates
	Go        string    `json:"go"`
	Iters     int       `json:"iters"`
	NsPerCall float64   `json:"ns_per_call"` // the cheapest call when calibrated
	When      time.Time `json:"when"`
	File      string    `json:"-"`
	Source    string    `json:"-"` // how it was chosen: "flag", "file", "calibrated now"
}

// defaultCalibrationFile is where the calibration is kept: in the user's
// cache directory, so that every invocation on the machine uses it.
func defaultCalibrationFile() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "rps-bench", "spin1us.json")
}

// loadCalibration returns the spin1us handler's iteration count: iters when
// positive (a flag), else the one saved in file for this CPU model, else a
// new calibration, saved to file when save is set. A file for another CPU
// model is replaced; an unreadable file is an error.
func loadCalibration(file string, iters int, cpu string, save bool) (Calibration, error) {
	if iters > 0 {
		minNs, _ := spinCost(spinner{iters: iters}, 20)
		return Calibration{CPU: cpu, Go: goVersion(), Iters: iters, NsPerCall: minNs, When: time.Now().UTC(), Source: "flag"}, nil
	}
	if file != "" {
		b, err := os.ReadFile(file)
		switch {
		case err == nil:
			var c Calibration
			if err := json.Unmarshal(b, &c); err != nil {
				return c, fmt.Errorf("calibration %s: %w (delete it to calibrate again)", file, err)
			}
			if c.CPU == cpu && c.Iters > 0 {
				c.File, c.Source = file, "file"
				return c, nil
			}
		case !errors.Is(err, fs.ErrNotExist):
			return Calibration{}, fmt.Errorf("calibration: %w", err)
		}
	}
	sp := calibrateSpinner(time.Microsecond)
	minNs, _ := spinCost(sp, 30)
	c := Calibration{CPU: cpu, Go: goVersion(), Iters: sp.iters, NsPerCall: minNs, When: time.Now().UTC(), Source: "calibrated now"}
	if file != "" && save {
		b, _ := json.MarshalIndent(c, "", "  ")
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return c, fmt.Errorf("saving the calibration: %w", err)
		}
		if err := os.WriteFile(file, append(b, '\n'), 0o644); err != nil {
			return c, fmt.Errorf("saving the calibration: %w", err)
		}
		c.File = file
	}
	return c, nil
}

// spinDrift is the handler's cost checked at the start and at the end of
// an invocation.
type spinDrift struct {
	StartNs    float64 `json:"start_ns"`     // cheapest call at the start
	StartMedNs float64 `json:"start_med_ns"` // median round at the start
	EndNs      float64 `json:"end_ns"`
	EndMedNs   float64 `json:"end_med_ns"`
}

// drift is the change of the cheapest call's cost from start to end, as a
// fraction of the start's.
func (d spinDrift) drift() float64 {
	if d.StartNs == 0 || d.EndNs == 0 {
		return 0
	}
	return (d.EndNs - d.StartNs) / d.StartNs
}

// maxSpinDrift is the drift of the handler's cost above which the results
// carry a warning.
const maxSpinDrift = 0.05
