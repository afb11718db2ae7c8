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

	"github.com/lockbench/lockbench/verdict"
)

// ScatterPlot is the base name of the latency-against-safety plot.
const ScatterPlot = "scatter"

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

// rect is a filled rectangle in data coordinates.
type rect struct {
	x0, y0, x1, y1 float64
	fill           color.Color
}

func (r rect) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	c.FillPolygon(r.fill, []vg.Point{{X: trX(r.x0), Y: trY(r.y0)}, {X: trX(r.x1), Y: trY(r.y0)}, {X: trX(r.x1), Y: trY(r.y1)}, {X: trX(r.x0), Y: trY(r.y1)}})
}

var glyphs = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.BoxGlyph{}, draw.TriangleGlyph{}, draw.PyramidGlyph{},
	draw.RingGlyph{}, draw.SquareGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{}}

// ScatterPoint is one backend in the scatter: what it costs without
// faults against what went wrong under them.
type ScatterPoint struct {
	Backend string
	// P99Ms is the no-fault p99 acquire latency (the case with the most
	// samples); PerThousand the violations per 1,000 acquisitions over
	// every case with a fault or client misuse.
	P99Ms, PerThousand float64
}

// ScatterPoints returns the backends that have both a valid no-fault case
// and cases under faults; the scatter means nothing for the others.
func ScatterPoints(s *verdict.Summary) []ScatterPoint {
	d := verdict.NewDecision(s)
	var out []ScatterPoint
	for _, r := range d.Rows {
		var acq, viol int
		for _, c := range s.Cases {
			if c.Check.Backend == r.Backend && verdict.FaultClass(c.Check.Meta) != verdict.ClassNone {
				acq += c.Check.AcquiresOK
				viol += c.Check.Violations
			}
		}
		if r.P99Ms <= 0 || acq == 0 {
			continue
		}
		out = append(out, ScatterPoint{Backend: r.Backend, P99Ms: r.P99Ms, PerThousand: 1000 * float64(viol) / float64(acq)})
	}
	return out
}

// WriteScatter plots each backend's no-fault p99 acquire latency against
// its violations per 1,000 acquisitions under faults: down and to the left
// is fast and safe. Each backend has its own colour and shape, named in
// the legend (labels beside the points would overlap). It draws nothing,
// and reports false, when fewer than two backends have both figures.
func WriteScatter(base string, s *verdict.Summary) (bool, error) {
	pts := ScatterPoints(s)
	if len(pts) < 2 {
		return false, nil
	}
	p := plot.New()
	p.Title.Text = "Latency without faults against violations under faults"
	p.X.Label.Text = "p99 acquire latency without faults (ms, log scale)"
	p.Y.Label.Text = "violations per 1,000 acquisitions under faults"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	lo, hi, top := math.Inf(1), 0.0, 0.0
	for i, pt := range pts {
		sc, err := plotter.NewScatter(plotter.XYs{{X: pt.P99Ms, Y: pt.PerThousand}})
		if err != nil {
			return false, fmt.Errorf("scatter: %w", err)
		}
		sc.GlyphStyle.Radius = vg.Points(5)
		// Colour and shape change together, and no two backends share
		// both (up to 64).
		sc.GlyphStyle.Color = palette[(i+i/len(glyphs))%len(palette)]
		sc.GlyphStyle.Shape = glyphs[i%len(glyphs)]
		p.Add(sc)
		p.Legend.Add(pt.Backend, sc)
		lo, hi, top = math.Min(lo, pt.P99Ms), math.Max(hi, pt.P99Ms), math.Max(top, pt.PerThousand)
	}
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	// Explicit bounds: equal latencies would give a zero-width log axis.
	p.X.Min, p.X.Max = lo/2, hi*2
	p.Y.Min, p.Y.Max = -0.05*math.Max(top, 1), 1.15*math.Max(top, 1)
	return true, savePlot(p, 7*vg.Inch, 4.5*vg.Inch, base)
}

func init() {
	registerFigure(Figure{
		Name: ScatterPlot, Alt: "latency against safety", Slot: SlotLatency, Order: 1, Draw: WriteScatter,
		Caption:  "Each backend's p99 acquire latency without faults (x, log scale) against its violations per 1,000 acquisitions in the cases with faults (y): down and to the left is fast and safe. Backends without both a fault-free case and a faulted one are left out.",
		Contents: "only when two or more backends have both a fault-free case and faulted ones: each backend's no-fault p99 against its violations per 1,000 acquisitions under faults",
	})
}
