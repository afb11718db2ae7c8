package checker

import (
	"math"
	"slices"
	"strconv"

	"github.com/lockbench/lockbench/history"
)

// This file judges a job workload's figures (MODEL §20) from what
// jobs.go read.

// Jobs is the judgement of a case's jobs (MODEL §20).
type Jobs struct {
	Strategy string `json:"strategy"`
	// Variant and Family are the meta's (history.JobsMeta).
	Variant string `json:"variant,omitempty"`
	Family  string `json:"family,omitempty"`
	// Count is the case's jobs; Due those due early enough to be judged
	// lost (their grace ended before the stop).
	Count int `json:"count"`
	Due   int `json:"due"`
	// Attempts by outcome (an attempt in flight at its instance's death
	// or at the case's end is unknown).
	Attempts        int `json:"attempts"`
	AttemptsOK      int `json:"attempts_ok"`
	AttemptsFailed  int `json:"attempts_failed"`
	AttemptsUnknown int `json:"attempts_unknown"`
	// The sink's record: effects applied, refused as duplicates (the
	// attempts an idempotency key absorbed) and refused as stale.
	Applied          int `json:"effects_applied"`
	RefusedDuplicate int `json:"effects_refused_duplicate"`
	RefusedStale     int `json:"effects_refused_stale"`
	// Duplicates: applied effects beyond each job's first, proven by the
	// sink alone; split into Concurrent (its attempt overlapped the
	// attempt of an earlier applied effect of the job), Sequential (it
	// began after every one of them had ended) and Unsplit (an attempt
	// the record does not hold, or a record that lost worker lines).
	Duplicates     int `json:"duplicate_effects"`
	Concurrent     int `json:"duplicates_concurrent"`
	Sequential     int `json:"duplicates_sequential"`
	Unsplit        int `json:"duplicates_unsplit"`
	DuplicatedJobs int `json:"jobs_duplicated"`
	// StaleAccepted: applied effects whose token is below that of an
	// effect of the job the sink had certainly applied before.
	StaleAccepted int `json:"stale_effects_accepted"`
	// Lost: due jobs the sink recorded no applied effect of; -1 when the
	// sink's record is not whole (unknown).
	Lost int `json:"lost_jobs"`
	// Touched: jobs an exposure's fault met in an attempt (MODEL §20),
	// by the phase it met (before the effect, during it, after it
	// before the completion); and of those, the duplicated and the lost.
	Touched           int            `json:"jobs_touched"`
	TouchedPhases     map[string]int `json:"touched_phases,omitempty"`
	TouchedDuplicated int            `json:"touched_duplicated"`
	TouchedLost       int            `json:"touched_lost"`
	// Faults: each fault counted in an exposure (MODEL §16), what it met.
	Faults []JobFault `json:"faults,omitempty"`
	// Stuck time: the attempts a fault on their own instance met, how
	// many were never taken up by the case's end, and of the others how
	// long, at most, the job stayed with the faulted executor (MODEL §20).
	Stuck      int      `json:"stuck"`
	StuckOpen  int      `json:"stuck_open"`
	StuckP50Ms *float64 `json:"stuck_p50_ms,omitempty"`
	StuckMaxMs *float64 `json:"stuck_max_ms,omitempty"`
	// EffectsAfterLost: effects sent by an executor its lock library had
	// already told the lease was lost (told, and it went on).
	EffectsAfterLost int `json:"effects_after_lost"`
	// Completion latency (from when a job fell due to its first recorded
	// completion), no value without a sample; jobs with an applied effect
	// per second of the workload.
	LatencyP50Ms *float64 `json:"completion_p50_ms,omitempty"`
	LatencyP99Ms *float64 `json:"completion_p99_ms,omitempty"`
	PerSec       float64  `json:"jobs_per_s"`
	// Periods are a periodic job's figures (MODEL §20); nil for one-off
	// jobs.
	Periods *JobPeriods `json:"periods,omitempty"`
	// SinkWhole: the sink's records were all read (the harness says no
	// read failed): what it does not show did not happen.
	SinkWhole bool `json:"sink_whole"`
}

// JobPeriods are a periodic job's figures (MODEL §20): the due periods
// with no applied effect sent before the next period fell due (-1:
// unknown), the delay from each period's due time to its first applied
// effect, the most effects applied for one period, and the clients' tries
// of the periods: how many, how many were served without recomputing —
// stale (no attempt: the lock was busy) or fresh (an attempt that applied
// nothing: found done, absorbed) — and how long those waited.
type JobPeriods struct {
	Missed      int      `json:"periods_missed"`
	DelayP50Ms  *float64 `json:"delay_p50_ms,omitempty"`
	DelayP99Ms  *float64 `json:"delay_p99_ms,omitempty"`
	MostInOne   int      `json:"most_in_one_period"`
	Tries       int      `json:"tries"`
	ServedStale int      `json:"served_stale"`
	ServedFresh int      `json:"served_fresh"`
	WaitP50Ms   *float64 `json:"wait_p50_ms,omitempty"`
	WaitP99Ms   *float64 `json:"wait_p99_ms,omitempty"`
}

// JobFault is one fault counted in an exposure of a job workload: the
// phase it aimed at ("" for none), the phases of the attempts it met, the
// jobs it touched and how many of them were duplicated.
type JobFault struct {
	Fault      string         `json:"fault"`
	Aimed      string         `json:"aimed,omitempty"`
	Phases     map[string]int `json:"phases,omitempty"`
	Touched    int            `json:"touched"`
	Duplicated int            `json:"duplicated"`
}

// Phases an exposure's fault can meet an attempt in (history's).
const (
	PhaseBefore = history.PhaseBefore
	PhaseDuring = history.PhaseDuring
	PhaseAfter  = history.PhaseAfter
)

// Phases lists them in the order of an attempt.
var Phases = history.JobPhases

// jobsIn is what result needs of its case.
type jobsIn struct {
	start, stop int64
	deathOf     func(inst string) (int64, bool)
	whole       bool // the sink's record is whole
	linesLost   bool // worker events were lost (MODEL §12: an attempt's end may be among them)
	faults      []*faultRec
}

// result judges the jobs.
func (j *jobCheck) result(in jobsIn) *Jobs {
	if !j.on() {
		return nil
	}
	m := j.meta
	r := &Jobs{Strategy: m.Strategy, Variant: m.Variant, Family: m.Family, Count: m.Count, SinkWhole: in.whole}
	end := func(a *attempt) int64 {
		if a.end >= 0 {
			return a.end
		}
		if t, dead := in.deathOf(a.inst); dead {
			return t
		}
		return math.MaxInt64 // open: the attempt never ended in the record
	}
	firstOK := map[string]int64{} // each job's earliest ok completion
	for _, a := range j.order {
		r.Attempts++
		switch a.endType {
		case history.OK:
			r.AttemptsOK++
			if t, seen := firstOK[a.job]; !seen || a.end < t {
				firstOK[a.job] = a.end
			}
		case history.Fail:
			r.AttemptsFailed++
		default:
			r.AttemptsUnknown++
		}
	}
	applied := map[string][]sinkRec{}
	for _, s := range j.sink {
		switch s.outcome {
		case history.OutcomeApplied:
			r.Applied++
			applied[s.key.job] = append(applied[s.key.job], s)
		case history.OutcomeDuplicate:
			r.RefusedDuplicate++
		case history.OutcomeStale:
			r.RefusedStale++
		}
		if a := j.attempts[s.key]; a != nil && a.lostBefore {
			r.EffectsAfterLost++
		}
	}
	duplicated := j.duplicates(r, applied, end, in.linesLost)
	var latencies []float64
	r.Lost = 0
	for n := m.First; n < m.First+m.Count; n++ {
		due := j.due(in.start, n)
		if due+m.GraceNs > in.stop {
			continue
		}
		r.Due++
		job := "j" + strconv.Itoa(n)
		if len(applied[job]) == 0 {
			r.Lost++
		}
		if t, ok := firstOK[job]; ok {
			latencies = append(latencies, float64(t-due)/1e6)
		}
	}
	j.touched(r, in, applied, duplicated, end)
	if !in.whole {
		r.Lost, r.TouchedLost = -1, -1
	}
	r.LatencyP50Ms, r.LatencyP99Ms = percentiles(latencies)
	if in.stop > in.start {
		r.PerSec = float64(len(applied)) / (float64(in.stop-in.start) / 1e9)
	}
	if m.Periodic {
		r.Periods = j.periodic(in, applied)
	}
	return r
}

// duplicates counts the applied effects beyond each job's first and splits
// them (MODEL §20); it returns the duplicated jobs.
func (j *jobCheck) duplicates(r *Jobs, applied map[string][]sinkRec, end func(*attempt) int64, linesLost bool) map[string]bool {
	duplicated := map[string]bool{}
	for job, recs := range applied {
		if len(recs) > 1 {
			duplicated[job] = true
			r.DuplicatedJobs++
		}
		for i, s := range recs {
			a := j.attempts[s.key]
			if i > 0 {
				r.Duplicates++
				switch kind := j.split(a, recs[:i], end, linesLost); kind {
				case "concurrent":
					r.Concurrent++
				case "sequential":
					r.Sequential++
				default:
					r.Unsplit++
				}
			}
			if s.token == 0 || a == nil || a.effInv < 0 {
				continue
			}
			for _, p := range recs {
				// Proven stale: an effect with a higher token was read
				// applied before this one was even sent (MODEL §20).
				if p.token > s.token && p.t < a.effInv {
					r.StaleAccepted++
					break
				}
			}
		}
	}
	return duplicated
}

// touched counts the jobs the exposures' faults met, by phase and by
// fault, and the stuck time of the attempts a fault on their own instance
// met (MODEL §20).
func (j *jobCheck) touched(r *Jobs, in jobsIn, applied map[string][]sinkRec, duplicated map[string]bool, end func(*attempt) int64) {
	touched := map[string]bool{}
	r.TouchedPhases = map[string]int{}
	var stuck []float64
	for _, f := range in.faults {
		if !f.observed() {
			continue
		}
		aimed, _ := AimedPhase(f.scheduled)
		jf := JobFault{Fault: f.name, Aimed: aimed, Phases: map[string]int{}}
		mine := map[string]bool{}
		insts := faultInstances(f)
		for _, t := range j.touch[f] {
			r.TouchedPhases[t.phase]++
			jf.Phases[t.phase]++
			if !mine[t.a.job] {
				mine[t.a.job] = true
				jf.Touched++
				if duplicated[t.a.job] {
					jf.Duplicated++
				}
			}
			if insts != nil {
				r.Stuck++
				if d, ok := j.stuckFor(t.a, f, insts, applied, end); ok {
					stuck = append(stuck, d)
				} else {
					r.StuckOpen++
				}
			}
			if touched[t.a.job] {
				continue
			}
			touched[t.a.job] = true
			r.Touched++
			if duplicated[t.a.job] {
				r.TouchedDuplicated++
			}
			if len(applied[t.a.job]) == 0 {
				r.TouchedLost++
			}
		}
		r.Faults = append(r.Faults, jf)
	}
	if len(stuck) > 0 {
		slices.Sort(stuck)
		p50, mx := rank(stuck, 50), stuck[len(stuck)-1]
		r.StuckP50Ms, r.StuckMaxMs = &p50, &mx
	}
}

// stuckFor is how long, at most, attempt a's job stayed with its executor
// after fault f on its instance began (MODEL §20): until the record shows
// the job taken up by a client of an instance f does not name (an attempt
// in flight at f's start or begun after it), or its effect in place (an
// applied effect, by its ok completion or its sink mark, whichever came
// first); false when neither happened.
func (j *jobCheck) stuckFor(a *attempt, f *faultRec, insts map[string]bool, applied map[string][]sinkRec, end func(*attempt) int64) (float64, bool) {
	best := int64(math.MaxInt64)
	for _, b := range j.order {
		if b.job != a.job || insts[b.inst] || end(b) <= f.start {
			continue
		}
		best = min(best, max(b.start, f.start))
	}
	for _, s := range applied[a.job] {
		landed := s.t
		if b := j.attempts[s.key]; b != nil && b.effOK && b.effEnd >= 0 {
			landed = min(landed, b.effEnd)
		}
		best = min(best, max(landed, f.start))
	}
	if best == math.MaxInt64 {
		return 0, false
	}
	return float64(best-f.start) / 1e6, true
}

// periodic judges a periodic job's periods and tries (MODEL §20).
func (j *jobCheck) periodic(in jobsIn, applied map[string][]sinkRec) *JobPeriods {
	m := j.meta
	r := &JobPeriods{}
	var delays []float64
	open := false
	for n := m.First; n < m.First+m.Count; n++ {
		due := j.due(in.start, n)
		if due+m.GraceNs > in.stop {
			continue
		}
		recs := applied["j"+strconv.Itoa(n)]
		r.MostInOne = max(r.MostInOne, len(recs))
		onTime, unknown := false, false
		first := int64(-1)
		for _, s := range recs {
			sent := int64(-1)
			if a := j.attempts[s.key]; a != nil && a.effInv >= 0 {
				sent = a.effInv
			}
			switch {
			case sent >= 0 && sent < due+m.EveryNs, s.t < due+m.EveryNs:
				onTime = true
			case sent < 0:
				unknown = true
			}
			if sent >= 0 && (first < 0 || sent < first) {
				first = sent
			}
		}
		if !onTime {
			if unknown {
				open = true
			}
			r.Missed++
		}
		if first >= 0 {
			delays = append(delays, float64(first-due)/1e6)
		}
	}
	if open || !in.whole {
		r.Missed = -1
	}
	r.DelayP50Ms, r.DelayP99Ms = percentiles(delays)
	var waits []float64
	for _, t := range j.tryOrder {
		r.Tries++
		recomputed := false
		for _, s := range applied[t.job] {
			if s.key.proc == t.proc {
				recomputed = true
			}
		}
		switch {
		case recomputed:
			continue
		case t.attempted:
			r.ServedFresh++
		default:
			r.ServedStale++
		}
		if t.end >= 0 {
			waits = append(waits, float64(t.end-t.start)/1e6)
		}
	}
	r.WaitP50Ms, r.WaitP99Ms = percentiles(waits)
	return r
}

// percentiles are the p50 and p99 of samples (MODEL §20: by rank, no
// value without a sample).
func percentiles(xs []float64) (*float64, *float64) {
	if len(xs) == 0 {
		return nil, nil
	}
	slices.Sort(xs)
	p50, p99 := rank(xs, 50), rank(xs, 99)
	return &p50, &p99
}

// rank is the sample of rank ⌈q·n/100⌉ of sorted samples.
func rank(sorted []float64, q int) float64 {
	i := (q*len(sorted) + 99) / 100
	return sorted[max(0, i-1)]
}

// split says whether a duplicate's attempt overlapped the attempt of an
// earlier applied effect of its job (concurrent), began after every one of
// them had ended (sequential), or cannot be told ("").
func (j *jobCheck) split(a *attempt, earlier []sinkRec, end func(*attempt) int64, linesLost bool) string {
	if a == nil || linesLost {
		return ""
	}
	for _, p := range earlier {
		b := j.attempts[p.key]
		if b == nil {
			return ""
		}
		// A3: an attempt that ends at t and one that begins at t do not
		// overlap.
		if a.start < end(b) && b.start < end(a) {
			return "concurrent"
		}
	}
	return "sequential"
}

// jobsResult judges the case's jobs and adds to invalid why they cannot
// be (MODEL §20, §12).
func (c *Case) jobsResult(invalid []string) (*Jobs, []string) {
	stop := c.stopT
	if !c.stopped {
		stop = c.lastT
	}
	h := c.harness.result()
	whole := c.ended && (h.Stats == nil || h.Stats.SinkError == "")
	r := c.jobs.result(jobsIn{start: c.start, stop: stop, deathOf: func(inst string) (int64, bool) {
		if in := c.insts[inst]; in != nil && in.dead {
			return in.deathT, true
		}
		return 0, false
	}, whole: whole, linesLost: h.EventsLost(), faults: c.faultList})
	if r.Attempts == 0 {
		invalid = append(invalid, "no job attempt: the run did no work")
	}
	if h.Stats != nil && h.Stats.SinkError != "" {
		invalid = append(invalid, "the effect sink's records could not all be read: "+h.Stats.SinkError)
	}
	return r, invalid
}
