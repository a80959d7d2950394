package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // blue
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // red
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // green
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // orange
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // purple
	color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}, // grey
}

// The plots are 5 x 3.4 inches at 192 dots an inch (960 x 653 pixels),
// with a footer that says where and how they were made.
const (
	plotW, plotH = 5 * vg.Inch, 3.4 * vg.Inch
	plotDPI      = 192
	footerH      = 0.3 * vg.Inch
)

// minPlotRun is the shortest measured run a plot is drawn from, and
// minBalancePeriods the fewest rebalancer periods a run of the skew
// experiment must last for the balance plot: shorter runs cannot show what
// the plots are about.
const (
	minPlotRun        = 100 * time.Millisecond
	minBalancePeriods = 10
)

// writePlots draws the PNG plots the results allow and returns their
// names; a plot whose runs are too short is left out with a note on
// rep.Notes.
func writePlots(dir string, rep *Report) ([]string, error) {
	gs := groups(rep.Results)
	footer := footerLines(rep)
	var files []string
	save := func(p *plot.Plot, name string) error {
		if err := savePlot(p, filepath.Join(dir, name), footer); err != nil {
			return fmt.Errorf("drawing %s: %w", name, err)
		}
		files = append(files, name)
		return nil
	}
	// long keeps the groups whose every run lasted at least d.
	long := func(d time.Duration, what string) []*group {
		var out, short []*group
		for _, g := range gs {
			if g.sum(func(r *Result) float64 { return r.Seconds }).Min*float64(time.Second) >= float64(d) {
				out = append(out, g)
			} else {
				short = append(short, g)
			}
		}
		if len(short) > 0 && len(out) == 0 && len(gs) > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("plots: %s not drawn: runs shorter than %v", what, d))
		}
		return out
	}
	tgs := long(minPlotRun, "throughput, speed-up and latency")
	for _, h := range []string{handlerNone, handlerSpin, handlerStateful} {
		p, ok, err := throughputPlot(tgs, h)
		if err != nil {
			return files, err
		}
		if ok {
			if err := save(p, "throughput-"+h+".png"); err != nil {
				return files, err
			}
		}
	}
	for _, m := range []struct {
		name string
		gs   []*group
		f    func([]*group) (*plot.Plot, bool, error)
	}{
		{"speedup.png", tgs, speedupPlot},
		{"balance.png", long(minBalancePeriods*rebalancePeriod, "per-worker balance"), balancePlot},
		{"latency.png", tgs, func(gs []*group) (*plot.Plot, bool, error) { return latencyPlot(gs, "latency") }},
		{"rr.png", gs, rrPlot},
		{"live-zeroloss.png", gs, zeroLossPlot},
		{"live-capture.png", gs, capturePlot},
		{"live-latency.png", gs, func(gs []*group) (*plot.Plot, bool, error) { return latencyPlot(gs, expLiveLatency) }},
	} {
		p, ok, err := m.f(m.gs)
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

// footerLines says where, when and how the plotted figures were made.
func footerLines(rep *Report) []string {
	m := rep.Machine
	l1 := fmt.Sprintf("%s, %d CPUs, %s, %s, commit %s, %s", m.CPU, m.Cores, m.Kernel, m.Go, orNone(m.Commit),
		rep.Started.Format(time.DateOnly))
	l2 := fmt.Sprintf("%s: %d runs each, median and min-max; load %.1f before, %.1f after", rep.Command, rep.Count,
		rep.Before.Load1, rep.After.Load1)
	if rep.Quick {
		l2 = "SMOKE RUN (-quick), " + l2
	}
	return []string{l1, l2}
}

// savePlot draws p above the footer into a PNG file at path.
func savePlot(p *plot.Plot, path string, footer []string) error {
	img := vgimg.NewWith(vgimg.UseWH(plotW, plotH), vgimg.UseDPI(plotDPI))
	dc := draw.New(img)
	p.Draw(draw.Crop(dc, 0, 0, footerH, 0))
	sty := draw.TextStyle{Color: palette[5], Font: font.From(plot.DefaultFont, vg.Points(6)),
		Handler: plot.DefaultTextHandler}
	for i, l := range footer {
		y := dc.Min.Y + footerH - vg.Points(8)*vg.Length(i+1)
		dc.FillText(sty, vg.Point{X: dc.Min.X + vg.Points(4), Y: y}, l)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.X.Label.Text = x
	p.Y.Label.Text = y
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(9)
		a.Tick.Label.Font.Size = vg.Points(8)
	}
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

// headroom raises p's Y axis above its data, for the legend in the top
// left corner: by half the range on a linear axis, by a factor of 8 on a
// log one. Call it after the data are added.
func headroom(p *plot.Plot) {
	if _, log := p.Y.Scale.(plot.LogScale); log {
		p.Y.Max *= 8
		return
	}
	p.Y.Max += (p.Y.Max - p.Y.Min) / 2
}

// logY puts p's Y axis on a log scale with ticks at 1, 2 and 5 times the
// powers of ten.
func logY(p *plot.Plot) {
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		var ticks []plot.Tick
		for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
			for _, m := range []float64{1, 2, 5} {
				v := m * math.Pow(10, e)
				if v >= lo && v <= hi {
					ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
				}
			}
		}
		return ticks
	})
}

// points are medians with their min-max error bars.
type points struct {
	plotter.XYs
	plotter.YErrors
}

func (ps *points) add(x float64, s summary) {
	ps.XYs = append(ps.XYs, plotter.XY{X: x, Y: s.Med})
	ps.YErrors = append(ps.YErrors, struct{ Low, High float64 }{s.Med - s.Min, s.Max - s.Med})
}

func (ps *points) sort() {
	idx := make([]int, len(ps.XYs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		switch {
		case ps.XYs[a].X < ps.XYs[b].X:
			return -1
		case ps.XYs[a].X > ps.XYs[b].X:
			return 1
		}
		return 0
	})
	xys, errs := make(plotter.XYs, len(idx)), make(plotter.YErrors, len(idx))
	for i, j := range idx {
		xys[i], errs[i] = ps.XYs[j], ps.YErrors[j]
	}
	ps.XYs, ps.YErrors = xys, errs
}

// addPoints draws ps as a line through the medians, with error bars.
func addPoints(p *plot.Plot, name string, ps *points, c color.Color, dashed bool) error {
	if len(ps.XYs) == 0 {
		return nil
	}
	ps.sort()
	l, err := plotter.NewLine(ps.XYs)
	if err != nil {
		return fmt.Errorf("plot line %s: %w", name, err)
	}
	l.Color = c
	l.Width = vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	p.Add(l)
	return addDots(p, name, ps, c, l)
}

// addDots draws ps as points at the medians with error bars, under name in
// the legend with the thumbnails thumbs besides the points'.
func addDots(p *plot.Plot, name string, ps *points, c color.Color, thumbs ...plot.Thumbnailer) error {
	ps.sort()
	s, err := plotter.NewScatter(ps.XYs)
	if err != nil {
		return fmt.Errorf("plot points %s: %w", name, err)
	}
	s.Color = c
	s.Shape = draw.CircleGlyph{}
	eb, err := plotter.NewYErrorBars(ps)
	if err != nil {
		return fmt.Errorf("plot error bars %s: %w", name, err)
	}
	eb.Color = c
	eb.CapWidth = vg.Points(5)
	p.Add(s, eb)
	p.Legend.Add(name, append(thumbs, s)...)
	return nil
}

func addLine(p *plot.Plot, name string, xys plotter.XYs, c color.Color) error {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return fmt.Errorf("plot line %s: %w", name, err)
	}
	l.Color = c
	l.Width = vg.Points(1)
	l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// find returns the groups of experiment exp that match.
func find(gs []*group, exp, impl, handler string, pinned bool) []*group {
	var out []*group
	for _, g := range gs {
		r := g.first()
		if r.Experiment == exp && r.Impl == impl && r.Handler == handler && r.Pinned == pinned {
			out = append(out, g)
		}
	}
	return out
}

func workerTicks(p *plot.Plot, maxW float64) {
	var ticks []plot.Tick
	for w := 1.0; w <= maxW; w++ {
		ticks = append(ticks, plot.Tick{Value: w, Label: fmt.Sprint(w)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = 0.8, maxW+0.2
}

// throughputPlot is Mpps against workers for one handler, on a log scale
// (the baselines are up to twenty times apart): the single-queue baseline,
// the measured ceiling of w independent single queues, the library
// unpinned and pinned, and the idiomatic pipeline.
func throughputPlot(gs []*group, h string) (*plot.Plot, bool, error) {
	rps := find(gs, "workers", "rps", h, false)
	single := find(gs, "workers", "single", h, false)
	if len(rps) == 0 || len(single) == 0 {
		return nil, false, nil
	}
	p := newPlot("throughput, handler "+h+" (64 B, 1024 flows)", "workers", "Mpps (log)")
	logY(p)
	maxW := 1.0
	series := []struct {
		name   string
		impl   string
		pinned bool
		c      color.Color
		dashed bool
	}{
		{"single queue (w=1) and ceiling", "ceiling", false, palette[5], true},
		{"rps", "rps", false, palette[0], false},
		{"rps pinned", "rps", true, palette[2], false},
		{"idiomatic Go", "idiomatic", false, palette[1], false},
	}
	for _, s := range series {
		var ps points
		if s.impl == "ceiling" {
			ps.add(1, single[0].sum(mpps))
		}
		for _, g := range find(gs, "workers", s.impl, h, s.pinned) {
			ps.add(float64(g.first().Workers), g.sum(mpps))
			maxW = max(maxW, float64(g.first().Workers))
		}
		if err := addPoints(p, s.name, &ps, s.c, s.dashed); err != nil {
			return nil, false, err
		}
	}
	workerTicks(p, maxW)
	headroom(p)
	return p, true, nil
}

// speedupPlot is the library's throughput over the single-queue baseline's
// (ratios paired by repetition) against workers, one line per handler,
// with the measured ceiling of each.
func speedupPlot(gs []*group) (*plot.Plot, bool, error) {
	p := newPlot("speed-up over the single-queue baseline", "workers", "x single queue")
	drawn := false
	maxW := 1.0
	for i, h := range []string{handlerNone, handlerSpin, handlerStateful} {
		single := find(gs, "workers", "single", h, false)
		if len(single) == 0 {
			continue
		}
		var rps, ceil points
		dx := 0.03 * float64(i-1) // keep the handlers' error bars apart
		for _, g := range find(gs, "workers", "rps", h, false) {
			rps.add(float64(g.first().Workers)+dx, g.ratio(single[0], mpps))
			maxW = max(maxW, float64(g.first().Workers))
		}
		if len(rps.XYs) == 0 {
			continue
		}
		ceil.add(1+dx, summary{N: 1, Min: 1, Med: 1, Max: 1})
		for _, g := range find(gs, "workers", "ceiling", h, false) {
			ceil.add(float64(g.first().Workers)+dx, g.ratio(single[0], mpps))
		}
		if err := addPoints(p, "rps, "+h, &rps, palette[i], false); err != nil {
			return nil, false, err
		}
		if len(ceil.XYs) > 1 {
			if err := addPoints(p, "ceiling, "+h, &ceil, palette[i], true); err != nil {
				return nil, false, err
			}
		}
		drawn = true
	}
	if !drawn {
		return nil, false, nil
	}
	if err := addLine(p, "linear", plotter.XYs{{X: 1, Y: 1}, {X: maxW, Y: maxW}}, palette[5]); err != nil {
		return nil, false, err
	}
	workerTicks(p, maxW)
	p.Y.Min = 0
	headroom(p)
	return p, true, nil
}

// balancePlot is the share of frames each worker handled in the measured
// time under Zipf(1.0) flow sizes, without and with the rebalancer.
func balancePlot(gs []*group) (*plot.Plot, bool, error) {
	var off, on *group
	for _, g := range gs {
		if r := g.first(); r.Experiment == "skew" && r.Impl == "rps" {
			if r.Rebalance {
				on = g
			} else {
				off = g
			}
		}
	}
	if off == nil || on == nil || len(off.first().PerWorker) == 0 {
		return nil, false, nil
	}
	r0 := off.first()
	p := newPlot(fmt.Sprintf("per-worker load, Zipf %.1f over %d flows", r0.Zipf, r0.Flows), "worker", "share of frames (%)")
	nw := len(r0.PerWorker)
	for i, g := range []*group{off, on} {
		var ps points
		for wk := 0; wk < nw; wk++ {
			s := g.sum(func(r *Result) float64 {
				var sum uint64
				for _, v := range r.PerWorker {
					sum += v
				}
				if wk >= len(r.PerWorker) || sum == 0 {
					return 0
				}
				return 100 * float64(r.PerWorker[wk]) / float64(sum)
			})
			ps.add(float64(wk)+0.1*float64(2*i-1), s)
		}
		name := fmt.Sprintf("static table (busiest/mean %s)", g.sum(imbal).rng("%.2f"))
		if i == 1 {
			name = fmt.Sprintf("rebalancer every %v (busiest/mean %s)", rebalancePeriod, g.sum(imbal).rng("%.2f"))
		}
		if err := addDots(p, name, &ps, palette[i]); err != nil {
			return nil, false, err
		}
	}
	var ticks []plot.Tick
	for wk := 0; wk < nw; wk++ {
		ticks = append(ticks, plot.Tick{Value: float64(wk), Label: fmt.Sprint(wk)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = -0.5, float64(nw)-0.5
	p.Y.Min, p.Y.Max = 0, 100
	return p, true, nil
}

// latencyPlot is a latency experiment's (e: latency or live-latency) p50
// (dashed) and p99 against the offered rate, per implementation.
func latencyPlot(gs []*group, e string) (*plot.Plot, bool, error) {
	type line struct {
		name string
		p50  points
		p99  points
	}
	var lines []*line
	byName := map[string]*line{}
	for _, g := range gs {
		r := g.first()
		if r.Experiment != e {
			continue
		}
		name := "single queue"
		if r.Impl != "single" {
			name = fmt.Sprintf("%s, %d worker(s)", r.Impl, r.Workers)
		}
		l := byName[name]
		if l == nil {
			l = &line{name: name}
			byName[name] = l
			lines = append(lines, l)
		}
		x := float64(r.Rate) / 1e3
		l.p50.add(x, g.sum(func(r *Result) float64 { return r.LatP50 }))
		l.p99.add(x, g.sum(func(r *Result) float64 { return r.LatP99 }))
	}
	if len(lines) == 0 {
		return nil, false, nil
	}
	title := "in memory: latency at fixed offered rates, spin1us (p99; p50 dashed)"
	if e == expLiveLatency {
		title = "live: kernel receive to handler end, spin1us (p99; p50 dashed)"
	}
	p := newPlot(title, "offered kpps", "µs (log)")
	logY(p)
	var ticks []plot.Tick
	for _, g := range gs {
		if r := g.first(); r.Experiment == e && !slices.ContainsFunc(ticks, func(t plot.Tick) bool { return t.Value == float64(r.Rate)/1e3 }) {
			ticks = append(ticks, plot.Tick{Value: float64(r.Rate) / 1e3, Label: fmt.Sprint(r.Rate / 1000)})
		}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	for i, l := range lines {
		if err := addPoints(p, l.name+" p99", &l.p99, palette[i%len(palette)], false); err != nil {
			return nil, false, err
		}
		if err := addPoints(p, l.name+" p50", &l.p50, palette[i%len(palette)], true); err != nil {
			return nil, false, err
		}
	}
	headroom(p)
	return p, true, nil
}

// rrPlot is the request/response transactions per second by workers.
func rrPlot(gs []*group) (*plot.Plot, bool, error) {
	var ps points
	var names []string
	for _, g := range gs {
		if r := g.first(); r.Experiment == "rr" {
			ps.add(float64(len(names)), g.sum(tps))
			names = append(names, fmt.Sprintf("%d worker(s)", r.Workers))
		}
	}
	if len(names) == 0 {
		return nil, false, nil
	}
	p := newPlot("1-byte TCP request/response through the forwarder", "", "transactions/s")
	vals := make(plotter.Values, len(ps.XYs))
	for i, xy := range ps.XYs {
		vals[i] = xy.Y
	}
	b, err := plotter.NewBarChart(vals, vg.Points(30))
	if err != nil {
		return nil, false, fmt.Errorf("bar chart: %w", err)
	}
	b.Color = palette[0]
	eb, err := plotter.NewYErrorBars(&ps)
	if err != nil {
		return nil, false, fmt.Errorf("error bars: %w", err)
	}
	eb.CapWidth = vg.Points(8)
	p.Add(b, eb)
	p.NominalX(names...)
	p.Y.Min = 0
	p.Legend.Add(strings.Join([]string{"median, bars min-max"}, ""), b)
	return p, true, nil
}

// liveLabel names a live configuration briefly, for an axis.
func liveLabel(r *Result) string {
	switch {
	case r.Impl == "single" || r.Impl == "tcpdump":
		return r.Impl
	case r.Impl == "rps" && r.Source == "afpacket":
		return fmt.Sprintf("rps %dw", r.Workers)
	case r.Impl == "kernel-fanout":
		return "kernel fanout"
	}
	return "rps " + r.Source
}

// zeroLossPlot is the zero-loss rate of each live configuration, per
// handler, with the sender's top rate for scale; a configuration flagged
// sender-limited in any run is drawn hollow.
func zeroLossPlot(gs []*group) (*plot.Plot, bool, error) {
	var labels []string
	for _, g := range gs {
		if r := g.first(); r.Experiment == expZeroLoss && !slices.Contains(labels, liveLabel(r)) {
			labels = append(labels, liveLabel(r))
		}
	}
	if len(labels) == 0 {
		return nil, false, nil
	}
	p := newPlot("live: zero-loss throughput on a veth pair (RFC 2544)", "", "kpps")
	for i, h := range []string{handlerNone, handlerSpin} {
		var ps, top points
		for _, g := range gs {
			r := g.first()
			if r.Experiment != expZeroLoss || r.Handler != h {
				continue
			}
			x := float64(slices.Index(labels, liveLabel(r))) + 0.12*float64(2*i-1)
			ps.add(x, g.sum(func(r *Result) float64 { return r.ZeroLossPPS / 1e3 }))
			top.add(x, g.sum(func(r *Result) float64 { return r.SendPPS / 1e3 }))
		}
		if len(ps.XYs) == 0 {
			continue
		}
		ps.sort()
		s, err := plotter.NewScatter(ps.XYs)
		if err != nil {
			return nil, false, fmt.Errorf("zero-loss points: %w", err)
		}
		s.Color, s.Shape, s.Radius = palette[i], draw.CircleGlyph{}, vg.Points(3)
		eb, err := plotter.NewYErrorBars(&ps)
		if err != nil {
			return nil, false, fmt.Errorf("zero-loss error bars: %w", err)
		}
		eb.Color, eb.CapWidth = palette[i], vg.Points(5)
		top.sort()
		ts, err := plotter.NewScatter(top.XYs)
		if err != nil {
			return nil, false, fmt.Errorf("sender points: %w", err)
		}
		ts.Color, ts.Shape = palette[i], draw.PlusGlyph{}
		p.Add(s, eb, ts)
		p.Legend.Add("zero loss, "+h, s)
		p.Legend.Add("sender top, "+h, ts)
	}
	p.NominalX(labels...)
	p.X.Min, p.X.Max = -0.5, float64(len(labels))-0.5
	p.X.Tick.Label.Rotation = math.Pi / 8
	p.X.Tick.Label.XAlign = draw.XRight
	p.Y.Min = 0
	headroom(p)
	return p, true, nil
}

// capturePlot is the reader's CPU time a frame against the offered rate,
// per capture of the comparison.
func capturePlot(gs []*group) (*plot.Plot, bool, error) {
	var names []string
	lines := map[string]*points{}
	for _, g := range gs {
		r := g.first()
		if r.Experiment != expCapture || r.Rate == 0 {
			continue
		}
		name := liveLabel(r)
		if lines[name] == nil {
			lines[name] = &points{}
			names = append(names, name)
		}
		lines[name].add(float64(r.Rate)/1e3, g.sum(func(r *Result) float64 { return r.ReaderNs }))
	}
	if len(names) == 0 {
		return nil, false, nil
	}
	p := newPlot("live: the reader's CPU a frame by offered rate", "offered kpps", "reader ns a frame")
	for i, n := range names {
		if err := addPoints(p, n, lines[n], palette[i%len(palette)], false); err != nil {
			return nil, false, err
		}
	}
	p.Y.Min = 0
	headroom(p)
	return p, true, nil
}
