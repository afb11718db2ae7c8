package sim

// This file reads a case's expectation with MODEL §13's defaults, and its
// class (§18).

// expectations with MODEL §13's defaults.
type effExpect struct {
	violations    bool
	violationsAny bool // left to any: not judged (MODEL §13)
	stale, lost   *bool
	available     *bool
	maxGap, recov int64
	minGap        int64
	measure       bool
	// what tells a client's bug from its control (MODEL §13); nil, 0:
	// not asked
	linearizable, lateRel, lateExt *bool
	maxOverlap                     int64
	// asked: the scenario asked a liveness question (available itself,
	// recovers_within or max_gap).
	asked bool
}

func (m *CaseMeta) effective() effExpect {
	if m.Expect.Measure {
		// a case that measures expects nothing: no default applies, and
		// every other expectation written beside it is ignored
		return effExpect{measure: true}
	}
	e := effExpect{maxGap: m.Expect.MaxGapNs, recov: m.Expect.RecoversWithinNs, minGap: m.Expect.MinGapNs}
	if m.Expect.Violations != nil {
		e.violations = *m.Expect.Violations
	}
	// an outcome left to any takes no default and is not judged (§13)
	e.violationsAny = m.Expect.isAny("violations")
	e.stale = m.Expect.StaleAccepted
	if e.stale == nil && m.Fenced && !m.Expect.isAny("stale_writes_accepted") {
		e.stale = bp(false)
	}
	e.lost = m.Expect.LostUpdates
	e.linearizable, e.lateRel, e.lateExt = m.Expect.Linearizable, m.Expect.LateReleasesAccepted, m.Expect.LateExtensionsAccepted
	e.maxOverlap = m.Expect.MaxOverlapNs
	e.available = m.Expect.Available
	e.asked = e.available != nil || e.recov > 0 || e.maxGap > 0
	if e.available == nil && len(m.Faults) > 0 && !m.Expect.isAny("available") {
		e.available = bp(true)
	}
	return e
}

// caseClass is a case's class (MODEL §18): the class its faults share, a
// fault with none counting as "unclassified" and client misuse as "client
// misuse" (with or without faults).
func caseClass(m *CaseMeta) string {
	set := map[string]bool{}
	for _, f := range m.Faults {
		c := f.Class
		if c == "" {
			c = "unclassified"
		}
		set[c] = true
	}
	if len(m.Misuse) > 0 {
		set["client misuse"] = true
	}
	switch len(set) {
	case 0:
		return "no fault"
	case 1:
		for c := range set {
			return c
		}
	}
	return "several faults"
}
