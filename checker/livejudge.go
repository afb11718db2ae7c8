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
	key       string
	met, bad  bool
	longest   int64 // the longest refused stretch that counted
	relevant  bool
	served    int64 // r_k (-1: not served)
	waitAtEnd bool
}

// judgeKeys judges every key of a heal's window.
func (l *liveness) judgeKeys(r *healRec) []keyJudgement {
	names := make([]string, 0, len(r.keys))
	for k := range r.keys {
		names = append(names, k)
	}
	sort.Strings(names)
	var out []keyJudgement
	for _, k := range names {
		hk := r.keys[k]
		j := keyJudgement{key: k, served: hk.r, relevant: hk.relevant || hk.r >= 0, waitAtEnd: hk.waitAtEnd}
		if l.within > 0 {
			until := never
			if hk.r >= 0 {
				until = hk.r
			}
			j.longest = hk.longest(until)
			j.bad = j.longest > l.within
			j.met = hk.r >= 0 && !j.bad
		} else {
			j.longest = hk.longest(never)
			j.met = hk.r >= 0
			j.bad = hk.r < 0 && j.longest >= int64(MinEvidence)
		}
		out = append(out, j)
	}
	return out
}

// judge returns a heal's own verdict (undecided_ when a later heal
// decides), its recovery time (ms, -1 if a relevant key was not served)
// and its keys' judgements.
func (l *liveness) judge(r *healRec) (string, float64, []keyJudgement) {
	if l.failedAt >= 0 && r.h >= l.failedAt {
		return Undecided, -1, nil // after a heal that failed: not the lock's
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
			rec = max(rec, ms(j.served-r.h))
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
		if j.served >= 0 {
			rec = max(rec, ms(j.served-r.h))
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
			if j.served >= 0 {
				return fmt.Sprintf("expected the lock to stay unavailable after %s, but key %s was served again %.0fms after the fault healed", where, j.key, ms(j.served-r.h))
			}
		}
	}
	for _, j := range keys {
		if !j.bad {
			continue
		}
		if l.within > 0 {
			return fmt.Sprintf("not live soon enough after %s: clients waited for key %s for %s at a stretch after the heal before anyone was served (recovers_within %s)", where, j.key, dur(j.longest), time.Duration(l.within))
		}
		return fmt.Sprintf("not live after %s healed: key %s was never served in the %s of clear window that followed, and clients waited for it for %s at a stretch after it was due (%s of refused demand is the evidence for never)", where, j.key, dur(r.e-r.h), dur(j.longest), MinEvidence)
	}
	return "not live after " + where
}

// undecidedText says, in figures, why a recovery cannot be told.
func (l *liveness) undecidedText(where string, r *healRec, keys []keyJudgement, falseMode bool) string {
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
		parts = append(parts, fmt.Sprintf("key %s not served in %s of clear window, its clients waited for at most %s at a stretch", j.key, clear, dur(j.longest)))
	}
	if len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("no client waited for any key in the %s of clear window", clear))
	}
	need := fmt.Sprintf("more than %s of refused demand to call it unmet (recovers_within)", time.Duration(l.within))
	if l.within == 0 {
		need = fmt.Sprintf("%s of refused demand, counted from %s after the heal (the lock's expiry bound), to call it never", MinEvidence, time.Duration(l.bound))
	}
	return fmt.Sprintf("whether the lock recovered after %s cannot be told: %s; needed: %s", where, strings.Join(parts, "; "), need)
}

func dur(ns int64) string { return time.Duration(ns).Round(time.Millisecond).String() }
