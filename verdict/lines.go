package verdict

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockbench/lockbench/checker"
)

var statusWords = map[checker.Status]string{
	checker.StatusOK:            "✓ as expected",
	checker.StatusViolation:     "✗ UNSAFE (unexpected)",
	checker.StatusUnavailable:   "✗ NOT LIVE (unexpected)",
	checker.StatusNotReproduced: "✗ expected outcome not reproduced",
	checker.StatusInvalid:       "✗ invalid run",
	checker.StatusUnknown:       "? incomplete",
}

// StatusWords says a case's status in words, with its mark.
func StatusWords(s checker.Status) string { return statusWords[s] }

// Verdicts counts rows by verdict.
func (s *Summary) Verdicts() map[RowVerdict]int {
	out := map[RowVerdict]int{}
	for _, r := range s.Rows {
		out[r.Verdict]++
	}
	return out
}

// Availability says in a few words how live the lock was: the longest gap
// (MODEL §11), and how soon it recovered after each fault healed; a
// recovery the case could not tell is said to be unknown (unknown is
// never silent, MODEL §11). A fault judged for available: false is judged
// on whether its keys stayed down, not on a recovery: it says that.
func Availability(l checker.Liveness) string {
	out := fmt.Sprintf("longest_gap=%.0fms", l.LongestGapMs)
	for _, f := range l.Faults {
		switch {
		case f.StaysDown:
			said := map[string]string{checker.Met: "yes", checker.Unmet: "no (served again)", checker.Undecided: "unknown"}[f.Verdict]
			if said != "" {
				out += fmt.Sprintf(" stayed_down_after_%s=%s", f.Fault, said)
			}
		case f.Verdict == checker.Undecided:
			out += fmt.Sprintf(" recovered_after_%s=unknown", f.Fault)
		case f.RecoveredAfterMs >= 0:
			out += fmt.Sprintf(" recovered_after_%s=%.0fms", f.Fault, f.RecoveredAfterMs)
		case f.Verdict == checker.Unmet:
			out += fmt.Sprintf(" recovered_after_%s=never", f.Fault)
		}
	}
	return out
}

// ViolationsText says a case's violations: its count, "open" in a record
// that lost worker lines (MODEL §12, A4: the lost lines could undo every
// overlap, or add one), "n/a" for a lockless backend (§6, A6).
func ViolationsText(r checker.Result) string {
	switch u := r.Unproven; {
	case r.Meta.Lockless:
		return "n/a"
	case u != nil:
		return fmt.Sprintf("open(%d in the record, %d line(s) lost)", u.Violations, u.Lines)
	}
	return fmt.Sprint(r.Violations)
}

// LateText says a case's late releases and extensions (MODEL §6) and how
// the service answered them, or nothing when there were none.
func LateText(l checker.Late) string {
	out := ""
	if l.Releases > 0 {
		out += fmt.Sprintf(" late_releases=%d(accepted %d, refused %d)", l.Releases, l.ReleasesAccepted, l.ReleasesRefused)
	}
	if l.Extends > 0 {
		out += fmt.Sprintf(" late_extensions=%d(accepted %d, refused %d)", l.Extends, l.ExtendsAccepted, l.ExtendsRefused)
	}
	return out
}

// LostText says a case's lost updates, with those the record shows and
// its lost lines could explain (MODEL §9, §12) as open.
func LostText(r checker.Result) string {
	if u := r.Unproven; u != nil && u.StoreLost+u.StorePhantom > 0 {
		return fmt.Sprintf("%d+open(%d in the record)", r.Resource.LostUpdates, u.StoreLost+u.StorePhantom)
	}
	return fmt.Sprint(r.Resource.LostUpdates)
}

// Verdict lines for the terminal, one per case.
func (s *Summary) Lines() []string {
	var out []string
	for _, c := range s.Cases {
		out = append(out, CaseLines(c)...)
	}
	for _, r := range s.Rows {
		if r.Trials > 1 {
			out = append(out, fmt.Sprintf("row %-20s %s: expected outcome in %d/%d trials (need %d), %d invalid", r.Row, r.Verdict, r.Met, r.Trials, r.Need, r.Invalid))
		}
	}
	return append(out, s.JobsRowLines()...)
}

// CaseLines is one case's verdict line, with its unmet expectations,
// invalid reasons and thresholds under it.
func CaseLines(c CaseSummary) []string {
	r, m := c.Check, c.Metrics
	p99 := "—"
	if m.AcquireLatency.Count > 0 {
		p99 = fmt.Sprintf("%.2fms", m.AcquireLatency.P99)
	}
	violations, lost := ViolationsText(r), LostText(r)
	out := []string{fmt.Sprintf("%-24s %-14s %-34s violations=%s stale_accepted=%d lost=%s stale_rejected=%d token_regressions=%d%s | acquisitions=%d %s | acq/s=%.0f p99=%s",
		r.Case, r.Backend, statusWords[r.Status], violations, r.Resource.StaleAccepted, lost, r.Resource.StaleRejected,
		r.TokenRegressions, LateText(r.Late), r.AcquiresOK, Availability(r.Liveness), m.AcquiresPerSec, p99)}
	if j := r.Jobs; j != nil {
		out = append(out, "    "+JobsLine(j))
	}
	for _, u := range r.Unmet {
		out = append(out, "    unmet: "+u)
	}
	for _, i := range r.Invalid {
		out = append(out, "    invalid: "+i)
	}
	for _, o := range r.Liveness.Open {
		if !slices.Contains(r.Invalid, o) { // an open question asked is already invalid
			out = append(out, "    unknown: "+o)
		}
	}
	for _, v := range c.Thresholds {
		out = append(out, "    "+v.String())
	}
	return out
}

// Tally sums the run up in one line: rows by verdict.
func (s *Summary) Tally() string {
	v := s.Verdicts()
	if len(s.Rows) == 0 {
		return ""
	}
	parts := []string{fmt.Sprintf("%d as expected", v[RowReproduced])}
	for _, k := range []RowVerdict{RowViolation, RowUnavailable, RowNotReproduced, RowInvalid} {
		if v[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", v[k], k))
		}
	}
	if n := s.ThresholdsFailed(); n > 0 {
		parts = append(parts, fmt.Sprintf("%d threshold(s) failed", n))
	}
	return fmt.Sprintf("%d row(s) from %d case(s): %s", len(s.Rows), len(s.Cases), strings.Join(parts, ", "))
}

// JobsLine is a job workload's figures in one line (MODEL §20): an
// unknown count is "?", a latency with no sample "—".
func JobsLine(j *checker.Jobs) string {
	lost, touchedLost := fmt.Sprint(j.Lost), fmt.Sprint(j.TouchedLost)
	if j.Lost < 0 {
		lost, touchedLost = "?", "?"
	}
	ms := func(p *float64) string {
		if p == nil {
			return "—"
		}
		return fmt.Sprintf("%.0fms", *p)
	}
	line := fmt.Sprintf("jobs %s: %d due, duplicates=%d (concurrent=%d sequential=%d unsplit=%d) stale_accepted=%d stale_refused=%d absorbed=%d lost=%s | touched=%d %v duplicated=%d lost=%s stuck=%d (max %s, %d never taken up) | attempts=%d effects_after_lost=%d | p50=%s p99=%s jobs/s=%.1f",
		j.Strategy, j.Due, j.Duplicates, j.Concurrent, j.Sequential, j.Unsplit, j.StaleAccepted, j.RefusedStale, j.RefusedDuplicate, lost,
		j.Touched, j.TouchedPhases, j.TouchedDuplicated, touchedLost, j.Stuck, ms(j.StuckMaxMs), j.StuckOpen, j.Attempts, j.EffectsAfterLost, ms(j.LatencyP50Ms), ms(j.LatencyP99Ms), j.PerSec)
	if p := j.Periods; p != nil {
		missed := fmt.Sprint(p.Missed)
		if p.Missed < 0 {
			missed = "?"
		}
		line += fmt.Sprintf(" | periods: run twice=%d missed=%s delay p50=%s p99=%s most in one=%d | tries=%d served stale=%d fresh=%d wait p50=%s p99=%s",
			j.DuplicatedJobs, missed, ms(p.DelayP50Ms), ms(p.DelayP99Ms), p.MostInOne, p.Tries, p.ServedStale, p.ServedFresh, ms(p.WaitP50Ms), ms(p.WaitP99Ms))
	}
	return line
}
