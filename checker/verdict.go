package checker

import (
	"fmt"
	"strings"
)

// Result finishes the check and returns the verdicts.
func (c *Case) Result() Result {
	r := c.res
	for proc := range c.acquiring { // still in flight at the end: unknown
		r.AcquiresUnknown++
		delete(c.acquiring, proc)
	}
	for _, f := range c.meta.Faults {
		switch msg, bad := c.errored[f.Name]; {
		case bad:
			r.Invalid = append(r.Invalid, fmt.Sprintf("fault %s could not be applied: %s", f.Name, msg))
		case !c.started[f.Name]:
			r.Invalid = append(r.Invalid, fmt.Sprintf("fault %s (%s on %s) never fired", f.Name, f.Type, f.Target))
		case c.unobserved[f.Name] != "":
			r.Invalid = append(r.Invalid, fmt.Sprintf("fault %s (%s on %s) was applied but its effect was not observed: %s", f.Name, f.Type, f.Target, c.unobserved[f.Name]))
		}
	}
	r.Invalid = append(r.Invalid, c.crashes...)
	var storeInvalid string
	r.Store, storeInvalid = c.store.result()
	if storeInvalid != "" {
		r.Invalid = append(r.Invalid, storeInvalid)
	}
	if r.Store != nil {
		r.Resource.LostUpdates += r.Store.Lost + r.Store.Phantom
	}
	if r.AcquiresOK == 0 {
		r.Invalid = append(r.Invalid, "no lock was ever acquired: the run did no work")
	}
	if c.orderErrs > 0 {
		r.Invalid = append(r.Invalid, fmt.Sprintf("%d events out of time order", c.orderErrs))
	}
	if c.early > 0 {
		r.Invalid = append(r.Invalid, fmt.Sprintf("%d events dated before the case started", c.early))
	}
	r.Harness = c.harness.result()
	for _, d := range r.Harness.Degraded {
		r.Invalid = append(r.Invalid, "harness degraded: "+d)
	}
	if !c.ended {
		r.Invalid = append(r.Invalid, "history ends before the case did")
	}
	r.Valid = len(r.Invalid) == 0

	exp := r.Expect
	var liveUnmet []string
	r.Liveness, liveUnmet = c.live.result(exp.Available, exp.MaxGapNs, exp.RecoversWithinNs)

	r.MutualExclusion = Ok
	if r.Violations > 0 {
		r.MutualExclusion = Violation
	}
	if c.meta.Lockless {
		r.MutualExclusion = NotApplicable
	}
	r.Resource.Verdict = Ok
	if r.Resource.LostUpdates > 0 || r.Resource.StaleAccepted > 0 {
		r.Resource.Verdict = Violation
	}
	safetyUnmet := unmet(r)
	unsafe := false
	for _, u := range safetyUnmet {
		unsafe = unsafe || strings.HasPrefix(u, "unexpected")
	}
	if !r.Valid {
		// A verdict of "nothing found" from a run that cannot be judged is
		// not evidence of safety; what it did find still counts.
		if r.MutualExclusion == Ok {
			r.MutualExclusion = Unknown
		}
		if r.Resource.Verdict == Ok {
			r.Resource.Verdict = Unknown
		}
		if r.Liveness.Verdict == Ok {
			r.Liveness.Verdict = Unknown
		}
		r.Status = "invalid"
		if !c.ended {
			r.Status = "unknown"
		}
		if unsafe {
			// Proven unsafety is reported, invalid or not, and wins.
			r.Status = "violation"
			for _, u := range safetyUnmet {
				if strings.HasPrefix(u, "unexpected") {
					r.Unmet = append(r.Unmet, u)
				}
			}
		}
		return r
	}
	r.Unmet = append(safetyUnmet, liveUnmet...)
	switch {
	case unsafe:
		r.Status = "violation"
	case len(liveUnmet) > 0 && liveUnavailable(liveUnmet):
		r.Status = "unavailable"
	case len(r.Unmet) > 0:
		r.Status = "not-reproduced"
	default:
		r.Status = "ok"
	}
	return r
}

// liveUnavailable reports whether some liveness expectation failed because
// the lock was not live (rather than live where it was expected not to be).
func liveUnavailable(unmet []string) bool {
	for _, u := range unmet {
		if !strings.HasPrefix(u, "expected the lock to stay unavailable") {
			return true
		}
	}
	return false
}

func unmet(r Result) []string {
	var out []string
	check := func(want *bool, got int, what string) {
		if want == nil {
			return
		}
		switch {
		case *want && got == 0:
			out = append(out, fmt.Sprintf("expected %s, found none", what))
		case !*want && got > 0:
			out = append(out, fmt.Sprintf("unexpected %s: %d", what, got))
		}
	}
	check(r.Expect.Violations, r.Violations, "mutual-exclusion violations")
	check(r.Expect.StaleAccepted, r.Resource.StaleAccepted, "stale writes accepted by the fenced resource")
	where := "lost updates on the unfenced resource"
	if r.Store != nil {
		where = "lost (or never committed) updates in the backend's database"
	}
	check(r.Expect.LostUpdates, r.Resource.LostUpdates, where)
	return out
}
