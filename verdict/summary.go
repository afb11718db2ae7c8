package verdict

import (
	"fmt"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/internal/threshold"
)

// Summary is summary.json: the verdicts and metrics of every case.
type Summary struct {
	// SchemaVersion is the layout version of this file (SchemaVersion).
	SchemaVersion int               `json:"schema_version"`
	Scenario      string            `json:"scenario,omitempty"`
	Seed          int64             `json:"seed"`
	RunID         string            `json:"run_id,omitempty"`
	Versions      map[string]string `json:"versions,omitempty"`
	// Conditions are the run's machine and set-up, from run.json.
	Conditions *Conditions `json:"conditions,omitempty"`
	// Decision is the backends × fault classes view of the run.
	Decision *Decision `json:"decision,omitempty"`
	// Warnings about the history itself (a truncated last line).
	Warnings []string      `json:"warnings,omitempty"`
	Cases    []CaseSummary `json:"cases"`
	// Rows judge each case across its trials (a case without trials is a
	// row of one).
	Rows []RowSummary `json:"rows"`
}

// CaseSummary is one case's verdicts and metrics.
type CaseSummary struct {
	Check   checker.Result `json:"check"`
	Metrics Metrics        `json:"metrics"`
	// Linearizability is porcupine's verdict on the lock service's own
	// history (see checker.LinOps).
	Linearizability checker.LinResult   `json:"linearizability"`
	Thresholds      []threshold.Verdict `json:"thresholds,omitempty"`
	// Digest identifies the case's events: a trial given twice (a
	// history written twice, a folder copied) has one digest, and counts
	// once (MODEL §18, A5).
	Digest string `json:"digest,omitempty"`
}

// RowVerdict is the verdict on a row, a case over its trials (MODEL §14).
type RowVerdict string

// Row verdicts (MODEL §14).
const (
	RowViolation     RowVerdict = "violation"
	RowUnavailable   RowVerdict = "unavailable"
	RowInvalid       RowVerdict = "invalid"
	RowReproduced    RowVerdict = "reproduced"
	RowNotReproduced RowVerdict = "not-reproduced"
)

// RowSummary is the verdict on a case repeated over trials (MODEL §14):
// the expected outcome must appear in at least Need of them, no trial may
// break a safety or liveness expectation, and a trial that could not be
// judged (invalid, cut short, or missing from the history) could have been
// the one that broke it.
type RowSummary struct {
	Row     string `json:"row"`
	Backend string `json:"backend"`
	Trials  int    `json:"trials"`
	Need    int    `json:"need"`
	// Met counts trials whose outcome matched the expectation; Invalid
	// those that could not be judged, Missing those the history does not
	// hold at all (an interrupted run); Unsafe those with a safety
	// violation the scenario did not expect; Unavailable those where the
	// lock was not live as expected.
	Met         int `json:"met"`
	Invalid     int `json:"invalid"`
	Missing     int `json:"missing,omitempty"`
	Unsafe      int `json:"unsafe"`
	Unavailable int `json:"unavailable"`
	// Verdict: violation (a trial broke a safety expectation: one unsafe
	// trial is enough, however many others were fine), unavailable (a
	// trial was not live as expected), invalid (a trial could not be
	// judged, or the trials disagree on the row), reproduced (Met >= Need)
	// or not-reproduced.
	Verdict RowVerdict `json:"verdict"`
	// Why says, for an invalid row, what made it so.
	Why string `json:"why,omitempty"`
	// The evidence over the row's decided trials (MODEL §16, §17): valid
	// ones, and invalid ones that proved unsafety: how many they are, the
	// occasions on which the lock met a fault in them, in how many two
	// holders were seen (with a 95% interval, over the valid trials and
	// the invalid ones that showed two holders: an invalid trial decided
	// by damage alone says nothing of two holders), and the longest
	// overlap and zombie time.
	Decided   int `json:"decided"`
	Exposures int `json:"exposures"`
	// TwoHolders has no value (Of 0) for a lockless backend (Lockless):
	// two clients inside at once is its design, not an outcome (MODEL
	// §6, A6), and no rate of it is a point of safety.
	TwoHolders   Rate    `json:"two_holders"`
	Lockless     bool    `json:"lockless,omitempty"`
	OverlapMaxMs float64 `json:"overlap_max_ms"`
	ZombieMaxMs  float64 `json:"zombie_max_ms"`
	twoHolders   int
	twoN         int
}

// TwoHoldersText says the row's two-holders rate, or that it has none
// for a lockless backend (MODEL §17, A6).
func (r RowSummary) TwoHoldersText() string {
	if r.Lockless {
		return "n/a (no lock)"
	}
	return r.TwoHolders.String()
}

// rows groups the cases by row, in order of first appearance, and judges
// each (MODEL §14, §17).
func rows(cases []CaseSummary) []RowSummary {
	var out []RowSummary
	idx := map[string]int{}
	seen := map[string]map[int]bool{}
	copies := map[string]bool{}
	for _, c := range cases {
		m := c.Check.Meta
		row := m.Row
		if row == "" {
			row = m.Name
		}
		need, trials, trial := m.Need, m.Trials, m.Trial
		if need == 0 {
			need = 1
		}
		if trials == 0 {
			trials, trial = 1, 1
		}
		i, ok := idx[row]
		if !ok {
			out = append(out, RowSummary{Row: row, Backend: m.Backend, Trials: trials, Need: need, Lockless: m.Lockless})
			i = len(out) - 1
			idx[row] = i
			seen[row] = map[int]bool{}
		}
		r := &out[i]
		switch {
		case r.Trials != trials || r.Need != need:
			r.Why = fmt.Sprintf("its trials disagree on the row: %d trials need %d, and %d need %d", r.Trials, r.Need, trials, need)
		case trial < 1 || trial > trials:
			r.Why = fmt.Sprintf("trial %d is outside 1..%d", trial, trials)
		case seen[row][trial]:
			r.Why = fmt.Sprintf("trial %d appears twice", trial)
		}
		seen[row][trial] = true
		// A trial given twice (the history written twice into one file)
		// is one sample (MODEL §17, A5): the row is invalid for it, and
		// its outcome and evidence count once.
		if c.Digest != "" && copies[c.Digest] {
			continue
		}
		copies[c.Digest] = true
		if c.Check.Decided {
			r.Decided++
			r.Exposures += c.Check.Exposures
			if c.Check.TwoHolders() {
				r.twoHolders++
			}
			if c.Check.Valid || c.Check.TwoHolders() {
				r.twoN++ // MODEL §17: a sample of two holders
			}
			r.OverlapMaxMs = max(r.OverlapMaxMs, c.Check.OverlapMaxMs)
			r.ZombieMaxMs = max(r.ZombieMaxMs, c.Check.ZombieMaxMs)
		}
		switch c.Check.Status {
		case checker.StatusOK:
			r.Met++
		case checker.StatusInvalid, checker.StatusUnknown:
			r.Invalid++
		case checker.StatusViolation:
			r.Unsafe++
		case checker.StatusUnavailable:
			r.Unavailable++
		}
	}
	for i := range out {
		r := &out[i]
		if !r.Lockless {
			r.TwoHolders = NewRate(r.twoHolders, r.twoN)
		}
		for t := 1; t <= r.Trials; t++ {
			if !seen[r.Row][t] {
				r.Missing++
			}
		}
		switch {
		case r.Unsafe > 0:
			r.Verdict = RowViolation
		case r.Unavailable > 0:
			r.Verdict = RowUnavailable
		case r.Why != "":
			r.Verdict = RowInvalid
		case r.Invalid > 0 || r.Missing > 0:
			r.Verdict = RowInvalid
			r.Why = fmt.Sprintf("%d trial(s) could not be judged and %d are missing from the history: any of them could have broken the row", r.Invalid, r.Missing)
		case r.Met >= r.Need:
			r.Verdict = RowReproduced
		default:
			r.Verdict = RowNotReproduced
		}
	}
	return out
}

// ThresholdsFailed counts failed thresholds over all cases.
func (s *Summary) ThresholdsFailed() int {
	n := 0
	for _, c := range s.Cases {
		for _, v := range c.Thresholds {
			if !v.Pass {
				n++
			}
		}
	}
	return n
}

// Err turns the rows' verdicts into the run's outcome (MODEL §14): nil when
// every row is as expected, otherwise an error carrying the exit code of
// the worst verdict. A safety violation outranks an invalid row, which
// outranks a lock that was not live, which outranks a known answer that
// was not reproduced, which outranks a failed threshold.
func (s *Summary) Err() error {
	v := s.Verdicts()
	switch {
	case v[RowViolation] > 0:
		return exitcode.With(fmt.Errorf("%d case(s) violated safety where the scenario expected none", v[RowViolation]), exitcode.Violation)
	case v[RowInvalid] > 0:
		return exitcode.With(fmt.Errorf("%d case(s) invalid or incomplete: their verdicts are not evidence", v[RowInvalid]), exitcode.Invalid)
	case v[RowUnavailable] > 0:
		return exitcode.With(fmt.Errorf("%d case(s) were not live as the scenario expects", v[RowUnavailable]), exitcode.Unavailable)
	case v[RowNotReproduced] > 0:
		return exitcode.With(fmt.Errorf("%d case(s) did not show the outcome the scenario expects", v[RowNotReproduced]), exitcode.NotReproduced)
	case s.ThresholdsFailed() > 0:
		return exitcode.With(fmt.Errorf("%d threshold(s) failed", s.ThresholdsFailed()), exitcode.Threshold)
	}
	return nil
}

// ExitCode is the exit code of Err.
func (s *Summary) ExitCode() exitcode.Code { return exitcode.Of(s.Err()) }

// Recount judges a summary's rows again from its cases (MODEL §14): for a
// summary put together from cases of several histories.
func Recount(s *Summary) *Summary {
	s.Rows = rows(s.Cases)
	return s
}
