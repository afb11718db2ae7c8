package sim

import (
	"sort"
)

// The figures of a case (MODEL §6's durations and zombies, §15), from the
// same records as its verdicts. Durations are in ns.

// Latency summarizes one latency's samples (MODEL §15): count, minimum and
// maximum exactly, the mean, and the percentiles as the sample of rank
// ⌈q·n/100⌉. The checker reports them from an HDR histogram (within 0.1%
// above, µs): the test compares with that precision.
type Latency struct {
	Count  int     `json:"count"`
	MinNs  int64   `json:"min_ns,omitempty"`
	MeanNs float64 `json:"mean_ns,omitempty"`
	P50Ns  int64   `json:"p50_ns,omitempty"`
	P90Ns  int64   `json:"p90_ns,omitempty"`
	P99Ns  int64   `json:"p99_ns,omitempty"`
	P999Ns int64   `json:"p999_ns,omitempty"`
	MaxNs  int64   `json:"max_ns,omitempty"`
	// Any: only the count is compared, and why.
	Any string `json:"any,omitempty"`
}

// rankOf: the 1-based rank ⌈q·n/100⌉ for q in tenths of a percent.
func rankOf(n int, q10 int) int {
	r := (q10*n + 999) / 1000
	return max(r, 1)
}

func latencyOf(samples []int64) Latency {
	l := Latency{Count: len(samples)}
	if len(samples) == 0 {
		return l
	}
	s := append([]int64(nil), samples...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	n := len(s)
	l.MinNs, l.MaxNs = s[0], s[n-1]
	sum := 0.0
	for _, v := range s {
		sum += float64(v)
	}
	l.MeanNs = sum / float64(n)
	l.P50Ns = s[rankOf(n, 500)-1]
	l.P90Ns = s[rankOf(n, 900)-1]
	l.P99Ns = s[rankOf(n, 990)-1]
	l.P999Ns = s[rankOf(n, 999)-1]
	return l
}

// median: the ⌈n/2⌉-th smallest (MODEL §6), 0 with none.
func median(vs []int64) int64 {
	if len(vs) == 0 {
		return 0
	}
	s := append([]int64(nil), vs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)+1)/2-1]
}

func maxOf(vs []int64) int64 {
	m := int64(0)
	for _, v := range vs {
		m = max(m, v)
	}
	return m
}

// holdEndT: when a hold ended (its ending event), or the case's end for a
// hold still in force there (MODEL §5, §6); open: it was in force where a
// history cut short ends.
func (x *evalCtx) holdEndT(h *holdRec, cutShort bool) (t int64, open bool) {
	if e := x.holdEnd(h); e != never32 {
		return x.T(e), false
	}
	return x.endT(), cutShort
}

// visibleHolds: the holds that began in the visible history.
func (x *evalCtx) visibleHolds() []*holdRec {
	var hs []*holdRec
	for _, h := range x.cr.holds {
		if x.in(h.beginIdx) {
			hs = append(hs, h)
		}
	}
	return hs
}

type violation struct {
	later, earlier *holdRec
	overlap        int64
	open           bool
}

// endedAt: the hold ended by its release, a lost signal or its death at
// instant t (not by the case's end, nor in force where the history ends).
func (x *evalCtx) endedAt(h *holdRec, t int64) bool {
	e := x.holdEnd(h)
	return e != never32 && h.endKind != "end" && x.T(e) == t
}

// violations: MODEL §6. A hold is in force on [begin, end): one that
// ends at t and one that begins at t never overlap, whatever their order
// in the file (§2), and a hold that ends (release, lost, death) at the
// instant it began is in force at no instant (reading 35); one still in
// force at the case's end, or where a history cut short ends, overlaps for
// as long as the record goes, no time included.
func (x *evalCtx) violations(cutShort bool) []violation {
	var out []violation
	hs := x.visibleHolds()
	for _, h := range hs {
		for _, o := range hs {
			if o != h && o.key == h.key && o.beginIdx < h.beginIdx && x.holdEnd(o) > h.beginIdx &&
				!x.endedAt(o, x.T(h.beginIdx)) && !x.endedAt(h, x.T(h.beginIdx)) {
				he, ho := x.holdEndT(h, cutShort)
				oe, oo := x.holdEndT(o, cutShort)
				end := min(he, oe)
				out = append(out, violation{later: h, earlier: o, overlap: end - x.T(h.beginIdx), open: ho || oo})
			}
		}
	}
	return out
}

// mutex: MODEL §6. Violations, their overlaps (longest, median, the first's
// beginning), and zombies.
func (x *evalCtx) mutex(t *CaseTruth) {
	cr := x.cr
	vs := x.violations(t.CutShort)
	t.Violations = len(vs)
	t.FirstViolationNs = -1
	var ovs []int64
	open := false
	for _, v := range vs {
		ovs = append(ovs, v.overlap)
		open = open || v.open
		if b := x.T(v.later.beginIdx) - x.T(cr.startIdx); t.FirstViolationNs < 0 || b < t.FirstViolationNs {
			t.FirstViolationNs = b
		}
	}
	t.OverlapMaxNs, t.OverlapP50Ns = maxOf(ovs), median(ovs)
	if open {
		t.Any["overlap_max_ms"] = "an overlap with a hold still in force where the history ends"
		t.Any["overlap_p50_ms"] = t.Any["overlap_max_ms"]
	}

	// zombies
	lease := cr.meta.LeaseNs
	var zs []int64
	zopen := false
	for _, h := range x.visibleHolds() {
		endIdx := x.holdEnd(h)
		endT, hopen := x.holdEndT(h, t.CutShort)
		within := func(i int) bool { return x.in(i) && i > h.beginIdx && i < endIdx }
		taken := int64(never)
		rule := 0
		for _, op := range cr.ops {
			if op.key != h.key || !x.visible(op) || !within(op.compIdx) || x.outcome(op) == "unknown" {
				continue
			}
			o := x.outcome(op)
			r := 0
			switch {
			case op.kind == "acquire" && o == "ok" && op.client != h.client:
				r = 1 // another client's grant of the key
			case op.kind == "extend" && o == "fail" && op.client == h.client:
				r = 3 // a refused extension by its own client
			case op.kind == "release-wrong-token" && o == "ok":
				r = 4 // an accepted wrong-token release, by any client
			default:
				continue
			}
			if x.T(op.compIdx) < taken {
				taken, rule = x.T(op.compIdx), r
			}
		}
		if lease > 0 && !cr.meta.LeaseRenewed && h.acq != nil && !x.good(h) {
			// 2. the lease: the latest instant it may run out in some
			// allowed world (MODEL §6, from A1). Its renewals are the
			// client's ok extensions and re-entrant grants (each at an
			// instant of its window, with the grant in force) and its
			// extensions of unknown outcome (after their invoke, or
			// never), answered in the hold or after it ended; unsent and
			// refused ones renew nothing. Not for a hold that turns out
			// good: its ok release says the grant outlived the hold.
			shape := func(s string) {
				if t.zombieShape == nil {
					t.zombieShape = map[string]int{}
				}
				t.zombieShape[s]++
			}
			e := x.leaseEnd(h, x.renewals(h, endIdx), endIdx, shape)
			if e < endT {
				if e < taken {
					taken, rule = e, 2
				}
			} else if hopen {
				zopen = true // the lease may run out after the history's end
			}
		}
		// a zombie when its end comes after that instant: strictly later
		// in time (reading 23)
		if taken == never || endT <= taken {
			continue
		}
		if hopen {
			zopen = true
		}
		zs = append(zs, endT-taken)
		t.zombieRule[rule]++
		if debugZombie != nil {
			debugZombie(h, rule, taken, endT)
		}
	}
	t.Zombies, t.ZombieMaxNs, t.ZombieP50Ns = len(zs), maxOf(zs), median(zs)
	if zopen {
		why := "a hold that may be a zombie is still in force where the history ends"
		t.Any["zombies"], t.Any["zombie_max_ms"], t.Any["zombie_p50_ms"] = why, why, why
	}
}

// liveAt: instance n is live after event p (not dead, not paused by an
// acting pause, MODEL §4).
func (x *evalCtx) liveAt(n, p int) bool {
	if ir := x.cr.inst(n); ir != nil && x.in(ir.deathIdx) && ir.deathIdx <= p {
		return false
	}
	for _, f := range x.cr.faults {
		if !x.in(f.startIdx) || f.startIdx > p || !x.acts(f) {
			continue
		}
		if x.in(f.endIdx) && f.endIdx <= p {
			continue
		}
		for _, m := range f.pauseInsts {
			if m == n {
				return false
			}
		}
	}
	return true
}

// figures: MODEL §15.
func (x *evalCtx) figures(t *CaseTruth) {
	cr := x.cr
	var oks []*opRec
	for _, op := range cr.ops {
		if x.counted(op) {
			oks = append(oks, op)
		}
	}
	sort.Slice(oks, func(i, j int) bool { return oks[i].compIdx < oks[j].compIdx })

	// acquire latency: one sample per acquire counted by §3 that completed
	// (ok, fail or info), from its invoke to its completion; one left in
	// flight by a death or the case's end has none
	var acq []int64
	for _, op := range cr.ops {
		if x.completed(op) {
			acq = append(acq, x.latency(op))
		}
	}
	t.AcquireLatency = latencyOf(acq)

	// hold time
	var holds []int64
	for _, h := range x.visibleHolds() {
		if h.endKind == "release" && x.in(h.endIdx) {
			holds = append(holds, x.T(h.endIdx)-x.T(h.beginIdx))
		}
	}
	t.HoldTime = latencyOf(holds)

	// hand-off: from the invoke of a release that ends a hold of k while
	// another live client waits for k (none open for k), to the next ok
	// acquire of k by a live client: a sample when that client is not the
	// releaser, a barge (no sample) when it is
	type open struct {
		from     int
		releaser string
	}
	opened := map[string]*open{}
	var handoffs []int64
	barges := 0
	var rels []*holdRec
	for _, h := range x.visibleHolds() {
		if h.endKind == "release" && x.in(h.endIdx) {
			rels = append(rels, h)
		}
	}
	sort.Slice(rels, func(i, j int) bool { return rels[i].endIdx < rels[j].endIdx })
	ri, oi := 0, 0
	for ri < len(rels) || oi < len(oks) {
		if oi < len(oks) && (ri == len(rels) || oks[oi].compIdx < rels[ri].endIdx) {
			op := oks[oi]
			oi++
			if o := opened[op.key]; o != nil && x.liveAt(op.inst, op.compIdx) {
				if op.client == o.releaser {
					barges++ // the key went back to its holder, not over
				} else {
					handoffs = append(handoffs, x.T(op.compIdx)-x.T(o.from))
					if debugHandoff != nil {
						debugHandoff(o.from, op)
					}
				}
				delete(opened, op.key)
			}
			continue
		}
		h := rels[ri]
		ri++
		if opened[h.key] != nil {
			continue
		}
		if x.othersWait(h.key, h.client, h.endIdx) {
			opened[h.key] = &open{from: h.endIdx, releaser: h.client}
		}
	}
	t.Handoff = latencyOf(handoffs)
	t.HandoffBarges = barges
	if !x.in(cr.stopIdx) {
		// waits end at the stop (§11): without one, whether a client
		// still waits is not defined
		t.Any["metrics.handoff_latency"] = "no case-stop: the waits of §11 have no end"
	}

	// throughput: the ok acquires that returned before the stop, over the
	// time from the start to the stop (to case-end, or the last event,
	// without a stop)
	end, n := x.endT(), 0
	stopped := x.in(cr.stopIdx)
	if stopped {
		end = x.T(cr.stopIdx)
	}
	for _, op := range oks {
		if !stopped || op.compIdx < cr.stopIdx {
			n++
		}
	}
	if d := end - x.T(cr.startIdx); d > 0 {
		t.Throughput = float64(n) / (float64(d) / 1e9)
	}

	x.phases(t, oks)
	x.faultFigures(t, oks)
	if why := x.misdatedOp(); why != "" {
		// a sample may be negative: how the histogram takes it is not
		// what these histories test
		for _, l := range []*Latency{&t.AcquireLatency, &t.Handoff, &t.HoldTime} {
			l.Any = why
		}
		for i := range t.Phases {
			for _, s := range []*PhaseStats{&t.Phases[i].Before, &t.Phases[i].During, &t.Phases[i].After} {
				s.Latency.Any = why
			}
		}
	}
}

// misdatedOp: an operation's event dated before the event before it is in
// the history (the record is unreadable, §12).
func (x *evalCtx) misdatedOp() string {
	if !x.cr.backdatedOp {
		return ""
	}
	for _, i := range x.cr.backdated {
		if x.in(i) {
			return "an operation's event dated before the one before it"
		}
	}
	return ""
}

// completed: an acquire counted by §3 whose completion (ok, fail or info)
// is in the history and not posthumous (MODEL §15: a latency sample).
func (x *evalCtx) completed(op *opRec) bool {
	return op.kind == "acquire" && x.visible(op) && op.compIdx >= 0 && x.in(op.compIdx) && !op.postComp
}

// latency: from an acquire's invoke to its completion.
func (x *evalCtx) latency(op *opRec) int64 { return x.T(op.compIdx) - x.T(op.invIdx) }

// othersWait: a live client other than c waits for key after event p
// (MODEL §11's waits).
func (x *evalCtx) othersWait(key, c string, p int) bool {
	for _, w := range x.cr.waits {
		if w.key != key || w.client == c || !x.in(w.beginIdx) || w.beginIdx >= p {
			continue
		}
		if w.endIdx >= 0 && x.in(w.endIdx) && w.endIdx <= p {
			continue
		}
		if x.liveAt(w.inst, p) {
			return true
		}
	}
	return false
}

// debugZombie, when set (a test's), sees every zombie.
var debugZombie func(h *holdRec, rule int, taken, end int64)

// debugHandoff, when set (a test's), sees every hand-off.
var debugHandoff func(from int, to *opRec)

// viewLastT: the time of the last visible event of this case or lane (a
// lane's record ends at its own last event, §14).
func (x *evalCtx) viewLastT() int64 {
	cr := x.cr
	last := cr.startIdx
	see := func(i int) {
		if x.in(i) && i > last {
			last = i
		}
	}
	for _, op := range cr.ops {
		see(op.invIdx)
		see(op.compIdx)
	}
	for _, f := range cr.faults {
		see(f.startIdx)
		see(f.endIdx)
		see(f.errorIdx)
		see(f.unobservedIdx)
		see(f.idleIdx)
	}
	for _, r := range cr.res {
		see(r.idx)
	}
	for _, l := range cr.losts {
		see(l.idx)
	}
	for _, ir := range cr.insts {
		see(ir.crashIdx)
	}
	see(cr.stopIdx)
	see(cr.harnIdx)
	return x.T(last)
}
