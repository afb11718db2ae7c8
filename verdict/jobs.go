package verdict

import "fmt"

// JobsRow sums a row of job cases over its decided trials (MODEL §17,
// §20): the jobs, those a fault touched and the exposures that touched
// them, and per 1,000 jobs the duplicated, stale and lost ones. The rates
// count jobs, not trials: the jobs of one trial share its run, so their
// interval is narrower than a rate over trials would be, and says so.
type JobsRow struct {
	Row        string `json:"row"`
	Strategy   string `json:"strategy"`
	Trials     int    `json:"trials"`
	Exposures  int    `json:"exposures"`
	Jobs       int    `json:"jobs"`
	Duplicates int    `json:"duplicate_effects"`
	Stale      int    `json:"stale_effects_accepted"`
	// Lost is -1 when a trial's lost jobs are unknown.
	Lost int `json:"lost_jobs"`
	// Touched: the jobs a fault met; TouchedDuplicated of them ran twice.
	Touched           Rate `json:"touched_duplicated"`
	DuplicatedOverall Rate `json:"jobs_duplicated"`
}

// JobsRows sums every row that ran jobs, in the order its first case ran.
func (s *Summary) JobsRows() []JobsRow {
	var out []JobsRow
	at := map[string]int{}
	hitsT, hitsA := map[string]int{}, map[string]int{}
	for _, c := range s.Cases {
		r := c.Check
		if r.Jobs == nil || !r.Decided {
			continue
		}
		row := r.Meta.Row
		if row == "" {
			row = r.Case
		}
		i, ok := at[row]
		if !ok {
			i, at[row] = len(out), len(out)
			out = append(out, JobsRow{Row: row, Strategy: r.Jobs.Strategy})
		}
		j, o := r.Jobs, &out[i]
		o.Trials++
		o.Exposures += r.Exposures
		o.Jobs += j.Due
		o.Duplicates += j.Duplicates
		o.Stale += j.StaleAccepted
		if o.Lost >= 0 && j.Lost >= 0 {
			o.Lost += j.Lost
		} else {
			o.Lost = -1
		}
		o.Touched.Of += j.Touched
		hitsT[row] += j.TouchedDuplicated
		hitsA[row] += j.DuplicatedJobs
	}
	for i := range out {
		o := &out[i]
		o.Touched = NewRate(hitsT[o.Row], o.Touched.Of)
		o.DuplicatedOverall = NewRate(hitsA[o.Row], o.Jobs)
	}
	return out
}

// JobsRowLines are the job rows' lines for the terminal: per 1,000 jobs
// a fault touched and per 1,000 jobs overall, with the 95% intervals.
func (s *Summary) JobsRowLines() []string {
	var out []string
	for _, r := range s.JobsRows() {
		lost := fmt.Sprint(r.Lost)
		if r.Lost < 0 {
			lost = "?"
		}
		out = append(out, fmt.Sprintf("jobs %-19s %s: %d trial(s), %d jobs, %d exposure(s): touched %d, duplicated %s per 1,000 touched; duplicated %s per 1,000 jobs; %d duplicate effects, %d stale accepted, %s lost",
			r.Row, r.Strategy, r.Trials, r.Jobs, r.Exposures, r.Touched.Of, perThousand(r.Touched), perThousand(r.DuplicatedOverall), r.Duplicates, r.Stale, lost))
	}
	return out
}

// perThousand is a rate per 1,000 with its 95% interval; — with no value.
func perThousand(r Rate) string {
	if r.Of == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f [%.0f, %.0f]", 1000*float64(r.Hits)/float64(r.Of), 1000*r.Low, 1000*r.High)
}
