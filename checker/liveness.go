package checker

import (
	"fmt"
	"sort"
	"time"
)

// Liveness is how available the lock was, and whether that met the case's
// expectations (history.Expectation: available, max_gap, recovers_within).
// A safe lock that nobody can take is not a pass. The rules are MODEL §11.
type Liveness struct {
	Verdict Verdict `json:"verdict"`
	// LongestGapMs is the longest time one key was continuously
	// unavailable: some live client waited for it and no live client held
	// it (MODEL §11).
	LongestGapMs float64         `json:"longest_gap_ms"`
	Faults       []FaultLiveness `json:"faults,omitempty"`
}

// FaultLiveness is the availability around one fault window.
type FaultLiveness struct {
	Fault  string `json:"fault"`
	Target string `json:"target"`
	// Verdict is the recovery's judgement: met, unmet, unknown (the case
	// left it undecided), or "" when it was not judged (no availability
	// expectation, or the fault never healed).
	Verdict string `json:"verdict"`
	// JudgedWith names the fault at whose heal the recovery was judged,
	// when another fault followed before it could be (MODEL §11).
	JudgedWith string `json:"judged_with,omitempty"`
	// Acquisitions while the fault was in force, and from its heal to the
	// end of the case.
	AcquisitionsDuring int `json:"acquisitions_during"`
	AcquisitionsAfter  int `json:"acquisitions_after"`
	// RecoveredAfterMs is the time from the heal (where it was judged) to
	// the moment the lock served its waiters again, the largest over its
	// keys (-1: not before the window ended).
	RecoveredAfterMs float64 `json:"recovered_after_ms"`
	// ClearMs is how long the heal's clear window lasted: until the next
	// fault began or the case stopped.
	ClearMs float64 `json:"clear_ms"`
	// NextGrantMs is the time from the fault's start to the next grant to
	// a live client (of any key): how long the lock was out of service
	// after, say, its holder failed (-1: none before the end).
	NextGrantMs float64 `json:"next_grant_ms"`
}

// Recovery verdicts of a fault (FaultLiveness.Verdict).
const (
	Met        = "met"
	Unmet      = "unmet"
	Undecided  = "unknown"
	NotJudged  = ""
	undecided_ = "?" // internal: decided by a later heal
)

// MinEvidence is how long an unavailable lock must be watched, after a
// heal, before "it never recovered" (or "it stayed unavailable") is a
// verdict rather than a guess, when the scenario gives no
// recovers_within.
const MinEvidence = 2 * time.Second

// keyLive is everything the checker follows per key: one map lookup per
// event, shared by availability, mutual exclusion and tokens.
type keyLive struct {
	name             string
	holders, waiters int     // live ones
	holds            []*hold // in force, live or not, in order of beginning
	since            int64   // unavailable since (-1: available)
	maxToken         uint64  // highest token granted (MODEL §7)
}

// healRec is one heal and its clear window (MODEL §11).
type healRec struct {
	f        *faultRec
	h, e     int64 // e: -1 while the window is open
	stopEnd  bool  // the window ended at the stop
	next     string
	keys     map[string]*healKey
	deadline int64 // h + recovers_within, -1 without it
	checked  bool  // the deadline was evaluated
}

type healKey struct {
	r          int64 // first instant served, -1
	relevant   bool
	waitAtDead bool // a live client waited at the deadline
	waitAtEnd  bool // a live client waited at the window's end
}

type candidate struct {
	hk *healKey
	at int64
}

type liveness struct {
	start, stop  int64
	stopped      bool
	within       int64
	falseMode    bool // available: false
	keys         map[string]*keyLive
	longest      int64
	acquisitions int
	heals        []*healRec
	open         []*healRec
	byFault      map[string]*healRec
	active       map[string]bool
	// failedAt is when a heal first failed (-1: none): the fault's effect
	// may have outlasted its window, so nothing from then on can be blamed
	// on the lock (MODEL §11).
	failedAt int64
}

func (l *liveness) init(start int64, available *bool, within int64) {
	l.start = start
	l.within = within
	l.falseMode = available != nil && !*available
	l.keys = map[string]*keyLive{}
	l.byFault = map[string]*healRec{}
	l.active = map[string]bool{}
	l.failedAt = -1
}

func (l *liveness) key(k string) *keyLive {
	kl := l.keys[k]
	if kl == nil {
		kl = &keyLive{name: k, since: -1}
		l.keys[k] = kl
	}
	return kl
}

func (r *healRec) key(k string) *healKey {
	hk := r.keys[k]
	if hk == nil {
		hk = &healKey{r: -1}
		r.keys[k] = hk
	}
	return hk
}

// serve marks key k served at t for every open window.
func (hk *healKey) serve(at int64) {
	if hk.r < 0 || at < hk.r {
		hk.r = at
	}
	hk.relevant = true
}

// update opens or closes key k's unavailable interval at t.
func (l *liveness) update(k string, kl *keyLive, t int64) {
	unav := !l.stopped && l.failedAt < 0 && kl.waiters > 0 && kl.holders == 0
	switch {
	case unav && kl.since < 0:
		kl.since = t
	case !unav && kl.since >= 0:
		if g := t - kl.since; g > l.longest {
			l.longest = g
		}
		kl.since = -1
	}
}

// advance evaluates the deadlines that passed before t.
func (l *liveness) advance(t int64) {
	for _, r := range l.open {
		if !r.checked && r.deadline >= 0 && r.deadline < t {
			l.evalDeadline(r)
		}
	}
}

func (l *liveness) evalDeadline(r *healRec) {
	r.checked = true
	for k, kl := range l.keys {
		r.key(k).waitAtDead = kl.waiters > 0
	}
}

func (l *liveness) acquired(cl *client, key string, t int64) {
	l.acquisitions++
	if !cl.live() {
		return
	}
	for _, r := range l.open {
		r.key(key).serve(t)
	}
}

func (l *liveness) holdBegin(h *hold) {
	kl := h.kl
	kl.holds = append(kl.holds, h)
	if h.cl.live() {
		kl.holders++
		l.update(h.key, kl, h.begin)
	}
}

func (l *liveness) holdEnd(h *hold, t int64) {
	kl := h.kl
	for i, x := range kl.holds {
		if x == h {
			kl.holds = append(kl.holds[:i], kl.holds[i+1:]...)
			break
		}
	}
	if h.cl.live() {
		kl.holders--
		l.update(h.key, kl, t)
	}
}

func (l *liveness) waitBegin(cl *client, kl *keyLive, t int64) {
	if !cl.live() {
		return
	}
	kl.waiters++
	l.update(kl.name, kl, t)
	for _, r := range l.open {
		r.key(kl.name).relevant = true
	}
}

func (l *liveness) waitEnd(cl *client, kl *keyLive, t int64) {
	if !cl.live() {
		return
	}
	kl.waiters--
	l.update(kl.name, kl, t)
}

// instanceDown is called while in is still live, before it pauses or dies.
func (l *liveness) instanceDown(in *instance, t int64) {
	for _, cl := range in.clients {
		for _, h := range cl.holds {
			h.kl.holders--
			l.update(h.key, h.kl, t)
		}
		if kl := cl.waits; kl != nil {
			kl.waiters--
			l.update(kl.name, kl, t)
		}
	}
}

// instanceUp is called once in is live again.
func (l *liveness) instanceUp(in *instance, t int64) {
	for _, cl := range in.clients {
		for _, h := range cl.holds {
			h.kl.holders++
			l.update(h.key, h.kl, t)
			for _, r := range l.open {
				h.cands = append(h.cands, candidate{hk: r.key(h.key), at: t})
			}
		}
		if kl := cl.waits; kl != nil {
			kl.waiters++
			l.update(kl.name, kl, t)
			for _, r := range l.open {
				r.key(kl.name).relevant = true
			}
		}
	}
}

// resolved serves, for a good hold, every window it was a candidate of.
func (l *liveness) resolved(h *hold) {
	if h.good() {
		for _, c := range h.cands {
			c.hk.serve(c.at)
		}
	}
	h.cands = nil
}

func (l *liveness) faultStart(f *faultRec, t int64) {
	l.advance(t)
	if !l.falseMode {
		l.closeOpen(t, f.name, false)
	}
	l.active[f.name] = true
}

// closeOpen ends every open window at t.
func (l *liveness) closeOpen(t int64, next string, stop bool) {
	for _, r := range l.open {
		if !r.checked && r.deadline >= 0 && r.deadline <= t {
			l.evalDeadline(r)
		}
		r.e, r.next, r.stopEnd = t, next, stop
		for k, kl := range l.keys {
			r.key(k).waitAtEnd = kl.waiters > 0
		}
	}
	l.open = l.open[:0]
}

func (l *liveness) faultEnd(f *faultRec, t int64) {
	l.advance(t)
	delete(l.active, f.name)
	if f.healErr != "" && l.failedAt < 0 {
		l.failedAt = t
		l.closeGaps(t)
	}
	r := &healRec{f: f, h: t, e: -1, keys: map[string]*healKey{}, deadline: -1}
	if l.within > 0 {
		r.deadline = t + l.within
	}
	l.heals = append(l.heals, r)
	l.byFault[f.name] = r
	if l.stopped {
		r.e, r.stopEnd = t, true
		return
	}
	if !l.falseMode && len(l.active) > 0 {
		// Another fault is still in force: the clear window is empty and
		// the recovery is judged at that fault's heal.
		r.e, r.next = t, firstActive(l.active)
		return
	}
	l.open = append(l.open, r)
	for k, kl := range l.keys {
		hk := r.key(k)
		hk.relevant = kl.waiters > 0
		for _, h := range kl.holds {
			if h.cl.live() {
				h.cands = append(h.cands, candidate{hk: hk, at: t})
			}
		}
	}
}

func firstActive(m map[string]bool) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names[0]
}

func (l *liveness) caseStop(t int64) {
	if l.stopped {
		return
	}
	l.advance(t)
	l.closeOpen(t, "", true)
	l.closeGaps(t)
	l.stopped = true
	l.stop = t
}

// closeGaps ends every unavailable interval at t.
func (l *liveness) closeGaps(t int64) {
	for _, kl := range l.keys {
		if kl.since >= 0 {
			if g := t - kl.since; g > l.longest {
				l.longest = g
			}
			kl.since = -1
		}
	}
}

// judge returns a heal's own verdict (undecided_ when a later heal decides)
// and its recovery time (ms, -1 if none).
func (l *liveness) judge(r *healRec) (string, float64) {
	rec := -1.0
	if l.failedAt >= 0 && r.h >= l.failedAt {
		return Undecided, rec // after a heal that failed: not the lock's
	}
	for _, hk := range r.keys {
		if hk.r >= 0 {
			if d := ms(hk.r - r.h); d > rec {
				rec = d
			}
		}
	}
	if l.falseMode {
		waited := false
		for _, hk := range r.keys {
			if hk.r >= 0 {
				return Unmet, rec
			}
			waited = waited || hk.waitAtEnd
		}
		if r.e >= 0 && r.e-r.h >= int64(MinEvidence) && waited {
			return Met, rec
		}
		return Undecided, rec
	}
	any, allMet, unmet := false, true, false
	for _, hk := range r.keys {
		if !hk.relevant && hk.r < 0 {
			continue
		}
		any = true
		var met, bad bool
		if l.within > 0 {
			met = hk.r >= 0 && hk.r-r.h <= l.within
			bad = r.e >= 0 && r.h+l.within <= r.e && !(hk.r >= 0 && hk.r <= r.h+l.within) && hk.waitAtDead
		} else {
			met = hk.r >= 0
			bad = r.e >= 0 && r.e-r.h >= int64(MinEvidence) && hk.r < 0 && hk.waitAtEnd
		}
		unmet = unmet || bad
		allMet = allMet && met
	}
	switch {
	case unmet:
		return Unmet, rec
	case any && allMet:
		return Met, rec
	case r.next != "" && !r.stopEnd:
		return undecided_, rec
	}
	return Undecided, rec
}

// verdictOf follows undecided heals to the heal that decides them.
func (l *liveness) verdictOf(r *healRec) (string, float64, string) {
	seen := map[*healRec]bool{}
	for {
		v, rec := l.judge(r)
		if v != undecided_ {
			return v, rec, r.f.name
		}
		seen[r] = true
		n := l.byFault[r.next]
		if n == nil || seen[n] {
			return Undecided, rec, r.f.name
		}
		r = n
	}
}

// result judges availability against the expectation; it returns the
// unmet expectations and the undecided ones.
func (l *liveness) result(faults []*faultRec, available *bool, maxGap int64) (Liveness, []string, []string) {
	out := Liveness{LongestGapMs: ms(l.longest), Verdict: Ok}
	var unmet, open []string
	for _, f := range faults {
		if !f.started {
			continue
		}
		fl := FaultLiveness{Fault: f.name, Target: f.target, RecoveredAfterMs: -1,
			AcquisitionsDuring: f.acqEnd - f.acqStart, NextGrantMs: -1}
		if f.nextGrant >= 0 {
			fl.NextGrantMs = ms(f.nextGrant - f.start)
		}
		if !f.ended {
			fl.AcquisitionsDuring = l.acquisitions - f.acqStart
		} else {
			fl.AcquisitionsAfter = l.acquisitions - f.acqEnd
		}
		r := l.byFault[f.name]
		if r != nil && r.e >= 0 {
			fl.ClearMs = ms(r.e - r.h)
		}
		if r != nil && available != nil && f.judgeable() {
			v, rec, at := l.verdictOf(r)
			fl.Verdict, fl.RecoveredAfterMs = v, rec
			if at != f.name {
				fl.JudgedWith = at
			}
			where := f.name
			if at != f.name {
				where = fmt.Sprintf("%s (judged with %s, which followed before the lock could recover)", f.name, at)
			}
			switch {
			case v == Unmet && !*available:
				unmet = append(unmet, fmt.Sprintf("expected the lock to stay unavailable after %s, but it served a client again %.0fms after the fault healed", where, rec))
			case v == Unmet && l.within > 0:
				unmet = append(unmet, fmt.Sprintf("not live soon enough after %s: a client still waited %s after the heal and nobody had been served (recovers_within %s)", where, time.Duration(l.within), time.Duration(l.within)))
			case v == Unmet:
				unmet = append(unmet, fmt.Sprintf("not live after %s healed: a client waited and nobody was served in the %.1fs that followed", where, fl.ClearMs/1e3))
			case v == Undecided && !*available:
				open = append(open, fmt.Sprintf("whether the lock stayed unavailable after %s cannot be told: it needs %s of the case after the heal with a client waiting at the end (%.0fms were left)", f.name, MinEvidence, fl.ClearMs))
			case v == Undecided:
				open = append(open, fmt.Sprintf("whether the lock recovered after %s cannot be told: nobody was served again and the case did not watch long enough with a client waiting (%.0fms of clear time, %s needed)", f.name, fl.ClearMs, evidenceNeeded(l.within)))
			}
		}
		out.Faults = append(out.Faults, fl)
	}
	if maxGap > 0 && l.longest > maxGap {
		unmet = append(unmet, fmt.Sprintf("a key was unavailable for %.0fms: a client waited and nobody live held it (max_gap %s)", ms(l.longest), time.Duration(maxGap)))
	}
	switch {
	case len(unmet) > 0:
		out.Verdict = Violation
	case len(open) > 0:
		out.Verdict = Unknown
	}
	return out, unmet, open
}

func evidenceNeeded(within int64) time.Duration {
	if within > 0 {
		return time.Duration(within)
	}
	return MinEvidence
}
