package report

import (
	"fmt"
	"image/color"
	"io"
	"strings"

	"golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/verdict"
)

// This file is the jobs decision view (checker/MODEL.md §21): job
// strategies × fault classes, as a Markdown table and as an image.

var jobSymbol = map[string]string{
	verdict.JobOutcomeOnce: "✓", verdict.JobOutcomeDuplicates: "✗", verdict.JobOutcomeStale: "✗",
	verdict.JobOutcomeLost: "✗", verdict.JobOutcomeNone: "?",
}

// jobRowLabel names a row: its variant, its backend for a strategy that
// takes a lock, and whether it is a control.
func jobRowLabel(r verdict.JobRow) string {
	s := r.Variant
	if r.Lock {
		s += " on " + r.Backend
	}
	if r.Control {
		s += " (control)"
	}
	return s
}

// jobOutcomeText is a cell's outcome in words: what went wrong, with
// its counts, or exactly once, and whether that means anything.
func jobOutcomeText(c *verdict.JobCell) string {
	var bad []string
	if c.StaleAccepted > 0 {
		bad = append(bad, fmt.Sprintf("%d stale accepted", c.StaleAccepted))
	}
	if c.Duplicates > 0 {
		s := fmt.Sprintf("%d duplicates (%d concurrent, %d sequential", c.Duplicates, c.Concurrent, c.Sequential)
		if c.Unsplit > 0 {
			s += fmt.Sprintf(", %d unsplit", c.Unsplit)
		}
		bad = append(bad, s+")")
	}
	if c.Lost > 0 {
		bad = append(bad, fmt.Sprintf("%d jobs lost", c.Lost))
	}
	s := jobSymbol[c.Outcome] + " "
	switch {
	case len(bad) > 0:
		s += strings.Join(bad, ", ")
	case c.Outcome == verdict.JobOutcomeNone:
		return s + "no evidence"
	case c.Vacuous:
		s = "◌ exactly once, VACUOUS: " + c.VacuousWhy
	default:
		s += "exactly once"
	}
	if c.TooFew {
		s += " — too few to call it exactly once"
	}
	return s
}

// jobEvidenceText says what the outcome rests on.
func jobEvidenceText(c *verdict.JobCell) string {
	if c.Trials == 0 {
		return "no decided trial"
	}
	var parts []string
	if c.Class != verdict.ClassNone && c.Class != verdict.ClassMisuse {
		ph := ""
		var ps []string
		for _, p := range checker.Phases {
			if n := c.PhaseExposures[p]; n > 0 {
				ps = append(ps, fmt.Sprintf("%d %s", n, strings.TrimSuffix(p, "-effect")))
			}
		}
		if len(ps) > 0 {
			ph = " (" + strings.Join(ps, ", ") + ")"
		}
		parts = append(parts, fmt.Sprintf("%d exposures%s", c.Exposures, ph),
			fmt.Sprintf("touched duplicated %s", perThousandText(c.TouchedDuplicated, "touched")))
	}
	parts = append(parts, fmt.Sprintf("duplicated %s", perThousandText(c.Duplicated, "jobs")),
		fmt.Sprintf("damage in %s trials", c.DamageTrials.String()))
	if c.StaleRefused > 0 {
		parts = append(parts, fmt.Sprintf("%d stale refused", c.StaleRefused))
	}
	if c.Absorbed > 0 {
		parts = append(parts, fmt.Sprintf("%d absorbed", c.Absorbed))
	}
	if c.StuckMaxMs > 0 || c.StuckOpen > 0 {
		s := "stuck up to " + msText(c.StuckMaxMs)
		if c.StuckOpen > 0 {
			s += fmt.Sprintf(", %d never taken up", c.StuckOpen)
		}
		parts = append(parts, s)
	}
	if c.Invalid > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d cases invalid", c.Invalid, c.Cases))
	}
	return strings.Join(parts, "; ")
}

// perThousandText is k of n per 1,000 with its 95% interval.
func perThousandText(r verdict.Rate, of string) string {
	if r.Of == 0 {
		return "— (no " + of + ")"
	}
	return fmt.Sprintf("%d of %d %s, %.0f [%.0f, %.0f] per 1,000", r.Hits, r.Of, of, 1000*float64(r.Hits)/float64(r.Of), 1000*r.Low, 1000*r.High)
}

// WriteJobDecisionMarkdown writes the jobs decision view as a Markdown
// table: one row per strategy, one column per fault class, then the
// costs without and with faults.
func WriteJobDecisionMarkdown(w io.Writer, d *verdict.JobDecision) error {
	t := Table{Header: append(append([]string{"strategy"}, d.Classes...), "completion p50 / p99 ms, no fault", "jobs/s, no fault", "completion p50 / p99 ms, faults", "jobs/s, faults")}
	t.Right = make([]bool, len(t.Header))
	for i := len(d.Classes) + 1; i < len(t.Header); i++ {
		t.Right[i] = true
	}
	for _, r := range d.Rows {
		row := []string{jobRowLabel(r)}
		for _, c := range d.Classes {
			if cell := r.Cells[c]; cell != nil {
				row = append(row, jobOutcomeText(cell)+" · "+jobEvidenceText(cell))
			} else {
				row = append(row, "—")
			}
		}
		nf, wf := latText(r.P50Ms, r.P99Ms), latText(r.FaultP50Ms, r.FaultP99Ms)
		if r.NoFaultCases > 1 && nf != "—" {
			nf += fmt.Sprintf(" (median of %d)", r.NoFaultCases)
		}
		if r.FaultCases > 1 && wf != "—" {
			wf += fmt.Sprintf(" (median of %d)", r.FaultCases)
		}
		t.Add(append(row, nf, numText(r.PerSec), wf, numText(r.FaultPerSec))...)
	}
	return t.Write(w)
}

// JobDecisionLegend explains the jobs decision view.
const JobDecisionLegend = "✓ *exactly once*: every due job's effect was applied once by the effect sink, in every decided trial. " +
	"✗ *duplicates*: a job's effect applied twice or more — *concurrent* when the two executions overlapped, *sequential* when the later began after the earlier had ended (a re-run). " +
	"✗ *stale accepted*: an effect applied with a fencing token below one the sink had already applied for its job. " +
	"✗ *jobs lost*: a job due whose effect was never applied. " +
	"◌ *vacuous*: exactly once under a fault where no control of the strategy's family (the unfenced lock under a pause longer than its lease, a queue whose visibility timeout is shorter than the job, the check-then-insert under contention) showed the failure: the fault did not create the conditions, so the cell proves nothing. " +
	"? *no evidence*. After the outcome: the exposures (and of their faults how many met an attempt before, during and after its effect), the touched jobs duplicated and the jobs duplicated, each k of n with its rate per 1,000 and 95% interval, the trials with damage, the stale effects the fence refused, the attempts an idempotency key absorbed, and the stuck time (how long, at most, a job stayed with a paused or dead executor before another took it up or its effect was in place). " +
	"The last columns are the costs: completion latency (from a job's due time to its first completion) and jobs/s, without faults and under them (medians over the valid cases)."

// JobDecisionPlot is the base name of the jobs decision view's image.
const JobDecisionPlot = "jobs-decision"

var jobFill = map[string]color.Color{
	verdict.JobOutcomeOnce:       color.NRGBA{0, 158, 115, 110},
	verdict.JobOutcomeDuplicates: color.NRGBA{213, 94, 0, 160},
	verdict.JobOutcomeStale:      color.NRGBA{213, 94, 0, 220},
	verdict.JobOutcomeLost:       color.NRGBA{230, 159, 0, 170},
	verdict.JobOutcomeNone:       color.NRGBA{200, 200, 200, 255},
}

var jobWord = map[string]string{
	verdict.JobOutcomeOnce: "EXACTLY ONCE", verdict.JobOutcomeDuplicates: "DUPLICATES", verdict.JobOutcomeStale: "STALE\nACCEPTED",
	verdict.JobOutcomeLost: "JOBS LOST", verdict.JobOutcomeNone: "NO EVIDENCE",
}

// WriteJobDecisionPlot draws the jobs decision view: strategies down,
// fault classes across, each cell coloured and named by its outcome
// (vacuous and too-few cells pale, and saying so), with its evidence;
// the last column the costs. 192 dpi, to paste into a design document.
func WriteJobDecisionPlot(base string, d *verdict.JobDecision) error {
	p := plot.New()
	p.Title.Text = "Which way of running a job takes effect exactly once, under which fault, at what cost"
	p.HideAxes()
	var labels plotter.XYLabels
	var bold []bool
	add := func(x, y float64, s string, b bool) {
		labels.XYs = append(labels.XYs, plotter.XY{X: x, Y: y})
		labels.Labels = append(labels.Labels, s)
		bold = append(bold, b)
	}
	n, cols := len(d.Rows), len(d.Classes)
	white := color.NRGBA{250, 250, 250, 255}
	for ri, r := range d.Rows {
		y := float64(n - 1 - ri)
		add(-1.15, y+0.4, wrap(jobRowLabel(r), 22), true)
		for ci, c := range d.Classes {
			x := float64(ci)
			cell := r.Cells[c]
			if cell == nil {
				p.Add(rect{x0: x + 0.03, y0: y + 0.04, x1: x + 0.97, y1: y + 0.96, fill: white})
				add(x+0.45, y+0.4, "—", false)
				continue
			}
			fill, word := jobFill[cell.Outcome], jobWord[cell.Outcome]
			if f, ok := fill.(color.NRGBA); ok && (cell.Vacuous || cell.TooFew) {
				f.A /= 3
				fill = f
				if cell.Vacuous {
					word = "VACUOUS\n(control\nshowed nothing)"
				} else {
					word += "?"
				}
			}
			p.Add(rect{x0: x + 0.03, y0: y + 0.04, x1: x + 0.97, y1: y + 0.96, fill: fill})
			add(x+0.07, y+0.6, word, true)
			add(x+0.07, y+0.08, jobPlotDetail(cell), false)
		}
		x := float64(cols)
		p.Add(rect{x0: x + 0.03, y0: y + 0.04, x1: x + 1.37, y1: y + 0.96, fill: white})
		add(x+0.07, y+0.2, fmt.Sprintf("no fault: p50 %s p99 %s\n  %s jobs/s\nfaults: p50 %s p99 %s\n  %s jobs/s",
			msOrDash(r.P50Ms), msOrDash(r.P99Ms), numText(r.PerSec), msOrDash(r.FaultP50Ms), msOrDash(r.FaultP99Ms), numText(r.FaultPerSec)), false)
	}
	for ci, c := range d.Classes {
		add(float64(ci)+0.05, float64(n)+0.12, wrap(c, 14), true)
	}
	add(float64(cols)+0.05, float64(n)+0.12, "completion,\njobs/s", true)
	l, err := plotter.NewLabels(labels)
	if err != nil {
		return fmt.Errorf("jobs decision labels: %w", err)
	}
	for i := range l.TextStyle {
		l.TextStyle[i].Font.Size = vg.Points(6.5)
		if bold[i] {
			l.TextStyle[i].Font.Size = vg.Points(7.5)
			l.TextStyle[i].Font.Weight = font.WeightBold
		}
	}
	p.Add(l)
	p.X.Min, p.X.Max = -1.2, float64(cols)+1.4
	p.Y.Min, p.Y.Max = -0.05, float64(n)+0.75
	width := vg.Length(1.55*(float64(cols)+2.6)) * vg.Inch
	height := vg.Length(0.9+0.7*float64(n)) * vg.Inch
	if err := p.Save(width, height, base+".svg"); err != nil {
		return fmt.Errorf("save jobs decision view: %w", err)
	}
	return savePNG2x(p, width, height, base+".png")
}

// jobPlotDetail is a cell's evidence in a few short lines.
func jobPlotDetail(c *verdict.JobCell) string {
	var lines []string
	if c.Duplicates+c.StaleAccepted+c.Lost > 0 {
		lines = append(lines, fmt.Sprintf("dup %d (%dc %ds) stale %d lost %d", c.Duplicates, c.Concurrent, c.Sequential, c.StaleAccepted, c.Lost))
	}
	if c.Class != verdict.ClassNone && c.Class != verdict.ClassMisuse {
		lines = append(lines, fmt.Sprintf("%d exposures, touched dup %d/%d", c.Exposures, c.TouchedDuplicated.Hits, c.TouchedDuplicated.Of))
	}
	lines = append(lines, fmt.Sprintf("jobs dup %d/%d %s", c.Duplicated.Hits, c.Duplicated.Of, c.Duplicated.Interval()))
	if c.StuckMaxMs > 0 {
		lines = append(lines, "stuck ≤ "+msText(c.StuckMaxMs))
	}
	return strings.Join(lines, "\n")
}

func init() {
	registerFigure(Figure{
		Name: JobDecisionPlot, Alt: "jobs decision view", Slot: SlotJobs,
		Caption:  "The jobs decision view as an image (2× resolution, to paste into a design document): each cell's colour and words say the same thing; \"jobs dup k/n\" is how many of the cell's due jobs had their effect applied twice or more, with its 95% interval, \"touched dup\" the same of the jobs a fault met; a pale VACUOUS cell is exactly once where the strategy's control showed nothing under that fault, a pale cell marked ? rests on fewer than 10 exposures.",
		Contents: "the jobs decision view as an image (2× resolution), to paste into a design document",
		Draw: func(base string, s *verdict.Summary) (bool, error) {
			d := s.JobDecision
			if d == nil {
				d = verdict.NewJobDecision(s)
			}
			if len(d.Rows) == 0 {
				return false, nil
			}
			return true, WriteJobDecisionPlot(base, d)
		},
	})
}
