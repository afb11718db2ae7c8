package sim

import (
	"fmt"
	"math"
	"slices"
	"strconv"
)

// This file works out what checker/MODEL.md §20 and §21 say of a
// simulated run of job workloads, from the simulator's own records: the
// attempts as they happened, the sink's commits and when each was read,
// the instances' deaths and the faults. Nothing here reads the history or
// the checker.

// JobsTruth is what MODEL.md says of a run of job workloads.
type JobsTruth struct {
	Cases []*JobCaseTruth `json:"cases"`
	// Rows and Decision are left out (nil) when some trial's being
	// decided is not known here (an invalid trial of a lock whose two
	// holders this file does not work out).
	Rows     []*JobRowTruth         `json:"rows,omitempty"`
	Decision []*JobRowDecisionTruth `json:"decision,omitempty"`
	Compared bool                   `json:"aggregates_compared"`
}

// JobCaseTruth is one case, or one lane of a batch.
type JobCaseTruth struct {
	Name    string   `json:"name"`
	Row     string   `json:"row"`
	Trial   int      `json:"trial"`
	Trials  int      `json:"trials"`
	Need    int      `json:"need"`
	Valid   bool     `json:"valid"`
	Why     []string `json:"invalid_reasons,omitempty"`
	Status  string   `json:"status"`
	Decided string   `json:"decided"` // "true", "false" or any
	Damage  bool     `json:"damage"`
	Class   string   `json:"class"`
	Variant string   `json:"variant"`
	Backend string   `json:"backend"`
	Family  string   `json:"family"`
	Lock    bool     `json:"lock"`
	Control bool     `json:"control"`
	// Exposures (MODEL §16).
	Exposures int              `json:"exposures"`
	Jobs      JobsTruthFigures `json:"jobs"`
}

// JobsTruthFigures are a case's job figures (MODEL §20), durations in ms.
type JobsTruthFigures struct {
	Count, Due                                            int
	Attempts, AttemptsOK, AttemptsFailed, AttemptsUnknown int
	Applied, RefusedDuplicate, RefusedStale               int
	Duplicates, Concurrent, Sequential, Unsplit           int
	DuplicatedJobs, StaleAccepted, Lost                   int
	Touched, TouchedDuplicated, TouchedLost               int
	TouchedPhases                                         map[string]int
	Faults                                                []JobFaultTruth
	Stuck, StuckOpen                                      int
	StuckP50Ms, StuckMaxMs                                *float64
	EffectsAfterLost                                      int
	LatencyP50Ms, LatencyP99Ms                            *float64
	PerSec                                                float64
	Periodic                                              bool
	PeriodsMissed, MostInPeriod                           int
	DelayP50Ms, DelayP99Ms                                *float64
	Tries, ServedStale, ServedFresh                       int
	WaitP50Ms, WaitP99Ms                                  *float64
}

// JobFaultTruth is one fault counted in an exposure.
type JobFaultTruth struct {
	Fault               string
	Aimed               string
	Phases              map[string]int
	Touched, Duplicated int
}

// JobRowTruth is a row's jobs line (MODEL §20).
type JobRowTruth struct {
	Row                                 string
	Verdict                             string
	Met                                 int
	Trials, Exposures, Jobs, Duplicates int
	Stale, Lost                         int
	Touched, TouchedHits                int
	DupHits                             int
}

// JobRowDecisionTruth is one row of the jobs decision view (MODEL §21).
type JobRowDecisionTruth struct {
	Variant, Backend string
	Control          bool
	Cells            map[string]*JobCellTruth
	NoFaultCases     int
	FaultCases       int
	P50, P99, PerSec float64 // no fault
	FP50, FP99, FPS  float64 // faults
}

// JobCellTruth is one cell.
type JobCellTruth struct {
	Outcome                               string
	Cases, Invalid, Trials, Exposures     int
	Jobs, Touched, Duplicates, Concurrent int
	Sequential, Unsplit, StaleAccepted    int
	StaleRefused, Absorbed, Lost          int
	TouchedHits, DupHits, Damage, DamageN int
	StuckMaxMs                            float64
	StuckOpen                             int
	TooFew, Vacuous                       bool
	PhaseExposures                        map[string]int
}

// Truth works out the run's truth.
func (r *JobsRun) Truth() *JobsTruth {
	t := &JobsTruth{Compared: true}
	for _, jc := range r.cases {
		for l := 1; l <= jc.lanes; l++ {
			ct := jc.laneTruth(l)
			if ct.Decided == Any {
				t.Compared = false
			}
			t.Cases = append(t.Cases, ct)
		}
	}
	if t.Compared {
		t.rows()
		t.decision()
	}
	return t
}

// lane is one lane's (or the case's) share of the simulator's records.
type laneView struct {
	jc       *jobCase
	lane     int
	first    int
	attempts []*jattempt
	commits  []*jcommit // read ones, in read order
	faults   []*jfault
	insts    map[int]bool
}

func (jc *jobCase) view(l int) *laneView {
	v := &laneView{jc: jc, lane: l, first: (l - 1) * jc.count, insts: map[int]bool{}}
	for _, in := range jc.insts {
		if in.lane == l {
			v.insts[in.n] = true
		}
	}
	for _, a := range jc.attempts {
		if v.insts[a.inst] {
			v.attempts = append(v.attempts, a)
		}
	}
	for _, cm := range jc.commits {
		if cm.read >= 0 && v.insts[cm.a.inst] {
			v.commits = append(v.commits, cm)
		}
	}
	slices.SortFunc(v.commits, func(a, b *jcommit) int { return int(a.read - b.read) })
	for _, f := range jc.faults {
		if f.lane == l {
			v.faults = append(v.faults, f)
		}
	}
	return v
}

// endOf is when an attempt ended: its completion, its instance's death,
// or never (MODEL §20).
func (v *laneView) endOf(a *jattempt) int64 {
	if a.end >= 0 {
		return a.end
	}
	if in := v.jc.insts[a.inst-1]; in.dead {
		return in.deathT
	}
	return math.MaxInt64
}

// inFlight reports whether a was in flight at fault start fs: begun
// before it, not ended before it (an instance killed by the fault itself
// dies after its start mark).
func (v *laneView) inFlight(a *jattempt, fs int64) bool {
	if a.start >= fs {
		return false
	}
	if a.end >= 0 {
		return a.end > fs
	}
	in := v.jc.insts[a.inst-1]
	return !in.dead || in.deathT >= fs
}

func phaseAt(a *jattempt, t int64) string {
	switch {
	case a.effEnd >= 0 && a.effEnd < t:
		return "after-effect"
	case a.effInv >= 0 && a.effInv < t:
		return "during-effect"
	}
	return "before-effect"
}

// targets are the instances a fault acts on (nil: none, every attempt).
func (f *jfault) targets() map[int]bool {
	if f.inst > 0 {
		return map[int]bool{f.inst: true}
	}
	return nil
}

// observed: started before the stop, healed, no error, no unobserved mark,
// not missed (MODEL §10, §16).
func (v *laneView) observed(f *jfault) bool {
	return f.started && f.end > 0 && f.start < v.jc.stop && !f.mark && !f.missed
}

func (jc *jobCase) laneTruth(l int) *JobCaseTruth {
	v := jc.view(l)
	ct := &JobCaseTruth{Name: jc.name, Row: jc.row, Trial: jc.trial + l - 1, Trials: jc.trials, Need: jc.need,
		Variant: jc.st.variant, Family: jc.st.family, Lock: jc.st.lock, Control: jc.expectDup == "true"}
	if jc.lanes > 1 {
		ct.Name = fmt.Sprintf("%s.t%d", jc.row, ct.Trial)
	}
	ct.Backend = "postgres"
	if jc.st.lock {
		ct.Backend = "redis"
	}
	// Which faults missed their aim (MODEL §20).
	for _, f := range v.faults {
		if !f.aimed || !f.started {
			continue
		}
		f.missed = true
		for _, a := range v.attempts {
			if a.inst == f.inst && v.inFlight(a, f.start) && phaseAt(a, f.start) == f.phase {
				f.missed = false
			}
		}
	}
	ct.Class = jobClass(v.faults)
	j := &ct.Jobs
	v.figures(j)
	ct.Exposures = v.exposures()
	// Validity (MODEL §12).
	for _, f := range v.faults {
		switch {
		case !f.started:
			ct.Why = append(ct.Why, f.name+" could not be applied")
		case f.missed:
			ct.Why = append(ct.Why, f.name+" missed its aim")
		case f.mark:
			ct.Why = append(ct.Why, f.name+" not observed")
		}
	}
	if jc.sinkError {
		ct.Why = append(ct.Why, "sink not read")
	}
	if jc.badLines {
		ct.Why = append(ct.Why, "lost lines")
	}
	if j.Attempts == 0 {
		ct.Why = append(ct.Why, "no attempt")
	}
	ct.Valid = len(ct.Why) == 0
	ct.Damage = j.Duplicates > 0 || j.StaleAccepted > 0
	switch {
	case ct.Valid, ct.Damage:
		ct.Decided = "true"
	case !jc.st.lock || jc.badLines:
		ct.Decided = "false" // no lock, or no proven two holders (A4)
	default:
		ct.Decided = Any
	}
	// Status (MODEL §13).
	broken := func(exp string, n int) bool { return exp == "false" && n > 0 }
	absent := func(exp string, n int) bool { return exp == "true" && n == 0 }
	switch {
	case broken(jc.expectDup, j.Duplicates), broken(jc.expectStale, j.StaleAccepted), j.Lost >= 0 && broken(jc.expectLost, j.Lost):
		ct.Status = "violation"
	case !ct.Valid:
		ct.Status = "invalid"
	case absent(jc.expectDup, j.Duplicates), absent(jc.expectStale, j.StaleAccepted), j.Lost >= 0 && absent(jc.expectLost, j.Lost):
		ct.Status = "not-reproduced"
	default:
		ct.Status = "ok"
	}
	return ct
}

// jobClass is the case's fault class (MODEL §18).
func jobClass(fs []*jfault) string {
	classes := map[string]bool{}
	for _, f := range fs {
		classes[f.class] = true
	}
	switch len(classes) {
	case 0:
		return "no fault"
	case 1:
		for c := range classes {
			return c
		}
	}
	return "several faults"
}

// exposures: the observed faults, those joined (links of one type on one
// instance, overlapping) counted once (MODEL §16).
func (v *laneView) exposures() int {
	var obs []*jfault
	for _, f := range v.faults {
		if f.started {
			obs = append(obs, f)
		}
	}
	parent := make([]int, len(obs))
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			i = parent[i]
		}
		return i
	}
	for i, f := range obs {
		for k := i + 1; k < len(obs); k++ {
			g := obs[k]
			link := len(f.target) > 5 && f.target[:5] == "link:" && len(g.target) > 5 && g.target[:5] == "link:"
			if link && f.typ == g.typ && f.inst == g.inst && f.start <= g.end && g.start <= f.end {
				parent[find(k)] = find(i)
			}
		}
	}
	sets := map[int]bool{}
	for i, f := range obs {
		if v.observed(f) {
			sets[find(i)] = true
		}
	}
	return len(sets)
}

// figures works out the lane's job figures (MODEL §20).
func (v *laneView) figures(j *JobsTruthFigures) {
	jc := v.jc
	j.Count, j.Periodic = jc.count, jc.periodic
	whole := !jc.sinkError
	for _, a := range v.attempts {
		j.Attempts++
		switch a.endType {
		case "ok":
			j.AttemptsOK++
		case "fail":
			j.AttemptsFailed++
		default:
			j.AttemptsUnknown++
		}
	}
	applied := map[string][]*jcommit{}
	for _, cm := range v.commits {
		switch cm.outcome {
		case "applied":
			j.Applied++
			applied[cm.a.job] = append(applied[cm.a.job], cm)
		case "duplicate":
			j.RefusedDuplicate++
		case "stale":
			j.RefusedStale++
		}
		if a := cm.a; a.lostAt >= a.start && a.effInv >= 0 && a.lostAt <= a.effInv {
			j.EffectsAfterLost++
		}
	}
	duplicated := map[string]bool{}
	for job, cms := range applied {
		if len(cms) > 1 {
			duplicated[job] = true
			j.DuplicatedJobs++
		}
		for i, cm := range cms {
			a := cm.a
			if i > 0 {
				j.Duplicates++
				switch {
				case jc.badLines:
					j.Unsplit++
				case v.overlapsAny(a, cms[:i]):
					j.Concurrent++
				default:
					j.Sequential++
				}
			}
			if a.token == 0 || a.effInv < 0 {
				continue
			}
			for _, p := range cms {
				if p.a.token > a.token && p.read < a.effInv {
					j.StaleAccepted++
					break
				}
			}
		}
	}
	var lat []float64
	for n := v.first; n < v.first+jc.count; n++ {
		due := jc.start + int64(n-v.first)*jc.every
		if due+jc.grace > jc.stop {
			continue
		}
		j.Due++
		job := "j" + strconv.Itoa(n)
		if len(applied[job]) == 0 {
			j.Lost++
		}
		first := int64(-1)
		for _, a := range v.attempts {
			if a.job == job && a.endType == "ok" && (first < 0 || a.end < first) {
				first = a.end
			}
		}
		if first >= 0 {
			lat = append(lat, float64(first-due)/1e6)
		}
	}
	j.LatencyP50Ms, j.LatencyP99Ms = pct(lat)
	j.PerSec = float64(len(applied)) / (float64(jc.stop-jc.start) / 1e9)
	v.touched(j, applied, duplicated)
	if !whole {
		j.Lost, j.TouchedLost = -1, -1
	}
	if jc.periodic {
		v.periodic(j, applied, whole)
	}
}

// overlapsAny reports whether a's attempt overlapped that of one of the
// earlier applied effects (an attempt ending at t and one beginning at t
// do not overlap, A3).
func (v *laneView) overlapsAny(a *jattempt, earlier []*jcommit) bool {
	for _, p := range earlier {
		b := p.a
		if a.start < v.endOf(b) && b.start < v.endOf(a) {
			return true
		}
	}
	return false
}
