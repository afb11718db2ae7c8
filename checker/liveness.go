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
	// Open says why each recovery left unknown cannot be told, whether or
	// not the scenario asked the question (MODEL §11, §12): unknown is
	// never ok, and never silent.
	Open []string `json:"open,omitempty"`
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
	// RecoveredAfterMs is how long the demand after the heal (where it was
	// judged) waited before the lock served it: per key, the longest
	// stretch of unbroken demand before the key was first served from its
	// first demand on, the largest over the keys demanded (MODEL §11; -1:
	// a demanded key was not served before the window ended, or no key
	// was demanded, or the recovery was not judged).
	RecoveredAfterMs float64 `json:"recovered_after_ms"`
	// ClearMs is how long the heal's clear window lasted: until the next
	// fault began or the case stopped (-1: healed at or after the stop).
	ClearMs float64 `json:"clear_ms"`
	// NextGrantMs is the time from the fault's start to the next grant to
	// a live client (of any key): how long the lock was out of service
	// after, say, its holder failed (-1: none before the end).
	NextGrantMs float64 `json:"next_grant_ms"`
	// StaysDown: the fault was judged for available: false (MODEL §11),
	// on whether the keys it took down stayed unavailable: met, they did;
	// unmet, one was served again. It has no recovery time.
	StaysDown bool `json:"stays_down,omitempty"`
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
	// handFrom is when an open hand-off of the key began (-1: none), by
	// the client whose release began it (MODEL §15).
	handFrom int64
	handBy   *client
	// lw is its linearizability window (MODEL §8), nil until it has one.
	lw *linWindow
	// dem are the stretches of demand for the key (MODEL §11), each of one
	// live client, recorded once closed (a client's asking, or its time
	// away on other keys once it came back), from the first heal on.
	dem []iv
	// serves are the instants and stretches the key was served (MODEL
	// §11): ok acquires of live clients (points), and the live stretches
	// of holds that turned out good; from the first heal on.
	serves []iv
}

// iv is a stretch of time [a, b); a point when a == b.
type iv struct{ a, b int64 }

// away is a key a client left unserved for another one (MODEL §11): if it
// comes back to it, its time away, while it was live, was demand too.
type away struct {
	kl   *keyLive
	from int64 // start of the open live stretch (-1: not live now)
	segs []iv
}

// healRec is one heal and its clear window (MODEL §11).
type healRec struct {
	f       *faultRec
	h, e    int64 // e: -1 while the window is open
	stopEnd bool  // the window ended at the stop
	next    string
	// waitAtEnd: the keys a live client waited for at the window's end.
	waitAtEnd map[string]bool
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
	// demand is, while a result is computed, each key's demand merged
	// (MODEL §11), and now the instant open stretches are counted to.
	demand map[*keyLive][]iv
	now    int64
	// waitingAtStop: a live client waited for a key at the stop.
	waitingAtStop bool
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
		kl = &keyLive{name: k, since: -1, handFrom: -1}
		l.keys[k] = kl
	}
	return kl
}

// recording: demand and service are recorded from the first heal on; what
// ended before it belongs to no clear window.
func (l *liveness) recording() bool { return len(l.heals) > 0 }

// demanded records a closed stretch [a, b) of one live client's demand for
// the key.
func (l *liveness) demanded(kl *keyLive, a, b int64) {
	if l.recording() {
		kl.dem = append(kl.dem, iv{a, b})
	}
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

// waiters changes key k's count of live waiters by d at t.
func (l *liveness) waiters(kl *keyLive, d int, t int64) {
	kl.waiters += d
	l.update(kl.name, kl, t)
}

// advance is called before each event; the windows need nothing of it.
func (l *liveness) advance(int64) {}

func (l *liveness) acquired(cl *client, key string, t int64) {
	l.acquisitions++
	if cl.live() && l.recording() {
		kl := l.key(key)
		kl.serves = append(kl.serves, iv{t, t})
	}
}

func (l *liveness) holdBegin(h *hold) {
	kl := h.kl
	kl.holds = append(kl.holds, h)
	h.segFrom = -1
	if h.cl.live() {
		kl.holders++
		h.segFrom = h.begin
		l.update(h.key, kl, h.begin)
	}
}

// segEnd closes a hold's live stretch at t.
func (l *liveness) segEnd(h *hold, t int64) {
	if h.segFrom >= 0 && l.recording() {
		h.segs = append(h.segs, iv{h.segFrom, t})
	}
	h.segFrom = -1
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
		l.segEnd(h, t)
		l.update(h.key, kl, t)
	}
}

// waitBegin: cl asks for kl from t (MODEL §11). If it comes back to a key
// it had left unserved, its time away was demand for it.
func (l *liveness) waitBegin(cl *client, kl *keyLive, t int64) {
	if !cl.live() {
		return
	}
	l.waiters(kl, 1, t)
	cl.askFrom = t
	for i, a := range cl.away {
		if a.kl != kl {
			continue
		}
		for _, s := range a.segs {
			l.demanded(kl, s.a, s.b)
		}
		if a.from >= 0 {
			l.demanded(kl, a.from, t)
		}
		cl.away = append(cl.away[:i], cl.away[i+1:]...)
		break
	}
}

// waitEnd: cl no longer asks for kl from t; moved: it went on to another
// key without getting this one.
func (l *liveness) waitEnd(cl *client, kl *keyLive, t int64, moved bool) {
	if !cl.live() {
		return
	}
	l.waiters(kl, -1, t)
	if cl.askFrom >= 0 {
		l.demanded(kl, cl.askFrom, t)
		cl.askFrom = -1
	}
	if moved && !l.stopped {
		cl.away = append(cl.away, &away{kl: kl, from: t})
	}
}

// clientGone: cl's instance died, or the case stopped, at t: its asking
// ends, and the keys it had left are no demand (it never came back).
func (l *liveness) clientGone(cl *client, t int64) {
	if cl.askFrom >= 0 && cl.waits != nil {
		l.demanded(cl.waits, cl.askFrom, t)
	}
	cl.askFrom = -1
	cl.away = nil
}

// instanceDown is called while in is still live, before it pauses or dies.
func (l *liveness) instanceDown(in *instance, t int64) {
	for _, cl := range in.clients {
		for _, h := range cl.holds {
			h.kl.holders--
			l.segEnd(h, t)
			l.update(h.key, h.kl, t)
		}
		if kl := cl.waits; kl != nil {
			l.waiters(kl, -1, t)
			if cl.askFrom >= 0 {
				l.demanded(kl, cl.askFrom, t)
			}
		}
		cl.askFrom = -1
		for _, a := range cl.away {
			if a.from >= 0 {
				a.segs = append(a.segs, iv{a.from, t})
			}
			a.from = -1
		}
	}
}

// instanceUp is called once in is live again.
func (l *liveness) instanceUp(in *instance, t int64) {
	for _, cl := range in.clients {
		for _, h := range cl.holds {
			h.kl.holders++
			h.segFrom = t
			l.update(h.key, h.kl, t)
		}
		if kl := cl.waits; kl != nil {
			l.waiters(kl, 1, t)
			cl.askFrom = t
		}
		for _, a := range cl.away {
			a.from = t
		}
	}
}

// resolved: a hold that turned out good served its key over its live
// stretches (MODEL §11, §5).
func (l *liveness) resolved(h *hold) {
	if h.good() && len(h.segs) > 0 {
		h.kl.serves = append(h.kl.serves, h.segs...)
	}
	h.segs = nil
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
			if kl.waiters > 0 {
				r.waitAtEnd[k] = true
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
	r := &healRec{f: f, h: t, e: -1, waitAtEnd: map[string]bool{}}
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
	for _, kl := range l.keys {
		for _, h := range kl.holds {
			if h.cl.live() && h.segFrom < 0 {
				h.segFrom = t
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
	for _, kl := range l.keys {
		l.waitingAtStop = l.waitingAtStop || kl.waiters > 0
	}
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

// mergeDemand is each key's demand (MODEL §11): the stretches of every
// live client's demand, those still open counted to now, joined where
// they meet or overlap. Stretches that meet at one instant are one: which
// of two events at an instant comes first is the merger's choice (A3).
func (l *liveness) mergeDemand(clients []*client, now int64) {
	l.now = now
	l.demand = map[*keyLive][]iv{}
	for _, kl := range l.keys {
		if len(kl.dem) > 0 {
			l.demand[kl] = append([]iv(nil), kl.dem...)
		}
	}
	if l.recording() {
		for _, cl := range clients {
			if cl.waits != nil && cl.askFrom >= 0 && cl.live() {
				l.demand[cl.waits] = append(l.demand[cl.waits], iv{cl.askFrom, now})
			}
		}
	}
	for kl, d := range l.demand {
		sort.Slice(d, func(i, j int) bool { return d[i].a < d[j].a || (d[i].a == d[j].a && d[i].b < d[j].b) })
		out := d[:1]
		for _, x := range d[1:] {
			if last := &out[len(out)-1]; x.a <= last.b {
				last.b = max(last.b, x.b)
				continue
			}
			out = append(out, x)
		}
		l.demand[kl] = out
	}
}

// result judges availability against the expectation; it returns the
// unmet expectations and the undecided questions the scenario asked.
func (l *liveness) result(faults []*faultRec, available *bool, maxGap int64, asked bool, clients []*client, now int64) (Liveness, []string, []string) {
	out := Liveness{LongestGapMs: ms(l.longest), Verdict: Ok}
	l.mergeDemand(clients, now)
	defer func() { l.demand = nil }()
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
		switch {
		case r != nil && l.unwatched(r):
			fl.ClearMs = -1 // MODEL §11: healed at or after the stop, no clear window (A6)
		case r != nil && r.e >= 0:
			fl.ClearMs = ms(r.e - r.h)
		}
		if r != nil && available != nil && f.judgeable() {
			v, rec, at, keys := l.verdictOf(r)
			fl.Verdict, fl.RecoveredAfterMs = v, rec
			if !*available {
				fl.RecoveredAfterMs = -1 // MODEL §11: no recovery time for available: false
				fl.StaysDown = true
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
	// Unknown is never ok (A7): what is open is said, asked or not.
	out.Open = open
	if !asked {
		// MODEL §12: a question the scenario did not ask, left open, is
		// reported unknown and takes nothing else down.
		open = nil
	}
	return out, unmet, open
}
