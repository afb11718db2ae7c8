package sim

import (
	"bytes"
	"encoding/json"
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
	ended      bool // the case-end is in the history
	// §6, §15 figures read again: samples in ns
	acqLat, holdTime, overlaps, handoffs, zombies []int64
	barges                                        int // hand-offs the releaser ended itself (§15)
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
		for _, ol := range oracleLanes(lines[i:end]) {
			out = append(out, oracleCase(ol))
		}
	}
	return out
}

func instOf(proc string) string { return strings.SplitN(proc, "c", 2)[0] }

func oracleCase(ol olane) ocase {
	ev := ol.lines
	oc := ocase{counts: map[string]int{}}
	var meta struct {
		LeaseNs      int64 `json:"lease_ns"`
		LeaseRenewed bool  `json:"lease_renewed"`
	}
	json.Unmarshal(ev[0].Meta, &meta)
	invT := map[string]int64{}
	type handoff struct {
		from     int64
		releaser string
	}
	opened := map[string]*handoff{}
	death := map[string]int64{} // instance -> death time
	dead := func(inst string, t int64) bool { d, ok := death[inst]; return ok && t > d }
	type hold struct {
		client, key string
		begin, end  int
		// real: ended by a release, a lost signal or a death (not the
		// case's end); good: by a release that returned ok
		real, good bool
	}
	var holds []*hold
	cur := map[string]*hold{}       // client+key
	releasing := map[string]*hold{} // client -> the hold its release in flight ended
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
	endHold := func(c, k string, i int) *hold {
		h := cur[c+"/"+k]
		if h != nil {
			h.end = i
			h.real = ev[i].F != "case-end"
			delete(cur, c+"/"+k)
		}
		return h
	}
	for i, e := range ev {
		if e.Type == "mark" {
			switch e.F {
			case "fault-start", "crash":
				var insts []string
				if e.F == "crash" {
					insts = []string{e.Proc}
				} else if ol.nonActing[e.Fault] {
					// a kill or a pause with an unobserved or idle mark did
					// not act (MODEL §4)
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
				if strings.HasPrefix(e.Fault, "pause") && !ol.nonActing[e.Fault] {
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
				if e.F == "acquire" {
					invT[c] = e.T
				}
				if h := cur[c+"/"+e.Key]; e.F == "release" && h != nil {
					oc.holdTime = append(oc.holdTime, e.T-ev[h.begin].T)
					if opened[e.Key] == nil {
						for w, k := range waiting {
							if k == e.Key && w != c && liveOf(w) {
								opened[e.Key] = &handoff{e.T, c}
							}
						}
					}
				}
				if e.F == "release" {
					releasing[c] = endHold(c, e.Key, i)
				}
			case e.F == "lost":
				oc.counts["leases_lost"]++
				endHold(c, e.Key, i)
			case e.F == "resource" || e.F == "dropped":
			default:
				if e.F == "acquire" && inflight[c] == "acquire" {
					// every completed acquire is a latency sample (§15)
					oc.acqLat = append(oc.acqLat, e.T-invT[c])
				}
				if e.F == "release" {
					if h := releasing[c]; h != nil && e.Type == "ok" {
						h.good = true
					}
					delete(releasing, c)
				}
				delete(inflight, c)
				switch {
				case e.F == "acquire" && e.Type == "ok":
					oc.counts["acquires_ok"]++
					if o := opened[e.Key]; o != nil && liveOf(c) {
						if o.releaser == c {
							oc.barges++ // taken straight back: no sample
						} else {
							oc.handoffs = append(oc.handoffs, e.T-o.from)
						}
						delete(opened, e.Key)
					}
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
						holds = append(holds, h)
						cur[c+"/"+e.Key] = h
					}
				case e.F == "acquire" && e.Type == "fail":
					oc.counts["acquires_failed"]++
				case e.F == "acquire" && e.Type == "info":
					oc.counts["acquires_unknown"]++
				case e.F == "acquire" && e.Type == "unsent":
					oc.counts["acquires_unsent"]++
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
			for _, key := range ol.keys {
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
	// violations: pairs of holds of a key in force at a common instant
	// ([begin, end), a hold ending at the instant the later began overlaps
	// nothing), or cut off together by the case's or the history's end
	endT := func(h *hold) int64 {
		if h.end >= len(ev) {
			return ev[len(ev)-1].T
		}
		return ev[h.end].T
	}
	var pairs [][2]*hold
	for j, h := range holds {
		for _, o := range holds[:j] {
			if o.key != h.key || o.end <= h.begin {
				continue
			}
			t := ev[h.begin].T
			if (o.real && endT(o) == t) || (h.real && endT(h) == t) {
				continue
			}
			oc.violations++
			pairs = append(pairs, [2]*hold{h, o})
		}
	}
	oc.ended = ev[len(ev)-1].F == "case-end"
	if !oc.ended {
		return oc
	}
	for _, p := range pairs {
		oc.overlaps = append(oc.overlaps, min(endT(p[0]), endT(p[1]))-ev[p[0].begin].T)
	}
	// zombies: the first instant the service certainly took a hold's
	// grant back (MODEL §6), if its end comes strictly later
	for _, h := range holds {
		taken := int64(1) << 62
		// expiry: the latest the lease may run out in an allowed world
		// (rule 2): an ok renewal lands as late as the grant lets it
		// (after spare extensions of unknown outcome that must have
		// landed first, when the lease had run out by its invoke), the
		// spare ones land last, a lease each; an extension's answer
		// counts after a lost signal ended the hold
		lease := meta.LeaseNs
		expiry := ev[h.begin].T + lease
		var spare []int64
		extInv, opInv := int64(-1), int64(-1)
		for j := h.begin + 1; j < len(ev); j++ {
			e := ev[j]
			after := j >= h.end
			if after && (extInv < 0 || ev[h.end].F != "lost") || e.F == "case-end" {
				break
			}
			if e.Key != h.key || e.Proc == "" || dead(instOf(e.Proc), e.T) {
				continue
			}
			if !after {
				switch {
				case e.F == "acquire" && e.Type == "ok" && e.Proc != h.client,
					e.F == "extend" && e.Type == "fail" && e.Proc == h.client,
					e.F == "release-wrong-token" && e.Type == "ok":
					taken = min(taken, e.T)
				}
			}
			if e.Proc != h.client {
				continue
			}
			switch {
			case e.Type == "invoke":
				opInv = e.T
				if e.F == "extend" {
					extInv = e.T
				}
			case e.Type == "ok" && (e.F == "extend" || e.F == "acquire"):
				for len(spare) > 0 && expiry <= opInv && spare[0] < expiry {
					expiry += lease
					spare = spare[1:]
				}
				at := e.T
				if expiry > opInv {
					at = min(at, expiry)
				}
				expiry, extInv = at+lease, -1
			case e.F == "extend" && e.Type == "info":
				spare, extInv = append(spare, extInv), -1
			case e.F == "extend":
				extInv = -1 // refused, or never sent: no renewal
			}
		}
		if extInv >= 0 {
			// in flight when a death or the case's end ended the hold, or
			// never answered after its lost signal: unknown
			spare = append(spare, extInv)
		}
		for _, u := range spare {
			if u < expiry {
				expiry += lease
			}
		}
		if meta.LeaseNs > 0 && !meta.LeaseRenewed && !h.good {
			// rule 2, not for a hold that turned out good
			taken = min(taken, expiry)
		}
		if end := ev[h.end].T; end > taken {
			oc.zombies = append(oc.zombies, end-taken)
		}
	}
	return oc
}

func TestOracleAgreesWithRecords(t *testing.T) {
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
			cr := r.Cases[ct.Index]
			if len(cr.backdated) > 0 || len(cr.strayComps) > 0 || ct.Skip != "" {
				continue
			}
			want := map[string]int{
				"acquires_ok": ct.AcquiresOK, "acquires_failed": ct.AcquiresFailed, "acquires_unknown": ct.AcquiresUnknown, "acquires_unsent": ct.AcquiresUnsent,
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
			same := func(what string, samples []int64, n int, mx int64) {
				if len(samples) != n || (n > 0 && maxOf(samples) != mx) {
					t.Errorf("seed %d case %d %s: oracle %d samples (max %d), truth %d (max %d)", s, i+1, what, len(samples), maxOf(samples), n, mx)
				}
			}
			same("acquire latency", oc.acqLat, ct.AcquireLatency.Count, ct.AcquireLatency.MaxNs)
			same("hold time", oc.holdTime, ct.HoldTime.Count, ct.HoldTime.MaxNs)
			if oc.stopped {
				same("hand-off", oc.handoffs, ct.Handoff.Count, ct.Handoff.MaxNs)
				if oc.barges != ct.HandoffBarges {
					t.Errorf("seed %d case %d hand-off barges: oracle %d, truth %d", s, i+1, oc.barges, ct.HandoffBarges)
				}
			}
			if oc.ended {
				same("overlaps", oc.overlaps, ct.Violations, ct.OverlapMaxNs)
				if median(oc.overlaps) != ct.OverlapP50Ns {
					t.Errorf("seed %d case %d overlap median: oracle %d, truth %d", s, i+1, median(oc.overlaps), ct.OverlapP50Ns)
				}
				same("zombies", oc.zombies, ct.Zombies, ct.ZombieMaxNs)
			}
		}
	}
}
