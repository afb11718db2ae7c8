package verdict

import (
	"strings"
	"testing"

	"github.com/lockbench/lockbench/checker"
)

// TestCaseLinesSayAnUnknownRecovery: a case whose recovery was never
// watched (healed after the stop) keeps the status it had (the question
// was not asked), but its line says the recovery is unknown, and why
// (MODEL §11: unknown is never silent).
func TestCaseLinesSayAnUnknownRecovery(t *testing.T) {
	why := "the recovery after kill-1 is unknown: it healed 2s after the case stopped, so the case never watched it"
	c := CaseSummary{Check: checker.Result{Case: "c", Status: checker.StatusOK, Liveness: checker.Liveness{Verdict: checker.Unknown,
		Faults: []checker.FaultLiveness{{Fault: "kill-1", Verdict: checker.Undecided, RecoveredAfterMs: -1, ClearMs: -1}}, Open: []string{why}}}}
	lines := CaseLines(c)
	if len(lines) != 2 || !strings.Contains(lines[0], "✓ as expected") || !strings.Contains(lines[0], "recovered_after_kill-1=unknown") || lines[1] != "    unknown: "+why {
		t.Errorf("lines:\n%s", strings.Join(lines, "\n"))
	}
	// asked, the same question makes the case invalid, said once
	c.Check.Status, c.Check.Invalid = checker.StatusInvalid, []string{why}
	if lines := CaseLines(c); len(lines) != 2 || lines[1] != "    invalid: "+why {
		t.Errorf("asked:\n%s", strings.Join(lines, "\n"))
	}
}
