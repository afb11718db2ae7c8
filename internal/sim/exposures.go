package sim

import "strings"

// This file holds the truth's reading of faults: which acted, which were
// observed, excused or missed their aim, which act together, and the
// exposures they make (MODEL §10, §16).

// hardUnknowns: a key with this many operations of unknown outcome may
// exhaust a linearizability search's budget (each may take effect at any
// later instant, or never).
const hardUnknowns = 8

func (x *evalCtx) hardestKey() (string, int) {
	n := map[string]int{}
	for _, op := range x.cr.ops {
		if x.visible(op) && op.kind != "release-wrong-token" && x.outcome(op) == "unknown" {
			n[op.key]++
		}
	}
	best, bn := "", 0
	for _, k := range x.cr.keys {
		if n[k] > bn {
			best, bn = k, n[k]
		}
	}
	return best, bn
}

// inFaultAftermath: t is inside a fault's window or its aftermath
// (op timeout + 1 s, or 2 s).
func (x *evalCtx) inFaultAftermath(t int64) bool {
	after := int64(2e9)
	if x.cr.meta.OpTimeoutNs > 0 {
		after = x.cr.meta.OpTimeoutNs + 1e9
	}
	for _, f := range x.cr.faults {
		if !x.in(f.startIdx) {
			continue
		}
		end := int64(never)
		if x.in(f.endIdx) {
			end = x.T(f.endIdx) + after
		}
		if t >= x.T(f.startIdx) && t <= end {
			return true
		}
	}
	return false
}

func scopeOf(target string) string {
	scope := "?"
	for i, t := range strings.Split(target, ",") {
		s := ""
		if at := strings.LastIndex(t, "@"); at >= 0 {
			s = t[at+1:]
		}
		if i == 0 {
			scope = s
		} else if s != scope {
			return "mixed:" + target
		}
	}
	return scope
}

func (x *evalCtx) window(f *faultRec) (int64, int64) {
	e := int64(never)
	if x.in(f.endIdx) {
		e = x.T(f.endIdx)
	}
	return x.T(f.startIdx), e
}

// overlap: the windows of two started faults overlap.
func (x *evalCtx) overlap(f, g *faultRec) bool {
	fs, fe := x.window(f)
	gs, ge := x.window(g)
	return fs <= ge && gs <= fe
}

func (x *evalCtx) sameGroup(f, g *faultRec) bool {
	if f.spec.Group != "" && f.spec.Group == g.spec.Group {
		return true
	}
	if !strings.HasPrefix(f.target, "link:") || !strings.HasPrefix(g.target, "link:") || f.spec.Type != g.spec.Type {
		return false
	}
	return x.overlap(f, g) && scopeOf(f.target) == scopeOf(g.target)
}

func (x *evalCtx) observed(g *faultRec) bool {
	return x.in(g.startIdx) && x.in(g.endIdx) && !g.healErr && !x.in(g.unobservedIdx) && !x.in(g.idleIdx) && !x.in(g.errorIdx) && !x.missedAim(g)
}

// missedAim: a fault aimed at the holder (or holder-of:kN) whose target
// instance held no key (no kN) at its fault-start: not observed, whatever
// its marks say (MODEL §10). A hold in force at the fault-start began
// before it and ended at it or later (a kill's own start ends it).
func (x *evalCtx) missedAim(f *faultRec) bool {
	if !f.aimed || !x.in(f.startIdx) {
		return false
	}
	targets := append(append([]int{}, f.killInsts...), f.pauseInsts...)
	for _, h := range x.cr.holds {
		if !x.in(h.beginIdx) || h.beginIdx >= f.startIdx || x.holdEnd(h) < f.startIdx || (f.aimKey != "" && h.key != f.aimKey) {
			continue
		}
		for _, n := range targets {
			if h.inst == n {
				return false
			}
		}
	}
	return true
}

func (x *evalCtx) excused(f *faultRec) bool {
	for _, g := range x.cr.faults {
		if g == f || !x.in(g.startIdx) || !x.sameGroup(f, g) {
			continue
		}
		if x.overlap(f, g) && x.observed(g) {
			return true
		}
	}
	return false
}

// exposures: MODEL §16. Faults in one group whose windows overlap are
// joined; each set so joined is one exposure when a member reached the
// workload (started before the stop) and was observed.
func (x *evalCtx) exposures(t *CaseTruth) {
	var fs []*faultRec
	for _, f := range x.cr.faults {
		if x.in(f.startIdx) {
			fs = append(fs, f)
		}
	}
	comp := make([]int, len(fs))
	for i := range comp {
		comp[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if comp[i] != i {
			comp[i] = find(comp[i])
		}
		return comp[i]
	}
	for i := range fs {
		for j := i + 1; j < len(fs); j++ {
			if x.sameGroup(fs[i], fs[j]) && x.overlap(fs[i], fs[j]) {
				comp[find(i)] = find(j)
			}
		}
	}
	stopped := x.in(x.cr.stopIdx)
	counts := map[int]bool{}
	unsure := false
	for i, f := range fs {
		if !x.observed(f) {
			continue
		}
		if !stopped {
			unsure = true
			continue
		}
		if f.startIdx < x.cr.stopIdx {
			counts[find(i)] = true
		}
	}
	t.Exposures = len(counts)
	if unsure {
		t.Any["exposures"] = "no case-stop: whether a fault reached the workload is not defined"
	}
}
