package report

import (
	"fmt"
	"image/color"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/lockbench/lockbench/verdict"
)

// timelineName is the base name of a case's holder timeline.
func timelineName(caseName string) string { return "timeline-" + caseName }

// laneTicks labels the lanes with client names.
type laneTicks []string

func (l laneTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for i, n := range l {
		ts = append(ts, plot.Tick{Value: float64(i) + 0.5, Label: n})
	}
	return ts
}

// WriteTimeline draws who believed they held the case's first key when:
// one lane per client, each hold a bar, holds that overlap another
// client's in red, fault windows shaded; a write the fencing check refused
// is a black ×, a late write that landed (stale, or a lost update) a red
// ▲ above its writer's lane.
func WriteTimeline(dir string, c *verdict.CaseSummary) error {
	m := c.Metrics
	tl := m.Timeline()
	if len(tl.Spans) == 0 {
		return nil
	}
	// The key to draw: the first a write was refused or landed late on,
	// else the first one held.
	key := tl.Spans[0].Key
	if len(tl.Writes) > 0 {
		key = tl.Writes[0].Key
	}
	var spans []verdict.Span
	lanes := map[string]int{}
	var names []string
	for _, s := range tl.Spans {
		if s.Key != key {
			continue
		}
		spans = append(spans, s)
		if _, ok := lanes[s.Proc]; !ok {
			lanes[s.Proc] = 0
			names = append(names, s.Proc)
		}
	}
	sort.Strings(names)
	for i, n := range names {
		lanes[n] = i
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].Start < spans[j].Start })
	overlaps := make([]bool, len(spans))
	for i := range spans { // sorted by start: compare with later ones until they start after i ends
		for j := i + 1; j < len(spans) && spans[j].Start < spans[i].End; j++ {
			if spans[j].Proc != spans[i].Proc {
				overlaps[i], overlaps[j] = true, true
			}
		}
	}
	sec := func(t int64) float64 { return float64(t-tl.Start) / 1e9 }
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s (%s): who held %s when — overlaps in red", c.Check.Case, c.Check.Backend, key)
	p.X.Label.Text = "seconds since the case started (faults shaded)"
	p.Y.Tick.Marker = laneTicks(names)
	var wins [][2]float64
	for _, w := range tl.Windows {
		wins = append(wins, [2]float64{sec(w.Start), sec(max(w.End, w.Start))})
	}
	p.Add(shade{windows: wins, fill: color.NRGBA{230, 90, 90, 55}})
	blue, red := color.NRGBA{0, 114, 178, 255}, color.NRGBA{213, 40, 30, 255}
	for i, s := range spans {
		col := blue
		if overlaps[i] {
			col = red
		}
		y := float64(lanes[s.Proc])
		x0, x1 := sec(s.Start), sec(s.End)
		if x1-x0 < 0.002 {
			x1 = x0 + 0.002 // keep very short holds visible
		}
		p.Add(rect{x0: x0, y0: y + 0.2, x1: x1, y1: y + 0.8, fill: col})
	}
	var rejected, landed plotter.XYs
	for _, w := range tl.Writes {
		y, ok := lanes[w.Proc]
		if w.Key != key || !ok {
			continue
		}
		xy := plotter.XY{X: sec(w.T), Y: float64(y) + 0.9}
		if w.Rejected {
			rejected = append(rejected, xy)
		} else {
			landed = append(landed, xy)
		}
	}
	for _, m := range []struct {
		xys   plotter.XYs
		shape draw.GlyphDrawer
		col   color.Color
		name  string
	}{{rejected, draw.CrossGlyph{}, color.Black, "write refused by the fencing token"}, {landed, draw.TriangleGlyph{}, red, "late write landed"}} {
		if len(m.xys) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(m.xys)
		if err != nil {
			return fmt.Errorf("timeline of %s: %w", c.Check.Case, err)
		}
		sc.GlyphStyle.Shape, sc.GlyphStyle.Color, sc.GlyphStyle.Radius = m.shape, m.col, vg.Points(3)
		p.Add(sc)
		p.Legend.Add(m.name, sc)
	}
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	p.Add(plotter.NewGrid())
	p.X.Min, p.X.Max = 0, m.DurationS
	p.Y.Min, p.Y.Max = 0, float64(len(names))
	if len(rejected)+len(landed) > 0 {
		p.Y.Max += 0.8 // room for the legend
	}
	h := vg.Length(1.2+0.35*float64(len(names))) * vg.Inch
	for _, ext := range []string{"png", "svg"} {
		if err := p.Save(10*vg.Inch, h, filepath.Join(dir, timelineName(c.Check.Case))+"."+ext); err != nil {
			return fmt.Errorf("save timeline of %s: %w", c.Check.Case, err)
		}
	}
	return nil
}
