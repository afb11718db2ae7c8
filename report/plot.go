package report

import (
	"fmt"
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/lockbench/lockbench/verdict"
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

// byBackend groups case indexes by backend, in order of first appearance.
func byBackend(s *verdict.Summary) (names []string, idx map[string][]int) {
	idx = map[string][]int{}
	for i, c := range s.Cases {
		b := c.Check.Backend
		if _, ok := idx[b]; !ok {
			names = append(names, b)
		}
		idx[b] = append(idx[b], i)
	}
	return names, idx
}

// shortRow names a case's row inside its backend's panel: shortCase
// without the trial's suffix (".t3").
func shortRow(c *verdict.CaseSummary) string {
	n := shortCase(c)
	if c.Check.Meta.Trials > 1 {
		if i := strings.LastIndex(n, ".t"); i >= 0 {
			n = n[:i]
		}
	}
	if n == "" {
		return verdict.FaultClass(c.Check.Meta)
	}
	return n
}

// shortCase names a case inside its backend's panel: the part of its name
// after the backend's, or its fault class when that is all it shares.
func shortCase(c *verdict.CaseSummary) string {
	n := strings.TrimPrefix(c.Check.Case, c.Check.Backend)
	n = strings.TrimLeft(n, "-_ ")
	if n == "" {
		return verdict.FaultClass(c.Check.Meta)
	}
	if c.Check.Meta.Trial > 0 {
		n = strings.TrimSuffix(n, fmt.Sprintf("#%d", c.Check.Meta.Trial))
	}
	return n
}

// WriteLatencyPlot writes the acquire latency distribution by percentile
// as small multiples, one panel per backend with a line per case, on
// shared axes (latency on a log scale, percentiles on a "nines" axis, HDR
// histogram style), to base+".png" and base+".svg".
func WriteLatencyPlot(base string, s *verdict.Summary) error {
	names, idx := byBackend(s)
	type line struct {
		label string
		pts   plotter.XYs
	}
	panels := map[string][]line{}
	lo, hi, maxX := math.Inf(1), 0.0, 2.0
	for _, b := range names {
		// One line per row: a row's trials (side by side, ten lanes of one
		// case) are samples of one distribution, merged.
		var rows []string
		merged := map[string]*hdrhistogram.Histogram{}
		trials := map[string]int{}
		label := map[string]string{}
		for _, i := range idx[b] {
			c := &s.Cases[i]
			h := c.Metrics.LatencyHistogram()
			if h == nil || h.TotalCount() == 0 {
				continue
			}
			row := c.Check.Meta.Row
			if row == "" {
				row = c.Check.Case
			}
			if merged[row] == nil {
				rows = append(rows, row)
				merged[row] = hdrhistogram.Import(h.Export())
				label[row] = shortRow(c)
			} else {
				merged[row].Merge(h)
			}
			trials[row]++
		}
		for _, row := range rows {
			h := merged[row]
			var pts plotter.XYs
			for _, pct := range []float64{0, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 99.999} {
				if pct > 0 && float64(h.TotalCount())*(1-pct/100) < 1 {
					break // fewer samples than this percentile needs
				}
				raw := h.ValueAtQuantile(pct)
				if pct == 0 {
					raw = h.Min() // ValueAtQuantile(0) is the histogram's floor, not a sample
				}
				v := math.Max(float64(raw)/1e3, 0.001)
				pts = append(pts, plotter.XY{X: nines(pct), Y: v})
				lo, hi, maxX = math.Min(lo, v), math.Max(hi, v), math.Max(maxX, nines(pct))
			}
			lb := label[row]
			if trials[row] > 1 {
				lb = fmt.Sprintf("%s (%d trials)", lb, trials[row])
			}
			panels[b] = append(panels[b], line{label: lb, pts: pts})
		}
	}
	var plots []*plot.Plot
	for _, b := range names {
		ls := panels[b]
		if len(ls) == 0 {
			continue
		}
		p := plot.New()
		p.Title.Text = b
		p.X.Label.Text = "percentile"
		p.Y.Label.Text = "acquire latency (ms)"
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.X.Tick.Marker = ninesTicks{}
		p.Add(plotter.NewGrid())
		for i, ln := range ls {
			l, err := plotter.NewLine(ln.pts)
			if err != nil {
				return fmt.Errorf("latency plot %s: %w", b, err)
			}
			l.Color = palette[i%len(palette)]
			l.Width = vg.Points(1.5)
			if i >= len(palette) {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
			}
			p.Add(l)
			p.Legend.Add(ln.label, l)
		}
		p.Legend.Top, p.Legend.Left = true, true
		p.Legend.TextStyle.Font.Size = vg.Points(7)
		p.Legend.Padding = vg.Points(1)
		p.X.Min, p.X.Max = 0, math.Ceil(maxX)
		// Shared, explicit bounds: panels compare at a glance, and equal
		// latencies would give a zero-height log axis gonum cannot draw.
		p.Y.Min, p.Y.Max = lo/2, hi*4
		plots = append(plots, p)
	}
	if len(plots) == 0 {
		p := plot.New()
		p.Title.Text = "Acquire latency by percentile: no acquisitions"
		p.HideAxes()
		return savePlot(p, 6*vg.Inch, 2*vg.Inch, base)
	}
	cols := 3
	if len(plots) < cols {
		cols = len(plots)
	}
	rows := (len(plots) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for r := range grid {
		grid[r] = make([]*plot.Plot, cols)
		for c := range grid[r] {
			if i := r*cols + c; i < len(plots) {
				grid[r][c] = plots[i]
			}
		}
	}
	w, h := vg.Length(cols)*3.6*vg.Inch, vg.Length(rows)*2.8*vg.Inch
	return saveTiles(grid, w, h, base)
}

// saveTiles draws a grid of plots into one image, .png and .svg.
func saveTiles(grid [][]*plot.Plot, w, h vg.Length, base string) error {
	for _, ext := range []string{"png", "svg"} {
		img, err := draw.NewFormattedCanvas(w, h, ext)
		if err != nil {
			return err
		}
		dc := draw.New(img)
		tiles := draw.Tiles{Rows: len(grid), Cols: len(grid[0]), PadX: vg.Points(10), PadY: vg.Points(10), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8)}
		canvases := plot.Align(grid, tiles, dc)
		for r := range grid {
			for c, p := range grid[r] {
				if p != nil {
					p.Draw(canvases[r][c])
				}
			}
		}
		if err := saveCanvas(img, base+"."+ext); err != nil {
			return fmt.Errorf("save %s.%s: %w", base, ext, err)
		}
	}
	return nil
}

// savePlot writes one plot as .png and .svg.
func savePlot(p *plot.Plot, w, h vg.Length, base string) error {
	for _, ext := range []string{"png", "svg"} {
		if err := p.Save(w, h, base+"."+ext); err != nil {
			return fmt.Errorf("save %s.%s: %w", base, ext, err)
		}
	}
	return nil
}

// LatencyPlot is the base name of the latency plot (.png and .svg).
const LatencyPlot = "latency"

func init() {
	registerFigure(Figure{
		Name: LatencyPlot, Alt: "acquire latency by percentile", Slot: SlotLatency,
		Caption:  "Acquire latency by percentile, one panel per backend and one line per case, on shared axes: read across a panel for how the tail grows (the x axis counts nines: 90%, 99%, 99.9%), and between panels at the same height to compare backends. A line stops at the highest percentile its samples can support.",
		Contents: "acquire latency by percentile, one panel per backend with a line per case, shared axes (HDR style: a 90% / 99% / 99.9% axis)",
		Draw: func(base string, s *verdict.Summary) (bool, error) {
			return true, WriteLatencyPlot(base, s)
		},
	})
}
