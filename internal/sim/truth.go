package sim

import (
	"fmt"
	"sort"
)

// Any marks a field whose true value the simulator cannot be sure of: the
// test does not compare it.
const Any = "any"

// CaseTruth is what MODEL.md says of one case (or one lane of a case whose
// trials ran side by side), worked out from the simulator's own records.
// Durations are in ns.
type CaseTruth struct {
	Index    int    `json:"index"` // the case's index in the run
	Lane     int    `json:"lane,omitempty"`
	Name     string `json:"name"`
	Variant  string `json:"variant"`
	Backend  string `json:"backend"`
	Class    string `json:"class"` // MODEL §18
	Fenced   bool   `json:"fenced"`
	Tags     string `json:"tags"` // what the case is made of, for grouping mismatches
	Status   string `json:"status"`
	Valid    bool   `json:"valid"`
	CutShort bool   `json:"cut_short"`
	Readable bool   `json:"readable"` // MODEL §12
	Decided  bool   `json:"decided"`  // MODEL §17
	// Skip: nothing of this case is compared, and why.
	Skip string `json:"skip,omitempty"`

	InvalidReasons []string `json:"invalid_reasons,omitempty"`
	Unmet          []string `json:"unmet_expectations,omitempty"`

	MutualExclusion            string `json:"mutual_exclusion"`
	Violations                 int    `json:"violations"`
	OverlapMaxNs               int64  `json:"overlap_max_ns"`
	OverlapP50Ns               int64  `json:"overlap_p50_ns"`
	FirstViolationNs           int64  `json:"first_violation_ns"` // -1: none
	Zombies                    int    `json:"zombies"`
	ZombieMaxNs                int64  `json:"zombie_max_ns"`
	ZombieP50Ns                int64  `json:"zombie_p50_ns"`
	AcquiresOK                 int    `json:"acquires_ok"`
	AcquiresFailed             int    `json:"acquires_failed"`
	AcquiresUnknown            int    `json:"acquires_unknown"`
	AcquiresUnsent             int    `json:"acquires_unsent"`
	DuplicateGrants            int    `json:"duplicate_grants"`
	ReleasesNotHeld            int    `json:"releases_not_held"`
	LeasesLost                 int    `json:"leases_lost"`
	WrongTokenReleasesAccepted int    `json:"wrong_token_releases_accepted"`
	Dropped                    int    `json:"acquires_dropped"` // open-loop drops (MODEL §19)
	TokenRegressions           int    `json:"token_regressions"`
	// Late: releases and extensions sent after their grant was certainly
	// gone, and the service's answers (MODEL §6)
	Late LateTruth `json:"late"`

	Resource ResourceTruth `json:"resource"`

	Liveness     string       `json:"liveness"`
	LongestGapNs int64        `json:"longest_gap_ns"` // -1: any
	Faults       []FaultTruth `json:"faults,omitempty"`

	Lin       string `json:"linearizability"`
	LinFenced string `json:"linearizability_fenced"`

	Exposures      int     `json:"exposures"` // MODEL §16
	AcquireLatency Latency `json:"acquire_latency"`
	Handoff        Latency `json:"handoff_latency"`
	HandoffBarges  int     `json:"handoff_barges"` // hand-offs the releaser ended by its own grant
	HoldTime       Latency `json:"hold_time"`
	Throughput     float64 `json:"acquisitions_per_s"`
	// the ok acquires that returned while some fault was in force, and
	// those that returned later with none in force (MODEL §15)
	AcqDuringFaults int          `json:"acquisitions_during_faults"`
	AcqAfterFaults  int          `json:"acquisitions_after_faults"`
	Phases          []PhaseTruth `json:"phases,omitempty"`

	Thresholds []ThresholdTruth `json:"thresholds,omitempty"`

	// Any lists fields not compared, and why.
	Any map[string]string `json:"any,omitempty"`
	// Alt gives a second answer a field may legitimately have: "unknown"
	// for linearizability on a key whose search may run out of its budget
	// (§8: many operations of unknown outcome).
	Alt   map[string]string `json:"alt,omitempty"`
	Notes []string          `json:"notes,omitempty"`

	meta *CaseMeta
	rec  *caseRec
	// zombieRule counts the zombies by the rule of §6 that took their
	// grant back first (for TestCoverage)
	zombieRule [5]int
	// zombieShape counts the holds whose lease rule 2 read in a way only
	// the derivation of MODEL §6 gets right (for TestCoverage)
	zombieShape map[string]int
	// UnprovenViolations: in a record that lost worker lines, the
	// overlaps the record alone shows (§12: none of them proven)
	UnprovenViolations int `json:"unproven_violations,omitempty"`

	// EventsLost: the harness mark says worker lines were lost (§12): an
	// overlap in the record proves nothing
	EventsLost bool `json:"events_lost,omitempty"`
}

// twoHolders: the case proved two holders (§6, §12): an overlap, in a
// record that lost no worker line (in one that did, Violations is none).
func (t *CaseTruth) twoHolders() bool { return t.Violations > 0 && !t.EventsLost }

// Meta is the meta the case (the lane) was judged with.
func (t *CaseTruth) Meta() *CaseMeta { return t.meta }

type ResourceTruth struct {
	Verdict            string `json:"verdict"`
	LostUpdates        int    `json:"lost_updates"`
	StaleRejected      int    `json:"stale_rejected"`
	StaleReadsRejected int    `json:"stale_reads_rejected"`
	StaleAccepted      int    `json:"stale_accepted"`
	TokenReuse         int    `json:"token_reuse"`
}

// FaultTruth is one scheduled fault: its recovery verdict (MODEL §11) and
// its figures (MODEL §15).
type FaultTruth struct {
	Fault   string `json:"fault"`
	Verdict string `json:"verdict"` // met, unmet, unknown, "" (not judged), any
	Detail  string `json:"detail,omitempty"`
	Started bool   `json:"started"`
	// JudgedAt: the fault at whose heal it was judged.
	JudgedAt    string `json:"judged_at,omitempty"`
	AcqDuring   int    `json:"acquisitions_during"`
	AcqAfter    int    `json:"acquisitions_after"`
	NextGrantNs int64  `json:"next_grant_ns"` // -1: none
	ClearNs     int64  `json:"clear_ns"`
	RecoveredNs int64  `json:"recovered_after_ns"` // -1: a relevant key not served
	// StayedDown: judged for available: false (on the keys it took down)
	StayedDown bool `json:"stayed_down,omitempty"`
	// Any: figures not compared, and why.
	Any map[string]string `json:"any,omitempty"`
}

type evalCtx struct {
	cr  *caseRec
	ev  []*Event
	cut int
	// linNotes: what the linearizability witness relied on (lin.go)
	linNotes []string
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

// counted: an ok acquire counted by §3 (visible, not posthumous).
func (x *evalCtx) counted(op *opRec) bool {
	return op.kind == "acquire" && x.visible(op) && x.outcome(op) == "ok"
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

// endBound is the index just after the case's last visible event: its
// case-end, or where the history (or the case) ends.
func (x *evalCtx) endBound() int {
	if x.in(x.cr.endIdx) {
		return x.cr.endIdx
	}
	return min(x.cr.lastIdx+1, x.cut)
}

// endT is when the case ended: its case-end, or its last visible event.
func (x *evalCtx) endT() int64 {
	if x.in(x.cr.endIdx) {
		return x.T(x.cr.endIdx)
	}
	return x.T(x.endBound() - 1)
}

// acts: a kill or a pause acts unless a fault-unobserved or fault-idle
// mark of it says its effect was not seen (MODEL §4).
func (x *evalCtx) acts(f *faultRec) bool { return !x.in(f.unobservedIdx) && !x.in(f.idleIdx) }

// skipReason: the records cannot tell what the model says of this view.
func (x *evalCtx) skipReason() string {
	for _, f := range x.cr.faults {
		if len(f.killInsts) == 0 || !x.in(f.startIdx) {
			continue
		}
		if (f.unobservedIdx >= 0 && !x.in(f.unobservedIdx)) || (f.idleIdx >= 0 && !x.in(f.idleIdx)) {
			// the history ends before the mark that says the kill did not
			// act: the model kills the instance, the simulation did not
			return f.spec.Name + " is a kill whose fault-unobserved or fault-idle mark lies beyond the end of the history"
		}
	}
	return ""
}

func (cr *caseRec) truth(events []*Event, cut int, index int) *CaseTruth {
	x := &evalCtx{cr: cr, ev: events, cut: cut}
	m := &cr.meta
	t := &CaseTruth{Index: index, Lane: cr.lane, Name: m.Name, Variant: cr.cfg.variant, Backend: m.Backend, Fenced: m.Fenced,
		Class: caseClass(m), Any: map[string]string{}, Alt: map[string]string{}, Tags: cr.tags(), meta: m, rec: cr}
	t.CutShort = !x.in(cr.endIdx)
	t.Skip = x.skipReason()
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
			case "unsent":
				t.AcquiresUnsent++ // never sent: no grant, no word of the service (A1)
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
	for _, e := range cr.dropped {
		if x.in(e.idx) {
			t.Dropped++
		}
	}
	// §7 tokens, in file order of the ok acquires
	oks := []*opRec{}
	for _, op := range cr.ops {
		if x.counted(op) {
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
	// §6 mutual exclusion, its durations and zombies, late calls
	x.mutex(t)
	x.late(t)
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
	reasons, stopped, outOfOrder := x.validity(t)
	add := func(s string) { reasons = append(reasons, s) }

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
			t.Faults[i].anyf("recovered_after_ms", faultsAny)
			t.Faults[i].anyf("clear_ms", faultsAny)
			if outOfOrder {
				// an ok dated before the fault-start it follows in the
				// file: "the next grant after it" has no duration
				t.Faults[i].anyf("next_grant_ms", faultsAny)
			}
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
	if anyUnknown && exp.asked {
		// §12: a question the scenario asked that the case leaves
		// undecided; the default available: true left undecided is
		// reported unknown and changes nothing else
		add("a liveness question the scenario asked is left undecided")
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
	for _, e := range cr.strayComps {
		if x.in(e.idx) {
			t.Lin, t.LinFenced = Any, Any
			anyf("linearizability.verdict", "a stray completion")
			anyf("linearizability.fenced_verdict", "a stray completion")
		}
	}

	// §12: a record that breaks its own rules (malformed, out of order,
	// early events) proves nothing, not even a violation.
	unreadable := outOfOrder || malformedFaults
	for _, i := range cr.strayMarks {
		if x.in(i) {
			unreadable = true
		}
	}
	for _, e := range cr.strayComps {
		if x.in(e.idx) {
			unreadable = true
		}
	}
	for _, i := range cr.earlyIdx {
		if x.in(i) {
			unreadable = true
		}
	}
	t.Readable = !unreadable
	t.EventsLost = x.in(cr.harnIdx) && cr.harness != nil && cr.harness.BadLines > 0
	if t.EventsLost {
		// §12 (A4): any lost line could be a holder's release invoke or
		// its lost-lease signal, ending its hold before the next grant:
		// no overlap and no zombie is proven, and the figures reported
		// are the least over the allowed worlds (A7): none. What the
		// record alone shows is kept as unproven.
		t.UnprovenViolations = t.Violations
		t.Violations, t.OverlapMaxNs, t.OverlapP50Ns, t.FirstViolationNs = 0, 0, 0, -1
		t.Zombies, t.ZombieMaxNs, t.ZombieP50Ns = 0, 0, 0
		for _, f := range []string{"overlap_max_ms", "overlap_p50_ms", "zombies", "zombie_max_ms", "zombie_p50_ms"} {
			delete(t.Any, f)
		}
	}

	// §13 status
	safety := !unreadable && ((!exp.measure && !exp.violations && !exp.violationsAny && t.twoHolders()) ||
		(exp.stale != nil && !*exp.stale && t.Resource.StaleAccepted > 0) ||
		(exp.lost != nil && !*exp.lost && t.Resource.LostUpdates > 0))
	var unmet []string
	if exp.violations && !t.twoHolders() {
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
	if exp.minGap > 0 && t.LongestGapNs >= 0 && t.LongestGapNs < exp.minGap {
		unmet = append(unmet, "no key stayed unavailable for min_gap")
	}
	clientSafety, clientUnmet, noValue := x.clientExpect(t, exp, t.Lin, unreadable)
	safety = safety || clientSafety
	unmet = append(unmet, clientUnmet...)
	reasons = append(reasons, noValue...)
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
	if t.twoHolders() {
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
	if t.EventsLost {
		// §8, §12 (A4): the lost lines could be the release, refusal or
		// extension that linearizes the service's history
		for _, p := range []*string{&t.Lin, &t.LinFenced} {
			if *p == "violation" {
				*p = "unknown"
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

	// §15 figures, §16 exposures, §17 decided
	x.figures(t)
	x.exposures(t)
	// §17: valid, or readable (cut short included) and proved unsafety: a
	// violation or damage
	t.Decided = t.Valid || (t.Readable && (t.twoHolders() || t.damage()))

	// §19 thresholds
	for _, th := range cr.thresholds {
		t.Thresholds = append(t.Thresholds, t.judge(th))
	}
	return t
}
