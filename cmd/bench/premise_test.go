package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/verdict"
)

// premises collects the timing premises of an integration test that were
// unmet: each check that rests on one is left out, the test's other checks
// all run, and the test is then skipped with the figures (never passed
// without having tested what it names, never failed for the machine's
// speed).
type premises struct{ unmet []string }

// acquisitions checks the premise of a check that needs a case to have
// made want acquisitions (enough samples to mean something): true when it
// did. A case short of them is a finding when its clients were not slowed
// (their holds stayed near the workload's longest, hold): the lock did not
// grant. One whose holds stretched far past it ran on a machine too busy
// for the case's duration: the premise unmet, with the figures.
func (p *premises) acquisitions(t errorer, c verdict.CaseSummary, want int, hold time.Duration) bool {
	t.Helper()
	return p.enough(t, c, fmt.Sprintf("%d acquisitions in %.1fs", c.Metrics.Acquisitions, c.Metrics.DurationS), c.Metrics.Acquisitions, want, hold)
}

// enough is acquisitions for a count of the case's own (what says what
// was counted, with its figure).
func (p *premises) enough(t errorer, c verdict.CaseSummary, what string, n, want int, hold time.Duration) bool {
	t.Helper()
	m := c.Metrics
	if n >= want {
		return true
	}
	figures := fmt.Sprintf("%s: %s, fewer than the %d its checks need; holds p50 %.0fms (the workload's longest %s), acquire latency p50 %.0fms, %d acquires failed, %d unknown",
		c.Check.Case, what, want, m.HoldTime.P50, hold, m.AcquireLatency.P50, m.AcquiresFailed, m.AcquiresUnknown)
	if stretched(m.HoldTime.P50, hold) {
		p.unmet = append(p.unmet, figures+": the machine slowed the clients themselves")
		return false
	}
	t.Errorf("%s, and the clients were not slowed: the lock did not grant", figures)
	return false
}

// errorer is what acquisitions reports a finding to (a *testing.T).
type errorer interface {
	Helper()
	Errorf(format string, args ...any)
}

// stretched reports whether holds of at most hold had a median of p50ms:
// three times as long and 20 ms more is no lock's doing (a hold is the
// client's own sleep, and the resource's round trip), but the machine's.
func stretched(p50ms float64, hold time.Duration) bool {
	return time.Duration(p50ms*float64(time.Millisecond)) > 3*hold+20*time.Millisecond
}

// done skips the test when a premise was unmet, after its other checks
// ran (a test that failed stays failed).
func (p *premises) done(t *testing.T) {
	t.Helper()
	if len(p.unmet) > 0 {
		t.Skipf("timing premise unmet, the machine too slow for it (not a finding about the code): %s", strings.Join(p.unmet, "; "))
	}
}

// TestPremisesSkipOnlyTheSlow: a case short of acquisitions whose holds
// stretched is the machine's (a skip, with the figures); one whose holds
// kept their length is the lock's (a failure); enough is enough.
func TestPremisesSkipOnlyTheSlow(t *testing.T) {
	short := func(holdP50 float64) verdict.CaseSummary {
		var c verdict.CaseSummary
		c.Check.Case = "c"
		c.Metrics.Acquisitions, c.Metrics.DurationS = 3, 2.5
		c.Metrics.HoldTime.P50 = holdP50
		return c
	}
	var inner *testing.T
	t.Run("slow machine", func(t *testing.T) {
		inner = t
		var p premises
		if p.acquisitions(t, short(200), 20, 5*time.Millisecond) {
			t.Error("3 acquisitions taken for 20")
		}
		p.done(t)
		t.Error("done returned with a premise unmet")
	})
	if !inner.Skipped() || inner.Failed() {
		t.Errorf("holds stretched 40 times: skipped %v, failed %v; want a skip", inner.Skipped(), inner.Failed())
	}
	var found findings
	var p premises
	if p.acquisitions(&found, short(4), 20, 5*time.Millisecond) || len(p.unmet) != 0 || len(found) != 1 || !strings.Contains(found[0], "the lock did not grant") {
		t.Errorf("holds of their length, few acquisitions: unmet %q, found %q; want a finding", p.unmet, found)
	}
	var enough verdict.CaseSummary
	enough.Metrics.Acquisitions = 20
	if !p.acquisitions(t, enough, 20, 5*time.Millisecond) {
		t.Error("20 of 20 not enough")
	}
}

// findings records what acquisitions reports.
type findings []string

func (f *findings) Helper() {}
func (f *findings) Errorf(format string, args ...any) {
	*f = append(*f, fmt.Sprintf(format, args...))
}
