package verdict

import (
	"maps"
	"slices"

	"github.com/lockbench/lockbench/checker"
)

// Outcomes of a backend under a class of faults, from best to worst
// (MODEL §18). The decision view names them in words and symbols, never by
// colour alone.
const (
	OutcomeSafe      = "safe"
	OutcomeRegressed = "safe, tokens regressed" // no overlap, but fencing tokens went backwards: legitimate writes refused
	OutcomeFenced    = "unsafe, fenced"         // two believed holders, and the fence was seen stopping late writes
	OutcomeUntested  = "unsafe, fence untested" // two believed holders on a fenced backend, and no late write reached the fence
	OutcomeUnfenced  = "unsafe, unfenced"       // two believed holders, no fence, no late write seen landing
	OutcomeDamage    = "damage done"            // a late write landed
	OutcomeNone      = "no evidence"            // no trial behind the cell could answer
)

// DecisionCell is one backend under one fault class, over every case (and
// lane) of the run in that class (MODEL §18). Cases and Invalid count them
// all; every other figure counts only the decided trials (MODEL §17):
// valid ones, and invalid ones that proved unsafety anyway.
type DecisionCell struct {
	Class   string `json:"class"`
	Outcome string `json:"outcome"`
	Cases   int    `json:"cases"`
	Invalid int    `json:"invalid"`
	// Trials are the decided trials, Exposures the occasions on which the
	// lock met a fault in them (MODEL §16); TwoHolders and Damage say in
	// how many trials two clients believed they held the lock, and a late
	// write landed, with a 95% interval: one trial is a sample, not a
	// property of the lock. Each rate is over the trials that can answer
	// for it: the valid ones, and the invalid ones that proved that
	// outcome (MODEL §17).
	Trials    int `json:"trials"`
	Exposures int `json:"exposures"`
	// TwoHolders is absent (Of 0) for a lockless backend: two holders
	// mean nothing where no lock is taken (MODEL §18).
	TwoHolders Rate `json:"two_holders"`
	Damage     Rate `json:"damage"`
	// TooFew: no two holders were seen, and the cell rests on fewer than
	// MinExposures exposures or fewer than MinExposures decided trials
	// (its rates' samples; for no fault and client misuse: trials), too
	// few to call the lock safe.
	TooFew           bool `json:"too_few"`
	Violations       int  `json:"violations"`
	StaleRejected    int  `json:"stale_rejected"`
	StaleAccepted    int  `json:"stale_accepted"`
	LostUpdates      int  `json:"lost_updates"`
	TokenRegressions int  `json:"token_regressions"`
	// RolledBack counts late work the backend's database refused to
	// commit: its fence at work, as StaleRejected is a token's.
	RolledBack int `json:"rolled_back,omitempty"`
	// Availability: acquisitions while the faults were in force and after
	// they healed, the longest gap, the slowest recovery after a heal (-1:
	// a fault after which the lock never served again), and how many
	// trials were not live as their scenario expected.
	AcquisitionsDuring int     `json:"acquisitions_during"`
	AcquisitionsAfter  int     `json:"acquisitions_after"`
	LongestGapMs       float64 `json:"longest_gap_ms"`
	RecoveredAfterMs   float64 `json:"recovered_after_ms"`
	NotLive            int     `json:"not_live"`
	// OverlapMaxMs and ZombieMaxMs are the longest overlap of two holders
	// and the longest zombie time over the decided trials.
	OverlapMaxMs float64 `json:"overlap_max_ms"`
	ZombieMaxMs  float64 `json:"zombie_max_ms"`

	// twoHolders and damage count the trials that showed each outcome;
	// twoN and damageN the trials that can answer for it (MODEL §17).
	twoHolders, damage, regressed, twoN, damageN int
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
	// NoFault latency and throughput: the median, over the backend's
	// valid cases without faults (every lane), of each case's acquire p50,
	// p99 and throughput (zero when the run had none for this backend:
	// MODEL §18). NoFaultCases says how many cases that is.
	P50Ms          float64 `json:"no_fault_p50_ms"`
	P99Ms          float64 `json:"no_fault_p99_ms"`
	AcquiresPerSec float64 `json:"no_fault_acquisitions_per_s"`
	NoFaultCases   int     `json:"no_fault_cases"`
	// HandoffP50Ms is the median of the hand-off p50s of those cases that
	// had a hand-off.
	HandoffP50Ms float64                  `json:"handoff_p50_ms"`
	Cells        map[string]*DecisionCell `json:"cells"`
}

// Decision is the backends × fault classes view: which lock is safe under
// which fault, at what availability and latency cost.
type Decision struct {
	Classes []string      `json:"classes"`
	Rows    []DecisionRow `json:"rows"`
}

// NewDecision builds the decision view of one or more runs' summaries
// (MODEL §18). A summary of a run already given (the same run id) is
// left out, and so is a trial already counted (the same digest, in one
// summary or another): their trials are not new trials (A5).
func NewDecision(sums ...*Summary) *Decision {
	d := &Decision{}
	classSeen := map[string]bool{}
	rowIdx := map[string]int{}
	// The no-fault costs of each backend's valid no-fault cases, of which
	// the row gives the medians (MODEL §18).
	type costs struct{ p50, p99, rate, hand []float64 }
	noFault := map[string]*costs{}
	runs, trials := map[string]bool{}, map[string]bool{}
	for _, s := range sums {
		// One run given twice (a folder and results/latest, a copy) is
		// one run: counting its trials twice would halve its intervals
		// and lift a cell over "too few" on no new evidence.
		if s.RunID != "" {
			if runs[s.RunID] {
				continue
			}
			runs[s.RunID] = true
		}
		for i := range s.Cases {
			c := &s.Cases[i]
			if c.Digest != "" {
				// The same trial again (a history written twice into
				// one file, a copy of a folder under another run id):
				// one sample (MODEL §18, A5).
				if trials[c.Digest] {
					continue
				}
				trials[c.Digest] = true
			}
			r := c.Check
			if r.Meta.Jobs != nil {
				continue // a job workload: the jobs decision view's (MODEL §21)
			}
			b := r.Backend
			ri, ok := rowIdx[b]
			if !ok {
				d.Rows = append(d.Rows, DecisionRow{Backend: b, Fenced: r.Meta.Fenced, Lockless: r.Meta.Lockless, Store: r.Meta.Store, Control: r.Meta.Control, Cells: map[string]*DecisionCell{}})
				ri = len(d.Rows) - 1
				rowIdx[b] = ri
				noFault[b] = &costs{}
			}
			row := &d.Rows[ri]
			class := FaultClass(r.Meta)
			classSeen[class] = true
			cell := row.Cells[class]
			if cell == nil {
				cell = &DecisionCell{Class: class}
				row.Cells[class] = cell
			}
			cell.add(c)
			if class != ClassNone || !r.Valid {
				continue
			}
			nf := noFault[b]
			if c.Metrics.AcquireLatency.Count > 0 {
				nf.p50 = append(nf.p50, c.Metrics.AcquireLatency.P50)
				nf.p99 = append(nf.p99, c.Metrics.AcquireLatency.P99)
			}
			rate := c.Metrics.AcquiresPerSec
			if st := r.Store; st != nil && c.Metrics.DurationS > 0 {
				// The work's commits, not the (free) acquisitions of a
				// lockless entry.
				rate = float64(st.Committed) / c.Metrics.DurationS
			}
			nf.rate = append(nf.rate, rate)
			if c.Metrics.Handoff.Count > 0 {
				nf.hand = append(nf.hand, c.Metrics.Handoff.P50)
			}
		}
	}
	for b, ri := range rowIdx {
		// Medians, not the busiest case: of lanes of one workload the
		// busiest is the one whose acquisitions were quickest.
		nf, row := noFault[b], &d.Rows[ri]
		row.NoFaultCases = len(nf.rate)
		row.P50Ms, row.P99Ms = median(nf.p50, true), median(nf.p99, true)
		row.AcquiresPerSec, row.HandoffP50Ms = median(nf.rate, false), median(nf.hand, true)
	}
	for i := range d.Rows {
		row := &d.Rows[i]
		if row.Lockless {
			// No lock: its "acquisitions" cost nothing and hand nothing over.
			row.P50Ms, row.P99Ms, row.HandoffP50Ms = 0, 0, 0
		}
		for _, cell := range row.Cells {
			cell.finish(row)
		}
	}
	for _, c := range ClassOrder {
		if classSeen[c] {
			d.Classes = append(d.Classes, c)
			delete(classSeen, c)
		}
	}
	// Classes the view does not know come last, never dropped (MODEL §18).
	d.Classes = append(d.Classes, slices.Sorted(maps.Keys(classSeen))...)
	return d
}

// add counts one case (or lane) into the cell.
func (cell *DecisionCell) add(c *CaseSummary) {
	r := c.Check
	cell.Cases++
	if !r.Valid {
		cell.Invalid++
	}
	if r.TokenRegressions > 0 && (r.Decided || r.Readable) {
		// A regression is two grants the record shows, which nothing
		// else that failed can undo (MODEL §18, A7): proven in any
		// readable trial, decided or not.
		cell.regressed++
		cell.TokenRegressions += r.TokenRegressions
	}
	if !r.Decided {
		return
	}
	cell.Trials++
	cell.Exposures += r.Exposures
	if r.TwoHolders() {
		cell.twoHolders++
	}
	if r.Damaged() {
		cell.damage++
	}
	// An invalid trial is a sample of the outcome it proved, and of no
	// other: its run could not answer for the rest (MODEL §17).
	if r.Valid || r.TwoHolders() {
		cell.twoN++
	}
	if r.Valid || r.Damaged() {
		cell.damageN++
	}
	cell.OverlapMaxMs = max(cell.OverlapMaxMs, r.OverlapMaxMs)
	cell.ZombieMaxMs = max(cell.ZombieMaxMs, r.ZombieMaxMs)
	cell.Violations += r.Violations
	cell.StaleRejected += r.Resource.StaleRejected
	cell.StaleAccepted += r.Resource.StaleAccepted
	cell.LostUpdates += r.Resource.LostUpdates
	if r.Store != nil {
		cell.RolledBack += r.Store.RolledBack
	}
	cell.LongestGapMs = max(cell.LongestGapMs, r.Liveness.LongestGapMs)
	if r.Status == checker.StatusUnavailable {
		cell.NotLive++
	}
	cell.AcquisitionsDuring += r.Figures.AcquiresDuringFaults
	cell.AcquisitionsAfter += r.Figures.AcquiresAfterFaults
	stayDown := r.Expect.Available != nil && !*r.Expect.Available
	for _, f := range r.Liveness.Faults {
		switch {
		case stayDown: // MODEL §18: no recovery time to take the largest of
		case cell.RecoveredAfterMs < 0:
		case f.Verdict == checker.Unmet && f.RecoveredAfterMs < 0:
			cell.RecoveredAfterMs = -1
		case f.Verdict != checker.NotJudged:
			cell.RecoveredAfterMs = max(cell.RecoveredAfterMs, f.RecoveredAfterMs)
		}
	}
}

// finish judges the cell's outcome and its rates (MODEL §18).
func (cell *DecisionCell) finish(row *DecisionRow) {
	if !row.Lockless {
		cell.TwoHolders = NewRate(cell.twoHolders, cell.twoN)
	}
	cell.Damage = NewRate(cell.damage, cell.damageN)
	switch {
	case cell.damage > 0:
		cell.Outcome = OutcomeDamage
	case cell.twoHolders > 0 && !row.Fenced && !row.Store:
		cell.Outcome = OutcomeUnfenced
	case cell.twoHolders > 0 && cell.StaleRejected+cell.RolledBack > 0:
		cell.Outcome = OutcomeFenced
	case cell.twoHolders > 0:
		cell.Outcome = OutcomeUntested
	case cell.Trials == 0:
		cell.Outcome = OutcomeNone
	case cell.regressed > 0:
		cell.Outcome = OutcomeRegressed
	default:
		cell.Outcome = OutcomeSafe
	}
	// The rates are over trials: ten windows of one trial are ten
	// exposures but one sample of the rate, so both must reach the bar.
	evidence := min(cell.Exposures, cell.Trials)
	if cell.Class == ClassNone || cell.Class == ClassMisuse {
		evidence = cell.Trials
	}
	cell.TooFew = cell.twoHolders == 0 && cell.damage == 0 && cell.Trials > 0 && evidence < MinExposures
}

// TwoHoldersSeen reports whether some decided trial of the cell showed two
// holders.
func (cell *DecisionCell) TwoHoldersSeen() bool { return cell.TwoHolders.Hits > 0 }

// median is the middle value of xs, or of an even count the worse of the
// two middle ones: the higher when higher is worse (a latency), else the
// lower (a throughput). 0 for none.
func median(xs []float64, higherWorse bool) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if higherWorse {
		return s[len(s)/2]
	}
	return s[(len(s)-1)/2]
}
