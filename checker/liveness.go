package checker

import (
	"fmt"
	"time"
)

// Liveness is how available the lock was, per fault, and whether that met
// the case's expectations (history.Expectation: available, max_gap,
// recovers_within). A safe lock that nobody can take is not a pass.
type Liveness struct {
	Verdict Verdict `json:"verdict"`
	// LongestGapMs is the longest time with no successful acquisition of
	// any key, from the case start to its end.
	LongestGapMs float64         `json:"longest_gap_ms"`
	Faults       []FaultLiveness `json:"faults,omitempty"`
}

// FaultLiveness is the availability around one fault window.
type FaultLiveness struct {
	Fault  string `json:"fault"`
	Target string `json:"target"`
	// Acquisitions while the fault was in force, and from its heal to the
	// end of the case.
	AcquisitionsDuring int `json:"acquisitions_during"`
	AcquisitionsAfter  int `json:"acquisitions_after"`
	// RecoveredAfterMs is the time from the heal to the next successful
	// acquisition (-1: none before the case ended, or never healed).
	RecoveredAfterMs float64 `json:"recovered_after_ms"`
	// RemainingMs is how much of the case was left after the heal.
	RemainingMs float64 `json:"remaining_ms"`
	// Judged says whether the recovery was judged: only when no other
	// fault was still in force at the heal.
	Judged bool `json:"judged"`

	start, end int64 // end -1: not healed
	acqAtStart int
	acqAtEnd   int
}

// minRemaining is how much of a case must be left after a fault heals for
// "never acquired again" to count against the lock when the scenario gives
// no recovers_within: less than that is too short to tell.
const minRemaining = 2 * time.Second

type liveness struct {
	start, end, last int64
	stopped          bool // end is the workload's stop, not the case's end
	maxGap           int64
	acquisitions     int
	faults           []*FaultLiveness
	active           map[string]*FaultLiveness
	awaiting         []*FaultLiveness
}

func (l *liveness) init(start int64) {
	l.start, l.last, l.end = start, start, start
	l.active = map[string]*FaultLiveness{}
}

func (l *liveness) acquired(t int64) {
	if g := t - l.last; g > l.maxGap {
		l.maxGap = g
	}
	l.last = t
	l.acquisitions++
	for _, f := range l.awaiting {
		f.RecoveredAfterMs = float64(t-f.end) / 1e6
	}
	l.awaiting = l.awaiting[:0]
}

func (l *liveness) faultStart(name, target string, t int64) {
	f := &FaultLiveness{Fault: name, Target: target, start: t, end: -1, acqAtStart: l.acquisitions, RecoveredAfterMs: -1}
	l.faults = append(l.faults, f)
	l.active[name] = f
}

func (l *liveness) faultEnd(name string, t int64) {
	f := l.active[name]
	if f == nil {
		return
	}
	delete(l.active, name)
	f.end, f.acqAtEnd = t, l.acquisitions
	f.Judged = len(l.active) == 0
	l.awaiting = append(l.awaiting, f)
}

// caseStop is when the workload's time was up: the case's remaining time
// after a fault is measured to it (workers may take long to stop, their
// clients stuck in a library call, and that is not time the lock had).
func (l *liveness) caseStop(t int64) { l.end, l.stopped = t, true }

func (l *liveness) caseEnd(t int64) {
	if !l.stopped {
		l.end = t
	}
}

// result finishes the liveness figures and judges them against exp; it
// returns the unmet expectations.
func (l *liveness) result(available *bool, maxGap, within int64) (Liveness, []string) {
	if g := l.end - l.last; g > l.maxGap {
		l.maxGap = g
	}
	out := Liveness{LongestGapMs: float64(l.maxGap) / 1e6, Verdict: Ok}
	var unmet []string
	undecided := false
	for _, f := range l.faults {
		if f.end < 0 {
			f.AcquisitionsDuring = l.acquisitions - f.acqAtStart
		} else {
			f.AcquisitionsDuring = f.acqAtEnd - f.acqAtStart
			f.AcquisitionsAfter = l.acquisitions - f.acqAtEnd
			f.RemainingMs = float64(l.end-f.end) / 1e6
		}
		out.Faults = append(out.Faults, *f)
		if f.end < 0 || !f.Judged || available == nil {
			continue
		}
		recovered := f.RecoveredAfterMs >= 0
		remaining := time.Duration(l.end - f.end)
		switch {
		case !*available && recovered:
			unmet = append(unmet, fmt.Sprintf("expected the lock to stay unavailable after %s, but it was acquired again %.0fms after the fault healed", f.Fault, f.RecoveredAfterMs))
		case !*available:
		case within > 0 && recovered && f.RecoveredAfterMs > float64(within)/1e6:
			unmet = append(unmet, fmt.Sprintf("not live soon enough after %s: the next acquisition came %.0fms after the fault healed (recovers_within %s)", f.Fault, f.RecoveredAfterMs, time.Duration(within)))
		case recovered:
		case within > 0 && remaining >= time.Duration(within), within == 0 && remaining >= minRemaining:
			unmet = append(unmet, fmt.Sprintf("not live after %s healed: no acquisition in the %.1fs that followed", f.Fault, remaining.Seconds()))
		default:
			undecided = true // too little of the case was left to tell
		}
	}
	if maxGap > 0 && l.maxGap > maxGap {
		unmet = append(unmet, fmt.Sprintf("the lock went %.0fms without any acquisition (max_gap %s)", float64(l.maxGap)/1e6, time.Duration(maxGap)))
	}
	switch {
	case len(unmet) > 0:
		out.Verdict = Violation
	case undecided:
		out.Verdict = Unknown
	}
	return out, unmet
}
