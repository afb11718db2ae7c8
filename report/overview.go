package report

import (
	"fmt"
	"image/color"
	"math"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The overview plots compare backends across a whole run.
const (
	MatrixPlot  = "matrix"  // backend × fault, .png and .svg
	ScatterPlot = "scatter" // latency against safety, .png and .svg
)

// faultLabel names a case's faults for the matrix columns.
func faultLabel(c *CaseSummary) string {
	if len(c.Check.Meta.Faults) == 0 {
		return "no fault"
	}
	seen := map[string]bool{}
	var parts []string
	for _, f := range c.Check.Meta.Faults {
		l := f.Type + " " + f.Target
		if !seen[l] {
			seen[l] = true
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " + ")
}

// cell is one backend under one fault.
type cell struct {
	violations, staleAcc int
	found                bool
}

// WriteMatrix draws the backend × fault matrix: each cell shows the
// violations (and stale writes accepted) of that backend under that fault,
// green when none, red when some.
func WriteMatrix(base string, s *Summary) error {
	var backends, faults []string
	cells := map[[2]string]*cell{}
	for i := range s.Cases {
		c := &s.Cases[i]
		b, f := c.Check.Backend, faultLabel(c)
		if !contains(backends, b) {
			backends = append(backends, b)
		}
		if !contains(faults, f) {
			faults = append(faults, f)
		}
		k := [2]string{b, f}
		if cells[k] == nil {
			cells[k] = &cell{}
		}
		cells[k].violations += c.Check.Violations
		cells[k].staleAcc += c.Check.Resource.StaleAccepted
		cells[k].found = true
	}
	if len(backends) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text = "Violations (stale writes accepted) by backend and fault"
	p.HideAxes()
	w := 1.0
	green, red, grey := color.NRGBA{120, 190, 120, 255}, color.NRGBA{220, 90, 80, 255}, color.NRGBA{235, 235, 235, 255}
	var labels plotter.XYLabels
	for bi, b := range backends {
		y := float64(len(backends) - 1 - bi)
		labels.XYs = append(labels.XYs, plotter.XY{X: -1.5, Y: y + 0.45})
		labels.Labels = append(labels.Labels, b)
		for fi, f := range faults {
			x := float64(fi)
			col := grey
			text := "—"
			if c := cells[[2]string{b, f}]; c != nil && c.found {
				col, text = green, "0"
				if c.violations > 0 || c.staleAcc > 0 {
					col = red
					text = fmt.Sprintf("%d", c.violations)
					if c.staleAcc > 0 {
						text += fmt.Sprintf(" (%d stale)", c.staleAcc)
					}
				}
			}
			p.Add(rect{x0: x + 0.03, y0: y + 0.05, x1: x + w - 0.03, y1: y + 0.95, fill: col})
			labels.XYs = append(labels.XYs, plotter.XY{X: x + 0.1, Y: y + 0.45})
			labels.Labels = append(labels.Labels, text)
		}
	}
	for fi, f := range faults {
		labels.XYs = append(labels.XYs, plotter.XY{X: float64(fi) + 0.05, Y: float64(len(backends)) + 0.1})
		labels.Labels = append(labels.Labels, wrap(f, 18))
	}
	l, err := plotter.NewLabels(labels)
	if err != nil {
		return fmt.Errorf("matrix labels: %w", err)
	}
	for i := range l.TextStyle {
		l.TextStyle[i].Font.Size = vg.Points(8)
	}
	p.Add(l)
	p.X.Min, p.X.Max = -1.6, float64(len(faults))
	p.Y.Min, p.Y.Max = -0.1, float64(len(backends))+0.9
	width := vg.Length(math.Max(6, 1.8+1.3*float64(len(faults)))) * vg.Inch
	height := vg.Length(1+0.4*float64(len(backends))) * vg.Inch
	for _, ext := range []string{"png", "svg"} {
		if err := p.Save(width, height, base+"."+ext); err != nil {
			return fmt.Errorf("save matrix: %w", err)
		}
	}
	return nil
}

func wrap(s string, n int) string {
	var out []string
	for len(s) > n {
		i := strings.LastIndex(s[:n], " ")
		if i <= 0 {
			i = n
		}
		out = append(out, s[:i])
		s = strings.TrimSpace(s[i:])
	}
	return strings.Join(append(out, s), "\n")
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// rect is a filled rectangle in data coordinates.
type rect struct {
	x0, y0, x1, y1 float64
	fill           color.Color
}

func (r rect) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	c.FillPolygon(r.fill, []vg.Point{{X: trX(r.x0), Y: trY(r.y0)}, {X: trX(r.x1), Y: trY(r.y0)}, {X: trX(r.x1), Y: trY(r.y1)}, {X: trX(r.x0), Y: trY(r.y1)}})
}

// WriteScatter plots one point per backend: its p99 acquire latency (over
// all its cases) against its violations per 1,000 acquisitions. Down and
// to the left is fast and safe.
func WriteScatter(base string, s *Summary) error {
	type agg struct {
		acq, viol int
		p99       float64
	}
	by := map[string]*agg{}
	for _, c := range s.Cases {
		a := by[c.Check.Backend]
		if a == nil {
			a = &agg{}
			by[c.Check.Backend] = a
		}
		a.acq += c.Metrics.Acquisitions
		a.viol += c.Check.Violations
		a.p99 = math.Max(a.p99, c.Metrics.AcquireLatency.P99)
	}
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	sort.Strings(names)
	var pts plotter.XYs
	var labels []string
	for _, n := range names {
		a := by[n]
		if a.acq == 0 || a.p99 <= 0 {
			continue
		}
		pts = append(pts, plotter.XY{X: a.p99, Y: 1000 * float64(a.viol) / float64(a.acq)})
		labels = append(labels, n)
	}
	if len(pts) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text = "Latency against safety, per backend — " + s.Scenario
	p.X.Label.Text = "p99 acquire latency, worst case of the backend (ms, log scale)"
	p.Y.Label.Text = "violations per 1,000 acquisitions"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	sc, err := plotter.NewScatter(pts)
	if err != nil {
		return fmt.Errorf("scatter: %w", err)
	}
	sc.GlyphStyle.Radius = vg.Points(4)
	sc.GlyphStyle.Color = palette[0]
	p.Add(sc)
	lab, err := plotter.NewLabels(plotter.XYLabels{XYs: pts, Labels: labels})
	if err != nil {
		return fmt.Errorf("scatter labels: %w", err)
	}
	for i := range lab.TextStyle {
		lab.TextStyle[i].Font.Size = vg.Points(8)
		lab.Offset = vg.Point{X: vg.Points(6), Y: vg.Points(2)}
	}
	p.Add(lab)
	p.Y.Min = 0
	// Explicit bounds: a single backend (or equal latencies) would give a
	// zero-width log axis, which gonum cannot draw.
	lo, hi := math.Inf(1), 0.0
	for _, pt := range pts {
		lo, hi = math.Min(lo, pt.X), math.Max(hi, pt.X)
	}
	p.X.Min, p.X.Max = lo/2, hi*2
	for _, ext := range []string{"png", "svg"} {
		if err := p.Save(8*vg.Inch, 5*vg.Inch, base+"."+ext); err != nil {
			return fmt.Errorf("save scatter: %w", err)
		}
	}
	return nil
}
