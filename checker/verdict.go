package checker

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Result finishes the check and returns the verdicts (MODEL §12, §13).
//
// Result may be called again after more events (a stray event after the
// case's end makes it invalid: MODEL §2); each call judges what was fed so
// far.
func (c *Case) Result() Result {
	c.flush()
	if !c.ended && !c.finished {
		// Cut short (MODEL §2): a gap still open counts up to the last
		// event, and what was in flight is unknown from there.
		if !c.live.stopped {
			c.live.closeGaps(c.lastT)
		}
		c.finish(c.lastT)
		c.finished = true
	}
	c.mutex.finish(c)
	r := c.res
	r.Readable = !c.unreadable()
	// The figures end at case-end (MODEL §15: an event after it belongs
	// to no case), or at the last event of a case cut short.
	end := c.lastT
	if c.ended {
		end = c.endT
	}
	r.Figures = c.fig.result(end)
	r.Exposures = c.exposures()
	r.OverlapMaxMs, r.OverlapP50Ms = c.mutex.figures()
	r.OverlapsMs = c.mutex.sample()
	r.Zombies, r.ZombieMaxMs, r.ZombieP50Ms = c.mutex.zombieFigures()
	r.FirstViolationMs = -1
	if c.mutex.first >= 0 {
		r.FirstViolationMs = ms(c.mutex.first - c.start)
	}
	exp := r.Expect

	r.Invalid = append(r.Invalid, c.faultReasons()...)
	r.Invalid = append(r.Invalid, c.crashes...)
	var storeInvalid string
	r.Store, storeInvalid = c.store.result()
	if storeInvalid != "" {
		r.Invalid = append(r.Invalid, storeInvalid)
	}
	r.Harness = c.harness.result()
	if r.Harness.EventsLost() {
		// MODEL §12 (A4): what the lost lines could undo is not proven.
		r.unprove(r.Harness.Stats.BadLines)
	}
	if r.Store != nil {
		r.Resource.LostUpdates += r.Store.Lost + r.Store.Phantom
	}
	if c.meta.Lockless && exp.Violations != nil {
		// MODEL §13 (A6): a question the run cannot answer, asked.
		r.Invalid = append(r.Invalid, "the scenario expects mutual-exclusion violations of a lockless backend, where mutual exclusion does not apply: the expectation has no value to judge")
	}
	switch {
	case c.jobs.on():
		r.Jobs, r.Invalid = c.jobsResult(r.Invalid)
	case r.AcquiresOK == 0:
		r.Invalid = append(r.Invalid, "no lock was ever acquired: the run did no work")
	}
	if c.orderErrs > 0 {
		r.Invalid = append(r.Invalid, fmt.Sprintf("%d events out of time order", c.orderErrs))
	}
	if c.afterEnd > 0 {
		r.Invalid = append(r.Invalid, fmt.Sprintf("%d event(s) after the case's end: what happened after it was judged cannot be checked", c.afterEnd))
	}
	for _, why := range slices.Sorted(maps.Keys(c.strays)) {
		r.Invalid = append(r.Invalid, fmt.Sprintf("%s (%d event(s))", why, c.strays[why]))
	}
	if c.early > 0 {
		r.Invalid = append(r.Invalid, fmt.Sprintf("%d events dated before the case started", c.early))
	}
	switch {
	case !c.stopped && c.ended:
		r.Invalid = append(r.Invalid, "the case has no case-stop mark: it did not run its course")
	case c.stopped && c.stopT < c.start+c.meta.Duration:
		r.Invalid = append(r.Invalid, fmt.Sprintf("the workload stopped after %s of its %s: the case did not run its course (interrupted?)",
			time.Duration(c.stopT-c.start).Round(time.Millisecond), time.Duration(c.meta.Duration)))
	}
	if c.malformedN > 0 {
		msg := strings.Join(c.malformedMsgs, "; ")
		if c.malformedN > len(c.malformedMsgs) {
			msg += fmt.Sprintf("; and %d more", c.malformedN-len(c.malformedMsgs))
		}
		r.Invalid = append(r.Invalid, "malformed history: "+msg)
	}
	for _, d := range r.Harness.Degraded {
		r.Invalid = append(r.Invalid, "harness degraded: "+d)
	}
	lateBroken, lateMissing, noValue := c.lateAndLin(&r)
	r.Invalid = append(r.Invalid, noValue...)
	var liveUnmet, liveOpen []string
	asked := c.meta.Expect.Available != nil || exp.RecoversWithinNs > 0 || exp.MaxGapNs > 0
	r.Liveness, liveUnmet, liveOpen = c.live.result(c.faultList, exp.Available, exp.MaxGapNs, asked, c.clientList, c.lastT)
	r.Invalid = append(r.Invalid, liveOpen...)
	if !c.ended {
		r.Invalid = append(r.Invalid, "history ends before the case did")
		r.CutShort = true
	}
	r.Valid = len(r.Invalid) == 0

	r.MutualExclusion = Ok
	if r.TwoHolders() {
		r.MutualExclusion = Violation
	}
	if c.meta.Lockless {
		r.MutualExclusion = NotApplicable
	}
	r.Resource.Verdict = Ok
	if r.Resource.LostUpdates > 0 || r.Resource.StaleAccepted > 0 {
		r.Resource.Verdict = Violation
	}
	broken, missing := safety(r)
	broken, missing = append(broken, lateBroken...), append(missing, lateMissing...)
	// A record that breaks its own rules (MODEL §2, §3) proves nothing:
	// what the checker found in it is an artifact of reading it.
	unreadable := c.unreadable()
	if !r.Valid {
		// A verdict of "nothing found" from a run that cannot be judged is
		// not evidence of safety; what it did find still counts.
		if unreadable {
			r.MutualExclusion, r.Resource.Verdict, r.Liveness.Verdict = Unknown, Unknown, Unknown
		}
		for i := range r.Liveness.Faults {
			// A recovery seen in a case that cannot be judged is not
			// evidence; one that failed still stands, unless the record
			// itself is unreadable.
			if f := &r.Liveness.Faults[i]; f.Verdict == Met || (unreadable && f.Verdict != NotJudged) {
				f.Verdict = Undecided
			}
		}
		if r.MutualExclusion == Ok {
			r.MutualExclusion = Unknown
		}
		if r.Resource.Verdict == Ok {
			r.Resource.Verdict = Unknown
		}
		if r.Liveness.Verdict == Ok {
			r.Liveness.Verdict = Unknown
		}
		r.Status = StatusInvalid
		if !c.ended {
			r.Status = StatusUnknown
		}
		if len(broken) > 0 && !unreadable {
			// Proven unsafety is reported, invalid or not, and wins.
			r.Status = StatusViolation
			r.Unmet = broken
		}
		r.Decided = !unreadable && (r.TwoHolders() || r.Damaged())
		return r
	}
	var liveBroken, liveMissing []string
	for _, u := range liveUnmet {
		if strings.HasPrefix(u, "expected the lock to stay unavailable") {
			liveMissing = append(liveMissing, u)
		} else {
			liveBroken = append(liveBroken, u)
		}
	}
	r.Unmet = append(append(append(broken, liveBroken...), missing...), liveMissing...)
	switch {
	case len(broken) > 0:
		r.Status = StatusViolation
	case len(liveBroken) > 0:
		r.Status = StatusUnavailable
	case len(missing)+len(liveMissing) > 0:
		r.Status = StatusNotReproduced
	default:
		r.Status = StatusOK
	}
	r.Decided = true
	return r
}

// Linearizability returns the linearizability verdict of the case, as it
// may be reported (Unknown for what an invalid case did not find). It is
// NotApplicable unless the case was made WithLinearizability. Call it
// after Result.
func (c *Case) Linearizability(valid bool) LinResult {
	if c.linRes == nil {
		r := c.lin.result()
		c.linRes = &r
	}
	r := c.linRes.Judged(valid)
	if (c.unreadable() || c.harness.result().EventsLost()) && r.Verdict != NotApplicable {
		// MODEL §12: nothing read from a record that breaks its own rules
		// is evidence, not even a violation; nor is a violation in a
		// record that lost worker lines (A4): the lost lines could be the
		// release, the refusal or the extension that makes it linearizable.
		r.Verdict = Unknown
		if r.Fenced != "" {
			r.Fenced = Unknown
		}
		keys := make(map[string]Verdict, len(r.Keys))
		for k, v := range r.Keys {
			if v == Violation {
				v = Unknown
			}
			keys[k] = v
		}
		r.Keys = keys
	}
	return r
}

// unreadable reports whether the record breaks its own rules (MODEL §2,
// §3, §10).
func (c *Case) unreadable() bool { return c.malformedN > 0 || c.orderErrs > 0 || c.early > 0 }

// safety returns the broken safety expectations and the expected outcomes
// that did not appear (MODEL §13).
func safety(r Result) (broken, missing []string) {
	check := func(want *bool, got int, what string) {
		if want == nil {
			return
		}
		switch {
		case *want && got == 0:
			missing = append(missing, fmt.Sprintf("expected %s, found none", what))
		case !*want && got > 0:
			broken = append(broken, fmt.Sprintf("unexpected %s: %d", what, got))
		}
	}
	check(r.Expect.Violations, r.Violations, "mutual-exclusion violations")
	check(r.Expect.StaleAccepted, r.Resource.StaleAccepted, "stale writes accepted by the fenced resource")
	where := "lost updates on the unfenced resource"
	if r.Store != nil {
		where = "lost (or never committed) updates in the backend's database"
	}
	check(r.Expect.LostUpdates, r.Resource.LostUpdates, where)
	check(r.Expect.TokenRegressions, r.TokenRegressions, "fencing-token regressions")
	if j := r.Jobs; j != nil {
		check(r.Expect.DuplicateEffects, j.Duplicates, "duplicate effects of a job")
		check(r.Expect.StaleEffects, j.StaleAccepted, "stale effects accepted by the sink")
		if j.Lost >= 0 {
			check(r.Expect.LostJobs, j.Lost, "lost jobs (due, and no effect applied)")
		}
	}
	// A gap at least this long is an outcome (a lock unavailable past
	// its TTL), judged on the §11 longest gap.
	if g := r.Expect.MinGapNs; g > 0 && r.Liveness.LongestGapMs*1e6 < float64(g) {
		missing = append(missing, fmt.Sprintf("expected a gap of at least %s with nobody holding, the longest was %.0fms", time.Duration(g), r.Liveness.LongestGapMs))
	}
	// Lost notifications are an outcome, not safety: either way a
	// mismatch is an expected outcome that did not appear.
	if want := r.Expect.LeasesLost; want != nil {
		switch {
		case *want && r.LeasesLost == 0:
			missing = append(missing, "expected a holder to be told it lost its lease, none was")
		case !*want && r.LeasesLost > 0:
			missing = append(missing, fmt.Sprintf("expected no holder to be told it lost its lease, %d were", r.LeasesLost))
		}
	}
	return broken, missing
}
