package report

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/lockbench/lockbench/verdict"
)

var outcomeSymbol = map[string]string{
	verdict.OutcomeSafe: "✓", verdict.OutcomeRegressed: "⚠", verdict.OutcomeFenced: "◐", verdict.OutcomeUntested: "◑",
	verdict.OutcomeUnfenced: "✗", verdict.OutcomeDamage: "✗", verdict.OutcomeNone: "?",
}

// availabilityText sums a cell's availability up in a few words.
func availabilityText(cell *verdict.DecisionCell) string {
	class := cell.Class
	var parts []string
	if class != verdict.ClassNone && class != verdict.ClassMisuse {
		parts = append(parts, fmt.Sprintf("%d during, %d after", cell.AcquisitionsDuring, cell.AcquisitionsAfter))
	}
	parts = append(parts, "gap "+msText(cell.LongestGapMs))
	if cell.RecoveredAfterMs < 0 {
		parts = append(parts, "never recovered")
	}
	if cell.NotLive > 0 {
		parts = append(parts, "NOT LIVE")
	}
	return strings.Join(parts, ", ")
}

// msText writes a duration in ms the way people read it.
func msText(ms float64) string {
	switch {
	case ms >= 10000:
		return fmt.Sprintf("%.0f s", ms/1000)
	case ms >= 1000:
		return fmt.Sprintf("%.1f s", ms/1000)
	case ms >= 10:
		return fmt.Sprintf("%.0f ms", ms)
	}
	return fmt.Sprintf("%.1f ms", ms)
}

// cellText is a cell in the Markdown table.
func cellText(cell *verdict.DecisionCell, store bool) string {
	s := outcomeSymbol[cell.Outcome] + " " + cell.Outcome
	switch {
	case cell.Outcome == verdict.OutcomeRegressed:
		s += fmt.Sprintf(" (%d, %d writes refused)", cell.TokenRegressions, cell.StaleRejected)
	case cell.Outcome == verdict.OutcomeFenced && store:
		s += fmt.Sprintf(" (%d overlaps; the database rolled %d late commits back)", cell.Violations, cell.RolledBack)
	case cell.Outcome == verdict.OutcomeFenced:
		s += fmt.Sprintf(" (%d overlaps, %d late writes stopped)", cell.Violations, cell.StaleRejected)
	case cell.Outcome == verdict.OutcomeUntested:
		s += fmt.Sprintf(" (%d overlaps; no late write reached the fence)", cell.Violations)
	case cell.Outcome == verdict.OutcomeUnfenced:
		s += fmt.Sprintf(" (%d overlaps, nothing to stop a late write; none seen landing)", cell.Violations)
	case cell.Outcome == verdict.OutcomeDamage:
		s += fmt.Sprintf(" (%d overlaps, %d stale accepted, %d lost)", cell.Violations, cell.StaleAccepted, cell.LostUpdates)
	}
	if cell.Invalid > 0 && cell.Outcome != verdict.OutcomeNone {
		s += fmt.Sprintf(" [%d of %d cases invalid]", cell.Invalid, cell.Cases)
	}
	return s + " · " + evidenceText(cell) + " · " + availabilityText(cell)
}

// evidenceText says how much the outcome rests on: in how many trials two
// holders were seen (damage, for a lockless backend), with the interval,
// the longest overlap and zombie time, and, for a safe cell with few
// exposures, that it is a sample.
func evidenceText(cell *verdict.DecisionCell) string {
	class := cell.Class
	if cell.Trials == 0 {
		return "no decided trial"
	}
	var s string
	if cell.TwoHolders.Of == 0 {
		s = "no lock: damage in " + cell.Damage.String()
	} else {
		s = "two holders in " + cell.TwoHolders.String()
	}
	if cell.TwoHoldersSeen() {
		s += ", overlap up to " + msText(cell.OverlapMaxMs)
	}
	if cell.ZombieMaxMs > 0 {
		s += ", zombie up to " + msText(cell.ZombieMaxMs)
	}
	if class != verdict.ClassNone && class != verdict.ClassMisuse {
		s += fmt.Sprintf(" (%d exposures)", cell.Exposures)
	}
	if cell.TooFew {
		s += " — too few to call it safe"
	}
	return s
}

// label names a row's backend with what kind of entry it is.
func rowLabel(r verdict.DecisionRow) string {
	switch {
	case r.Control:
		return r.Backend + " (unsafe control)"
	case r.Lockless:
		return r.Backend + " (no lock)"
	case r.Store:
		return r.Backend + " (work in its transaction)"
	case !r.Fenced:
		return r.Backend + " (no token)"
	}
	return r.Backend
}

// WriteDecisionMarkdown writes the decision view as a Markdown table: one row per
// backend, one column per fault class the run exercised, then the cost
// without faults.
func WriteDecisionMarkdown(w io.Writer, d *verdict.Decision) error {
	t := Table{Header: append(append([]string{"backend"}, d.Classes...), "p50 / p99 ms, no fault", "acq/s (commits/s), no fault", "hand-off p50 ms")}
	t.Right = make([]bool, len(t.Header))
	for i := len(d.Classes) + 1; i < len(t.Header); i++ {
		t.Right[i] = true
	}
	for _, r := range d.Rows {
		row := []string{rowLabel(r)}
		for _, c := range d.Classes {
			if cell := r.Cells[c]; cell != nil {
				row = append(row, cellText(cell, r.Store))
			} else {
				row = append(row, "—")
			}
		}
		lat := latText(r.P50Ms, r.P99Ms)
		if r.NoFaultCases > 1 && lat != "—" {
			lat += fmt.Sprintf(" (median of %d)", r.NoFaultCases) // MODEL §18
		}
		t.Add(append(row, lat, numText(r.AcquiresPerSec), numText(r.HandoffP50Ms))...)
	}
	return t.Write(w)
}

func latText(p50, p99 float64) string {
	if p50 == 0 && p99 == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f / %.2f", p50, p99)
}

func numText(v float64) string {
	switch {
	case v == 0:
		return "—"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", math.Round(v*100)/100)
}

// DecisionLegend explains the outcomes, for the report and the docs.
const DecisionLegend = "✓ *safe*: never two believed holders, no damage. " +
	"⚠ *safe, tokens regressed*: no overlap, but the fencing token went backwards (a counter lost in a restart or failover), so the fenced resource refused legitimate writes. " +
	"◐ *unsafe, fenced*: two clients believed they held the lock at once, and the fence (the token, or the database the work commits in) was seen stopping late writes. " +
	"◑ *unsafe, fence untested*: two believed holders on a fenced backend, but no late write reached the fence: whether it would have held is not shown. " +
	"✗ *unsafe, unfenced*: two believed holders and nothing to stop a late write (none was seen landing). " +
	"✗ *damage done*: a late write landed (stale accepted, a lost update, a lost commit). " +
	"? *no evidence*: no trial behind the cell could answer. " +
	"After the outcome: the evidence (two holders in k of n decided trials with its 95% interval, the longest overlap and zombie time, the exposures), then the acquisitions while a fault was in force and after, and the longest gap: the longest a client waited with nobody holding the key."
