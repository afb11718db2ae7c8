package sim

import (
	"fmt"
	"sort"
	"strings"
)

// Any marks a field whose true value the simulator cannot be sure of: the
// test does not compare it.
const Any = "any"

// CaseTruth is what MODEL.md says of one case, worked out from the
// simulator's own records.
type CaseTruth struct {
	Index    int    `json:"index"`
	Name     string `json:"name"`
	Variant  string `json:"variant"`
	Tags     string `json:"tags"` // what the case is made of, for grouping mismatches
	Status   string `json:"status"`
	Valid    bool   `json:"valid"`
	CutShort bool   `json:"cut_short"`

	InvalidReasons []string `json:"invalid_reasons,omitempty"`
	Unmet          []string `json:"unmet_expectations,omitempty"`

	MutualExclusion            string `json:"mutual_exclusion"`
	Violations                 int    `json:"violations"`
	AcquiresOK                 int    `json:"acquires_ok"`
	AcquiresFailed             int    `json:"acquires_failed"`
	AcquiresUnknown            int    `json:"acquires_unknown"`
	DuplicateGrants            int    `json:"duplicate_grants"`
	ReleasesNotHeld            int    `json:"releases_not_held"`
	LeasesLost                 int    `json:"leases_lost"`
	WrongTokenReleasesAccepted int    `json:"wrong_token_releases_accepted"`
	TokenRegressions           int    `json:"token_regressions"`

	Resource ResourceTruth `json:"resource"`

	Liveness     string       `json:"liveness"`
	LongestGapNs int64        `json:"longest_gap_ns"` // -1: any
	Faults       []FaultTruth `json:"faults,omitempty"`

	Lin       string `json:"linearizability"`
	LinFenced string `json:"linearizability_fenced"`

	Thresholds []ThresholdTruth `json:"thresholds,omitempty"`

	// Any lists fields not compared, and why.
	Any map[string]string `json:"any,omitempty"`
	// Alt gives a second answer a field may legitimately have: "unknown"
	// for linearizability on a key whose search may run out of its budget
	// (§8: many operations of unknown outcome).
	Alt   map[string]string `json:"alt,omitempty"`
	Notes []string          `json:"notes,omitempty"`
}

type ResourceTruth struct {
	Verdict            string `json:"verdict"`
	LostUpdates        int    `json:"lost_updates"`
	StaleRejected      int    `json:"stale_rejected"`
	StaleReadsRejected int    `json:"stale_reads_rejected"`
	StaleAccepted      int    `json:"stale_accepted"`
	TokenReuse         int    `json:"token_reuse"`
}

type FaultTruth struct {
	Fault   string `json:"fault"`
	Verdict string `json:"verdict"` // met, unmet, unknown, "" (not judged), any
	Detail  string `json:"detail,omitempty"`
}

type evalCtx struct {
	cr  *caseRec
	ev  []*Event
	cut int
}

func (x *evalCtx) in(i int) bool          { return i >= 0 && i < x.cut }
func (x *evalCtx) T(i int) int64          { return x.ev[i].T }
func (x *evalCtx) visible(op *opRec) bool { return x.in(op.invIdx) && !op.postInv }

// outcome: ok, fail, info as recorded, or unknown when the operation was
// still in flight at its instance's death or at the end of the history.
func (x *evalCtx) outcome(op *opRec) string {
	if op.compIdx >= 0 && x.in(op.compIdx) && !op.postComp {
		if op.outcome == "info" {
			return "unknown"
		}
		return op.outcome
	}
	return "unknown"
}

func (x *evalCtx) holdEnd(h *holdRec) int {
	if h.endIdx >= 0 && x.in(h.endIdx) {
		return h.endIdx
	}
	return never32
}

const never32 = 1 << 62

func (x *evalCtx) good(h *holdRec) bool {
	return h.endKind == "release" && x.in(h.endIdx) && h.rel != nil && x.outcome(h.rel) == "ok"
}

// expectations with MODEL §13's defaults.
type effExpect struct {
	violations    bool
	stale, lost   *bool
	available     *bool
	maxGap, recov int64
}

func (m *CaseMeta) effective() effExpect {
	e := effExpect{maxGap: m.Expect.MaxGapNs, recov: m.Expect.RecoversWithinNs}
	if m.Expect.Violations != nil {
		e.violations = *m.Expect.Violations
	}
	e.stale = m.Expect.StaleAccepted
	if e.stale == nil && m.Fenced {
		e.stale = bp(false)
	}
	e.lost = m.Expect.LostUpdates
	e.available = m.Expect.Available
	if e.available == nil && len(m.Faults) > 0 {
		e.available = bp(true)
	}
	return e
}

func (cr *caseRec) truth(events []*Event, cut int, index int) *CaseTruth {
	x := &evalCtx{cr: cr, ev: events, cut: cut}
	m := &cr.meta
	t := &CaseTruth{Index: index, Name: m.Name, Variant: cr.cfg.variant, Any: map[string]string{}, Alt: map[string]string{}, Tags: cr.tags()}
	t.CutShort = !x.in(cr.endIdx)
	anyf := func(f, why string) { t.Any[f] = why }

	// §3 counts
	for _, op := range cr.ops {
		if !x.visible(op) {
			continue
		}
		o := x.outcome(op)
		switch op.kind {
		case "acquire":
			switch o {
			case "ok":
				t.AcquiresOK++
				if op.dup {
					t.DuplicateGrants++
				}
			case "fail":
				t.AcquiresFailed++
			default:
				t.AcquiresUnknown++
			}
		case "release":
			if o == "fail" {
				t.ReleasesNotHeld++
			}
		case "release-wrong-token":
			if o == "ok" {
				t.WrongTokenReleasesAccepted++
			}
		}
	}
	for _, l := range cr.losts {
		if x.in(l.idx) && !l.post {
			t.LeasesLost++
		}
	}
	// §7 tokens, in file order of the ok acquires
	oks := []*opRec{}
	for _, op := range cr.ops {
		if op.kind == "acquire" && x.visible(op) && x.outcome(op) == "ok" {
			oks = append(oks, op)
		}
	}
	sort.Slice(oks, func(i, j int) bool { return oks[i].compIdx < oks[j].compIdx })
	top := map[string]uint64{}
	for _, op := range oks {
		if op.token > 0 && op.token <= top[op.key] {
			t.TokenRegressions++
		}
		top[op.key] = max(top[op.key], op.token)
	}
	// §6 mutual exclusion
	var holds []*holdRec
	for _, h := range cr.holds {
		if x.in(h.beginIdx) {
			holds = append(holds, h)
		}
	}
	for _, h := range holds {
		for _, o := range holds {
			if o != h && o.key == h.key && o.beginIdx < h.beginIdx && x.holdEnd(o) > h.beginIdx {
				t.Violations++
			}
		}
	}
	// §9 resource marks
	for _, r := range cr.res {
		if !x.in(r.idx) {
			continue
		}
		if r.write && r.lost {
			t.Resource.LostUpdates++
		}
		if r.fenced == "rejected" {
			if r.write {
				t.Resource.StaleRejected++
			} else {
				t.Resource.StaleReadsRejected++
			}
		}
		if r.write && r.fenced == "stale" {
			t.Resource.StaleAccepted++
		}
		if r.reuse && m.Fenced {
			t.Resource.TokenReuse++
		}
	}
	t.Resource.Verdict = Any
	anyf("resource.verdict", "MODEL §9 defines the counts, not a verdict")

	// §12 validity
	var reasons []string
	add := func(s string) { reasons = append(reasons, s) }
	if t.AcquiresOK == 0 {
		add("no acquire ever returned ok")
	}
	for _, f := range cr.faults {
		name := f.spec.Name
		switch {
		case x.in(f.errorIdx):
			add(name + " could not be applied")
		case !x.in(f.startIdx):
			add(name + " never fired")
		default:
			if !x.in(f.endIdx) && !t.CutShort {
				add(name + " never healed")
			}
			if x.in(f.endIdx) && f.healErr {
				add(name + " could not be healed")
			}
			if x.in(f.unobservedIdx) {
				add(name + " was applied but its effect was not observed")
			}
			if x.in(f.idleIdx) && !x.excused(f) {
				add(name + " was idle")
			}
			if x.in(f.dupStartIdx) {
				add(name + " started twice (malformed)")
			}
		}
	}
	for _, ir := range cr.insts {
		if !x.in(ir.crashIdx) {
			continue
		}
		if ir.deathIdx == ir.crashIdx && ir.deathKind == "crash" && !ir.crashAfterStop {
			add(fmt.Sprintf("i%d died with no kill fault", ir.n))
		}
		if x.in(cr.stopIdx) && ir.crashIdx > cr.stopIdx {
			add(fmt.Sprintf("i%d did not exit cleanly when the case ended", ir.n))
		}
	}
	outOfOrder := false
	for _, i := range cr.backdated {
		if x.in(i) {
			outOfOrder = true
		}
	}
	if outOfOrder {
		add("events out of order")
	}
	for _, i := range cr.earlyIdx {
		if x.in(i) {
			add("an event dated before the case start")
		}
	}
	stopped := x.in(cr.stopIdx)
	if !stopped && !t.CutShort {
		add("no case-stop")
	}
	if stopped && x.T(cr.stopIdx) < x.T(cr.startIdx)+m.DurationNs {
		add("stopped before its duration")
	}
	for _, i := range cr.strayMarks {
		if x.in(i) {
			add("a fault mark names no scheduled fault (malformed)")
		}
	}
	for _, i := range cr.strayComps {
		if x.in(i) {
			add("a completion with no operation in flight (malformed)")
		}
	}
	if x.in(cr.harnIdx) && cr.harness != nil {
		h := cr.harness
		if h.BadLines > 0 {
			add("worker output lines that were not events")
		}
		if h.EmitLagMaxNs > 1e9 {
			add("an event stuck over 1 s in a worker")
		}
		if h.CoordinatorCPU > 0.75*float64(h.Cores) {
			add("coordinator over 0.75 of the cores")
		}
		if h.CoordinatorCPU+h.WorkersCPU > 0.9*float64(h.Cores) {
			add("coordinator and workers over 0.9 of the cores")
		}
	}
	for _, i := range append(append([]int{}, cr.resFailIdx...), cr.lateIdx...) {
		if x.in(i) && !x.inFaultAftermath(x.T(i)) {
			add("a resource request failed or arrived late outside every fault window")
			break
		}
	}
	malformedFaults := false
	for _, f := range cr.faults {
		if x.in(f.dupStartIdx) {
			malformedFaults = true
		}
	}

	// §11 availability
	exp := m.effective()
	live := x.liveness(exp)
	t.LongestGapNs = live.gap
	t.Faults = live.faults
	if !stopped {
		t.LongestGapNs = -1
		anyf("liveness.longest_gap_ms", "no case-stop in the history: availability has no end")
	}
	if outOfOrder {
		t.LongestGapNs = -1
		anyf("liveness.longest_gap_ms", "events out of order")
	}
	faultsAny := ""
	switch {
	case !stopped:
		faultsAny = "no case-stop"
	case outOfOrder:
		faultsAny = "events out of order"
	case malformedFaults:
		faultsAny = "a fault started twice"
	}
	anyUnmet, anyUnknown := false, false
	for i := range t.Faults {
		if faultsAny != "" {
			t.Faults[i].Verdict = Any
			t.Faults[i].Detail = faultsAny
			continue
		}
		switch t.Faults[i].Verdict {
		case "unmet":
			anyUnmet = true
		case "unknown":
			anyUnknown = true
		}
	}
	gapBroken := exp.maxGap > 0 && t.LongestGapNs > exp.maxGap
	livenessBroken := (exp.available != nil && *exp.available && anyUnmet) || gapBroken
	if anyUnknown && exp.available != nil {
		add("a liveness expectation the case leaves undecided")
	}
	switch {
	case faultsAny != "" || t.LongestGapNs < 0:
		t.Liveness = Any
		anyf("liveness.verdict", "availability is not defined on this history")
	case exp.available != nil && !*exp.available:
		t.Liveness = Any
		anyf("liveness.verdict", "MODEL gives no verdict word for available: false")
	case exp.available == nil && exp.maxGap == 0:
		t.Liveness = Any
		anyf("liveness.verdict", "no liveness expectation")
	case livenessBroken:
		t.Liveness = "violation"
	case anyUnknown:
		t.Liveness = "unknown"
	default:
		t.Liveness = "ok"
	}

	// §8 linearizability
	t.Lin, t.LinFenced, t.Notes = x.linTruth()
	if k, n := x.hardestKey(); n >= hardUnknowns {
		t.Alt["linearizability.verdict"], t.Alt["linearizability.fenced_verdict"] = "unknown", "unknown"
		t.Notes = append(t.Notes, fmt.Sprintf("%s has %d operations of unknown outcome: the search may run out of its budget", k, n))
	}
	if t.Lin == Any {
		anyf("linearizability.verdict", "neither a witness nor a proof")
	}
	if t.LinFenced == Any {
		if !m.Fenced {
			anyf("linearizability.fenced_verdict", "the backend has no tokens")
		} else {
			anyf("linearizability.fenced_verdict", "neither a witness nor a proof")
		}
	}
	for _, i := range cr.strayComps {
		if x.in(i) {
			t.Lin, t.LinFenced = Any, Any
			anyf("linearizability.verdict", "a stray completion")
			anyf("linearizability.fenced_verdict", "a stray completion")
		}
	}

	// §12: a record that breaks its own rules (malformed, out of order,
	// early events) proves nothing, not even a violation.
	unreadable := outOfOrder || malformedFaults
	for _, i := range append(append(append([]int{}, cr.strayMarks...), cr.strayComps...), cr.earlyIdx...) {
		if x.in(i) {
			unreadable = true
		}
	}

	// §13 status
	safety := !unreadable && ((!exp.violations && t.Violations > 0) ||
		(exp.stale != nil && !*exp.stale && t.Resource.StaleAccepted > 0) ||
		(exp.lost != nil && !*exp.lost && t.Resource.LostUpdates > 0))
	var unmet []string
	if exp.violations && t.Violations == 0 {
		unmet = append(unmet, "expected violations, found none")
	}
	if exp.stale != nil && *exp.stale && t.Resource.StaleAccepted == 0 {
		unmet = append(unmet, "expected stale writes accepted, found none")
	}
	if exp.lost != nil && *exp.lost && t.Resource.LostUpdates == 0 {
		unmet = append(unmet, "expected lost updates, found none")
	}
	if exp.available != nil && !*exp.available && anyUnmet {
		unmet = append(unmet, "expected the lock to stay unavailable")
	}
	t.InvalidReasons = reasons
	t.Unmet = unmet
	t.Valid = len(reasons) == 0 && !t.CutShort
	switch {
	case safety:
		t.Status = "violation"
	case t.CutShort:
		t.Status = "unknown"
	case len(reasons) > 0:
		t.Status = "invalid"
	case livenessBroken:
		t.Status = "unavailable"
	case len(unmet) > 0:
		t.Status = "not-reproduced"
	default:
		t.Status = "ok"
	}

	// verdicts
	t.MutualExclusion = "ok"
	if t.Violations > 0 {
		t.MutualExclusion = "violation"
	}
	if !t.Valid {
		// §12: in an invalid or cut-short case every check that found
		// nothing is unknown.
		for _, p := range []*string{&t.MutualExclusion, &t.Lin, &t.LinFenced, &t.Liveness} {
			if *p == "ok" {
				*p = "unknown"
			}
		}
		for i := range t.Faults {
			if t.Faults[i].Verdict == "met" {
				t.Faults[i].Verdict = "unknown"
				t.Faults[i].Detail += " (met, but the case is not valid)"
			}
		}
	}
	if unreadable {
		for _, p := range []*string{&t.MutualExclusion, &t.Lin, &t.LinFenced, &t.Liveness} {
			if *p != Any {
				*p = "unknown"
			}
		}
		for i := range t.Faults {
			if t.Faults[i].Verdict != Any && t.Faults[i].Verdict != "" {
				t.Faults[i].Verdict = "unknown"
			}
		}
	}
	for _, th := range cr.thresholds {
		tt := ThresholdTruth{Source: th.source}
		if obs, ok := t.observed(th.metric); ok {
			tt.Observed, tt.Pass = obs, judgeThreshold(th.op, obs, th.value)
		} else {
			tt.Any = "the truth does not know " + th.metric
		}
		t.Thresholds = append(t.Thresholds, tt)
	}
	return t
}

func (cr *caseRec) tags() string {
	c := cr.cfg
	tags := []string{c.variant}
	if c.problem != "" {
		tags = append(tags, "problem="+c.problem)
	}
	if c.lease == 0 {
		tags = append(tags, "no-lease")
	}
	if !c.fenced {
		tags = append(tags, "unfenced")
	}
	for _, f := range c.faults {
		s := f.kind
		if f.outcome != foNormal {
			s += "/" + f.outcome
		}
		if f.spec.Group != "" {
			s += "/group"
		}
		tags = append(tags, s)
	}
	if c.dyingMax > 0 {
		tags = append(tags, "posthumous")
	}
	return strings.Join(tags, " ")
}

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
	for _, k := range x.cr.cfg.keyNames() {
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

// --- §10 groups -----------------------------------------------------------

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

func (x *evalCtx) sameGroup(f, g *faultRec) bool {
	if f.spec.Group != "" && f.spec.Group == g.spec.Group {
		return true
	}
	if !strings.HasPrefix(f.target, "link:") || !strings.HasPrefix(g.target, "link:") || f.spec.Type != g.spec.Type {
		return false
	}
	fs, fe := x.window(f)
	gs, ge := x.window(g)
	return fs <= ge && gs <= fe && scopeOf(f.target) == scopeOf(g.target)
}

func (x *evalCtx) observed(g *faultRec) bool {
	return x.in(g.startIdx) && x.in(g.endIdx) && !g.healErr && !x.in(g.unobservedIdx) && !x.in(g.idleIdx) && !x.in(g.errorIdx)
}

func (x *evalCtx) excused(f *faultRec) bool {
	fs, fe := x.window(f)
	for _, g := range x.cr.faults {
		if g == f || !x.in(g.startIdx) || !x.sameGroup(f, g) {
			continue
		}
		gs, ge := x.window(g)
		if fs <= ge && gs <= fe && x.observed(g) {
			return true
		}
	}
	return false
}
