package report

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// nines maps a percentile to the HDR-style x axis: 0 at 0%, 1 at 90%, 2 at 99%, 3 at 99.9%: x = -log10(1 - p/100).
func nines(p float64) float64 { return -math.Log10(1 - p/100) }

type ninesTicks struct{}

func (ninesTicks) Ticks(min, max float64) []plot.Tick {
	labels := []string{"0%", "90%", "99%", "99.9%", "99.99%", "99.999%"}
	var ts []plot.Tick
	for i, l := range labels {
		if x := float64(i); x >= min && x <= max {
			ts = append(ts, plot.Tick{Value: x, Label: l})
		}
	}
	return ts
}

// palette is colour-blind friendly (Okabe–Ito).
var palette = []color.Color{
	color.RGBA{0, 114, 178, 255}, color.RGBA{213, 94, 0, 255}, color.RGBA{0, 158, 115, 255},
	color.RGBA{204, 121, 167, 255}, color.RGBA{230, 159, 0, 255}, color.RGBA{86, 180, 233, 255},
	color.RGBA{0, 0, 0, 255}, color.RGBA{240, 228, 66, 255},
}

// WriteLatencyPlot writes the acquire latency distribution of every case,
// HDR-histogram style (latency against percentile on a "nines" axis, log
// latency), to base+".png" and base+".svg".
func WriteLatencyPlot(base string, s *Summary) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Acquire latency by percentile — %s", s.Scenario)
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "acquire latency (ms, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.X.Tick.Marker = ninesTicks{}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	maxX := 2.0
	lines := 0
	lo, hi := math.Inf(1), 0.0
	for i, c := range s.Cases {
		h := c.Metrics.LatencyHistogram()
		if h == nil || h.TotalCount() == 0 {
			continue
		}
		var pts plotter.XYs
		for _, pct := range []float64{0, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 99.999} {
			x := nines(pct)
			if pct > 0 && float64(h.TotalCount())*(1-pct/100) < 1 {
				break // fewer samples than this percentile needs
			}
			v := float64(h.ValueAtQuantile(pct)) / 1e3
			if v <= 0 {
				v = 0.001
			}
			pts = append(pts, plotter.XY{X: x, Y: v})
			lo, hi = math.Min(lo, v), math.Max(hi, v)
			if x > maxX {
				maxX = x
			}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("latency plot %s: %w", c.Check.Case, err)
		}
		l.Color = palette[i%len(palette)]
		l.Width = vg.Points(1.5)
		if i >= len(palette) {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		p.Add(l)
		p.Legend.Add(c.Check.Case, l)
		lines++
	}
	if lines == 0 {
		p.Add(plotter.NewFunction(func(float64) float64 { return math.NaN() }))
		p.Title.Text += " (no acquisitions)"
	}
	p.X.Min, p.X.Max = 0, math.Ceil(maxX)
	if hi > 0 {
		// Explicit bounds: equal latencies would give a zero-height log
		// axis, which gonum cannot draw.
		p.Y.Min, p.Y.Max = lo/2, hi*2
	}
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	p.Legend.Padding = vg.Points(2)
	p.Legend.YOffs = -vg.Points(4)
	for _, ext := range []string{"png", "svg"} {
		if err := p.Save(8*vg.Inch, 5*vg.Inch, base+"."+ext); err != nil {
			return fmt.Errorf("save latency plot: %w", err)
		}
	}
	return nil
}
