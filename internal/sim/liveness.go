package sim

import (
	"fmt"
	"os"
)

// MODEL §11, over the simulator's records of waits, holds, pauses and
// deaths. The state after event p lasts until event p+1 (zero time when
// they share a timestamp: an instant of the history is an event's
// position, reading 13).

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
	// demand: some live client waits for the key, or is away from it on
	// other keys and comes back to it (MODEL §11's demand).
	demand map[string][]bool
	// okAt: a live client's acquire of the key returned ok at the event.
	okAt map[string][]bool
}

// servedAt: the key is served at the instant of event p (MODEL §11): an
// ok there, or a live good hold in force over a time that follows (a
// state that lasts no time is no instant of its own: A3).
func (tl *timeline) servedAt(k string, p int) bool {
	i := p - tl.s
	return tl.okAt[k][i] || (tl.served[k][i] && tl.T(p+1) > tl.T(p))
}

func (tl *timeline) T(p int) int64 { return tl.x.T(p) }

func (x *evalCtx) timeline() *timeline {
	cr := x.cr
	s, e := cr.startIdx, cr.stopIdx
	n := e - s + 1
	tl := &timeline{x: x, s: s, e: e, keys: cr.keys, served: map[string][]bool{}, liveWait: map[string][]bool{}, unavail: map[string][]bool{}, demand: map[string][]bool{}, okAt: map[string][]bool{}}
	const (
		waitOn = iota
		waitOff
		holdOn
		holdOff
		pauseOn
		pauseOff
		dead
		okAt
		awayOn
		awayOff
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
	// A client that left a key it waited for for another key, and asks
	// for it again later, demanded it in between (MODEL §11).
	for i, w := range cr.waits {
		if w.endKind != "other-key" || !x.in(w.endIdx) {
			continue
		}
		for _, n := range cr.waits[i+1:] {
			if n.client == w.client && n.key == w.key {
				if x.in(n.beginIdx) {
					add(w.endIdx, chg{kind: awayOn, client: w.client, inst: w.inst, key: w.key})
					add(n.beginIdx, chg{kind: awayOff, client: w.client, inst: w.inst, key: w.key})
				}
				break
			}
		}
	}
	for _, h := range cr.holds {
		add(h.beginIdx, chg{kind: holdOn, client: h.client, inst: h.inst, key: h.key, good: x.good(h)})
		add(h.endIdx, chg{kind: holdOff, client: h.client, inst: h.inst, key: h.key})
	}
	for _, f := range cr.faults {
		if !x.in(f.startIdx) || !x.acts(f) {
			continue // a pause with an unobserved or idle mark paused nothing (§4)
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
		if x.counted(op) {
			add(op.compIdx, chg{kind: okAt, client: op.client, inst: op.inst, key: op.key})
		}
	}
	paused := map[int]int{}
	isDead := map[int]bool{}
	waiting := map[string]map[string]int{} // key -> client -> inst
	awayFor := map[string]map[string]int{} // key -> client -> inst
	holding := map[string]map[string]bool{}
	instOf := map[string]int{}
	for _, k := range tl.keys {
		waiting[k] = map[string]int{}
		awayFor[k] = map[string]int{}
		holding[k] = map[string]bool{}
		tl.demand[k] = make([]bool, n)
		tl.okAt[k] = make([]bool, n)
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
				if waiting[c.key] != nil {
					waiting[c.key][c.client] = c.inst
				}
			case waitOff:
				delete(waiting[c.key], c.client)
			case awayOn:
				if awayFor[c.key] != nil {
					awayFor[c.key][c.client] = c.inst
				}
			case awayOff:
				delete(awayFor[c.key], c.client)
			case holdOn:
				if holding[c.key] != nil {
					holding[c.key][c.client] = c.good
				}
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
					tl.okAt[k][p] = true
				}
			}
			ld := lw
			for _, inst := range awayFor[k] {
				if live(inst) {
					ld = true
				}
			}
			tl.liveWait[k][p] = lw
			tl.demand[k][p] = ld && p+s < e
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
		res.faults = append(res.faults, FaultTruth{Fault: f.spec.Name, NextGrantNs: -1})
	}
	if !x.in(cr.stopIdx) {
		for i := range res.faults {
			res.faults[i].anyf("clear_ms", "no case-stop")
			res.faults[i].anyf("recovered_after_ms", "no case-stop")
		}
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
	stopT := x.T(cr.stopIdx)
	for i, f := range cr.faults {
		ft := &res.faults[i]
		// the clear window of its own heal (MODEL §11, §15)
		if x.in(f.endIdx) {
			if x.T(f.endIdx) >= stopT {
				// healed at or after the stop: no clear window, no value
				// (MODEL §11, A6)
				ft.ClearNs = -1
			} else if exp.available != nil && !*exp.available {
				// available: false: the stretch it is judged over, from
				// the heal to the stop (MODEL §15)
				ft.ClearNs = x.T(cr.stopIdx) - x.T(f.endIdx)
			} else {
				eIdx, _ := x.clearWindow(f, f.endIdx)
				ft.ClearNs = x.T(eIdx) - x.T(f.endIdx)
			}
		} else {
			ft.anyf("clear_ms", "never healed")
		}
		ft.anyf("recovered_after_ms", "not judged met or unmet")
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
		case x.missedAim(f):
			ft.Detail = "it missed its aim (not observed): not judged"
			continue
		case f.startIdx > cr.stopIdx:
			ft.Verdict = Any
			ft.Detail = "too late (started after the stop): whether it is judged is not settled (reading 24)"
			continue
		}
		if exp.available == nil {
			ft.Detail = "no availability expectation"
			ft.Verdict = Any
			continue
		}
		if !*exp.available {
			ft.Verdict, ft.Detail = x.stayedDown(tl, f, stopT)
			ft.StayedDown = true
			// §11: a fault judged for available: false has no recovery
			// time (-1), whatever its verdict
			ft.RecoveredNs = -1
			delete(ft.Any, "recovered_after_ms")
			continue
		}
		ft.Verdict, ft.Detail = x.recovery(tl, f, exp, ft)
	}
	return res
}

// clearWindow: the end of the clear window of a heal at index h (MODEL
// §11): the next fault-start after it, or the stop; h itself when another
// fault is still in force there. g is the fault that cut it short (nil:
// the stop ended it).
func (x *evalCtx) clearWindow(self *faultRec, h int) (eIdx int, g *faultRec) {
	cr := x.cr
	var inForce []*faultRec
	for _, o := range cr.faults {
		if o == self || !x.in(o.startIdx) || o.startIdx > h {
			continue
		}
		if !x.in(o.endIdx) || o.endIdx > h {
			inForce = append(inForce, o)
		}
	}
	if len(inForce) > 0 {
		for _, o := range inForce {
			if x.in(o.endIdx) && (g == nil || o.endIdx < g.endIdx) {
				g = o
			}
		}
		if g == nil {
			g = inForce[0]
		}
		return h, g
	}
	eIdx = cr.stopIdx
	for _, o := range cr.faults {
		if x.in(o.startIdx) && o.startIdx > h && o.startIdx < eIdx {
			g, eIdx = o, o.startIdx
		}
	}
	return eIdx, g
}

// stayedDown judges an available: false fault on the keys it took down.
func (x *evalCtx) stayedDown(tl *timeline, f *faultRec, stopT int64) (string, string) {
	cr := x.cr
	s := tl.s
	h := x.T(f.endIdx)
	targets := append(append([]int{}, f.killInsts...), f.pauseInsts...)
	down := map[string]bool{}
	for _, hd := range cr.holds {
		if !x.in(hd.beginIdx) || hd.beginIdx >= f.startIdx || x.holdEnd(hd) < f.startIdx {
			continue
		}
		for _, n := range targets {
			if hd.inst == n {
				down[hd.key] = true
			}
		}
	}
	which := "the keys its instances held"
	if len(down) == 0 {
		which = "every key"
		for _, k := range tl.keys {
			down[k] = true
		}
	}
	served, waitBefore := false, false
	for k := range down {
		for p := f.endIdx; p < tl.e; p++ {
			if p >= s && tl.servedAt(k, p) {
				served = true
			}
		}
		if tl.e-1 >= s && tl.liveWait[k][tl.e-1-s] {
			waitBefore = true
		}
	}
	switch {
	case served:
		return "unmet", "judged on " + which + ": served after the heal"
	case stopT-h >= 2e9 && waitBefore:
		return "met", "judged on " + which
	}
	return "unknown", "judged on " + which + ": not served, but too little time or nobody waiting"
}

// recovery judges an available: true fault from its heal, again at later
// heals while it stays undecided (MODEL §11).
func (x *evalCtx) recovery(tl *timeline, f *faultRec, exp effExpect, ft *FaultTruth) (string, string) {
	healIdx := f.endIdx
	self := f
	detail := ""
	for {
		if fh := x.failedHeal(); fh >= 0 && healIdx >= fh {
			return "unknown", detail + "judged at or after a heal that failed"
		}
		if x.T(healIdx) >= x.T(x.cr.stopIdx) {
			return "unknown", detail + "healed at or after the stop: its recovery was never watched"
		}
		eIdx, g := x.clearWindow(self, healIdx)
		v, rec := x.judge(tl, healIdx, eIdx, exp)
		detail += fmt.Sprintf("judged at %s's heal (window %d ns): %s; ", self.spec.Name, x.T(eIdx)-x.T(healIdx), v)
		if v != "undecided" {
			ft.JudgedAt = self.spec.Name
			ft.RecoveredNs = rec
			delete(ft.Any, "recovered_after_ms")
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

// judge applies §11's rules at one heal (index hIdx), over the clear window
// [hIdx, eIdx). It returns the verdict and the recovery time: per key, the
// longest refused stretch of its demand, the largest over the keys
// demanded; −1 when one was not served, or none was demanded.
//
// Time, not positions: the state after event p lasts [T(p), T(p+1)), so a
// state that lasts no time (events at one instant) neither begins nor
// breaks a stretch of demand (A3).
func (x *evalCtx) judge(tl *timeline, hIdx, eIdx int, exp effExpect) (string, int64) {
	s := tl.s
	h := x.T(hIdx)
	e := x.T(eIdx)
	u := h + x.cr.meta.ExpiryBoundNs
	lasts := func(p int) bool { return x.T(p+1) > x.T(p) }
	anyUnmet, anyUndecided, relevant, unserved := false, false, 0, false
	rec := int64(0)
	for _, k := range tl.keys {
		// d_k: the first instant of demand in the window (an acquire asked
		// and granted at one instant is demand, served at once)
		dIdx := -1
		for p := hIdx; p < eIdx; p++ {
			if tl.demand[k][p-s] {
				dIdx = p
				break
			}
		}
		if dIdx < 0 {
			continue // not demanded: no recovery to judge (A6)
		}
		relevant++
		d := x.T(dIdx)
		// r_k: the first instant from d_k on at which k is served
		rIdx := -1
		for p := hIdx; p < eIdx; p++ {
			if x.T(p) >= d && tl.servedAt(k, p) {
				rIdx = p
				break
			}
		}
		bound := eIdx
		if rIdx >= 0 {
			bound = rIdx
		}
		// refused stretches: unbroken demand in [d_k, r_k)
		longest, longestAfterU := int64(0), int64(0)
		run := int64(-1)
		close := func(b int64) {
			a := run
			longest = max(longest, b-a)
			if b > max(a, u) {
				longestAfterU = max(longestAfterU, b-max(a, u))
			}
			run = -1
		}
		for p := dIdx; p < bound; p++ {
			if !lasts(p) {
				continue
			}
			if tl.demand[k][p-s] {
				if run < 0 {
					run = x.T(p)
				}
			} else if run >= 0 {
				close(x.T(p))
			}
		}
		if run >= 0 {
			close(x.T(bound))
		}
		if rIdx >= 0 {
			rec = max(rec, longest)
		} else {
			unserved = true
		}
		var met, unmet bool
		if exp.recov > 0 {
			// a key served exactly B after its demand began is met
			met = rIdx >= 0 && longest <= exp.recov
			unmet = longest > exp.recov
		} else {
			met = rIdx >= 0
			unmet = rIdx < 0 && longestAfterU >= 2e9
		}
		if debugLive {
			fmt.Printf("judge h=%d e=%d B=%d key %s: d=%d r=%d longest=%d afterU=%d met=%v unmet=%v\n", h, e, exp.recov, k, dIdx, rIdx, longest, longestAfterU, met, unmet)
		}
		switch {
		case unmet:
			anyUnmet = true
		case !met:
			anyUndecided = true
		}
	}
	if unserved || relevant == 0 {
		rec = -1
	}
	switch {
	case anyUnmet:
		return "unmet", rec
	case relevant > 0 && !anyUndecided:
		return "met", rec
	}
	return "undecided", rec
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
