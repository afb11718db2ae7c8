package checker

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/lockbench/lockbench/history"
)

// This file judges a job workload (MODEL §20): the attempts the executors
// recorded, and the effects the sink recorded on its own side.

// Jobs is the judgement of a case's jobs (MODEL §20).
type Jobs struct {
	Strategy string `json:"strategy"`
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
	// EffectsAfterLost: effects sent by an executor its lock library had
	// already told the lease was lost (told, and it went on).
	EffectsAfterLost int `json:"effects_after_lost"`
	// Completion latency (from when a job fell due to its first recorded
	// completion), no value without a sample; jobs with an applied effect
	// per second of the workload.
	LatencyP50Ms *float64 `json:"completion_p50_ms,omitempty"`
	LatencyP99Ms *float64 `json:"completion_p99_ms,omitempty"`
	PerSec       float64  `json:"jobs_per_s"`
	// SinkWhole: the sink's records were all read (the harness says no
	// read failed): what it does not show did not happen.
	SinkWhole bool `json:"sink_whole"`
}

// Phases an exposure's fault can meet an attempt in.
const (
	PhaseBefore = "before-effect"
	PhaseDuring = "during-effect"
	PhaseAfter  = "after-effect"
)

type attemptKey struct {
	proc, job string
	n         int64
}

// attempt is one job attempt (MODEL §20).
type attempt struct {
	attemptKey
	inst           string
	start, end     int64 // end -1: open
	endType        history.Type
	effInv, effEnd int64 // -1: none
	lostBefore     bool  // the client was told its lease was lost before the effect
}

type sinkRec struct {
	key     attemptKey
	token   uint64
	outcome string
	t       int64
}

type jobCheck struct {
	meta     *history.JobsMeta
	attempts map[attemptKey]*attempt
	order    []*attempt
	open     map[string]*attempt // a client's attempt in flight
	lostAt   map[string]int64    // client -> job -> when told lost (latest), as "proc\x00job"
	sink     []sinkRec
	touch    map[*faultRec][]touch
	// malformed is the case's: a job event outside the record's rules
	// makes the history malformed (MODEL §3, §20).
	malformed func(format string, args ...any)
}

type touch struct {
	job   string
	phase string
}

func (j *jobCheck) init(meta history.CaseMeta, malformed func(format string, args ...any)) {
	j.malformed = malformed
	j.meta = meta.Jobs
	j.attempts = map[attemptKey]*attempt{}
	j.open = map[string]*attempt{}
	j.lostAt = map[string]int64{}
	j.touch = map[*faultRec][]touch{}
}

func (j *jobCheck) on() bool { return j.meta != nil }

// jobNumber is n of a job key j<n> of the case, or -1.
func (j *jobCheck) jobNumber(key string) int {
	s, ok := strings.CutPrefix(key, "j")
	n, err := strconv.Atoi(s)
	if !ok || err != nil || n < 0 || n >= j.meta.Count || strconv.Itoa(n) != s {
		return -1
	}
	return n
}

// op takes a job or effect operation of a live client, or a lost signal.
func (j *jobCheck) op(e *history.Event) {
	if !j.on() {
		return
	}
	inst, _, ok := parseProc(e.Proc)
	if !ok {
		return
	}
	if e.F == history.OpLost {
		j.lostAt[e.Proc+"\x00"+e.Key] = e.T
		return
	}
	if e.F != history.OpJob && e.F != history.OpEffect {
		return
	}
	if j.jobNumber(e.Key) < 0 {
		j.malformed("%s %s of %q: not a job of the case (j0 .. j%d)", e.Type, e.F, e.Key, j.meta.Count-1)
		return
	}
	k := attemptKey{e.Proc, e.Key, e.Attempt}
	a := j.open[e.Proc]
	if e.F == history.OpJob && e.Type == history.Invoke {
		switch {
		case a != nil:
			j.malformed("%s began attempt %d of %s while its attempt %d of %s was in flight", e.Proc, e.Attempt, e.Key, a.n, a.job)
			return
		case j.attempts[k] != nil:
			j.malformed("%s began attempt %d of %s twice", e.Proc, e.Attempt, e.Key)
			return
		}
		a = &attempt{attemptKey: k, inst: inst, start: e.T, end: -1, effInv: -1, effEnd: -1}
		j.attempts[k], j.open[e.Proc] = a, a
		j.order = append(j.order, a)
		return
	}
	if a == nil || a.attemptKey != k {
		j.malformed("%s %s of %s (attempt %d) by %s: no such attempt in flight", e.Type, e.F, e.Key, e.Attempt, e.Proc)
		return
	}
	switch {
	case e.F == history.OpJob:
		a.end, a.endType = e.T, e.Type
		delete(j.open, e.Proc)
	case e.Type == history.Invoke:
		if a.effInv >= 0 {
			j.malformed("%s sent attempt %d of %s's effect twice", e.Proc, e.Attempt, e.Key)
			return
		}
		a.effInv = e.T
		if t, ok := j.lostAt[e.Proc+"\x00"+e.Key]; ok && t >= a.start {
			a.lostBefore = true
		}
	default:
		a.effEnd = e.T
	}
}

// sinkMark takes the sink's record of an effect.
func (j *jobCheck) sinkMark(e *history.Event) {
	if !j.on() || e.F != history.MarkSinkEffect {
		return
	}
	if j.jobNumber(e.Key) < 0 {
		j.malformed("sink-effect of %q: not a job of the case", e.Key)
		return
	}
	j.sink = append(j.sink, sinkRec{key: attemptKey{e.Proc, e.Key, e.Attempt}, token: e.Token, outcome: e.Outcome, t: e.T})
}

// faultStart notes the attempts a fault meets at its start: those of its
// target instances' clients, or every one in flight for a fault on no
// instance (MODEL §20).
func (j *jobCheck) faultStart(f *faultRec) {
	if !j.on() {
		return
	}
	insts := map[string]bool{}
	for _, t := range f.targets() {
		if name, ok := instanceOf(t); ok {
			insts[name] = true
		}
	}
	for _, a := range j.open {
		if len(insts) > 0 && !insts[a.inst] {
			continue
		}
		phase := PhaseBefore
		switch {
		case a.effEnd >= 0:
			phase = PhaseAfter
		case a.effInv >= 0:
			phase = PhaseDuring
		}
		j.touch[f] = append(j.touch[f], touch{a.job, phase})
	}
}

// inside reports whether a client of instance inst is in a job attempt:
// for a job workload, the holder a holder fault aims at (MODEL §10).
func (j *jobCheck) inside(inst string) bool {
	for _, a := range j.open {
		if a.inst == inst {
			return true
		}
	}
	return false
}

// result judges the jobs. deathOf gives an instance's death (ok false:
// alive); start and stop bound the workload; whole says the sink's record
// is whole; linesLost that worker events were lost (MODEL §12: an
// attempt's end may be among them).
func (j *jobCheck) result(start, stop int64, deathOf func(inst string) (int64, bool), whole, linesLost bool, faults []*faultRec) *Jobs {
	if !j.on() {
		return nil
	}
	r := &Jobs{Strategy: j.meta.Strategy, Count: j.meta.Count, SinkWhole: whole}
	end := func(a *attempt) int64 {
		if a.end >= 0 {
			return a.end
		}
		if t, dead := deathOf(a.inst); dead {
			return t
		}
		return math.MaxInt64 // open: the attempt never ended in the record
	}
	var latencies []float64
	firstOK := map[string]int64{}
	for _, a := range j.order {
		r.Attempts++
		switch a.endType {
		case history.OK:
			r.AttemptsOK++
			if _, seen := firstOK[a.job]; !seen {
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
	r.Lost = 0
	for n := 0; n < j.meta.Count; n++ {
		due := start + int64(n)*j.meta.EveryNs
		if due+j.meta.GraceNs > stop {
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
	touched := map[string]bool{}
	r.TouchedPhases = map[string]int{}
	for _, f := range faults {
		if !f.observed() {
			continue
		}
		for _, t := range j.touch[f] {
			r.TouchedPhases[t.phase]++
			if touched[t.job] {
				continue
			}
			touched[t.job] = true
			r.Touched++
			if duplicated[t.job] {
				r.TouchedDuplicated++
			}
			if len(applied[t.job]) == 0 {
				r.TouchedLost++
			}
		}
	}
	if !whole {
		r.Lost, r.TouchedLost = -1, -1
	}
	if len(latencies) > 0 {
		slices.Sort(latencies)
		p50, p99 := rank(latencies, 50), rank(latencies, 99)
		r.LatencyP50Ms, r.LatencyP99Ms = &p50, &p99
	}
	if stop > start {
		r.PerSec = float64(len(applied)) / (float64(stop-start) / 1e9)
	}
	return r
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
	r := c.jobs.result(c.start, stop, func(inst string) (int64, bool) {
		if in := c.insts[inst]; in != nil && in.dead {
			return in.deathT, true
		}
		return 0, false
	}, whole, h.EventsLost(), c.faultList)
	if r.Attempts == 0 {
		invalid = append(invalid, "no job attempt: the run did no work")
	}
	if h.Stats != nil && h.Stats.SinkError != "" {
		invalid = append(invalid, "the effect sink's records could not all be read: "+h.Stats.SinkError)
	}
	return r, invalid
}
