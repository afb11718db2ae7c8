package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
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

type ofault struct {
	name             string
	start, end       int64 // -1: none
	startI, endI     int
	healErr, errored bool
	unobserved       bool
	insts            []string
	pause            bool
}

func liveOracle(ev []oev) map[string]string {
	var meta struct {
		Keys   int `json:"keys"`
		Faults []struct {
			Name string `json:"name"`
		} `json:"faults"`
		Expect struct {
			Available *bool `json:"available"`
			Recov     int64 `json:"recovers_within_ns"`
		} `json:"expect"`
	}
	json.Unmarshal(ev[0].Meta, &meta)
	const inf = int64(1) << 62
	start := ev[0].T
	stop := int64(-1)
	faults := map[string]*ofault{}
	var order []*ofault
	for _, f := range meta.Faults {
		o := &ofault{name: f.Name, start: -1, end: -1, startI: -1, endI: -1}
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
			f.pause = strings.HasPrefix(e.Fault, "pause")
			if strings.HasPrefix(e.Fault, "kill") {
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
	// the pauses on it
	liveOf0 := func(in string) []ival {
		end := inf
		if d, ok := death[in]; ok {
			end = d
		}
		cur := []ival{{start, end}}
		for _, f := range order {
			if !f.pause || f.start < 0 {
				continue
			}
			for _, p := range f.insts {
				if p != in {
					continue
				}
				pe := inf
				if f.end >= 0 {
					pe = f.end
				}
				var next []ival
				for _, c := range cur {
					if pe <= c.s || f.start >= c.e {
						next = append(next, c)
						continue
					}
					if c.s < f.start {
						next = append(next, ival{c.s, f.start})
					}
					if pe < c.e {
						next = append(next, ival{pe, c.e})
					}
				}
				cur = next
			}
		}
		return cur
	}
	liveMemo := map[string][]ival{}
	liveOf := func(in string) []ival {
		if l, ok := liveMemo[in]; ok {
			return l
		}
		l := liveOf0(in)
		liveMemo[in] = l
		return l
	}
	posthumous := func(proc string, t int64) bool {
		d, ok := death[instOf(proc)]
		return ok && t > d
	}
	// waits, good holds and ok instants, per key
	waits := map[string][]ival{}
	served := map[string][]ival{}
	instants := map[string][]int64{}
	type hold struct {
		key   string
		begin int64
	}
	holding := map[string]*hold{}    // client -> hold (one key at a time is enough here)
	pendingRel := map[string]int64{} // client -> the begin of the hold its release in flight ended
	waitFor := map[string]string{}
	waitFrom := map[string]int64{}
	endWait := func(c string, t int64) {
		if k, ok := waitFor[c]; ok {
			for _, x := range clip(ival{waitFrom[c], t}, liveOf(instOf(c))) {
				waits[k] = append(waits[k], x)
			}
			delete(waitFor, c)
		}
	}
	for _, e := range ev {
		if e.Type == "mark" {
			if e.F == "case-stop" {
				for c := range waitFor {
					endWait(c, e.T)
				}
			}
			if (e.F == "fault-start" && strings.HasPrefix(e.Fault, "kill")) || e.F == "crash" {
				for c := range waitFor {
					if d, ok := death[instOf(c)]; ok && d == e.T {
						endWait(c, e.T)
					}
				}
				for c := range holding {
					if d, ok := death[instOf(c)]; ok && d == e.T {
						delete(holding, c)
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
			}
			if _, ok := waitFor[c]; !ok {
				waitFor[c], waitFrom[c] = e.Key, e.T
			}
		case e.Type == "ok" && e.F == "acquire":
			if waitFor[c] == e.Key {
				endWait(c, e.T)
			}
			if e.T < stop || true {
				instants[e.Key+" "+c] = append(instants[e.Key+" "+c], e.T)
			}
			if holding[c] == nil {
				holding[c] = &hold{key: e.Key, begin: e.T}
			}
		case e.Type == "invoke" && e.F == "release":
			if h := holding[c]; h != nil && h.key == e.Key {
				pendingRel[c] = h.begin
				delete(holding, c)
				holding[c+"#rel"] = &hold{key: e.Key, begin: h.begin}
				holding[c+"#relend"] = &hold{key: e.Key, begin: e.T}
			}
		case e.Type == "ok" && e.F == "release":
			if h := holding[c+"#rel"]; h != nil {
				end := holding[c+"#relend"].begin
				for _, x := range clip(ival{h.begin, end}, liveOf(instOf(c))) {
					served[h.key] = append(served[h.key], x)
				}
			}
			delete(holding, c+"#rel")
			delete(holding, c+"#relend")
		case e.Type == "fail" && e.F == "release", e.Type == "info" && e.F == "release":
			delete(holding, c+"#rel")
			delete(holding, c+"#relend")
		case e.F == "lost":
			if h := holding[c]; h != nil && h.key == e.Key {
				delete(holding, c)
			}
		}
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
	keys := []string{}
	for k := 0; k < meta.Keys; k++ {
		keys = append(keys, fmt.Sprintf("k%d", k))
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
	waitsAt := func(k string, t int64) bool {
		for _, x := range waits[k] {
			if x.s <= t && t < x.e {
				return true
			}
		}
		return false
	}
	waitsJustBefore := func(k string, t int64) bool {
		for _, x := range waits[k] {
			if x.s < t && t <= x.e {
				return true
			}
		}
		return false
	}
	waitsIn := func(k string, h, e int64) bool {
		for _, x := range waits[k] {
			if max(x.s, h) < min(x.e, e) {
				return true
			}
		}
		return false
	}
	B := int64(2e9)
	within := meta.Expect.Recov > 0
	if within {
		B = meta.Expect.Recov
	}
	judge := func(h, e int64) string {
		rel, unmet, undecided := 0, false, false
		for _, k := range keys {
			r := firstServed(k, h, e)
			if r < 0 && !waitsIn(k, h, e) {
				continue
			}
			rel++
			var m, u bool
			if within {
				m = r >= 0 && r-h <= B
				u = h+B <= e && firstServed(k, h, h+B+1) < 0 && waitsAt(k, h+B)
			} else {
				m = r >= 0
				u = e-h >= B && r < 0 && waitsJustBefore(k, e)
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
	avail := meta.Expect.Available == nil || *meta.Expect.Available
	for _, f := range order {
		if f.errored || f.start < 0 || f.end < 0 || f.healErr || f.unobserved {
			out[f.name] = ""
			continue
		}
		if !avail {
			servedAfter := false
			for _, k := range keys {
				if firstServed(k, f.end, stop) >= 0 {
					servedAfter = true
				}
			}
			waiting := false
			for _, k := range keys {
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
	for s := uint64(1); s <= unitSeeds; s++ {
		r0 := simulated(s)
		if r0.bad != nil {
			continue
		}
		rc := *r0
		r := &rc
		r.cut, r.blank = nil, map[int]int{}
		h, _ := r.Files()
		var lines []oev
		for _, l := range bytes.Split(bytes.TrimSpace(h), []byte("\n")) {
			var e oev
			json.Unmarshal(l, &e)
			lines = append(lines, e)
		}
		tr := r.Truth(false)
		for i, cr := range r.Cases {
			ct := tr.Cases[i]
			got := liveOracle(lines[cr.startIdx : r.lastOf(cr)+1])
			for _, f := range ct.Faults {
				if f.Verdict == Any {
					continue
				}
				want := f.Verdict
				if !ct.Valid && strings.Contains(f.Detail, "(met, but the case is not valid)") {
					want = "met"
				}
				compared++
				if got[f.Fault] != want {
					t.Errorf("seed %d case %d fault %s: oracle %q, truth %q (%s)", s, i+1, f.Fault, got[f.Fault], f.Verdict, f.Detail)
				}
			}
		}
	}
	t.Logf("%d fault verdicts compared", compared)
}
