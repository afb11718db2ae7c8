package sim

import (
	"sort"
	"strings"
	"testing"
)

// verdictCoverage: each broken variant misbehaves, and every verdict the
// truth can give is given.
type verdictCoverage struct {
	misbehaved, statuses, rows, lin, faults map[string]int
	codes                                   map[int]int
}

func newVerdictCoverage() *verdictCoverage {
	return &verdictCoverage{misbehaved: map[string]int{}, statuses: map[string]int{}, rows: map[string]int{}, lin: map[string]int{},
		faults: map[string]int{}, codes: map[int]int{}}
}

func (v *verdictCoverage) add(r *Run, tr *Truth) {
	for _, c := range r.Cases {
		if c.misbehaved {
			v.misbehaved[c.cfg.variant]++
		}
	}
	v.codes[tr.ExitCode]++
	for _, c := range tr.Cases {
		v.statuses[c.Status]++
		v.lin[c.Lin]++
		for _, f := range c.Faults {
			v.faults[f.Verdict]++
		}
	}
	for _, rw := range tr.Rows {
		v.rows[rw.Verdict]++
	}
}

func (v *verdictCoverage) check(t *testing.T) {
	for _, s := range Variants[1:] {
		if s != NoExpiry && v.misbehaved[s] == 0 {
			t.Errorf("variant %s never misbehaved", s)
		}
	}
	for _, s := range []string{"ok", "violation", "invalid", "unknown", "unavailable", "not-reproduced"} {
		if v.statuses[s] == 0 {
			t.Errorf("no case of status %s", s)
		}
	}
	for _, s := range []string{"violation", "unavailable", "invalid", "reproduced", "not-reproduced"} {
		if v.rows[s] == 0 {
			t.Errorf("no row of verdict %s", s)
		}
	}
	for _, c := range []int{0, 99, 100, 101, 102, 103, 104} {
		if v.codes[c] == 0 {
			t.Errorf("no run of exit code %d", c)
		}
	}
	for _, s := range []string{"ok", "violation", "unknown", Any} {
		if v.lin[s] == 0 {
			t.Errorf("no linearizability verdict %s", s)
		}
	}
	for _, s := range []string{"met", "unmet", "unknown", ""} {
		if v.faults[s] == 0 {
			t.Errorf("no fault judged %q", s)
		}
	}
	t.Logf("statuses %v rows %v codes %v lin %v faults %v misbehaved %v", v.statuses, v.rows, v.codes, v.lin, v.faults, v.misbehaved)
}

// TestCoverage: over 300 seeds, each broken variant misbehaves, every
// verdict the truth can give is given, what issue 27 asks the simulator to
// generate appears, and every figure takes the values that tell a
// checker's mistakes apart (a rule of §6 for each zombie, hand-offs of
// zero time, every cell outcome, too few both ways, ...).
func TestCoverage(t *testing.T) {
	if testing.Short() {
		t.Skip("coverage is the pass without -short's")
	}
	n := map[string]int{}
	vc := newVerdictCoverage()
	defer vc.check(t)
	for s := uint64(1); s <= 300; s++ {
		r := Simulate(s)
		tr := r.Truth(true)
		vc.add(r, tr)
		if tr.Refused && r.pre != nil {
			n["an event before the first case-start"]++
		}
		if tr.Refused && r.bad != nil && r.bad.replace {
			n["a meta with a field it does not know"]++
		}
		for _, cr := range r.Cases {
			cf := cr.cfg
			kinds := map[string]int{}
			for _, p := range cf.faults {
				if p.lane <= 1 {
					kinds[p.kind]++
				}
				if p.aimKey != "" {
					n["a fault aimed at holder-of:kN"]++
				}
				switch {
				case p.kind == fkKillInst && p.outcome == foUnobserved:
					n["a kill marked unobserved"]++
				case p.kind == fkKillInst && p.outcome == foIdleMark:
					n["a kill marked idle"]++
				case p.kind == fkPauseInst && (p.outcome == foUnobserved || p.outcome == foIdleMark):
					n["a pause that did not act"]++
				}
			}
			for _, k := range kinds {
				if k >= 3 {
					n["repeated fault windows (a nemesis)"]++
					break
				}
			}
			if cf.tick > 0 {
				n["equal timestamps"]++
			}
			for _, rr := range cr.res {
				if ir := cr.inst(rr.inst); ir != nil && ir.deathIdx >= 0 && rr.idx > ir.deathIdx {
					n["a posthumous resource mark"]++
				}
			}
			for _, e := range cr.outsideInst {
				if cf.keyLane(e.key) == 0 {
					n["an event on a key of no lane"]++
				}
			}
			for _, v := range cr.views() {
				x := &evalCtx{cr: v, ev: r.Events, cut: r.visible(true)}
				for _, h := range x.visibleHolds() {
					for _, o := range x.visibleHolds() {
						if o.key == h.key && o.beginIdx < h.beginIdx && x.holdEnd(o) > h.beginIdx && x.endedAt(o, x.T(h.beginIdx)) {
							n["a hold ending after another began in the file, at its instant (no overlap)"]++
						}
					}
				}
			}
			if cf.queue {
				n["a queueing service"]++
			}
			if cf.expiryBound > 0 {
				n["expiry_bound_ns"]++
			}
			if cf.keys > 1 && cf.expect.Available != nil && !*cf.expect.Available {
				n["available: false on several keys"]++
			}
		}
		for _, c := range tr.Cases {
			m := c.Meta()
			if c.Lane > 0 {
				n["a lane"]++
			}
			if m.Expect.Measure {
				n["a case that measures"]++
			}
			if m.Expect.isAny("violations") && c.Violations > 0 {
				n["violations left to any, and seen"]++
			}
			if m.Expect.isAny("available") && len(m.Faults) > 0 {
				n["available left to any, with faults"]++
			}
			n["class "+c.Class]++
			if !c.Valid && c.Decided {
				n["an invalid trial that proved unsafety"]++
			}
			if c.CutShort && c.Decided {
				n["a trial cut short that proved unsafety"]++
			}
			for s, k := range c.zombieShape {
				n[s] += k
			}
			if c.AcquiresUnsent > 0 {
				n["an acquire never sent"]++
			}
			for r := 1; r <= 4; r++ {
				if c.zombieRule[r] > 0 {
					n["a zombie by rule "+string(rune('0'+r))]++
				}
			}
			if c.Handoff.Count > 0 && c.Handoff.MinNs == 0 {
				n["a hand-off of zero time (a release invoked at the nanosecond of the next grant)"]++
			}
			if c.HandoffBarges > 0 && c.Handoff.Count > 0 {
				n["a hand-off barge beside hand-off samples"]++
			}
			if c.AcquireLatency.Count == 0 && c.Valid {
				n["a valid case without a latency sample"]++
			}
			if c.AcquireLatency.Count > c.AcquiresOK {
				n["a latency sample of an acquire that failed or is unknown"]++
			}
			if c.AcqDuringFaults > 0 && c.AcqAfterFaults > 0 {
				n["ok acquires during and after faults"]++
			}
			for _, why := range c.InvalidReasons {
				for _, k := range []string{"too late", "after the case-end", "beyond the lanes", "another lane", "asked is left undecided", "missed its aim", "out of order"} {
					if strings.Contains(why, k) {
						n["invalid: "+k]++
					}
				}
			}
			for _, f := range c.Faults {
				if f.JudgedAt != "" && f.RecoveredNs < 0 {
					n["a recovery of -1"]++
				}
				if f.Verdict == "unmet" && f.RecoveredNs >= 0 && !f.StayedDown {
					n["unmet although served (a refused stretch longer than B)"]++
				}
				if f.JudgedAt != "" && f.JudgedAt != f.Fault {
					n["a fault judged at another's heal"]++
				}
				if strings.HasPrefix(f.Detail, "judged on the keys its instances held") {
					n["available: false on the keys a fault took down"]++
				}
				if strings.HasPrefix(f.Detail, "judged on every key") && f.Verdict == "unmet" {
					n["available: false unmet on every key"]++
				}
			}
			if c.Exposures >= 3 {
				n["a case of 3 or more exposures"]++
			}
			for _, th := range c.Thresholds {
				switch {
				case th.NoValue && c.CutShort:
					n["a threshold with no value (cut short)"]++
				case th.NoValue:
					n["a threshold with no value (no sample)"]++
				case th.Pass:
					n["a threshold that passes"]++
				default:
					n["a threshold that fails"]++
				}
			}
		}
		for _, rw := range tr.Rows {
			if rw.Missing > 0 {
				n["a row with a missing trial"]++
			}
			switch {
			case rw.Decided == 0:
				n["a row with no decided trial"]++
			case rw.TwoHolders.Hits == 0:
				n["a row whose rate is 0 of n"]++
			case rw.TwoHolders.Hits == rw.Decided:
				n["a row whose rate is n of n"]++
			default:
				n["a row whose rate is k of n"]++
			}
		}
		if len(tr.Envelope) > 0 {
			n["an envelope"]++
		}
		for _, b := range tr.Decision {
			for _, cell := range b.Cells {
				n["outcome "+cell.Outcome]++
				if cell.TooFew {
					n["too few"]++
				} else {
					n["enough evidence"]++
				}
			}
		}
	}
	want := []string{"violations left to any, and seen", "available left to any, with faults", "an event before the first case-start", "a meta with a field it does not know", "a fault aimed at holder-of:kN",
		"a posthumous resource mark", "an event on a key of no lane", "a hold ending after another began in the file, at its instant (no overlap)",
		"a latency sample of an acquire that failed or is unknown", "ok acquires during and after faults", "invalid: missed its aim", "invalid: out of order",
		"unmet although served (a refused stretch longer than B)", "class unclassified", "outcome unsafe, unfenced", "outcome unsafe, fence untested", "a kill marked unobserved", "a kill marked idle", "a pause that did not act",
		"repeated fault windows (a nemesis)", "equal timestamps", "a queueing service", "expiry_bound_ns", "available: false on several keys",
		"a lane", "a case that measures", "class no fault", "class client misuse", "class several faults", "class pause holder", "class partition",
		"an invalid trial that proved unsafety", "a zombie by rule 1", "a zombie by rule 2", "a zombie by rule 3", "a zombie by rule 4",
		"a hand-off of zero time (a release invoked at the nanosecond of the next grant)", "a hand-off barge beside hand-off samples", "invalid: too late", "invalid: after the case-end",
		"invalid: beyond the lanes", "invalid: another lane", "invalid: asked is left undecided", "a recovery of -1", "a fault judged at another's heal",
		"available: false on the keys a fault took down", "available: false unmet on every key",
		"a threshold with no value (cut short)", "a threshold with no value (no sample)", "a threshold that passes", "a threshold that fails",
		"a row with a missing trial", "a row with no decided trial", "a row whose rate is 0 of n", "a row whose rate is n of n", "a row whose rate is k of n",
		"an envelope", "outcome damage done", "outcome unsafe, fenced", "outcome no evidence", "outcome safe", "outcome safe, tokens regressed",
		"too few", "enough evidence", "a case of 3 or more exposures",
		"an acquire never sent", "an extension never sent", "an ok renewal after an extension of unknown outcome",
		"an extension answered after the lost signal ended its hold"}
	for _, w := range want {
		if n[w] == 0 {
			t.Errorf("never generated: %s", w)
		}
	}
	var ks []string
	for k := range n {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var b strings.Builder
	for _, k := range ks {
		b.WriteString("\n  ")
		b.WriteString(k)
		b.WriteString(": ")
		b.WriteString(itoa(n[k]))
	}
	t.Logf("over seeds 1..300:%s", b.String())
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	s := ""
	for ; i > 0; i /= 10 {
		s = string(rune('0'+i%10)) + s
	}
	return s
}
