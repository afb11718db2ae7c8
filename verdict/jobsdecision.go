package verdict

import (
	"maps"
	"slices"

	"github.com/lockbench/lockbench/checker"
)

// Outcomes of a job strategy under a class of faults (MODEL §21), worst
// first.
const (
	JobOutcomeStale      = "stale accepted" // an effect applied below a token already applied for its job
	JobOutcomeDuplicates = "duplicates"     // a job's effect applied twice or more
	JobOutcomeLost       = "jobs lost"      // a job due that never had its effect
	JobOutcomeOnce       = "exactly once"   // every due job's effect applied once
	JobOutcomeNone       = "no evidence"    // no trial behind the cell could answer
)

// JobCell is one job strategy under one fault class, over every case (and
// lane) of the run in it (MODEL §21). Cases and Invalid count them all;
// the rest counts the decided trials (MODEL §17), the lost jobs only the
// valid ones.
type JobCell struct {
	Class   string `json:"class"`
	Outcome string `json:"outcome"`
	Cases   int    `json:"cases"`
	Invalid int    `json:"invalid"`
	Trials  int    `json:"trials"`
	// Exposures, and of the faults counted in them how many met an
	// attempt in each phase (before, during, after the effect).
	Exposures      int            `json:"exposures"`
	PhaseExposures map[string]int `json:"phase_exposures,omitempty"`
	Jobs           int            `json:"jobs"`
	Touched        int            `json:"jobs_touched"`
	Duplicates     int            `json:"duplicate_effects"`
	Concurrent     int            `json:"duplicates_concurrent"`
	Sequential     int            `json:"duplicates_sequential"`
	Unsplit        int            `json:"duplicates_unsplit"`
	StaleAccepted  int            `json:"stale_effects_accepted"`
	StaleRefused   int            `json:"stale_effects_refused"`
	Absorbed       int            `json:"absorbed"`
	// Lost: over the valid trials (an invalid one's harness failure may
	// have lost them, A8).
	Lost int `json:"lost_jobs"`
	// TouchedDuplicated and Duplicated are per job: the touched jobs
	// duplicated of the jobs touched, and the jobs duplicated of the
	// jobs due; DamageTrials per trial: the trials with a duplicate or a
	// stale effect accepted of those that can answer for it.
	TouchedDuplicated Rate `json:"touched_duplicated"`
	Duplicated        Rate `json:"jobs_duplicated"`
	DamageTrials      Rate `json:"damage_trials"`
	// StuckMaxMs is the longest stuck time, StuckOpen the attempts never
	// taken up by their case's end.
	StuckMaxMs float64 `json:"stuck_max_ms"`
	StuckOpen  int     `json:"stuck_open"`
	// TooFew: exactly once on fewer than MinExposures exposures or jobs
	// touched (without faults: jobs due).
	TooFew bool `json:"too_few"`
	// Vacuous: exactly once under faults, where no control of the
	// strategy's family showed the failure in this class (MODEL §21):
	// the cell proves nothing. VacuousWhy says which.
	Vacuous    bool   `json:"vacuous"`
	VacuousWhy string `json:"vacuous_why,omitempty"`

	hitsT, hitsJ, damage, damageN, lostValid int
}

// JobRow is one job strategy (its variant, on its backend) across the
// fault classes, with what it costs.
type JobRow struct {
	Variant  string `json:"variant"`
	Strategy string `json:"strategy"`
	Backend  string `json:"backend"`
	Family   string `json:"family,omitempty"`
	Lock     bool   `json:"lock,omitempty"`
	// Control: every case of the row expects duplicate effects (it is
	// there to show the failure).
	Control bool `json:"control,omitempty"`
	// The costs: the median over the row's valid cases without faults,
	// and over those with faults, of each case's completion p50, p99 and
	// jobs/s (the worse middle value of an even count), and how many
	// cases that is (MODEL §21).
	P50Ms        float64             `json:"no_fault_completion_p50_ms"`
	P99Ms        float64             `json:"no_fault_completion_p99_ms"`
	PerSec       float64             `json:"no_fault_jobs_per_s"`
	NoFaultCases int                 `json:"no_fault_cases"`
	FaultP50Ms   float64             `json:"fault_completion_p50_ms"`
	FaultP99Ms   float64             `json:"fault_completion_p99_ms"`
	FaultPerSec  float64             `json:"fault_jobs_per_s"`
	FaultCases   int                 `json:"fault_cases"`
	Cells        map[string]*JobCell `json:"cells"`
	control      bool                // a case of the row that is not a control was seen: false
	familyKey    string
}

// JobDecision is the job strategies × fault classes view.
type JobDecision struct {
	Classes []string `json:"classes"`
	Rows    []JobRow `json:"rows"`
}

// jobFamily pairs a strategy with its controls: its family on its backend
// (a pause longer than that lock's lease, or that election's session; the
// sink's PostgreSQL for a strategy that takes no lock).
func jobFamily(r *checker.Result) string {
	f := r.Jobs.Family
	if f == "" {
		f = r.Jobs.Strategy
	}
	return f + "/" + r.Backend
}

// jobVariant names a job case's row of the view.
func jobVariant(r *checker.Result) string {
	if r.Jobs.Variant != "" {
		return r.Jobs.Variant
	}
	return r.Jobs.Strategy
}

// isControl reports whether a case is there to show the failure: it
// expects duplicate effects.
func isControl(r *checker.Result) bool {
	d := r.Expect.DuplicateEffects
	return d != nil && *d
}

// NewJobDecision builds the jobs decision view of one or more runs'
// summaries (MODEL §21), each run and each trial counted once (A5).
func NewJobDecision(sums ...*Summary) *JobDecision {
	d := &JobDecision{}
	classSeen := map[string]bool{}
	rowIdx := map[string]int{}
	type costs struct{ p50, p99, rate []float64 }
	noFault, withFault := map[string]*costs{}, map[string]*costs{}
	// controls[family][class]: the control cells' trials and how many
	// showed the failure.
	type ctl struct{ trials, showed int }
	controls := map[string]map[string]*ctl{}
	eachCase(sums, func(c *CaseSummary) {
		r := &c.Check
		if r.Jobs == nil {
			return
		}
		key := jobVariant(r) + "\x00" + r.Backend
		ri, ok := rowIdx[key]
		if !ok {
			d.Rows = append(d.Rows, JobRow{Variant: jobVariant(r), Strategy: r.Jobs.Strategy, Backend: r.Backend, Family: r.Jobs.Family,
				Lock: r.Meta.Jobs != nil && r.Meta.Jobs.Lock, Cells: map[string]*JobCell{}, control: true, familyKey: jobFamily(r)})
			ri = len(d.Rows) - 1
			rowIdx[key] = ri
			noFault[key], withFault[key] = &costs{}, &costs{}
		}
		row := &d.Rows[ri]
		class := FaultClass(r.Meta)
		classSeen[class] = true
		cell := row.Cells[class]
		if cell == nil {
			cell = &JobCell{Class: class, PhaseExposures: map[string]int{}}
			row.Cells[class] = cell
		}
		cell.add(r)
		if !isControl(r) {
			row.control = false
		} else if r.Decided {
			fam := controls[jobFamily(r)]
			if fam == nil {
				fam = map[string]*ctl{}
				controls[jobFamily(r)] = fam
			}
			if fam[class] == nil {
				fam[class] = &ctl{}
			}
			fam[class].trials++
			if r.Damaged() {
				fam[class].showed++
			}
		}
		if !r.Valid {
			return
		}
		cs := withFault[key]
		if class == ClassNone {
			cs = noFault[key]
		}
		if j := r.Jobs; j.LatencyP50Ms != nil {
			cs.p50 = append(cs.p50, *j.LatencyP50Ms)
			cs.p99 = append(cs.p99, *j.LatencyP99Ms)
		}
		cs.rate = append(cs.rate, r.Jobs.PerSec)
	})
	for key, ri := range rowIdx {
		row := &d.Rows[ri]
		nf, wf := noFault[key], withFault[key]
		row.Control = row.control
		row.NoFaultCases, row.FaultCases = len(nf.rate), len(wf.rate)
		row.P50Ms, row.P99Ms, row.PerSec = median(nf.p50, true), median(nf.p99, true), median(nf.rate, false)
		row.FaultP50Ms, row.FaultP99Ms, row.FaultPerSec = median(wf.p50, true), median(wf.p99, true), median(wf.rate, false)
		for class, cell := range row.Cells {
			cell.finish()
			if cell.Outcome != JobOutcomeOnce || class == ClassNone || row.Control {
				continue
			}
			switch c := controls[row.familyKey][class]; {
			case c == nil:
				cell.Vacuous, cell.VacuousWhy = true, "no control of its family ("+row.familyKey+") ran under this fault"
			case c.showed == 0:
				cell.Vacuous, cell.VacuousWhy = true, "its family's control ("+row.familyKey+") showed no duplicate under this fault"
			}
		}
	}
	for _, c := range ClassOrder {
		if classSeen[c] {
			d.Classes = append(d.Classes, c)
			delete(classSeen, c)
		}
	}
	d.Classes = append(d.Classes, slices.Sorted(maps.Keys(classSeen))...)
	return d
}

// eachCase calls f for every case of the runs, a run given twice (its
// run id) and a trial given twice (its digest) once (A5).
func eachCase(sums []*Summary, f func(c *CaseSummary)) {
	runs, trials := map[string]bool{}, map[string]bool{}
	for _, s := range sums {
		if s.RunID != "" {
			if runs[s.RunID] {
				continue
			}
			runs[s.RunID] = true
		}
		for i := range s.Cases {
			c := &s.Cases[i]
			if c.Digest != "" {
				if trials[c.Digest] {
					continue
				}
				trials[c.Digest] = true
			}
			f(c)
		}
	}
}

// add counts one case (or lane) into the cell.
func (cell *JobCell) add(r *checker.Result) {
	cell.Cases++
	if !r.Valid {
		cell.Invalid++
	}
	if !r.Decided {
		return
	}
	j := r.Jobs
	damaged := r.Damaged()
	cell.Trials++
	if r.Valid || damaged {
		cell.damageN++
		if damaged {
			cell.damage++
		}
	}
	cell.Exposures += r.Exposures
	for _, f := range j.Faults {
		for p, n := range f.Phases {
			if n > 0 {
				cell.PhaseExposures[p]++
			}
		}
	}
	// An invalid trial is a sample of the damage it proved, and of no
	// other figure (MODEL §17).
	if !r.Valid && !damaged {
		return
	}
	cell.Duplicates += j.Duplicates
	cell.Concurrent += j.Concurrent
	cell.Sequential += j.Sequential
	cell.Unsplit += j.Unsplit
	cell.StaleAccepted += j.StaleAccepted
	cell.StaleRefused += j.RefusedStale
	cell.Absorbed += j.RefusedDuplicate
	cell.Jobs += j.Due
	cell.Touched += j.Touched
	cell.hitsT += j.TouchedDuplicated
	cell.hitsJ += j.DuplicatedJobs
	if j.StuckMaxMs != nil {
		cell.StuckMaxMs = max(cell.StuckMaxMs, *j.StuckMaxMs)
	}
	cell.StuckOpen += j.StuckOpen
	if r.Valid && j.Lost > 0 {
		cell.lostValid += j.Lost
	}
}

// finish judges the cell (MODEL §21).
func (cell *JobCell) finish() {
	cell.Lost = cell.lostValid
	cell.TouchedDuplicated = NewRate(cell.hitsT, cell.Touched)
	cell.Duplicated = NewRate(cell.hitsJ, cell.Jobs)
	cell.DamageTrials = NewRate(cell.damage, cell.damageN)
	switch {
	case cell.StaleAccepted > 0:
		cell.Outcome = JobOutcomeStale
	case cell.Duplicates > 0:
		cell.Outcome = JobOutcomeDuplicates
	case cell.Lost > 0:
		cell.Outcome = JobOutcomeLost
	case cell.Trials == 0:
		cell.Outcome = JobOutcomeNone
	default:
		cell.Outcome = JobOutcomeOnce
	}
	evidence := min(cell.Exposures, cell.Touched)
	if cell.Class == ClassNone || cell.Class == ClassMisuse {
		evidence = cell.Jobs
	}
	cell.TooFew = cell.Outcome == JobOutcomeOnce && evidence < MinExposures
}
