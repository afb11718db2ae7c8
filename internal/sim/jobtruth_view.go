package sim

import (
	"slices"
)

// This file works out a run of job workloads' rows and its jobs decision
// view (MODEL §14, §20, §21) from the cases' truths (jobtruth.go).

// rows works out the rows' jobs lines and verdicts (MODEL §14, §20).
func (t *JobsTruth) rows() {
	idx := map[string]*JobRowTruth{}
	type acc struct {
		trials   map[int]bool
		statuses []string
		need, of int
	}
	accs := map[string]*acc{}
	for _, c := range t.Cases {
		r := idx[c.Row]
		if r == nil {
			r = &JobRowTruth{Row: c.Row}
			idx[c.Row] = r
			t.Rows = append(t.Rows, r)
			accs[c.Row] = &acc{trials: map[int]bool{}, need: c.Need, of: c.Trials}
		}
		a := accs[c.Row]
		a.trials[c.Trial] = true
		a.statuses = append(a.statuses, c.Status)
		if c.Status == "ok" {
			r.Met++
		}
		if c.Decided != "true" {
			continue
		}
		j := c.Jobs
		r.Trials++
		r.Exposures += c.Exposures
		r.Jobs += j.Due
		r.Duplicates += j.Duplicates
		r.Stale += j.StaleAccepted
		if r.Lost >= 0 && j.Lost >= 0 {
			r.Lost += j.Lost
		} else {
			r.Lost = -1
		}
		r.Touched += j.Touched
		r.TouchedHits += j.TouchedDuplicated
		r.DupHits += j.DuplicatedJobs
	}
	for _, r := range t.Rows {
		a := accs[r.Row]
		has := func(s string) bool { return slices.Contains(a.statuses, s) }
		switch {
		case has("violation"):
			r.Verdict = "violation"
		case has("invalid") || len(a.trials) < a.of:
			r.Verdict = "invalid"
		case r.Met >= a.need:
			r.Verdict = "reproduced"
		default:
			r.Verdict = "not-reproduced"
		}
	}
}

// decision works out the jobs decision view (MODEL §21).
func (t *JobsTruth) decision() {
	idx := map[string]*JobRowDecisionTruth{}
	type costs struct{ p50, p99, ps []float64 }
	nf, wf := map[string]*costs{}, map[string]*costs{}
	type ctl struct{ trials, showed int }
	controls := map[string]map[string]*ctl{}
	fam := func(c *JobCaseTruth) string { return c.Family + "/" + c.Backend }
	notControl := map[string]bool{}
	for _, c := range t.Cases {
		k := c.Variant + "\x00" + c.Backend
		row := idx[k]
		if row == nil {
			row = &JobRowDecisionTruth{Variant: c.Variant, Backend: c.Backend, Cells: map[string]*JobCellTruth{}}
			idx[k] = row
			t.Decision = append(t.Decision, row)
			nf[k], wf[k] = &costs{}, &costs{}
		}
		if !c.Control {
			notControl[k] = true
		}
		cell := row.Cells[c.Class]
		if cell == nil {
			cell = &JobCellTruth{PhaseExposures: map[string]int{}}
			row.Cells[c.Class] = cell
		}
		cell.Cases++
		if !c.Valid {
			cell.Invalid++
		}
		if c.Decided == "true" {
			if c.Control {
				f := controls[fam(c)]
				if f == nil {
					f = map[string]*ctl{}
					controls[fam(c)] = f
				}
				if f[c.Class] == nil {
					f[c.Class] = &ctl{}
				}
				f[c.Class].trials++
				if c.Damage {
					f[c.Class].showed++
				}
			}
			j := c.Jobs
			cell.Trials++
			cell.Exposures += c.Exposures
			for _, jf := range j.Faults {
				for p, n := range jf.Phases {
					if n > 0 {
						cell.PhaseExposures[p]++
					}
				}
			}
			if c.Valid || c.Damage {
				cell.DamageN++
				if c.Damage {
					cell.Damage++
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
				cell.TouchedHits += j.TouchedDuplicated
				cell.DupHits += j.DuplicatedJobs
				if j.StuckMaxMs != nil {
					cell.StuckMaxMs = max(cell.StuckMaxMs, *j.StuckMaxMs)
				}
				cell.StuckOpen += j.StuckOpen
				if c.Valid && j.Lost > 0 {
					cell.Lost += j.Lost
				}
			}
		}
		if c.Valid {
			cs := wf[k]
			if c.Class == "no fault" {
				cs = nf[k]
			}
			if c.Jobs.LatencyP50Ms != nil {
				cs.p50 = append(cs.p50, *c.Jobs.LatencyP50Ms)
				cs.p99 = append(cs.p99, *c.Jobs.LatencyP99Ms)
			}
			cs.ps = append(cs.ps, c.Jobs.PerSec)
		}
	}
	worse := func(xs []float64, higher bool) float64 {
		if len(xs) == 0 {
			return 0
		}
		s := slices.Clone(xs)
		slices.Sort(s)
		if higher {
			return s[len(s)/2]
		}
		return s[(len(s)-1)/2]
	}
	for k, row := range idx {
		row.Control = !notControl[k]
		row.NoFaultCases, row.FaultCases = len(nf[k].ps), len(wf[k].ps)
		row.P50, row.P99, row.PerSec = worse(nf[k].p50, true), worse(nf[k].p99, true), worse(nf[k].ps, false)
		row.FP50, row.FP99, row.FPS = worse(wf[k].p50, true), worse(wf[k].p99, true), worse(wf[k].ps, false)
		var family string
		for _, c := range t.Cases {
			if c.Variant+"\x00"+c.Backend == k {
				family = fam(c)
			}
		}
		for class, cell := range row.Cells {
			switch {
			case cell.StaleAccepted > 0:
				cell.Outcome = "stale accepted"
			case cell.Duplicates > 0:
				cell.Outcome = "duplicates"
			case cell.Lost > 0:
				cell.Outcome = "jobs lost"
			case cell.Trials == 0:
				cell.Outcome = "no evidence"
			default:
				cell.Outcome = "exactly once"
			}
			ev := min(cell.Exposures, cell.Touched)
			if class == "no fault" {
				ev = cell.Jobs
			}
			cell.TooFew = cell.Outcome == "exactly once" && ev < 10
			if cell.Outcome == "exactly once" && class != "no fault" && !row.Control {
				c := controls[family][class]
				cell.Vacuous = c == nil || c.showed == 0
			}
		}
	}
}
