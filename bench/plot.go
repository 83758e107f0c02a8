package main

import (
	"fmt"
	"image/color"
	"os"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

var (
	colorPlanned  = color.RGBA{R: 30, G: 90, B: 220, A: 255}
	colorHandover = color.RGBA{R: 20, G: 160, B: 60, A: 255}
	colorElection = color.RGBA{R: 220, G: 30, B: 30, A: 255}
	colorDown     = color.NRGBA{R: 110, G: 110, B: 110, A: 45}
	colorLost     = color.NRGBA{R: 220, G: 30, B: 30, A: 90}
	colorOK       = color.RGBA{R: 40, G: 40, B: 40, A: 255}
)

// Latency axis (ms, log scale): failed writes are drawn at failedY, above every possible success (the
// client's timeout is 500 ms).
const (
	yMin    = 0.2
	yMax    = 2000.0
	failedY = 1000.0
)

// plotScenario draws, for each strategy, one rollout of the scenario (the run whose ops were kept) as write
// latency over time, with member outages shaded and leader changes as vertical lines, all panels on one
// time axis so they compare at a glance.
func plotScenario(path string, sc ScenarioMeta, meta *Meta, rs []Rollout) error {
	var panels []*plot.Plot
	span := 0.0
	var picked []Rollout
	for _, st := range strategyOrder(meta) {
		for _, r := range rs {
			if r.Scenario == sc.Name && r.Strategy == st && len(r.Clusters) > 0 && len(r.Clusters[0].Ops) > 0 {
				picked = append(picked, r)
				span = max(span, r.LoadTo.Sub(r.Start).Seconds())
				break
			}
		}
	}
	if len(picked) == 0 {
		return nil
	}
	for _, r := range picked {
		p, err := panel(r, span)
		if err != nil {
			return err
		}
		panels = append(panels, p)
	}
	const width = 22 * vg.Centimeter
	height := vg.Length(len(panels)) * 5.5 * vg.Centimeter
	img := vgimg.New(width, height)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Millimeter, PadBottom: vg.Millimeter,
		PadLeft: vg.Millimeter, PadRight: 2 * vg.Millimeter, PadY: 2 * vg.Millimeter}
	grid := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		grid[i] = []*plot.Plot{p}
	}
	canvases := plot.Align(grid, tiles, dc)
	for i, p := range panels {
		p.Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func panel(r Rollout, span float64) (*plot.Plot, error) {
	cr := r.Clusters[0]
	p := plot.New()
	planned, handover, election := cr.Raft.Count(ChangePlanned), cr.Raft.Count(ChangeHandover), cr.Raft.Count(ChangeElection)
	p.Title.Text = fmt.Sprintf("%s / %s, leader first on %d: roll %.1f s, worst write gap %d ms, %d failed writes,\nleader changes: %d planned, %d hand-over, %d election; quorum lost %.1f s",
		r.Scenario, r.Strategy, r.LeaderStart[0], r.Wall.Seconds(), cr.Client.WorstGap.Milliseconds(), cr.Client.FailedWrites,
		planned, handover, election, cr.Avail.QuorumLostFor().Seconds())
	p.Title.TextStyle.Font.Size = vg.Points(9)
	p.X.Label.Text = "seconds since the roll began"
	p.Y.Label.Text = "put latency (ms)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.X.Min, p.X.Max = -1, span
	p.X.Tick.Marker = secondTicks{}
	p.Y.Min, p.Y.Max = yMin, yMax
	at := func(t time.Time) float64 { return t.Sub(r.Start).Seconds() }

	// One translucent band per member out, so two members out at once show darker; quorum loss also gets a
	// red band along the bottom.
	band := func(s Interval, lo, hi float64, c color.Color) error {
		poly, err := plotter.NewPolygon(plotter.XYs{{X: at(s.From), Y: lo}, {X: at(s.To), Y: lo},
			{X: at(s.To), Y: hi}, {X: at(s.From), Y: hi}})
		if err != nil {
			return err
		}
		poly.Color = c
		poly.LineStyle.Width = vg.Points(0.4)
		poly.LineStyle.Color = color.NRGBA{R: 90, G: 90, B: 90, A: 140}
		p.Add(poly)
		return nil
	}
	for _, spans := range cr.Avail.Down {
		for _, s := range spans {
			if err := band(s, yMin, yMax, colorDown); err != nil {
				return nil, err
			}
		}
	}
	for _, s := range cr.Avail.QuorumLost {
		if err := band(s, yMin, yMin*2.5, colorLost); err != nil {
			return nil, err
		}
	}
	for _, c := range cr.Raft.Changes {
		col := colorPlanned
		switch c.Kind {
		case ChangeHandover:
			col = colorHandover
		case ChangeElection:
			col = colorElection
		}
		l, err := plotter.NewLine(plotter.XYs{{X: at(c.Time), Y: yMin}, {X: at(c.Time), Y: yMax}})
		if err != nil {
			return nil, err
		}
		l.Color = col
		l.Width = vg.Points(1.5)
		p.Add(l)
	}
	var ok, failed plotter.XYs
	for _, op := range cr.Ops {
		if op.Kind != harness.OpPut {
			continue
		}
		if op.OK {
			ok = append(ok, plotter.XY{X: at(op.Start), Y: max(ms(op.Latency), yMin)})
		} else {
			failed = append(failed, plotter.XY{X: at(op.Start), Y: failedY})
		}
	}
	if len(ok) > 0 {
		s, err := plotter.NewScatter(ok)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle.Radius = vg.Points(1)
		s.GlyphStyle.Color = colorOK
		p.Add(s)
	}
	if len(failed) > 0 {
		s, err := plotter.NewScatter(failed)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle.Radius = vg.Points(2)
		s.GlyphStyle.Color = colorElection
		s.GlyphStyle.Shape = draw.CrossGlyph{}
		p.Add(s)
	}
	return p, nil
}

// secondTicks labels the time axis every second (every 2 or 5 s on longer spans), so outages and leader
// changes can be read off against it.
type secondTicks struct{}

func (secondTicks) Ticks(lo, hi float64) []plot.Tick {
	step := 1.0
	switch {
	case hi-lo > 40:
		step = 5
	case hi-lo > 16:
		step = 2
	}
	var ts []plot.Tick
	for x := float64(int(lo/step)) * step; x <= hi; x += step {
		ts = append(ts, plot.Tick{Value: x, Label: fmt.Sprintf("%g", x)})
	}
	return ts
}
