package sim

import (
	"math/rand/v2"
	"sort"
)

// This file works out MODEL §6's late releases and extensions, and
// judges §13's expectations that tell a client's bug from its control:
// late calls accepted, the service's answers linearizable, the longest
// overlap.

// LateTruth counts the late releases and extensions (MODEL §6), and the
// service's ok and refusal among them.
type LateTruth struct {
	Releases         int `json:"late_releases"`
	ReleasesAccepted int `json:"late_releases_accepted"`
	ReleasesRefused  int `json:"late_releases_refused"`
	Extends          int `json:"late_extensions"`
	ExtendsAccepted  int `json:"late_extensions_accepted"`
	ExtendsRefused   int `json:"late_extensions_refused"`
}

// renewals are h's ok-able renewals invoked in the hold before index
// before, in invoke order: its client's extensions of its key and
// re-entrant grants (MODEL §6 rule 2).
func (x *evalCtx) renewals(h *holdRec, before int) []*opRec {
	var mine []*opRec
	for _, op := range x.cr.ops {
		if op.client == h.client && op.key == h.key && x.visible(op) && op.invIdx > h.beginIdx && op.invIdx < before &&
			(op.kind == "extend" || (op.kind == "acquire" && op.dup)) {
			mine = append(mine, op)
		}
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].invIdx < mine[j].invIdx })
	return mine
}

// leaseEnd is the latest instant h's lease may run out in an allowed
// world (MODEL §6 rule 2, from A1), given its renewals mine: each ok one
// at an instant of its window with the grant in force, each of unknown
// outcome after its invoke or never, unsent and refused ones not at all.
// shape (nil: none) hears of the readings only the derivation gets right.
func (x *evalCtx) leaseEnd(h *holdRec, mine []*opRec, endIdx int, shape func(string)) int64 {
	if shape == nil {
		shape = func(string) {}
	}
	lease := x.cr.meta.LeaseNs
	e := x.T(h.acq.compIdx) + lease
	// spare: invokes of the unknown extensions not yet landed; each may
	// land last, just before the lease runs out
	var spare []int64
	for _, op := range mine {
		if x.in(op.compIdx) && op.compIdx > endIdx && x.outcome(op) != "unknown" {
			shape("an extension answered after the lost signal ended its hold")
		}
		switch o := x.outcome(op); {
		case o == "unsent" && op.kind == "extend":
			shape("an extension never sent")
		case o == "ok":
			if len(spare) > 0 {
				shape("an ok renewal after an extension of unknown outcome")
			}
			a, c := x.T(op.invIdx), x.T(op.compIdx)
			// it took effect with the grant in force: if the lease had
			// run out by its invoke, spare extensions landed first, as
			// few as it takes
			for len(spare) > 0 && e <= a && spare[0] < e {
				spare, e = spare[1:], e+lease
			}
			if e > a && e < c {
				c = e // as late as the grant lets it
			}
			e = c + lease
		case op.kind == "extend" && o == "unknown":
			spare = append(spare, x.T(op.invIdx))
		}
	}
	for _, u := range spare {
		if u < e {
			e += lease
		}
	}
	return e
}

// gone is G for an operation of h invoked at index at (MODEL §6): the
// first instant from which the service had certainly taken the grant
// back, by rules 1, 3 and 4 read from the operations that completed in
// the hold before at, and by rule 2 (the lease) where the expiry bound
// is no longer than the lease (A2′). never: none.
func (x *evalCtx) gone(h *holdRec, at int) int64 {
	m := &x.cr.meta
	g := int64(never)
	for _, op := range x.cr.ops {
		if op.key != h.key || !x.visible(op) || !x.in(op.compIdx) || op.compIdx <= h.beginIdx || op.compIdx >= at || x.outcome(op) == "unknown" {
			continue
		}
		o := x.outcome(op)
		if (op.kind == "acquire" && o == "ok" && op.client != h.client) || // 1. another client's grant
			(op.kind == "extend" && o == "fail" && op.client == h.client) || // 3. a refused extension
			(op.kind == "release-wrong-token" && o == "ok") { // 4. an accepted wrong-token release
			g = min(g, x.T(op.compIdx))
		}
	}
	if m.LeaseNs > 0 && !m.LeaseRenewed && h.acq != nil && (m.ExpiryBoundNs == 0 || m.ExpiryBoundNs <= m.LeaseNs) {
		g = min(g, x.leaseEnd(h, x.renewals(h, at), at, nil))
	}
	return g
}

// late counts the late releases (the release that ends a hold) and
// extensions (invoked while a hold is in force) of the case.
func (x *evalCtx) late(t *CaseTruth) {
	for _, h := range x.visibleHolds() {
		endIdx := x.holdEnd(h)
		count := func(op *opRec, at int, n, ok, refused *int) {
			if x.T(at) <= x.gone(h, at) {
				return
			}
			*n++
			switch x.outcome(op) {
			case "ok":
				*ok++
			case "fail":
				*refused++
			}
		}
		if h.endKind == "release" && endIdx != never32 && h.rel != nil && x.visible(h.rel) {
			count(h.rel, h.rel.invIdx, &t.Late.Releases, &t.Late.ReleasesAccepted, &t.Late.ReleasesRefused)
		}
		for _, op := range x.cr.ops {
			if op.kind == "extend" && op.client == h.client && op.key == h.key && x.visible(op) && op.invIdx > h.beginIdx && op.invIdx < endIdx {
				count(op, op.invIdx, &t.Late.Extends, &t.Late.ExtendsAccepted, &t.Late.ExtendsRefused)
			}
		}
	}
}

// clientExpect judges the expectations on late calls, linearizability and
// the longest overlap (MODEL §13): whether one broke safety, the expected
// outcomes that did not appear, and the questions asked with no value
// (the case is invalid for them, §12). lin is §8's verdict as the truth
// has it, before §12 reads it again; unreadable: the record breaks its
// own rules. A question the truth cannot settle (no witness nor proof of
// §8, an overlap whose length the history's end leaves open) leaves the
// case not compared.
func (x *evalCtx) clientExpect(t *CaseTruth, exp effExpect, lin string, unreadable bool) (safety bool, unmet, noValue []string) {
	if t.EventsLost {
		// §6, §12 (A4): a lost ok extension moves G: the counts are not proven
		t.Late = LateTruth{}
	}
	if exp.measure {
		return false, nil, nil
	}
	late := func(want *bool, n, accepted int) {
		switch {
		case want == nil:
		case n == 0:
			noValue = append(noValue, "late calls asked of a case with none")
		case !*want && accepted > 0:
			safety = true
		case *want && accepted == 0:
			unmet = append(unmet, "expected a late call accepted, none was")
		}
	}
	late(exp.lateRel, t.Late.Releases, t.Late.ReleasesAccepted)
	late(exp.lateExt, t.Late.Extends, t.Late.ExtendsAccepted)
	if exp.maxOverlap > 0 {
		if _, open := t.Any["overlap_max_ms"]; open && t.Skip == "" {
			t.Skip = "max_overlap is asked of an overlap the history's end leaves open"
		}
		if t.OverlapMaxNs > exp.maxOverlap {
			safety = true
		}
	}
	if exp.linearizable != nil {
		if _, hard := t.Alt["linearizability.verdict"]; (lin == Any || hard) && t.Skip == "" {
			t.Skip = "linearizable is asked, and neither a witness nor a proof settles §8 (or the search may run out of its budget)"
		}
		if lin == "violation" && (unreadable || t.EventsLost) {
			lin = "unknown" // §8, §12: not proven
		}
		switch {
		case lin == "unknown":
			noValue = append(noValue, "linearizable asked, and §8 is left unknown")
		case *exp.linearizable && lin == "violation":
			safety = true
		case !*exp.linearizable && lin == "ok":
			unmet = append(unmet, "expected the service's answers not to linearize")
		}
	}
	return safety && !unreadable, unmet, noValue
}

// expectAll draws a case's expectations: MODEL §13's, then those that
// tell a client's bug from its control.
func (g *gen) expectAll(c *caseConfig) {
	g.expectations(c)
	c.clientExpectations()
}

// clientExpectations draws, now and then, the expectations that tell a
// client's bug from its control, from a stream of the case's own (so that
// the cases a seed makes are the ones it made before they existed).
func (c *caseConfig) clientExpectations() {
	g := &gen{rng: rand.New(rand.NewPCG(c.seed, 39))}
	e := &c.expect
	if g.p(0.08) {
		e.LateReleasesAccepted = bp(g.p(0.5))
	}
	if g.p(0.08) && c.extendEvery > 0 {
		e.LateExtensionsAccepted = bp(g.p(0.5))
	}
	if g.p(0.08) {
		e.Linearizable = bp(g.p(0.5))
	}
	if g.p(0.3) && ((e.Violations != nil && *e.Violations) || e.isAny("violations")) {
		e.MaxOverlapNs = g.ms(1, 1500)
	}
}
