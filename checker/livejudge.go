package checker

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// This file judges each heal's clear window key by key (MODEL §11) and
// says in figures why a recovery was unmet or cannot be told.

// keyJudgement is one key's recovery at a heal (MODEL §11).
type keyJudgement struct {
	key      string
	met, bad bool
	// longest is the longest refused stretch that counts for the verdict
	// (from the instant the lock is due back, without recovers_within);
	// refused the longest from the key's first demand: its recovery time.
	longest, refused int64
	relevant         bool  // demanded in the window
	demandAt         int64 // d_k: the first demand in the window (-1: none)
	served           int64 // r_k: first served from d_k on (-1: not)
	servedAny        int64 // first served in the window, asked or not (-1)
	waitAtEnd        bool
}

// firstServe is the first instant in [from, e) at which the key was
// served (-1: none).
func firstServe(kl *keyLive, from, e int64) int64 {
	r := int64(-1)
	for _, s := range kl.serves {
		var at int64
		switch {
		case s.a == s.b && s.a >= from:
			at = s.a
		case s.a < s.b && s.b > from:
			at = max(s.a, from)
		default:
			continue
		}
		if at < e && (r < 0 || at < r) {
			r = at
		}
	}
	return r
}

// judgeKeys judges every key of a heal's window.
func (l *liveness) judgeKeys(r *healRec) []keyJudgement {
	e := r.e
	if e < 0 {
		e = l.now // a case cut short: to its last event
	}
	u := r.h + l.bound
	names := make([]string, 0, len(l.keys))
	for k := range l.keys {
		names = append(names, k)
	}
	sort.Strings(names)
	var out []keyJudgement
	for _, k := range names {
		kl := l.keys[k]
		j := keyJudgement{key: k, demandAt: -1, served: -1, servedAny: firstServe(kl, r.h, e), waitAtEnd: r.waitAtEnd[k]}
		d := l.demand[kl]
		for _, x := range d {
			if x.a < e && (x.b > r.h || x.a >= r.h) {
				j.demandAt = max(x.a, r.h)
				break
			}
		}
		if j.demandAt >= 0 {
			j.relevant = true
			j.served = firstServe(kl, j.demandAt, e)
			until := e
			if j.served >= 0 {
				until = j.served
			}
			var afterU int64
			for _, x := range d {
				a, b := max(x.a, j.demandAt), min(x.b, until)
				if b <= a {
					continue
				}
				j.refused = max(j.refused, b-a)
				if b > max(a, u) {
					afterU = max(afterU, b-max(a, u))
				}
			}
			if l.within > 0 {
				j.longest = j.refused
				j.bad = j.refused > l.within
				j.met = j.served >= 0 && !j.bad
			} else {
				j.longest = afterU
				j.met = j.served >= 0
				j.bad = j.served < 0 && afterU >= int64(MinEvidence)
			}
		}
		out = append(out, j)
	}
	return out
}

// unwatched: the fault healed at or after the stop, so the case never
// watched its recovery (MODEL §11: unknown).
func (l *liveness) unwatched(r *healRec) bool { return l.stopped && r.h >= l.stop }

// judge returns a heal's own verdict (undecided_ when a later heal
// decides), its recovery time (ms, -1 if a demanded key was not served or
// none was demanded) and its keys' judgements.
func (l *liveness) judge(r *healRec) (string, float64, []keyJudgement) {
	if l.failedAt >= 0 && r.h >= l.failedAt {
		return Undecided, -1, nil // after a heal that failed: not the lock's
	}
	if l.unwatched(r) {
		return Undecided, -1, nil
	}
	keys := l.judgeKeys(r)
	if l.falseMode {
		return l.judgeFalse(r, keys)
	}
	rec := -1.0
	anyKey, allMet, unmet, unserved := false, true, false, false
	for _, j := range keys {
		if !j.relevant {
			continue
		}
		anyKey = true
		if j.served >= 0 {
			rec = max(rec, ms(j.refused))
		} else {
			unserved = true
		}
		unmet = unmet || j.bad
		allMet = allMet && j.met
	}
	if unserved {
		rec = -1
	}
	switch {
	case unmet:
		return Unmet, rec, keys
	case anyKey && allMet:
		return Met, rec, keys
	case r.next != "" && !r.stopEnd:
		return undecided_, rec, keys
	}
	return Undecided, rec, keys
}

// judgeFalse judges available: false on the keys the fault took down.
func (l *liveness) judgeFalse(r *healRec, keys []keyJudgement) (string, float64, []keyJudgement) {
	var down []keyJudgement
	for _, j := range keys {
		if r.f.down == nil || r.f.down[j.key] {
			down = append(down, j)
		}
	}
	rec, waited := -1.0, false
	for _, j := range down {
		if j.servedAny >= 0 {
			rec = max(rec, ms(j.servedAny-r.h))
		}
		waited = waited || j.waitAtEnd
	}
	switch {
	case rec >= 0:
		return Unmet, rec, down
	case r.e >= 0 && r.e-r.h >= int64(MinEvidence) && waited:
		return Met, rec, down
	}
	return Undecided, rec, down
}

// verdictOf follows undecided heals to the heal that decides them.
func (l *liveness) verdictOf(r *healRec) (string, float64, *healRec, []keyJudgement) {
	seen := map[*healRec]bool{}
	for {
		v, rec, keys := l.judge(r)
		if v != undecided_ {
			return v, rec, r, keys
		}
		seen[r] = true
		n := l.byFault[r.next]
		if n == nil || seen[n] {
			return Undecided, rec, r, keys
		}
		r = n
	}
}

// unmetText says, in figures, why a recovery was unmet.
func (l *liveness) unmetText(where string, r *healRec, keys []keyJudgement, falseMode bool) string {
	if falseMode {
		for _, j := range keys {
			if j.servedAny >= 0 {
				return fmt.Sprintf("expected the lock to stay unavailable after %s, but key %s was served again %.0fms after the fault healed", where, j.key, ms(j.servedAny-r.h))
			}
		}
	}
	for _, j := range keys {
		if !j.bad {
			continue
		}
		if l.within > 0 {
			return fmt.Sprintf("not live soon enough after %s: clients asked for key %s for %s without a break after the heal before anyone was served (recovers_within %s)", where, j.key, dur(j.longest), time.Duration(l.within))
		}
		return fmt.Sprintf("not live after %s healed: key %s was never served in the %s of clear window that followed, and clients asked for it for %s without a break after it was due (%s of refused demand is the evidence for never)", where, j.key, dur(r.e-r.h), dur(j.longest), MinEvidence)
	}
	return "not live after " + where
}

// undecidedText says, in figures, why a recovery cannot be told.
func (l *liveness) undecidedText(where string, r *healRec, keys []keyJudgement, falseMode bool) string {
	if l.unwatched(r) {
		return fmt.Sprintf("the recovery after %s is unknown: it healed %s after the case stopped, so the case never watched it (a client waited for a key at the stop: %v)", where, dur(r.h-l.stop), l.waitingAtStop)
	}
	clear := "the case ended"
	if r.e >= 0 {
		clear = dur(r.e - r.h)
	}
	if falseMode {
		waited := false
		for _, j := range keys {
			waited = waited || j.waitAtEnd
		}
		return fmt.Sprintf("whether the lock stayed unavailable after %s cannot be told: it needs %s of the case after the heal with a client waiting for a key the fault took down at the end (%s were left; a client waiting at the end: %v)", where, MinEvidence, clear, waited)
	}
	if l.failedAt >= 0 && r.h >= l.failedAt {
		return fmt.Sprintf("whether the lock recovered after %s cannot be told: a heal failed before it, so what followed cannot be blamed on the lock", where)
	}
	var parts []string
	for _, j := range keys {
		if !j.relevant || j.met {
			continue
		}
		parts = append(parts, fmt.Sprintf("key %s not served in %s of clear window, its demand lasted at most %s without a break", j.key, clear, dur(j.longest)))
	}
	if len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("no client asked for any key in the %s of clear window: a recovery with no demand has no value", clear))
	}
	need := fmt.Sprintf("more than %s of refused demand to call it unmet (recovers_within)", time.Duration(l.within))
	if l.within == 0 {
		need = fmt.Sprintf("%s of refused demand, counted from %s after the heal (the lock's expiry bound), to call it never", MinEvidence, time.Duration(l.bound))
	}
	return fmt.Sprintf("whether the lock recovered after %s cannot be told: %s; needed: %s", where, strings.Join(parts, "; "), need)
}

func dur(ns int64) string { return time.Duration(ns).Round(time.Millisecond).String() }
