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
	// waitSince is since when some live client has waited for the key
	// without a break (-1: none waits): demand, refused until it is
	// served (MODEL §11).
	waitSince int64
	maxToken  uint64 // highest token granted (MODEL §7)
	// handFrom is when an open hand-off of the key began (-1: none), by
	// the client whose release began it (MODEL §15).
	handFrom int64
	handBy   *client
	// lw is its linearizability window (MODEL §8), nil until it has one.
	lw *linWindow
}

// healRec is one heal and its clear window (MODEL §11).
type healRec struct {
	f       *faultRec
	h, e    int64 // e: -1 while the window is open
	stopEnd bool  // the window ended at the stop
	next    string
	keys    map[string]*healKey
	// from is where refused stretches start to count: the heal with
	// recovers_within, else the instant the lock is due back by its own
	// design (the heal plus the expiry bound).
	from int64
}

// stretch is a stretch of continuous waiting by live clients for a key in
// a clear window (MODEL §11): where it began (no earlier than the heal),
// where it counts from (no earlier than the window's count-from instant)
// and where it ended. Only its part before the key was first served is
// refused, and that instant may be learnt later (a hold that turns out
// good): the stretch is cut when the window is judged.
type stretch struct{ start, from, end int64 }

type healKey struct {
	r         int64 // first instant served, -1
	relevant  bool
	waitAtEnd bool // a live client waited at the window's end
	stretches []stretch
}

// refused records a stretch [a, b) of waiting for the key.
func (hk *healKey) refused(r *healRec, a, b int64) {
	from := max(a, r.from)
	if b <= from {
		return
	}
	hk.stretches = append(hk.stretches, stretch{start: max(a, r.h), from: from, end: b})
}

// longest is the longest refused stretch before t: the stretches that
// began before t, each cut at t.
func (hk *healKey) longest(t int64) int64 {
	var n int64
	for _, st := range hk.stretches {
		if st.start < t {
			n = max(n, min(st.end, t)-st.from)
		}
	}
	return n
}

type candidate struct {
	hk *healKey
	at int64
}

type liveness struct {
	start, stop  int64
	stopped      bool
	within       int64 // recovers_within (0: none)
	bound        int64 // the lock's expiry bound (MODEL §11: when it is due back)
	falseMode    bool  // available: false
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

func (l *liveness) init(start int64, available *bool, within, bound int64) {
	l.start = start
	l.within, l.bound = within, bound
	l.falseMode = available != nil && !*available
	l.keys = map[string]*keyLive{}
	l.byFault = map[string]*healRec{}
	l.active = map[string]bool{}
	l.failedAt = -1
}

func (l *liveness) key(k string) *keyLive {
	kl := l.keys[k]
	if kl == nil {
		kl = &keyLive{name: k, since: -1, waitSince: -1, handFrom: -1}
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

// serve marks key k served at t.
func (hk *healKey) serve(at int64) {
	if hk.r < 0 || at < hk.r {
		hk.r = at
	}
	hk.relevant = true
}

// update opens or closes key k's gap at t (MODEL §11).
func (l *liveness) update(k string, kl *keyLive, t int64) {
	unav := !l.stopped && l.failedAt < 0 && kl.waiters > 0 && kl.holders == 0
	switch {
	case unav && kl.since < 0:
		kl.since = t
	case !unav && kl.since >= 0:
		l.gapEnd(kl, t)
	}
}

// gapEnd closes key k's gap at t.
func (l *liveness) gapEnd(kl *keyLive, t int64) {
	if g := t - kl.since; g > l.longest {
		l.longest = g
	}
	kl.since = -1
}

// waiters changes key k's count of live waiters by d at t, and ends a
// stretch of waiting in every open clear window when none is left.
func (l *liveness) waiters(kl *keyLive, d int, t int64) {
	kl.waiters += d
	switch {
	case kl.waiters > 0 && kl.waitSince < 0:
		kl.waitSince = t
	case kl.waiters <= 0 && kl.waitSince >= 0:
		for _, r := range l.open {
			r.key(kl.name).refused(r, kl.waitSince, t)
		}
		kl.waitSince = -1
	}
	l.update(kl.name, kl, t)
}

// advance is called before each event; the windows need nothing of it.
func (l *liveness) advance(int64) {}

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
	l.waiters(kl, 1, t)
	for _, r := range l.open {
		r.key(kl.name).relevant = true
	}
}

func (l *liveness) waitEnd(cl *client, kl *keyLive, t int64) {
	if !cl.live() {
		return
	}
	l.waiters(kl, -1, t)
}

// instanceDown is called while in is still live, before it pauses or dies.
func (l *liveness) instanceDown(in *instance, t int64) {
	for _, cl := range in.clients {
		for _, h := range cl.holds {
			h.kl.holders--
			l.update(h.key, h.kl, t)
		}
		if kl := cl.waits; kl != nil {
			l.waiters(kl, -1, t)
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
			l.waiters(kl, 1, t)
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
	if !l.falseMode {
		l.closeOpen(t, f.name, false)
	}
	l.active[f.name] = true
}

// closeOpen ends every open window at t.
func (l *liveness) closeOpen(t int64, next string, stop bool) {
	for _, r := range l.open {
		r.e, r.next, r.stopEnd = t, next, stop
		for k, kl := range l.keys {
			hk := r.key(k)
			hk.waitAtEnd = kl.waiters > 0
			if kl.waitSince >= 0 {
				hk.refused(r, kl.waitSince, t)
			}
		}
	}
	l.open = l.open[:0]
}

func (l *liveness) faultEnd(f *faultRec, t int64) {
	delete(l.active, f.name)
	if f.healErr != "" && l.failedAt < 0 {
		l.failedAt = t
		l.closeGaps(t)
	}
	r := &healRec{f: f, h: t, e: -1, keys: map[string]*healKey{}, from: t}
	if l.within == 0 {
		r.from = t + l.bound
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
	l.closeOpen(t, "", true)
	l.closeGaps(t)
	l.stopped = true
	l.stop = t
}

// closeGaps ends every gap at t.
func (l *liveness) closeGaps(t int64) {
	for _, kl := range l.keys {
		if kl.since >= 0 {
			l.gapEnd(kl, t)
		}
	}
}

// result judges availability against the expectation; it returns the
// unmet expectations and the undecided questions the scenario asked.
func (l *liveness) result(faults []*faultRec, available *bool, maxGap int64, asked bool) (Liveness, []string, []string) {
	out := Liveness{LongestGapMs: ms(l.longest), Verdict: Ok}
	var unmet, open []string
	undecided := false
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
			v, rec, at, keys := l.verdictOf(r)
			fl.Verdict, fl.RecoveredAfterMs = v, rec
			if !*available {
				fl.RecoveredAfterMs = -1 // MODEL §11: no recovery time for available: false
			}
			if at.f != f {
				fl.JudgedWith = at.f.name
			}
			where := f.name
			if at.f != f {
				where = fmt.Sprintf("%s (judged with %s, which followed before the lock could recover)", f.name, at.f.name)
			}
			switch v {
			case Unmet:
				unmet = append(unmet, l.unmetText(where, at, keys, !*available))
			case Undecided:
				undecided = true
				open = append(open, l.undecidedText(where, at, keys, !*available))
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
	case undecided:
		out.Verdict = Unknown
	}
	if !asked {
		// MODEL §12: a question the scenario did not ask, left open, is
		// reported unknown and takes nothing else down.
		open = nil
	}
	return out, unmet, open
}
