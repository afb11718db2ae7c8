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

// Plot names (base names: .png and .svg).
const (
	EnvelopePlot = "envelope"
	OverlapPlot  = "overlaps"
)

// band is a filled polygon between two lines: a rate's interval.
type band struct {
	lo, hi plotter.XYs
	fill   color.Color
}

func (b band) Plot(c draw.Canvas, p *plot.Plot) {
	tx, ty := p.Transforms(&c)
	var pts []vg.Point
	for _, q := range b.lo {
		pts = append(pts, vg.Point{X: tx(q.X), Y: ty(q.Y)})
	}
	for i := len(b.hi) - 1; i >= 0; i-- {
		pts = append(pts, vg.Point{X: tx(b.hi[i].X), Y: ty(b.hi[i].Y)})
	}
	if len(pts) > 2 {
		c.FillPolygon(b.fill, c.ClipPolygonXY(pts))
	}
}

// WriteEnvelopePlot writes the safety envelope: the share of trials in
// which two clients believed they held the lock at once, against the swept
// magnitude (for a pause, its length as a multiple of the lease), one line
// per backend with its 95% interval as a band. It returns false when the
// run swept nothing.
func WriteEnvelopePlot(base string, s *verdict.Summary) (bool, error) {
	lines := verdict.Envelope(s)
	if len(lines) == 0 {
		return false, nil
	}
	p := plot.New()
	p.Title.Text = "Safety envelope: where two holders appear"
	p.X.Label.Text = lines[0].Axis
	if strings.HasSuffix(lines[0].Points[0].Value, "×lease") {
		p.X.Label.Text = lines[0].Axis + " (multiple of the lease)"
	}
	p.Y.Label.Text = "trials with two holders"
	p.Y.Min, p.Y.Max = 0, 1
	p.Y.Tick.Marker = percentTicks{}
	// The lines rise between about half the lease and twice it: a log
	// axis ticked at the swept values gives that region the room, and
	// leaves the bottom right (long pauses, few safe trials) for the legend.
	if ticks, ok := sweptTicks(lines); ok {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = ticks
	}
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.YOffs = vg.Points(8)
	for i, l := range lines {
		col := palette[i%len(palette)]
		var mid, lo, hi plotter.XYs
		for _, pt := range l.Points {
			if pt.Rate.Of == 0 {
				continue
			}
			mid = append(mid, plotter.XY{X: pt.X, Y: float64(pt.Rate.Hits) / float64(pt.Rate.Of)})
			lo = append(lo, plotter.XY{X: pt.X, Y: pt.Rate.Low})
			hi = append(hi, plotter.XY{X: pt.X, Y: pt.Rate.High})
		}
		if len(mid) == 0 {
			continue
		}
		r, g, b, _ := col.RGBA()
		p.Add(band{lo: lo, hi: hi, fill: color.NRGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 45}})
		ln, pts, err := plotter.NewLinePoints(mid)
		if err != nil {
			return false, fmt.Errorf("envelope line: %w", err)
		}
		ln.Color, pts.Color = col, col
		ln.Width = vg.Points(1.5)
		p.Add(ln, pts)
		p.Legend.Add(l.Backend, ln, pts)
	}
	return true, savePlot(p, 7*vg.Inch, 4.5*vg.Inch, base)
}

// sweptTicks ticks the x axis at every swept value, labelled as the
// scenario wrote it, when every value is positive (a log axis needs it).
func sweptTicks(lines []verdict.EnvelopeLine) (plot.ConstantTicks, bool) {
	seen := map[float64]bool{}
	var ticks plot.ConstantTicks
	for _, l := range lines {
		for _, pt := range l.Points {
			if pt.X <= 0 {
				return nil, false
			}
			if !seen[pt.X] {
				seen[pt.X] = true
				ticks = append(ticks, plot.Tick{Value: pt.X, Label: strings.TrimSuffix(pt.Value, "lease")})
			}
		}
	}
	return ticks, len(ticks) > 1
}

type percentTicks struct{}

func (percentTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for v := 0.0; v <= 1.0001; v += 0.25 {
		if v >= min && v <= max {
			ts = append(ts, plot.Tick{Value: v, Label: fmt.Sprintf("%.0f%%", 100*v)})
		}
	}
	return ts
}

// WriteOverlapPlot writes the distribution of overlap durations per
// backend (every overlap of its cases: how long two holders coexisted,
// the window a late write has), as box plots on a log scale. It returns
// false when no case overlapped.
func WriteOverlapPlot(base string, s *verdict.Summary) (bool, error) {
	names, idx := byBackend(s)
	type group struct {
		name string
		v    plotter.Values
	}
	var groups []group
	for _, b := range names {
		var v plotter.Values
		for _, i := range idx[b] {
			for _, d := range s.Cases[i].Check.OverlapsMs {
				v = append(v, math.Max(d, 0.001))
			}
		}
		if len(v) > 0 {
			groups = append(groups, group{b, v})
		}
	}
	if len(groups) == 0 {
		return false, nil
	}
	p := plot.New()
	p.Title.Text = "How long two holders coexisted"
	p.Y.Label.Text = "overlap (ms, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	lo, hi := math.Inf(1), 0.0
	for _, g := range groups {
		for _, v := range g.v {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	p.Y.Min, p.Y.Max = lo/2, hi*2 // a log axis needs its range set above zero
	var labels []string
	for i, g := range groups {
		bp, err := plotter.NewBoxPlot(vg.Points(18), float64(i), g.v)
		if err != nil {
			return false, fmt.Errorf("overlap box of %s: %w", g.name, err)
		}
		bp.FillColor = palette[i%len(palette)]
		p.Add(bp)
		labels = append(labels, fmt.Sprintf("%s (%d)", g.name, len(g.v)))
	}
	p.NominalX(labels...)
	return true, savePlot(p, vg.Length(1.5+1.1*float64(len(groups)))*vg.Inch, 4*vg.Inch, base)
}

// writeEnvelopeTable writes one line per swept case and the rate at each
// of its points.
func writeEnvelopeTable(b *strings.Builder, s *verdict.Summary) error {
	lines := verdict.Envelope(s)
	var vals []string
	seen := map[string]bool{}
	for _, l := range lines {
		for _, p := range l.Points {
			if !seen[p.Value] {
				seen[p.Value] = true
				vals = append(vals, p.Value)
			}
		}
	}
	t := Table{Header: append([]string{"case", "backend"}, vals...)}
	for _, l := range lines {
		row := []string{l.Case, l.Backend}
		for _, v := range vals {
			cell := "—"
			for _, p := range l.Points {
				switch {
				case p.Value == v && l.Lockless:
					cell = "n/a (no lock)" // MODEL §17, A6: no rate of two holders
				case p.Value == v:
					cell = p.Rate.String()
				}
			}
			row = append(row, cell)
		}
		t.Add(row...)
	}
	return t.Write(b)
}

func init() {
	registerFigure(Figure{
		Name: EnvelopePlot, Alt: "safety envelope", Slot: SlotEnvelope, Draw: WriteEnvelopePlot,
		Caption:  "Each line is one backend's case swept over one value (for a pause of the holder: its length as a multiple of the lease): the share of its decided trials in which two clients believed they held the lock at once, and the band its 95% interval (Wilson). Where a line leaves zero is where the backend's lease stops protecting a paused holder; how steeply it rises says how much margin its expiry checks, drift factor or session timeout leave. A wide band means few trials: read the counts in the table.",
		Contents: "only for a run with swept cases (`sweep:`, `make envelope`): per backend, the share of decided trials with two holders against the swept value, with its 95% band",
	})
	registerFigure(Figure{
		Name: OverlapPlot, Alt: "overlap durations", Slot: SlotSafety, Draw: WriteOverlapPlot,
		Caption:  "How long two holders coexisted, every overlap of each backend's cases (box: quartiles; whiskers: the range without outliers; log scale): the window in which a late write does damage unless a fencing token or the work itself stops it.",
		Contents: "only when some case had two holders: every overlap's length, one box per backend (log scale)",
	})
}
