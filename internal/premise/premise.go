// Package premise checks the timing premises of tests against real
// servers and real processes: a test whose assertion needs a step to
// finish within a lease, a timeout or a fault's window measures whether it
// did, instead of assuming the machine was quick enough.
//
// A premise that held leaves the assertion standing; one that did not is
// no finding about the code under test, only about the machine's speed at
// that moment: Retry then runs the attempt again with a wider margin (a
// longer lease, a longer window), a bounded number of times, and reports
// the premise unmet as a skip with every attempt's figures when even the
// widest one was not enough. A test run through Retry therefore never
// fails for the machine's speed, and never passes without one attempt
// whose premise held.
package premise

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Retry calls try with each margin in turn until one returns "" (its
// premise held, and its assertions were made) or fails the test (a real
// finding: no retry hides it). A non-empty return says, with figures,
// which premise did not hold at that margin ("the second acquire came
// 512ms after the first, past the 400ms lease"); the next, wider margin
// is tried. When every margin's premise went unmet, the test is skipped
// with all the figures.
func Retry(t testing.TB, margins []time.Duration, try func(margin time.Duration) (unmet string)) {
	t.Helper()
	var figures []string
	for _, m := range margins {
		unmet := try(m)
		if unmet == "" || t.Failed() {
			return
		}
		t.Logf("timing premise unmet with margin %s: %s", m, unmet)
		figures = append(figures, fmt.Sprintf("%s: %s", m, unmet))
	}
	t.Skipf("timing premise unmet at every margin, the machine too slow for it (not a finding about the code): %s", strings.Join(figures, "; "))
}

// Clock measures the time since an attempt's step began, to check a
// premise against it.
type Clock struct{ start time.Time }

// Start starts a Clock now.
func Start() Clock { return Clock{time.Now()} }

// Since is the time since the Clock started.
func (c Clock) Since() time.Duration { return time.Since(c.start) }

// Within reports whether less than d has passed since the Clock started,
// with the elapsed time for the figures.
func (c Clock) Within(d time.Duration) (bool, time.Duration) {
	e := time.Since(c.start)
	return e < d, e
}
