package report

import (
	"fmt"
	"image/color"
	"os"
	"strings"

	"golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/lockbench/lockbench/verdict"
)

// DecisionPlot is the base name of the decision view's image (.png at 2×
// resolution, .svg).
const DecisionPlot = "decision"

// outcomeFill colours the outcomes with the Okabe–Ito palette, lightened
// so that black text reads on every cell; each cell also names its
// outcome in words, so no one needs to tell the colours apart.
var outcomeFill = map[string]color.Color{
	verdict.OutcomeSafe:      color.NRGBA{0, 158, 115, 110},
	verdict.OutcomeRegressed: color.NRGBA{240, 228, 66, 200},
	verdict.OutcomeFenced:    color.NRGBA{230, 159, 0, 170},
	verdict.OutcomeUntested:  color.NRGBA{230, 159, 0, 110},
	verdict.OutcomeUnfenced:  color.NRGBA{213, 94, 0, 140},
	verdict.OutcomeDamage:    color.NRGBA{213, 94, 0, 200},
	verdict.OutcomeNone:      color.NRGBA{200, 200, 200, 255},
}

// outcomeWord is the outcome in the image, where symbols may lack glyphs.
var outcomeWord = map[string]string{
	verdict.OutcomeSafe: "SAFE", verdict.OutcomeRegressed: "SAFE, TOKENS\nREGRESSED", verdict.OutcomeFenced: "UNSAFE,\nFENCED",
	verdict.OutcomeUntested: "UNSAFE, FENCE\nUNTESTED", verdict.OutcomeUnfenced: "UNSAFE,\nUNFENCED",
	verdict.OutcomeDamage: "DAMAGE", verdict.OutcomeNone: "NO EVIDENCE",
}

// WriteDecisionPlot draws the decision view: backends down, fault classes
// across, each cell coloured and named by its outcome, with the
// acquisitions during/after the fault and the longest gap; the last column
// gives the no-fault latency and the hand-off latency. The PNG is drawn at
// 192 dpi, to paste into a document.
func WriteDecisionPlot(base string, d *verdict.Decision) error {
	if len(d.Rows) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text = "Which lock is safe under which fault, and what it costs"
	p.HideAxes()
	var labels plotter.XYLabels
	var bold []bool
	add := func(x, y float64, s string, b bool) {
		labels.XYs = append(labels.XYs, plotter.XY{X: x, Y: y})
		labels.Labels = append(labels.Labels, s)
		bold = append(bold, b)
	}
	n := len(d.Rows)
	cols := len(d.Classes)
	white := color.NRGBA{250, 250, 250, 255}
	for ri, r := range d.Rows {
		y := float64(n - 1 - ri)
		add(-1.55, y+0.4, strings.Replace(rowLabel(r), " (", "\n(", 1), true)
		for ci, c := range d.Classes {
			x := float64(ci)
			cell := r.Cells[c]
			if cell == nil {
				p.Add(rect{x0: x + 0.03, y0: y + 0.04, x1: x + 0.97, y1: y + 0.96, fill: white})
				add(x+0.45, y+0.4, "—", false)
				continue
			}
			fill, word := outcomeFill[cell.Outcome], outcomeWord[cell.Outcome]
			if f, ok := fill.(color.NRGBA); ok && cell.TooFew {
				// A sample, not a property: paler, and it says so.
				f.A /= 3
				fill, word = f, word+"?"
			}
			p.Add(rect{x0: x + 0.03, y0: y + 0.04, x1: x + 0.97, y1: y + 0.96, fill: fill})
			add(x+0.07, y+0.62, word, true)
			add(x+0.07, y+0.1, plotDetail(cell), false)
		}
		x := float64(cols)
		p.Add(rect{x0: x + 0.03, y0: y + 0.04, x1: x + 1.37, y1: y + 0.96, fill: white})
		add(x+0.07, y+0.2, fmt.Sprintf("p50 %s\np99 %s\nhand-off %s", msOrDash(r.P50Ms), msOrDash(r.P99Ms), msOrDash(r.HandoffP50Ms)), false)
	}
	for ci, c := range d.Classes {
		add(float64(ci)+0.05, float64(n)+0.12, wrap(c, 14), true)
	}
	add(float64(cols)+0.05, float64(n)+0.12, "latency,\nno fault", true)
	l, err := plotter.NewLabels(labels)
	if err != nil {
		return fmt.Errorf("decision labels: %w", err)
	}
	for i := range l.TextStyle {
		l.TextStyle[i].Font.Size = vg.Points(7)
		if bold[i] {
			l.TextStyle[i].Font.Size = vg.Points(8)
			l.TextStyle[i].Font.Weight = font.WeightBold
		}
	}
	p.Add(l)
	p.X.Min, p.X.Max = -1.6, float64(cols)+1.4
	p.Y.Min, p.Y.Max = -0.05, float64(n)+0.75
	width := vg.Length(1.6+1.25*float64(cols)+1.4) * vg.Inch
	height := vg.Length(0.9+0.62*float64(n)) * vg.Inch
	if err := p.Save(width, height, base+".svg"); err != nil {
		return fmt.Errorf("save decision view: %w", err)
	}
	return savePNG2x(p, width, height, base+".png")
}

// plotDetail is the availability of a cell in three short lines.
func plotDetail(cell *verdict.DecisionCell) string {
	class := cell.Class
	s := fmt.Sprintf("2 holders %d/%d %s\n", cell.TwoHolders.Hits, cell.TwoHolders.Of, cell.TwoHolders.Interval())
	if cell.TwoHolders.Of == 0 {
		s = fmt.Sprintf("damage %d/%d %s\n", cell.Damage.Hits, cell.Damage.Of, cell.Damage.Interval())
	}
	if class != verdict.ClassNone && class != verdict.ClassMisuse {
		s += fmt.Sprintf("during %d, after %d\n", cell.AcquisitionsDuring, cell.AcquisitionsAfter)
	}
	s += "gap " + msText(cell.LongestGapMs)
	if cell.RecoveredAfterMs < 0 || cell.NotLive > 0 {
		s += " NOT LIVE"
	}
	if cell.Invalid > 0 && cell.Outcome != verdict.OutcomeNone {
		s += fmt.Sprintf("\n%d/%d invalid", cell.Invalid, cell.Cases)
	}
	return s
}

func msOrDash(ms float64) string {
	if ms == 0 {
		return "—"
	}
	return msText(ms)
}

// savePNG2x renders p as a PNG at twice the usual resolution.
func savePNG2x(p *plot.Plot, w, h vg.Length, path string) error {
	c := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(192))
	p.Draw(draw.New(c))
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("save %s: %w", path, err)
	}
	return f.Close()
}

func init() {
	registerFigure(Figure{
		Name: DecisionPlot, Alt: "decision view", Slot: SlotDecision,
		Caption:  "The decision view as an image (2× resolution, to paste into a design document): the colour and the words in each cell say the same thing; \"2 holders k/n\" is in how many of the cell's decided trials two clients believed they held the lock, with its 95% interval; a pale cell marked ? rests on fewer than 10 fault exposures; \"during/after\" count acquisitions while the fault was in force and after it healed, \"gap\" is the longest time a client waited with nobody holding the lock.",
		Contents: "the decision view as an image (2× resolution), to paste into a design document",
		Draw: func(base string, s *verdict.Summary) (bool, error) {
			if s.Decision == nil || len(s.Decision.Rows) == 0 {
				return false, nil // a run of job workloads only: the jobs decision view's
			}
			return true, WriteDecisionPlot(base, s.Decision)
		},
	})
}
