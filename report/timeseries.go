package report

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/lockbench/lockbench/verdict"
)

// timeseriesName is the base name of a case's time-series plot.
func timeseriesName(caseName string) string { return "timeseries-" + caseName }

// shade draws fault windows as translucent bands behind a plot.
type shade struct {
	windows [][2]float64 // seconds since the case start
	fill    color.Color
}

func (s shade) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	for _, w := range s.windows {
		x0, x1 := trX(w[0]), trX(w[1])
		if x1 <= x0 {
			x1 = x0 + 1
		}
		c.FillPolygon(s.fill, []vg.Point{{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}})
	}
}

// WriteTimeSeries writes, for one case, acquisitions per second and the
// slowest acquisition over time, with its fault windows shaded: what a
// partition or a pause did to the lock, second by second. Both panels
// cover the whole case; an interval without any acquisition is a zero
// rate and a gap in the latency line (no acquisition, no latency), never a
// latency of 0 ms.
func WriteTimeSeries(dir string, c *verdict.CaseSummary) error {
	m := c.Metrics
	tl := m.Timeline()
	if !hasTimeSeries(c) {
		return nil
	}
	step := float64(verdict.SeriesStep) / 1e9
	n := int(math.Ceil(m.DurationS / step))
	if n < len(tl.Series) {
		n = len(tl.Series)
	}
	var rate, worst plotter.XYs
	for i := 0; i < n; i++ {
		var p verdict.Point
		if i < len(tl.Series) {
			p = tl.Series[i]
		}
		x := float64(i) * step
		rate = append(rate, plotter.XY{X: x, Y: float64(p.Acquisitions) / step})
		y := math.NaN()
		if p.Acquisitions > 0 {
			y = p.MaxMs
		}
		worst = append(worst, plotter.XY{X: x, Y: y})
	}
	var wins [][2]float64
	for _, w := range tl.Windows {
		wins = append(wins, [2]float64{float64(w.Start-tl.Start) / 1e9, float64(max(w.End, w.Start)-tl.Start) / 1e9})
	}
	mk := func(title, ylabel string, xys plotter.XYs, col color.Color) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "seconds since the case started (faults shaded)"
		p.Y.Label.Text = ylabel
		p.Add(plotter.NewGrid(), shade{windows: wins, fill: color.NRGBA{230, 90, 90, 55}})
		if err := addBroken(p, xys, col); err != nil {
			return nil, err
		}
		p.X.Min, p.X.Max = 0, math.Max(m.DurationS, float64(n)*step)
		p.Y.Min = 0
		return p, nil
	}
	top, err := mk(fmt.Sprintf("%s (%s): acquisitions per second", c.Check.Case, c.Check.Backend), "acquisitions/s", rate, palette[0])
	if err != nil {
		return fmt.Errorf("time series of %s: %w", c.Check.Case, err)
	}
	bottom, err := mk("slowest acquisition in each 250 ms (no line: none acquired)", "acquire latency (ms)", worst, palette[1])
	if err != nil {
		return fmt.Errorf("time series of %s: %w", c.Check.Case, err)
	}
	return saveTiles([][]*plot.Plot{{top}, {bottom}}, 8*vg.Inch, 6*vg.Inch, filepath.Join(dir, timeseriesName(c.Check.Case)))
}

// hasTimeSeries says whether a case gets a time series: it had faults and
// lasted long enough for one point (a case where nothing was ever acquired
// gets one too: a flat zero says so).
func hasTimeSeries(c *verdict.CaseSummary) bool {
	tl := c.Metrics.Timeline()
	return len(tl.Windows) > 0 && (c.Metrics.DurationS >= float64(verdict.SeriesStep)/1e9 || len(tl.Series) > 0)
}

// addBroken draws xys as a line broken wherever Y is NaN; a lone point
// between two breaks is drawn as a dot.
func addBroken(p *plot.Plot, xys plotter.XYs, col color.Color) error {
	var run plotter.XYs
	flush := func() error {
		switch len(run) {
		case 0:
			return nil
		case 1:
			s, err := plotter.NewScatter(run)
			if err != nil {
				return err
			}
			s.GlyphStyle.Color, s.GlyphStyle.Radius, s.GlyphStyle.Shape = col, vg.Points(1.5), draw.CircleGlyph{}
			p.Add(s)
		default:
			l, err := plotter.NewLine(run)
			if err != nil {
				return err
			}
			l.Color, l.Width = col, vg.Points(1.5)
			p.Add(l)
		}
		run = nil
		return nil
	}
	for _, xy := range xys {
		if math.IsNaN(xy.Y) {
			if err := flush(); err != nil {
				return err
			}
			continue
		}
		run = append(run, xy)
	}
	return flush()
}

// saveCanvas writes a formatted canvas to a file.
func saveCanvas(img vg.CanvasWriterTo, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := img.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
