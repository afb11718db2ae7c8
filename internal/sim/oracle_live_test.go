package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// A second reading of MODEL §11's recovery rules, from the history text
// alone and in intervals of time (the truth works in event indices): the
// per-fault verdicts of the two must agree.

var oracleDebug = false

type ival struct{ s, e int64 } // [s, e)

func clip(a ival, bs []ival) []ival {
	var out []ival
	for _, b := range bs {
		s, e := max(a.s, b.s), min(a.e, b.e)
		if s < e {
			out = append(out, ival{s, e})
		}
	}
	return out
}

// merge: the union of intervals, disjoint and sorted; touching ones join.
func merge(is []ival) []ival {
	s := append([]ival(nil), is...)
	sort.Slice(s, func(i, j int) bool { return s[i].s < s[j].s })
	var out []ival
	for _, x := range s {
		if x.s >= x.e {
			continue
		}
		if n := len(out); n > 0 && x.s <= out[n-1].e {
			out[n-1].e = max(out[n-1].e, x.e)
			continue
		}
		out = append(out, x)
	}
	return out
}

// minus: a − b, both merged.
func minus(a, b []ival) []ival {
	var out []ival
	for _, x := range a {
		cur := []ival{x}
		for _, y := range b {
			var next []ival
			for _, c := range cur {
				if y.e <= c.s || y.s >= c.e {
					next = append(next, c)
					continue
				}
				if c.s < y.s {
					next = append(next, ival{c.s, y.s})
				}
				if y.e < c.e {
					next = append(next, ival{y.e, c.e})
				}
			}
			cur = next
		}
		out = append(out, cur...)
	}
	return merge(out)
}

type ofault struct {
	name             string
	start, end       int64 // -1: none
	startI, endI     int
	healErr, errored bool
	unobserved       bool
	insts            []string
	pause, acting    bool
	role             string // the target as scheduled: "holder", "holder-of:kN", ...
}

func liveOracle(ol olane) map[string]string {
	ev := ol.lines
	var meta ometa
	json.Unmarshal(ev[0].Meta, &meta)
	const inf = int64(1) << 62
	start := ev[0].T
	stop := int64(-1)
	faults := map[string]*ofault{}
	var order []*ofault
	for _, f := range meta.Faults {
		o := &ofault{name: f.Name, start: -1, end: -1, startI: -1, endI: -1, acting: !ol.nonActing[f.Name], role: f.Target}
		faults[f.Name] = o
		order = append(order, o)
	}
	death := map[string]int64{}
	for i, e := range ev {
		switch {
		case e.F == "case-stop":
			stop = e.T
		case e.F == "fault-start" && faults[e.Fault] != nil:
			f := faults[e.Fault]
			f.start, f.startI = e.T, i
			for _, t := range strings.Split(e.Target, ",") {
				if strings.HasPrefix(t, "instance-") {
					f.insts = append(f.insts, "i"+strings.TrimPrefix(t, "instance-"))
				}
			}
			f.pause = strings.HasPrefix(e.Fault, "pause") && f.acting
			if strings.HasPrefix(e.Fault, "kill") && f.acting {
				for _, in := range f.insts {
					if _, ok := death[in]; !ok {
						death[in] = e.T
					}
				}
			}
		case e.F == "fault-end" && faults[e.Fault] != nil:
			faults[e.Fault].end, faults[e.Fault].endI = e.T, i
			faults[e.Fault].healErr = e.Err != ""
		case e.F == "fault-error" && faults[e.Fault] != nil:
			faults[e.Fault].errored = true
		case e.F == "fault-unobserved" && faults[e.Fault] != nil:
			faults[e.Fault].unobserved = true
		case e.F == "crash":
			if _, ok := death[e.Proc]; !ok {
				death[e.Proc] = e.T
			}
		}
	}
	out := map[string]string{}
	if stop < 0 {
		return out
	}
	// live intervals of each instance: from the start to its death, minus
	// the acting pauses on it
	liveMemo := map[string][]ival{}
	liveOf := func(in string) []ival {
		if l, ok := liveMemo[in]; ok {
			return l
		}
		end := inf
		if d, ok := death[in]; ok {
			end = d
		}
		var paused []ival
		for _, f := range order {
			if !f.pause || f.start < 0 {
				continue
			}
			for _, p := range f.insts {
				if p == in {
					pe := inf
					if f.end >= 0 {
						pe = f.end
					}
					paused = append(paused, ival{f.start, pe})
				}
			}
		}
		l := minus([]ival{{start, end}}, merge(paused))
		liveMemo[in] = l
		return l
	}
	posthumous := func(proc string, t int64) bool {
		d, ok := death[instOf(proc)]
		return ok && t > d
	}
	// waits, holds, good holds and ok instants, per key
	waits := map[string][]ival{}
	holds := map[string][]ival{}
	served := map[string][]ival{}
	instants := map[string][]int64{}
	type hold struct {
		key   string
		begin int64
		inst  string
	}
	type span struct {
		key, inst string
		s, e      int64
	}
	var allHolds []span // every hold, unclipped: who held what when
	holding := map[string]*hold{}
	pendingRel := map[string]*hold{} // client -> the hold its release in flight ended, and the release's invoke
	relAt := map[string]int64{}
	waitFor := map[string]string{}
	waitFrom := map[string]int64{}
	// demand: waits, and a client's time away from a key it left for
	// another and comes back to (MODEL §11)
	demand := map[string][]ival{}
	away := map[string]map[string]int64{} // client -> key -> since
	endWait := func(c string, t int64) {
		if k, ok := waitFor[c]; ok {
			w := clip(ival{waitFrom[c], t}, liveOf(instOf(c)))
			waits[k] = append(waits[k], w...)
			demand[k] = append(demand[k], w...)
			delete(waitFor, c)
		}
	}
	endHold := func(c string, t int64) *hold {
		h := holding[c]
		if h == nil {
			return nil
		}
		holds[h.key] = append(holds[h.key], clip(ival{h.begin, t}, liveOf(h.inst))...)
		allHolds = append(allHolds, span{h.key, h.inst, h.begin, t})
		delete(holding, c)
		return h
	}
	for _, e := range ev {
		if e.Type == "mark" {
			switch {
			case e.F == "case-stop":
				for c := range waitFor {
					endWait(c, e.T)
				}
				away = map[string]map[string]int64{} // nobody comes back now
			case e.F == "case-end":
				for c := range holding {
					endHold(c, e.T)
				}
			case (e.F == "fault-start" && strings.HasPrefix(e.Fault, "kill")) || e.F == "crash":
				for c := range waitFor {
					if d, ok := death[instOf(c)]; ok && d == e.T {
						endWait(c, e.T)
					}
				}
				for c := range away {
					if d, ok := death[instOf(c)]; ok && d == e.T {
						delete(away, c)
					}
				}
				for c := range holding {
					if d, ok := death[instOf(c)]; ok && d == e.T {
						endHold(c, e.T)
					}
				}
			}
			continue
		}
		if e.Proc == "" || !strings.Contains(e.Proc, "c") || posthumous(e.Proc, e.T) {
			continue
		}
		c := e.Proc
		switch {
		case e.Type == "invoke" && e.F == "acquire" && e.T < stop:
			if k, ok := waitFor[c]; ok && k != e.Key {
				endWait(c, e.T)
				if away[c] == nil {
					away[c] = map[string]int64{}
				}
				away[c][k] = e.T
			}
			if since, ok := away[c][e.Key]; ok {
				demand[e.Key] = append(demand[e.Key], clip(ival{since, e.T}, liveOf(instOf(c)))...)
				delete(away[c], e.Key)
			}
			if _, ok := waitFor[c]; !ok {
				waitFor[c], waitFrom[c] = e.Key, e.T
			}
		case e.Type == "ok" && e.F == "acquire":
			if waitFor[c] == e.Key {
				endWait(c, e.T)
			}
			instants[e.Key+" "+c] = append(instants[e.Key+" "+c], e.T)
			if holding[c] == nil {
				holding[c] = &hold{key: e.Key, begin: e.T, inst: instOf(c)}
			}
		case e.Type == "invoke" && e.F == "release":
			if h := holding[c]; h != nil && h.key == e.Key {
				endHold(c, e.T)
				pendingRel[c], relAt[c] = h, e.T
			}
		case e.Type == "ok" && e.F == "release":
			if h := pendingRel[c]; h != nil {
				served[h.key] = append(served[h.key], clip(ival{h.begin, relAt[c]}, liveOf(h.inst))...)
			}
			delete(pendingRel, c)
		case e.Type == "fail" && e.F == "release", e.Type == "info" && e.F == "release":
			delete(pendingRel, c)
		case e.F == "lost":
			if h := holding[c]; h != nil && h.key == e.Key {
				endHold(c, e.T)
			}
		}
	}
	for c := range holding {
		endHold(c, inf)
	}
	// a live client's ok acquire is an instant of service
	inst := map[string][]int64{}
	for kc, ts := range instants {
		p := strings.SplitN(kc, " ", 2)
		for _, t := range ts {
			for _, l := range liveOf(instOf(p[1])) {
				if t >= l.s && t < l.e {
					inst[p[0]] = append(inst[p[0]], t)
				}
			}
		}
	}
	// unavailable: a live client waits, no live client holds, before the stop
	unavail := map[string][]ival{}
	for _, k := range ol.keys {
		unavail[k] = minus(clip(ival{start, stop}, merge(waits[k])), merge(holds[k]))
	}
	firstServed := func(k string, h, e int64) int64 { // in [h, e), or -1
		r := int64(-1)
		for _, t := range inst[k] {
			if t >= h && t < e && (r < 0 || t < r) {
				r = t
			}
		}
		for _, x := range served[k] {
			if t := max(x.s, h); t < min(x.e, e) && (r < 0 || t < r) {
				r = t
			}
		}
		return r
	}
	waitsJustBefore := func(k string, t int64) bool {
		for _, x := range merge(waits[k]) {
			if x.s < t && t <= x.e {
				return true
			}
		}
		return false
	}
	B := meta.Expect.Recov
	u0 := meta.ExpiryBoundNs
	judge := func(h, e int64) string {
		rel, unmet, undecided := 0, false, false
		for _, k := range ol.keys {
			// d: the first demand in the window; a key not demanded has
			// no recovery (A6), whoever held it
			d := int64(-1)
			for _, x := range clip(ival{h, e}, merge(demand[k])) {
				d = x.s
				break
			}
			if d < 0 {
				continue
			}
			rel++
			r := firstServed(k, d, e)
			bound := e
			if r >= 0 {
				bound = r
			}
			// refused stretches: unbroken demand in [d, r)
			longest, afterU := int64(0), int64(0)
			for _, x := range clip(ival{d, bound}, merge(demand[k])) {
				longest = max(longest, x.e-x.s)
				if y := clip(ival{h + u0, e}, []ival{x}); len(y) > 0 {
					afterU = max(afterU, y[0].e-y[0].s)
				}
			}
			var m, u bool
			if B > 0 {
				m = r >= 0 && longest <= B
				u = longest > B
			} else {
				m = r >= 0
				u = r < 0 && afterU >= 2e9
			}
			if u {
				unmet = true
			} else if !m {
				undecided = true
			}
		}
		switch {
		case unmet:
			return "unmet"
		case rel > 0 && !undecided:
			return "met"
		}
		return "undecided"
	}
	if meta.Expect.Measure {
		return out
	}
	avail := meta.Expect.Available == nil || *meta.Expect.Available
	// a fault aimed at the holder (holder-of:kN) whose target instance held
	// no key (not kN) at its start missed its aim: not observed (§10)
	missed := func(f *ofault) bool {
		if f.role != "holder" && !strings.HasPrefix(f.role, "holder-of:") {
			return false
		}
		key := strings.TrimPrefix(f.role, "holder-of:")
		for _, h := range allHolds {
			for _, in := range f.insts {
				if h.inst == in && h.s < f.start && h.e >= f.start && (f.role == "holder" || h.key == key) {
					return false
				}
			}
		}
		return true
	}
	for _, f := range order {
		if f.errored || f.start < 0 || f.end < 0 || f.healErr || f.unobserved || missed(f) {
			out[f.name] = ""
			continue
		}
		if f.start >= stop {
			continue // too late: not compared
		}
		if !avail {
			down := map[string]bool{}
			for _, h := range allHolds {
				for _, in := range f.insts {
					if h.inst == in && h.s < f.start && h.e >= f.start {
						down[h.key] = true
					}
				}
			}
			if len(down) == 0 {
				for _, k := range ol.keys {
					down[k] = true
				}
			}
			servedAfter, waiting := false, false
			for k := range down {
				if firstServed(k, f.end, stop) >= 0 {
					servedAfter = true
				}
				if waitsJustBefore(k, stop) {
					waiting = true
				}
			}
			switch {
			case servedAfter:
				out[f.name] = "unmet"
			case stop-f.end >= 2e9 && waiting:
				out[f.name] = "met"
			default:
				out[f.name] = "unknown"
			}
			continue
		}
		failed := int64(-1) // the first heal that failed
		for _, o := range order {
			if o.healErr && o.end >= 0 && (failed < 0 || o.end < failed) {
				failed = o.end
			}
		}
		cur := f
		for {
			if failed >= 0 && cur.end >= failed {
				out[f.name] = "unknown" // at or after a heal that failed
				break
			}
			if cur.end >= stop {
				out[f.name] = "unknown"
				break
			}
			h := cur.end
			e := stop
			var g *ofault
			var inForce []*ofault
			for _, o := range order {
				if o != cur && o.start >= 0 && o.startI < cur.endI && (o.end < 0 || o.endI > cur.endI) {
					inForce = append(inForce, o)
				}
			}
			if len(inForce) > 0 {
				e = h
				for _, o := range inForce {
					if o.end >= 0 && (g == nil || o.end < g.end) {
						g = o
					}
				}
				if g == nil {
					g = inForce[0]
				}
			} else {
				for _, o := range order {
					if o.start >= 0 && o.startI > cur.endI && o.start < e {
						g, e = o, o.start
					}
				}
			}
			v := judge(h, e)
			if oracleDebug {
				fmt.Printf("oracle %s at %s's heal h=%d e=%d inForce=%d g=%v -> %s\n", f.name, cur.name, h, e, len(inForce), g != nil, v)
			}
			if v != "undecided" {
				out[f.name] = v
				break
			}
			if g == nil || g.end < 0 || g.healErr {
				out[f.name] = "unknown"
				break
			}
			cur = g
		}
	}
	return out
}

func TestOracleRecovery(t *testing.T) {
	compared := 0
	verdicts := map[string]int{}
	for s := uint64(1); s <= unitSeeds(); s++ {
		r0 := simulated(s)
		if r0.bad != nil {
			continue
		}
		rc := *r0
		r := &rc
		r.cut, r.blank, r.pre = nil, map[int]int{}, nil
		h, _ := r.Files()
		var lines []oev
		for _, l := range bytes.Split(bytes.TrimSpace(h), []byte("\n")) {
			var e oev
			json.Unmarshal(l, &e)
			lines = append(lines, e)
		}
		tr := r.Truth(false)
		k := 0
		for i, cr := range r.Cases {
			for _, ol := range oracleLanes(lines[cr.startIdx : r.lastOf(cr)+1]) {
				ct := tr.Cases[k]
				k++
				if ol.tick || ct.Skip != "" {
					continue // zero-length states: the truth counts them, intervals do not
				}
				got := liveOracle(ol)
				for _, f := range ct.Faults {
					if f.Verdict == Any {
						continue
					}
					want := f.Verdict
					if !ct.Valid && strings.Contains(f.Detail, "(met, but the case is not valid)") {
						want = "met"
					}
					compared++
					verdicts[want]++
					if got[f.Fault] != want {
						t.Errorf("seed %d case %d (%s) fault %s: oracle %q, truth %q (%s)", s, i+1, ct.Name, f.Fault, got[f.Fault], f.Verdict, f.Detail)
					}
				}
			}
		}
	}
	t.Logf("%d fault verdicts compared: %v", compared, verdicts)
}
