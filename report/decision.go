package report

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/lockbench/lockbench/checker"
)

// Outcomes of a backend under a class of faults, from best to worst. The
// decision view names them in words and symbols, never by colour alone.
const (
	OutcomeSafe      = "safe"
	OutcomeRegressed = "safe, tokens regressed" // no overlap, but fencing tokens went backwards: legitimate writes refused
	OutcomeFenced    = "unsafe, fenced"         // two believed holders, and fencing stopped every late write
	OutcomeDamage    = "damage done"            // a late write landed, or two holders with nothing to stop them
	OutcomeNone      = "no evidence"            // every case behind the cell was invalid
)

var outcomeSymbol = map[string]string{
	OutcomeSafe: "✓", OutcomeRegressed: "⚠", OutcomeFenced: "◐", OutcomeDamage: "✗", OutcomeNone: "?",
}

// DecisionCell is one backend under one fault class, over every case (and
// trial) of the run in that class.
type DecisionCell struct {
	Outcome          string `json:"outcome"`
	Cases            int    `json:"cases"`
	Invalid          int    `json:"invalid"`
	Violations       int    `json:"violations"`
	StaleRejected    int    `json:"stale_rejected"`
	StaleAccepted    int    `json:"stale_accepted"`
	LostUpdates      int    `json:"lost_updates"`
	TokenRegressions int    `json:"token_regressions"`
	// Availability: acquisitions while the faults were in force and after
	// they healed, the longest time without any acquisition, the slowest
	// recovery after a heal (-1: a fault after which the lock never came
	// back), and whether every case was live as its scenario expected.
	AcquisitionsDuring int     `json:"acquisitions_during"`
	AcquisitionsAfter  int     `json:"acquisitions_after"`
	LongestGapMs       float64 `json:"longest_gap_ms"`
	RecoveredAfterMs   float64 `json:"recovered_after_ms"`
	NotLive            int     `json:"not_live"`
	// The evidence behind the outcome: Trials are the cases that could
	// answer (valid ones, and invalid ones that proved unsafety anyway),
	// Exposures the faults that fired in them; TwoHolders and Damage say
	// in how many of those trials two clients believed they held the lock,
	// and a late write landed, with a 95% interval (Wilson): one trial is
	// a sample, not a property of the lock.
	Trials     int  `json:"trials"`
	Exposures  int  `json:"exposures"`
	TwoHolders Rate `json:"two_holders"`
	Damage     Rate `json:"damage"`
	// OverlapMaxMs and ZombieMaxMs are the longest overlap of two holders
	// and the longest zombie time over the cell's cases.
	OverlapMaxMs float64 `json:"overlap_max_ms"`
	ZombieMaxMs  float64 `json:"zombie_max_ms"`
	twoHolders   int
	damage       int
}

// DecisionRow is one backend across the fault classes, with what it costs
// when nothing goes wrong.
type DecisionRow struct {
	Backend string `json:"backend"`
	Fenced  bool   `json:"fenced"`
	// Lockless: no lock at all (optimistic concurrency); Store: the work
	// runs in the backend's own database (see backends.Store).
	Lockless bool `json:"lockless,omitempty"`
	Store    bool `json:"store,omitempty"`
	Control  bool `json:"known_unsafe_control,omitempty"`
	// NoFault latency and throughput, from the cases without faults
	// (zero when the run had none for this backend).
	P50Ms          float64 `json:"no_fault_p50_ms"`
	P99Ms          float64 `json:"no_fault_p99_ms"`
	AcquiresPerSec float64 `json:"no_fault_acquisitions_per_s"`
	// Hand-off latency where clients contended for a key (any case).
	HandoffP50Ms float64                  `json:"handoff_p50_ms"`
	Cells        map[string]*DecisionCell `json:"cells"`
}

// Decision is the backends × fault classes view: which lock is safe under
// which fault, at what availability and latency cost.
type Decision struct {
	Classes []string      `json:"classes"`
	Rows    []DecisionRow `json:"rows"`
}

// NewDecision builds the decision view of one or more runs' summaries.
func NewDecision(sums ...*Summary) *Decision {
	d := &Decision{}
	classSeen := map[string]bool{}
	rowIdx := map[string]int{}
	type lat struct {
		n          int64
		p50, p99   float64
		acqPerSec  float64
		handN      int64
		handoffP50 float64
	}
	lats := map[string]*lat{}
	for _, s := range sums {
		for i := range s.Cases {
			c := &s.Cases[i]
			r := c.Check
			b := r.Backend
			ri, ok := rowIdx[b]
			if !ok {
				d.Rows = append(d.Rows, DecisionRow{Backend: b, Fenced: r.Meta.Fenced, Lockless: r.Meta.Lockless, Store: r.Meta.Store, Control: r.Meta.Control, Cells: map[string]*DecisionCell{}})
				ri = len(d.Rows) - 1
				rowIdx[b] = ri
				lats[b] = &lat{}
			}
			row := &d.Rows[ri]
			class := FaultClass(r.Meta)
			classSeen[class] = true
			cell := row.Cells[class]
			if cell == nil {
				cell = &DecisionCell{RecoveredAfterMs: 0}
				row.Cells[class] = cell
			}
			cell.add(c)
			// Latency without faults: the case with the most samples
			// speaks for the backend (a mean of percentiles means nothing).
			l := lats[b]
			if class == ClassNone && c.Metrics.AcquireLatency.Count > l.n && r.Valid {
				l.n, l.p50, l.p99 = c.Metrics.AcquireLatency.Count, c.Metrics.AcquireLatency.P50, c.Metrics.AcquireLatency.P99
				l.acqPerSec = c.Metrics.AcquiresPerSec
				if st := r.Store; st != nil && c.Metrics.DurationS > 0 {
					// The work's commits, not the (free) acquisitions of a
					// lockless entry.
					l.acqPerSec = float64(st.Committed) / c.Metrics.DurationS
				}
			}
			if h := c.Metrics.Handoff; h.Count > l.handN && r.Valid && class == ClassNone {
				l.handN, l.handoffP50 = h.Count, h.P50
			}
		}
	}
	for i := range d.Rows {
		row := &d.Rows[i]
		l := lats[row.Backend]
		row.P50Ms, row.P99Ms, row.AcquiresPerSec, row.HandoffP50Ms = l.p50, l.p99, l.acqPerSec, l.handoffP50
		if row.Lockless {
			// No lock: its "acquisitions" cost nothing and hand nothing over.
			row.P50Ms, row.P99Ms, row.HandoffP50Ms = 0, 0, 0
		}
		for _, cell := range row.Cells {
			// Work that commits with its lock in the database is stopped
			// by the database as a token would stop it.
			cell.Outcome = cell.judge(row.Fenced || row.Store)
			cell.TwoHolders = NewRate(cell.twoHolders, cell.Trials)
			cell.Damage = NewRate(cell.damage, cell.Trials)
		}
	}
	for _, c := range ClassOrder {
		if classSeen[c] {
			d.Classes = append(d.Classes, c)
		}
	}
	return d
}

// add counts one case into the cell.
func (cell *DecisionCell) add(c *CaseSummary) {
	r := c.Check
	cell.Cases++
	if !r.Valid {
		cell.Invalid++
	}
	if r.Valid || r.Status == "violation" {
		cell.Trials++
		cell.Exposures += r.FaultsFired
		if r.Violations > 0 {
			cell.twoHolders++
		}
		if r.Resource.StaleAccepted > 0 || (!r.Meta.Fenced && !r.Meta.Store && (r.Violations > 0 || r.Resource.LostUpdates > 0)) || (r.Meta.Store && r.Resource.LostUpdates > 0) {
			cell.damage++
		}
	}
	cell.OverlapMaxMs = max(cell.OverlapMaxMs, r.OverlapMaxMs)
	cell.ZombieMaxMs = max(cell.ZombieMaxMs, r.ZombieMaxMs)
	cell.Violations += r.Violations
	cell.StaleRejected += r.Resource.StaleRejected
	cell.StaleAccepted += r.Resource.StaleAccepted
	cell.LostUpdates += r.Resource.LostUpdates
	cell.TokenRegressions += r.TokenRegressions
	if r.Liveness.LongestGapMs > cell.LongestGapMs {
		cell.LongestGapMs = r.Liveness.LongestGapMs
	}
	if r.Status == "unavailable" {
		cell.NotLive++
	}
	for _, f := range r.Liveness.Faults {
		cell.AcquisitionsDuring += f.AcquisitionsDuring
		cell.AcquisitionsAfter += f.AcquisitionsAfter
		switch {
		case cell.RecoveredAfterMs < 0:
		case f.RecoveredAfterMs < 0 && f.Verdict == checker.Unmet:
			cell.RecoveredAfterMs = -1
		case f.RecoveredAfterMs > cell.RecoveredAfterMs:
			cell.RecoveredAfterMs = f.RecoveredAfterMs
		}
	}
}

// judge names the cell's outcome. Damage a case proves counts even when
// the case is otherwise invalid (proven unsafety wins); a clean record
// counts only from valid cases.
func (cell *DecisionCell) judge(fenced bool) string {
	switch {
	case cell.StaleAccepted > 0, !fenced && (cell.Violations > 0 || cell.LostUpdates > 0):
		return OutcomeDamage
	case cell.Violations > 0 || cell.LostUpdates > 0:
		return OutcomeFenced
	case cell.Invalid == cell.Cases:
		return OutcomeNone
	case cell.TokenRegressions > 0:
		return OutcomeRegressed
	}
	return OutcomeSafe
}

// availabilityText sums a cell's availability up in a few words.
func (cell *DecisionCell) availabilityText(class string) string {
	var parts []string
	if class != ClassNone && class != ClassMisuse {
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
func (cell *DecisionCell) cellText(class string, store bool) string {
	s := outcomeSymbol[cell.Outcome] + " " + cell.Outcome
	switch {
	case cell.Outcome == OutcomeRegressed:
		s += fmt.Sprintf(" (%d, %d writes refused)", cell.TokenRegressions, cell.StaleRejected)
	case cell.Outcome == OutcomeFenced && store:
		s += fmt.Sprintf(" (%d overlaps; the database rolled the late work back)", cell.Violations)
	case cell.Outcome == OutcomeFenced:
		s += fmt.Sprintf(" (%d overlaps, %d late writes stopped)", cell.Violations, cell.StaleRejected)
	case cell.Outcome == OutcomeDamage:
		s += fmt.Sprintf(" (%d overlaps, %d stale accepted, %d lost)", cell.Violations, cell.StaleAccepted, cell.LostUpdates)
	}
	if cell.Invalid > 0 && cell.Outcome != OutcomeNone {
		s += fmt.Sprintf(" [%d of %d cases invalid]", cell.Invalid, cell.Cases)
	}
	return s + " · " + cell.evidenceText(class) + " · " + cell.availabilityText(class)
}

// evidenceText says how much the outcome rests on: in how many trials two
// holders were seen, with the interval, and, for a safe cell with few
// exposures, that it is a sample.
func (cell *DecisionCell) evidenceText(class string) string {
	if cell.Trials == 0 {
		return "no decided trial"
	}
	s := "two holders in " + cell.TwoHolders.String()
	if cell.twoHolders > 0 {
		s += ", overlap up to " + msText(cell.OverlapMaxMs)
	}
	if class != ClassNone && class != ClassMisuse {
		s += fmt.Sprintf(" (%d exposures)", cell.Exposures)
	}
	if cell.thin(class) {
		s += " — too few to call it safe"
	}
	return s
}

// thin reports whether a cell that saw no two holders rests on too few
// trials (or fault exposures) to call the lock safe.
func (cell *DecisionCell) thin(class string) bool {
	if cell.twoHolders > 0 || cell.Trials == 0 {
		return false
	}
	if class != ClassNone && class != ClassMisuse {
		return cell.Exposures < MinExposures
	}
	return cell.Trials < MinExposures
}

// label names a row's backend with what kind of entry it is.
func (r DecisionRow) label() string {
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

// WriteMarkdown writes the decision view as a Markdown table: one row per
// backend, one column per fault class the run exercised, then the cost
// without faults.
func (d *Decision) WriteMarkdown(w io.Writer) error {
	t := Table{Header: append(append([]string{"backend"}, d.Classes...), "p50 / p99 ms, no fault", "acq/s (commits/s), no fault", "hand-off p50 ms")}
	t.Right = make([]bool, len(t.Header))
	for i := len(d.Classes) + 1; i < len(t.Header); i++ {
		t.Right[i] = true
	}
	for _, r := range d.Rows {
		row := []string{r.label()}
		for _, c := range d.Classes {
			if cell := r.Cells[c]; cell != nil {
				row = append(row, cell.cellText(c, r.Store))
			} else {
				row = append(row, "—")
			}
		}
		t.Add(append(row, latText(r.P50Ms, r.P99Ms), numText(r.AcquiresPerSec), numText(r.HandoffP50Ms))...)
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
	"◐ *unsafe, fenced*: two clients believed they held the lock at once, and the fencing token stopped every late write. " +
	"✗ *damage done*: a late write landed (stale accepted), or two holders overlapped with no token to stop them. " +
	"? *no evidence*: every case behind the cell was invalid. " +
	"After the outcome: acquisitions while the fault was in force and after it healed, and the longest time with no acquisition at all."
