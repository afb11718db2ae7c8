package report

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
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
// partition or a pause did to the lock, second by second.
func WriteTimeSeries(dir string, c *CaseSummary) error {
	m := c.Metrics
	if len(m.series) == 0 {
		return nil
	}
	step := float64(SeriesStep) / 1e9
	var rate, worst plotter.XYs
	for i, p := range m.series {
		x := float64(i) * step
		rate = append(rate, plotter.XY{X: x, Y: float64(p.acq) / step})
		worst = append(worst, plotter.XY{X: x, Y: p.maxMs})
	}
	var wins [][2]float64
	for _, w := range m.wins {
		end := w.end
		if end < w.start {
			end = w.start
		}
		wins = append(wins, [2]float64{float64(w.start-m.start) / 1e9, float64(end-m.start) / 1e9})
	}
	mk := func(title, ylabel string, xys plotter.XYs, col color.Color) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "seconds since the case started (faults shaded)"
		p.Y.Label.Text = ylabel
		p.Add(plotter.NewGrid(), shade{windows: wins, fill: color.NRGBA{230, 90, 90, 55}})
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		l.Color, l.Width = col, vg.Points(1.5)
		p.Add(l)
		p.Y.Min = 0
		return p, nil
	}
	top, err := mk(fmt.Sprintf("%s (%s): acquisitions per second", c.Check.Case, c.Check.Backend), "acquisitions/s", rate, palette[0])
	if err != nil {
		return fmt.Errorf("time series of %s: %w", c.Check.Case, err)
	}
	bottom, err := mk("slowest acquisition in each 250 ms", "acquire latency (ms)", worst, palette[1])
	if err != nil {
		return fmt.Errorf("time series of %s: %w", c.Check.Case, err)
	}
	base := filepath.Join(dir, timeseriesName(c.Check.Case))
	for _, ext := range []string{"png", "svg"} {
		img, err := draw.NewFormattedCanvas(8*vg.Inch, 6*vg.Inch, ext)
		if err != nil {
			return err
		}
		dc := draw.New(img)
		tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(8)}
		canvases := plot.Align([][]*plot.Plot{{top}, {bottom}}, tiles, dc)
		top.Draw(canvases[0][0])
		bottom.Draw(canvases[1][0])
		if err := saveCanvas(img, base+"."+ext); err != nil {
			return fmt.Errorf("save time series of %s: %w", c.Check.Case, err)
		}
	}
	return nil
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
