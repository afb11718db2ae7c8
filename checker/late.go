package checker

import (
	"fmt"
	"time"

	"github.com/lockbench/lockbench/history"
)

// This file follows MODEL §6's late releases and extensions, and the
// expectations of §13 that tell a client's bug from its control: late
// calls accepted, the service's answers linearizable, the longest overlap.

// Late counts a case's late releases and extensions (MODEL §6): those
// invoked strictly after the instant their grant was certainly gone, by
// their outcome. A service that answers one ok spoke for a grant that was
// no longer its caller's: another client's, or nobody's.
type Late struct {
	Releases         int `json:"late_releases,omitempty"`
	ReleasesAccepted int `json:"late_releases_accepted,omitempty"`
	ReleasesRefused  int `json:"late_releases_refused,omitempty"`
	Extends          int `json:"late_extensions,omitempty"`
	ExtendsAccepted  int `json:"late_extensions_accepted,omitempty"`
	ExtendsRefused   int `json:"late_extensions_refused,omitempty"`
}

// late reports whether a release or extension of h invoked at t is late
// (MODEL §6): t is strictly after G, the first instant from which the
// service had certainly taken the grant back by rules 1–4, each read from
// what came before t. Rule 2 reads the lease as the longest a grant lasts
// past its last renewal, which it is only where the lock's expiry bound
// is no longer (A2′): past the lease a lock that may keep a grant to its
// bound has not certainly let it go.
func (c *Case) late(h *hold, t int64) bool {
	g := h.taken
	if b := c.meta.ExpiryBoundNs; b == 0 || b <= c.meta.LeaseNs {
		g = min(g, c.latestExpiry(h))
	}
	return g < t
}

// lateInvoke marks an invoked release or extension of h that is late, and
// counts it.
func (c *Case) lateInvoke(o *op, h *hold, t int64) {
	if h == nil || c.meta.Lockless || !c.late(h, t) {
		return
	}
	o.late = true
	if o.f == history.OpRelease {
		c.res.Late.Releases++
	} else {
		c.res.Late.Extends++
	}
}

// lateDone counts a late operation's answer: the service's ok or refusal.
func (c *Case) lateDone(o *op, outcome history.Type) {
	if !o.late {
		return
	}
	l := &c.res.Late
	switch {
	case o.f == history.OpRelease && outcome == history.OK:
		l.ReleasesAccepted++
	case o.f == history.OpRelease && outcome == history.Fail:
		l.ReleasesRefused++
	case outcome == history.OK:
		l.ExtendsAccepted++
	case outcome == history.Fail:
		l.ExtendsRefused++
	}
}

// lateAndLin judges the expectations on late calls, on linearizability
// and on the longest overlap (MODEL §13), after the figures are final:
// the broken ones (safety), those that did not appear, and the questions
// asked that the case cannot answer (A6: the case is invalid for them).
func (c *Case) lateAndLin(r *Result) (broken, missing, noValue []string) {
	exp := r.Expect
	late := func(want *bool, n, accepted int, what string) {
		switch {
		case want == nil:
		case n == 0:
			noValue = append(noValue, fmt.Sprintf("the scenario asks whether late %s are accepted, but no %s was late (sent after its grant was certainly gone): the question has no value", what, what[:len(what)-1]))
		case !*want && accepted > 0:
			broken = append(broken, fmt.Sprintf("late %s accepted: %d of %d sent after their grant was certainly gone were answered ok", what, accepted, n))
		case *want && accepted == 0:
			missing = append(missing, fmt.Sprintf("expected a late %s to be accepted, none of %d was", what[:len(what)-1], n))
		}
	}
	late(exp.LateReleasesAccepted, r.Late.Releases, r.Late.ReleasesAccepted, "releases")
	late(exp.LateExtensionsAccepted, r.Late.Extends, r.Late.ExtendsAccepted, "extensions")
	if b := exp.MaxOverlapNs; b > 0 {
		switch {
		case c.meta.Lockless:
			noValue = append(noValue, "the scenario bounds the overlap of two holders of a lockless backend, where mutual exclusion does not apply: the bound has no value to judge")
		case r.Unproven == nil && c.mutex.longest > b: // in ns: no rounding decides it
			broken = append(broken, fmt.Sprintf("two holders overlapped for %.0fms, longer than max_overlap %s", r.OverlapMaxMs, time.Duration(b)))
		}
	}
	if want := exp.Linearizable; want != nil {
		v := c.linVerdict(r)
		switch {
		case v == NotApplicable:
			noValue = append(noValue, "the scenario asks whether the service's answers linearize, which is not checked for this case (a lockless backend): the question has no value")
		case v == Unknown:
			noValue = append(noValue, "the scenario asks whether the service's answers linearize (§8), and the search could not tell: unknown")
		case *want && v == Violation:
			broken = append(broken, "the service's answers do not linearize as a lease lock's (§8): no order of its grants, releases and extensions fits them")
		case !*want && v == Ok:
			missing = append(missing, "expected the service's answers not to linearize as a lease lock's (§8), but an order fits them")
		}
	}
	return broken, missing, noValue
}

// linVerdict is the plain linearizability verdict (MODEL §8) as far as
// the record proves it: a violation in a record that breaks its rules or
// lost worker lines is unknown (§12, A4).
func (c *Case) linVerdict(r *Result) Verdict {
	if c.linRes == nil {
		lr := c.lin.result()
		c.linRes = &lr
	}
	v := c.linRes.Verdict
	if v == Violation && (c.unreadable() || r.Harness.EventsLost()) {
		v = Unknown
	}
	return v
}
