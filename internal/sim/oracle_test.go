package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// A second reading of MODEL §3–§7 and §11's gap, from the history text
// alone: it checks that the simulator's records (from which the truth is
// worked out) say what the history says.

type oev struct {
	T      int64           `json:"t"`
	Type   string          `json:"type"`
	F      string          `json:"f"`
	Proc   string          `json:"proc"`
	Key    string          `json:"key"`
	Token  uint64          `json:"token"`
	Target string          `json:"target"`
	Fault  string          `json:"fault"`
	Err    string          `json:"err"`
	Meta   json.RawMessage `json:"meta"`
}

type ocase struct {
	counts     map[string]int
	violations int
	gap        int64
	stopped    bool
}

func oracle(lines []oev) []ocase {
	var out []ocase
	for i := 0; i < len(lines); i++ {
		if lines[i].F != "case-start" {
			continue
		}
		j := i + 1
		for j < len(lines) && lines[j].F != "case-end" && lines[j].F != "case-start" {
			j++
		}
		end := j
		if j < len(lines) && lines[j].F == "case-end" {
			end = j + 1
		}
		out = append(out, oracleCase(lines[i:end]))
	}
	return out
}

func instOf(proc string) string { return strings.SplitN(proc, "c", 2)[0] }

func oracleCase(ev []oev) ocase {
	var meta struct {
		Keys int `json:"keys"`
	}
	json.Unmarshal(ev[0].Meta, &meta)
	oc := ocase{counts: map[string]int{}}
	death := map[string]int64{} // instance -> death time
	dead := func(inst string, t int64) bool { d, ok := death[inst]; return ok && t > d }
	type hold struct {
		client, key string
		begin, end  int
	}
	var holds []*hold
	cur := map[string]*hold{} // client+key
	inflight := map[string]string{}
	paused := map[string]int{}
	waiting := map[string]string{} // client -> key
	top := map[string]uint64{}
	unavailSince := map[string]int64{}
	stopIdx := -1
	failedIdx := -1
	for i, e := range ev {
		if e.Type == "mark" && e.F == "case-stop" {
			stopIdx = i
		}
	}
	// availability state and gap, after each event up to the stop
	liveOf := func(c string) bool {
		in := instOf(c)
		_, d := death[in]
		return !d && paused[in] == 0
	}
	endHold := func(c, k string, i int) {
		if h := cur[c+"/"+k]; h != nil {
			h.end = i
			delete(cur, c+"/"+k)
		}
	}
	for i, e := range ev {
		if e.Type == "mark" {
			switch e.F {
			case "fault-start", "crash":
				var insts []string
				if e.F == "crash" {
					insts = []string{e.Proc}
				} else if strings.HasPrefix(e.Fault, "kill") {
					for _, t := range strings.Split(e.Target, ",") {
						if strings.HasPrefix(t, "instance-") {
							insts = append(insts, "i"+strings.TrimPrefix(t, "instance-"))
						}
					}
				} else if strings.HasPrefix(e.Fault, "pause") {
					for _, t := range strings.Split(e.Target, ",") {
						if strings.HasPrefix(t, "instance-") {
							paused["i"+strings.TrimPrefix(t, "instance-")]++
						}
					}
				}
				for _, in := range insts {
					if _, ok := death[in]; ok {
						continue
					}
					death[in] = e.T
					for ck := range cur {
						if instOf(ck) == in {
							k := strings.SplitN(ck, "/", 2)
							endHold(k[0], k[1], i)
						}
					}
					for c := range inflight {
						if instOf(c) == in {
							if inflight[c] == "acquire" {
								oc.counts["acquires_unknown"]++
							}
							delete(inflight, c)
						}
					}
					for c := range waiting {
						if instOf(c) == in {
							delete(waiting, c)
						}
					}
				}
			case "fault-end":
				if strings.HasPrefix(e.Fault, "pause") {
					for _, t := range strings.Split(e.Target, ",") {
						if strings.HasPrefix(t, "instance-") {
							paused["i"+strings.TrimPrefix(t, "instance-")]--
						}
					}
				}
			case "case-stop":
				waiting = map[string]string{}
			case "case-end":
				for ck := range cur {
					k := strings.SplitN(ck, "/", 2)
					endHold(k[0], k[1], i)
				}
			}
		} else if e.Proc != "" && strings.Contains(e.Proc, "c") && !dead(instOf(e.Proc), e.T) {
			c := e.Proc
			switch {
			case e.Type == "invoke":
				inflight[c] = e.F
				if e.F == "acquire" && stopIdx >= 0 && i < stopIdx {
					waiting[c] = e.Key
				}
				if e.F == "release" {
					endHold(c, e.Key, i)
				}
			case e.F == "lost":
				oc.counts["leases_lost"]++
				endHold(c, e.Key, i)
			case e.F == "resource" || e.F == "dropped":
			default:
				delete(inflight, c)
				switch {
				case e.F == "acquire" && e.Type == "ok":
					oc.counts["acquires_ok"]++
					if e.Token > 0 && e.Token <= top[e.Key] {
						oc.counts["token_regressions"]++
					}
					top[e.Key] = max(top[e.Key], e.Token)
					if waiting[c] == e.Key {
						delete(waiting, c)
					}
					if cur[c+"/"+e.Key] != nil {
						oc.counts["duplicate_grants"]++
					} else {
						h := &hold{client: c, key: e.Key, begin: i, end: 1 << 60}
						for _, o := range holds {
							if o.key == e.Key && o.end > i {
								oc.violations++
							}
						}
						holds = append(holds, h)
						cur[c+"/"+e.Key] = h
					}
				case e.F == "acquire" && e.Type == "fail":
					oc.counts["acquires_failed"]++
				case e.F == "acquire" && e.Type == "info":
					oc.counts["acquires_unknown"]++
				case e.F == "release" && e.Type == "fail":
					oc.counts["releases_not_held"]++
				case e.F == "release-wrong-token" && e.Type == "ok":
					oc.counts["wrong_token_releases_accepted"]++
				}
			}
		}
		if e.F == "fault-end" && e.Err != "" && failedIdx < 0 && i < stopIdx {
			// A heal that failed ends the gap's measure (MODEL §11).
			failedIdx = i
			for _, since := range unavailSince {
				oc.gap = max(oc.gap, e.T-since)
			}
			unavailSince = map[string]int64{}
		}
		if stopIdx >= 0 && i < stopIdx && failedIdx < 0 {
			for k := 0; k < meta.Keys; k++ {
				key := fmt.Sprintf("k%d", k)
				w, h := false, false
				for c, wk := range waiting {
					if wk == key && liveOf(c) {
						w = true
					}
				}
				for ck := range cur {
					p := strings.SplitN(ck, "/", 2)
					if p[1] == key && liveOf(p[0]) {
						h = true
					}
				}
				since, was := unavailSince[key]
				switch {
				case w && !h && !was:
					unavailSince[key] = e.T
				case !(w && !h) && was:
					oc.gap = max(oc.gap, e.T-since)
					delete(unavailSince, key)
				}
			}
		}
		if i == stopIdx {
			for _, since := range unavailSince {
				oc.gap = max(oc.gap, e.T-since)
			}
			oc.stopped = true
		}
	}
	for c := range inflight {
		if inflight[c] == "acquire" {
			oc.counts["acquires_unknown"]++
		}
	}
	return oc
}

func TestOracleAgreesWithRecords(t *testing.T) {
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
			if err := json.Unmarshal(l, &e); err != nil {
				t.Fatalf("seed %d: my own line does not decode: %s: %v", s, l, err)
			}
			lines = append(lines, e)
		}
		tr := r.Truth(false)
		ocs := oracle(lines)
		if len(ocs) != len(tr.Cases) {
			t.Fatalf("seed %d: %d cases, truth %d", s, len(ocs), len(tr.Cases))
		}
		for i, oc := range ocs {
			ct := tr.Cases[i]
			cr := r.Cases[i]
			if len(cr.backdated) > 0 || len(cr.strayComps) > 0 {
				continue
			}
			want := map[string]int{
				"acquires_ok": ct.AcquiresOK, "acquires_failed": ct.AcquiresFailed, "acquires_unknown": ct.AcquiresUnknown,
				"duplicate_grants": ct.DuplicateGrants, "releases_not_held": ct.ReleasesNotHeld, "leases_lost": ct.LeasesLost,
				"wrong_token_releases_accepted": ct.WrongTokenReleasesAccepted, "token_regressions": ct.TokenRegressions,
			}
			for k, v := range want {
				if oc.counts[k] != v {
					t.Errorf("seed %d case %d %s: oracle %d, truth %d", s, i+1, k, oc.counts[k], v)
				}
			}
			if oc.violations != ct.Violations {
				t.Errorf("seed %d case %d violations: oracle %d, truth %d", s, i+1, oc.violations, ct.Violations)
			}
			if oc.stopped && ct.LongestGapNs >= 0 && oc.gap != ct.LongestGapNs {
				t.Errorf("seed %d case %d gap: oracle %d, truth %d", s, i+1, oc.gap, ct.LongestGapNs)
			}
		}
	}
}
