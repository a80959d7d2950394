package main

import (
	"fmt"
	"image/color"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // blue
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // red
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // green
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // orange
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // purple
	color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}, // grey
}

const plotW, plotH = 5 * vg.Inch, 3.4 * vg.Inch

// writePlots draws the PNG plots the results allow and returns their names.
func writePlots(dir string, rep *Report) ([]string, error) {
	meds := medians(rep.Results)
	var files []string
	save := func(p *plot.Plot, name string) error {
		if err := p.Save(plotW, plotH, filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("drawing %s: %w", name, err)
		}
		files = append(files, name)
		return nil
	}
	for _, h := range []string{handlerNone, handlerSpin, handlerStateful} {
		p, ok, err := throughputPlot(meds, h)
		if err != nil {
			return files, err
		}
		if ok {
			if err := save(p, "throughput-"+h+".png"); err != nil {
				return files, err
			}
		}
	}
	type maker func([]Result) (*plot.Plot, bool, error)
	for _, m := range []struct {
		name string
		f    maker
	}{{"speedup.png", speedupPlot}, {"balance.png", balancePlot}, {"latency.png", latencyPlot}, {"rr.png", rrPlot}} {
		p, ok, err := m.f(meds)
		if err != nil {
			return files, err
		}
		if ok {
			if err := save(p, m.name); err != nil {
				return files, err
			}
		}
	}
	return files, nil
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

func addLine(p *plot.Plot, name string, xys plotter.XYs, c color.Color, dashed, points bool) error {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return fmt.Errorf("plot line %s: %w", name, err)
	}
	l.Color = c
	l.Width = vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	p.Add(l)
	if points {
		s, err := plotter.NewScatter(xys)
		if err != nil {
			return fmt.Errorf("plot points %s: %w", name, err)
		}
		s.Color = c
		s.Shape = draw.CircleGlyph{}
		p.Add(s)
		p.Legend.Add(name, l, s)
		return nil
	}
	p.Legend.Add(name, l)
	return nil
}

// series returns the points (workers, rate) of the median results that
// match.
func series(meds []Result, exp, impl, handler string, pinned bool) plotter.XYs {
	var xys plotter.XYs
	for _, r := range meds {
		if r.Experiment == exp && r.Impl == impl && r.Handler == handler && r.Pinned == pinned {
			xys = append(xys, plotter.XY{X: float64(r.Workers), Y: r.Mpps})
		}
	}
	slices.SortFunc(xys, func(a, b plotter.XY) int { return int(a.X - b.X) })
	return xys
}

func workerTicks(p *plot.Plot, maxW float64) {
	var ticks []plot.Tick
	for w := 1.0; w <= maxW; w++ {
		ticks = append(ticks, plot.Tick{Value: w, Label: fmt.Sprint(w)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = 0.8, maxW+0.2
}

// throughputPlot is Mpps against workers for one handler: the library
// (unpinned and pinned), the idiomatic pipeline, the single-queue baseline
// and the linear ideal from it.
func throughputPlot(meds []Result, h string) (*plot.Plot, bool, error) {
	rps := series(meds, "workers", "rps", h, false)
	single := series(meds, "workers", "single", h, false)
	if len(rps) == 0 || len(single) == 0 {
		return nil, false, nil
	}
	maxW := rps[len(rps)-1].X
	p := newPlot("throughput, handler "+h+" (64 B, 1024 flows)", "workers", "Mpps")
	b := single[0].Y
	if err := addLine(p, "single queue", plotter.XYs{{X: 1, Y: b}, {X: maxW, Y: b}}, palette[5], false, false); err != nil {
		return nil, false, err
	}
	if err := addLine(p, "ideal (linear)", plotter.XYs{{X: 1, Y: b}, {X: maxW, Y: b * maxW}}, palette[5], true, false); err != nil {
		return nil, false, err
	}
	if err := addLine(p, "rps", rps, palette[0], false, true); err != nil {
		return nil, false, err
	}
	if pin := series(meds, "workers", "rps", h, true); len(pin) > 0 {
		if err := addLine(p, "rps pinned", pin, palette[2], false, true); err != nil {
			return nil, false, err
		}
	}
	if idio := series(meds, "workers", "idiomatic", h, false); len(idio) > 0 {
		if err := addLine(p, "idiomatic Go", idio, palette[1], false, true); err != nil {
			return nil, false, err
		}
	}
	workerTicks(p, maxW)
	p.Y.Min = 0
	return p, true, nil
}

// speedupPlot is the library's throughput over the single-queue baseline
// against workers, one line per handler, with the ideal.
func speedupPlot(meds []Result) (*plot.Plot, bool, error) {
	p := newPlot("speed-up over the single-queue baseline", "workers", "x single queue")
	any := false
	maxW := 1.0
	for i, h := range []string{handlerNone, handlerSpin, handlerStateful} {
		rps := series(meds, "workers", "rps", h, false)
		single := series(meds, "workers", "single", h, false)
		if len(rps) == 0 || len(single) == 0 || single[0].Y == 0 {
			continue
		}
		for j := range rps {
			rps[j].Y /= single[0].Y
		}
		maxW = max(maxW, rps[len(rps)-1].X)
		if err := addLine(p, h, rps, palette[i], false, true); err != nil {
			return nil, false, err
		}
		any = true
	}
	if !any {
		return nil, false, nil
	}
	if err := addLine(p, "ideal", plotter.XYs{{X: 1, Y: 1}, {X: maxW, Y: maxW}}, palette[5], true, false); err != nil {
		return nil, false, err
	}
	workerTicks(p, maxW)
	p.Y.Min = 0
	return p, true, nil
}

// balancePlot is the share of frames each worker handled under Zipf(1.0)
// flow sizes, without and with the rebalancer.
func balancePlot(meds []Result) (*plot.Plot, bool, error) {
	var off, on *Result
	for i := range meds {
		r := &meds[i]
		if r.Experiment == "skew" && r.Impl == "rps" {
			if r.Rebalance {
				on = r
			} else {
				off = r
			}
		}
	}
	if off == nil || on == nil || len(off.PerWorker) == 0 {
		return nil, false, nil
	}
	p := newPlot(fmt.Sprintf("per-worker load, Zipf %.1f over %d flows", off.Zipf, off.Flows), "worker", "share of frames (%)")
	w := vg.Points(14)
	for i, r := range []*Result{off, on} {
		var sum uint64
		for _, v := range r.PerWorker {
			sum += v
		}
		vals := make(plotter.Values, len(r.PerWorker))
		for j, v := range r.PerWorker {
			vals[j] = 100 * float64(v) / float64(max(sum, 1))
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, false, fmt.Errorf("bar chart: %w", err)
		}
		b.Color = palette[i]
		b.LineStyle.Width = 0
		b.Offset = vg.Length(2*i-1) * w / 2
		p.Add(b)
		name := fmt.Sprintf("static table (max/mean %.2f)", r.Imbalance)
		if r.Rebalance {
			name = fmt.Sprintf("rebalancer (max/mean %.2f)", r.Imbalance)
		}
		p.Legend.Add(name, b)
	}
	names := make([]string, len(off.PerWorker))
	for i := range names {
		names[i] = fmt.Sprint(i)
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(names))-0.4
	p.Y.Min, p.Y.Max = 0, 100
	return p, true, nil
}

// latencyPlot is the distribution (CDF) of the dispatch-to-handler latency
// of the library at the most workers, per handler.
func latencyPlot(meds []Result) (*plot.Plot, bool, error) {
	p := newPlot("dispatch-to-handler latency (sampled 1/1024)", "µs (log)", "fraction of frames below")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	any := false
	i := 0
	for _, h := range []string{handlerNone, handlerSpin, handlerStateful} {
		var best *Result
		for j := range meds {
			r := &meds[j]
			if r.Experiment == "workers" && r.Impl == "rps" && !r.Pinned && r.Handler == h && r.lat != nil {
				if best == nil || r.Workers > best.Workers {
					best = r
				}
			}
		}
		if best == nil {
			continue
		}
		var xys plotter.XYs
		var cum uint64
		n := best.lat.Count()
		best.lat.Buckets(func(lo, width, c uint64) {
			cum += c
			x := float64(lo+width) / 1e3
			xys = append(xys, plotter.XY{X: max(x, 0.01), Y: float64(cum) / float64(n)})
		})
		if err := addLine(p, fmt.Sprintf("%s, %d workers", h, best.Workers), xys, palette[i], false, false); err != nil {
			return nil, false, err
		}
		i++
		any = true
	}
	if !any {
		return nil, false, nil
	}
	p.Y.Min, p.Y.Max = 0, 1
	return p, true, nil
}

// rrPlot is the request/response transactions per second by workers.
func rrPlot(meds []Result) (*plot.Plot, bool, error) {
	var vals plotter.Values
	var names []string
	for _, r := range meds {
		if r.Experiment == "rr" {
			vals = append(vals, r.TPS)
			names = append(names, fmt.Sprintf("%d worker(s)", r.Workers))
		}
	}
	if len(vals) == 0 {
		return nil, false, nil
	}
	p := newPlot("1-byte TCP request/response through the forwarder", "", "transactions/s")
	b, err := plotter.NewBarChart(vals, vg.Points(30))
	if err != nil {
		return nil, false, fmt.Errorf("bar chart: %w", err)
	}
	b.Color = palette[0]
	p.Add(b)
	p.NominalX(names...)
	p.Y.Min = 0
	return p, true, nil
}
