package sim

import (
	"fmt"
	"os"
)

// MODEL §11, over the simulator's records of waits, holds, pauses and
// deaths. The state after event p lasts until event p+1; every instant of
// the history is one event (times strictly increase).

var debugLive = os.Getenv("SIM_DEBUG_LIVE") != ""

type liveResult struct {
	gap    int64
	faults []FaultTruth
}

type timeline struct {
	x        *evalCtx
	s, e     int // case-start and case-stop indices
	keys     []string
	served   map[string][]bool
	liveWait map[string][]bool
	unavail  map[string][]bool
}

func (tl *timeline) T(p int) int64 { return tl.x.T(p) }

func (x *evalCtx) timeline() *timeline {
	cr := x.cr
	s, e := cr.startIdx, cr.stopIdx
	n := e - s + 1
	tl := &timeline{x: x, s: s, e: e, keys: cr.cfg.keyNames(), served: map[string][]bool{}, liveWait: map[string][]bool{}, unavail: map[string][]bool{}}
	const (
		waitOn = iota
		waitOff
		holdOn
		holdOff
		pauseOn
		pauseOff
		dead
		okAt
	)
	type chg struct {
		kind   int
		client string
		inst   int
		key    string
		good   bool
	}
	changes := make([][]chg, n)
	add := func(idx int, c chg) {
		if x.in(idx) && idx >= s && idx <= e {
			changes[idx-s] = append(changes[idx-s], c)
		}
	}
	for _, w := range cr.waits {
		add(w.beginIdx, chg{kind: waitOn, client: w.client, inst: w.inst, key: w.key})
		add(w.endIdx, chg{kind: waitOff, client: w.client, inst: w.inst, key: w.key})
	}
	for _, h := range cr.holds {
		add(h.beginIdx, chg{kind: holdOn, client: h.client, inst: h.inst, key: h.key, good: x.good(h)})
		add(h.endIdx, chg{kind: holdOff, client: h.client, inst: h.inst, key: h.key})
	}
	for _, f := range cr.faults {
		if !x.in(f.startIdx) {
			continue
		}
		for _, n := range f.pauseInsts {
			add(f.startIdx, chg{kind: pauseOn, inst: n})
			add(f.endIdx, chg{kind: pauseOff, inst: n})
		}
	}
	for _, ir := range cr.insts {
		add(ir.deathIdx, chg{kind: dead, inst: ir.n})
	}
	for _, op := range cr.ops {
		if op.kind == "acquire" && x.visible(op) && x.outcome(op) == "ok" {
			add(op.compIdx, chg{kind: okAt, client: op.client, inst: op.inst, key: op.key})
		}
	}
	paused := map[int]int{}
	isDead := map[int]bool{}
	waiting := map[string]map[string]int{} // key -> client -> inst
	holding := map[string]map[string]bool{}
	instOf := map[string]int{}
	for _, k := range tl.keys {
		waiting[k] = map[string]int{}
		holding[k] = map[string]bool{}
		tl.served[k] = make([]bool, n)
		tl.liveWait[k] = make([]bool, n)
		tl.unavail[k] = make([]bool, n)
	}
	live := func(inst int) bool { return !isDead[inst] && paused[inst] == 0 }
	for p := 0; p < n; p++ {
		type kc struct{ key, client string }
		okNow := map[kc]bool{}
		for _, c := range changes[p] {
			if c.client != "" {
				instOf[c.client] = c.inst
			}
			switch c.kind {
			case waitOn:
				waiting[c.key][c.client] = c.inst
			case waitOff:
				delete(waiting[c.key], c.client)
			case holdOn:
				holding[c.key][c.client] = c.good
			case holdOff:
				delete(holding[c.key], c.client)
			case pauseOn:
				paused[c.inst]++
			case pauseOff:
				paused[c.inst]--
			case dead:
				isDead[c.inst] = true
			case okAt:
				okNow[kc{c.key, c.client}] = true
			}
		}
		for _, k := range tl.keys {
			lw, lh, lg := false, false, false
			for _, inst := range waiting[k] {
				if live(inst) {
					lw = true
				}
			}
			for c, good := range holding[k] {
				if live(instOf[c]) {
					lh = true
					if good {
						lg = true
					}
				}
			}
			for o := range okNow {
				if o.key == k && live(instOf[o.client]) {
					lg = true
				}
			}
			tl.liveWait[k][p] = lw
			tl.served[k][p] = lg
			tl.unavail[k][p] = lw && !lh && p+s < e
		}
	}
	return tl
}

func (x *evalCtx) liveness(exp effExpect) liveResult {
	cr := x.cr
	var res liveResult
	for _, f := range cr.faults {
		res.faults = append(res.faults, FaultTruth{Fault: f.spec.Name})
	}
	if !x.in(cr.stopIdx) {
		return res
	}
	tl := x.timeline()
	s, e := tl.s, tl.e
	// A heal that failed ends the judgement of availability: the gap is
	// measured up to it (MODEL §11).
	if f := x.failedHeal(); f >= 0 && f < e {
		e = f
	}
	for _, k := range tl.keys {
		run := -1
		for p := s; p < e; p++ {
			if tl.unavail[k][p-s] {
				if run < 0 {
					run = p
				}
			} else if run >= 0 {
				res.gap = max(res.gap, x.T(p)-x.T(run))
				run = -1
			}
		}
		if run >= 0 {
			res.gap = max(res.gap, x.T(e)-x.T(run))
		}
	}
	stopT := x.T(e)
	for i, f := range cr.faults {
		ft := &res.faults[i]
		switch {
		case !x.in(f.startIdx) || x.in(f.errorIdx):
			ft.Detail = "not applied"
			continue
		case !x.in(f.endIdx):
			ft.Detail = "never healed (or healed beyond the history)"
			if cr.endIdx < 0 || !x.in(cr.endIdx) {
				ft.Verdict = Any
				ft.Detail = "its heal is beyond the end of a history cut short"
			}
			continue
		case f.healErr:
			ft.Detail = "could not be healed: not judged"
			continue
		case x.in(f.unobservedIdx):
			ft.Detail = "its effect was not observed: not judged"
			continue
		}
		if exp.available == nil {
			ft.Detail = "no availability expectation"
			ft.Verdict = Any
			continue
		}
		if !*exp.available {
			h := x.T(f.endIdx)
			served := false
			for p := f.endIdx; p < e; p++ {
				for _, k := range tl.keys {
					if tl.served[k][p-s] {
						served = true
					}
				}
			}
			waitBefore := false
			for _, k := range tl.keys {
				if tl.liveWait[k][e-1-s] {
					waitBefore = true
				}
			}
			switch {
			case served:
				ft.Verdict = "unmet"
			case stopT-h >= 2e9 && waitBefore:
				ft.Verdict = "met"
			default:
				ft.Verdict = "unknown"
			}
			continue
		}
		ft.Verdict, ft.Detail = x.recovery(tl, f, exp)
	}
	return res
}

// recovery judges an available: true fault from its heal, again at later
// heals while it stays undecided (MODEL §11).
func (x *evalCtx) recovery(tl *timeline, f *faultRec, exp effExpect) (string, string) {
	cr := x.cr
	healIdx := f.endIdx
	self := f
	B := int64(2e9)
	if exp.recov > 0 {
		B = exp.recov
	}
	detail := ""
	for {
		if f := x.failedHeal(); f >= 0 && healIdx >= f {
			return "unknown", detail + "judged at or after a heal that failed"
		}
		h := x.T(healIdx)
		// the clear window [h, e)
		var g *faultRec
		e := x.T(tl.e)
		eIdx := tl.e
		var inForce []*faultRec
		for _, o := range cr.faults {
			if o == self || !x.in(o.startIdx) || o.startIdx > healIdx {
				continue
			}
			if !x.in(o.endIdx) || o.endIdx > healIdx {
				inForce = append(inForce, o)
			}
		}
		if len(inForce) > 0 {
			e, eIdx = h, healIdx
			for _, o := range inForce {
				if x.in(o.endIdx) && (g == nil || o.endIdx < g.endIdx) {
					g = o
				}
			}
			if g == nil {
				g = inForce[0]
			}
		} else {
			for _, o := range cr.faults {
				if x.in(o.startIdx) && o.startIdx > healIdx && o.startIdx < eIdx {
					g, e, eIdx = o, x.T(o.startIdx), o.startIdx
				}
			}
		}
		v := x.judge(tl, healIdx, h, e, B, exp.recov > 0)
		detail += fmt.Sprintf("judged at %s's heal: %s; ", self.spec.Name, v)
		if v != "undecided" {
			return v, detail
		}
		if g == nil {
			return "unknown", detail + "undecided at the stop"
		}
		if !x.in(g.endIdx) || g.healErr {
			return "unknown", detail + g.spec.Name + " was never healed cleanly"
		}
		healIdx, self = g.endIdx, g
	}
}

// judge applies §11's rules for one heal at h, clear window [h, e).
func (x *evalCtx) judge(tl *timeline, healIdx int, h, e, B int64, within bool) string {
	s := tl.s
	last := func(pred func(p int) bool) int { // the last event index p >= healIdx with pred(T)
		q := -1
		for p := healIdx; p <= tl.e && pred(p); p++ {
			q = p
		}
		return q
	}
	before := last(func(p int) bool { return x.T(p) < e })  // just before e
	atHB := last(func(p int) bool { return x.T(p) <= h+B }) // at h+B
	anyUnmet, anyUndecided, relevant := false, false, 0
	for _, k := range tl.keys {
		r := int64(-1)
		waits := false
		for p := healIdx; p <= before; p++ {
			if tl.served[k][p-s] && r < 0 {
				r = x.T(p)
			}
			if tl.liveWait[k][p-s] {
				waits = true
			}
		}
		if !waits && r < 0 {
			continue
		}
		relevant++
		var met, unmet bool
		if within {
			met = r >= 0 && r-h <= B
			if h+B <= e {
				servedHB := false
				for p := healIdx; p <= atHB; p++ {
					if tl.served[k][p-s] {
						servedHB = true
					}
				}
				unmet = !servedHB && atHB >= 0 && tl.liveWait[k][atHB-s]
			}
		} else {
			met = r >= 0
			unmet = e-h >= B && r < 0 && before >= 0 && tl.liveWait[k][before-s]
		}
		if debugLive {
			fmt.Printf("judge h=%d e=%d B=%d within=%v key %s: r=%d (r-h=%d) waits=%v met=%v unmet=%v atHB=%d liveWait(atHB)=%v before=%d\n", h, e, B, within, k, r, r-h, waits, met, unmet, atHB, atHB >= 0 && tl.liveWait[k][atHB-s], before)
		}
		switch {
		case unmet:
			anyUnmet = true
		case !met:
			anyUndecided = true
		}
	}
	switch {
	case anyUnmet:
		return "unmet"
	case relevant > 0 && !anyUndecided:
		return "met"
	}
	return "undecided"
}

// failedHeal is the index of the first fault-end that carries a heal error
// in the visible history, or -1.
func (x *evalCtx) failedHeal() int {
	first := -1
	for _, f := range x.cr.faults {
		if f.healErr && x.in(f.endIdx) && (first < 0 || f.endIdx < first) {
			first = f.endIdx
		}
	}
	return first
}
