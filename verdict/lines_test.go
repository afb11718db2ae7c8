package verdict

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/checker"
)

// TestCaseLineSaysOpenAndNA: the case line never headlines a count the
// case left unproven (MODEL §12, A4) or one that has no value (§6, A6).
func TestCaseLineSaysOpenAndNA(t *testing.T) {
	for _, tt := range []struct{ file, want, not string }{
		{"lost-lines-damage", "violations=open(1 in the record, 2 line(s) lost)", "violations=1"},
		{"lost-lines-store", "lost=0+open(1 in the record)", "lost=1"},
		{"lockless-gates", "violations=n/a", "violations=0"},
	} {
		sum, err := AnalyzeFile(filepath.Join("..", "checker", "testdata", "figures", tt.file+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		line := CaseLines(sum.Cases[0])[0]
		if !strings.Contains(line, tt.want) || strings.Contains(line, tt.not) {
			t.Errorf("%s: %q, want %q and no %q", tt.file, line, tt.want, tt.not)
		}
	}
}

// TestLostLinesLinKeys: in a record that lost worker lines no key's
// linearizability reads "violation" either (MODEL §8, §12).
func TestLostLinesLinKeys(t *testing.T) {
	sum, err := AnalyzeFile(filepath.Join("..", "checker", "testdata", "figures", "lost-lines-lin.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range sum.Cases[0].Linearizability.Keys {
		if v == "violation" {
			t.Errorf("key %s: %s", k, v)
		}
	}
}

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

// TestCaseLineSaysWhetherTheLockStayedDown: a fault judged for available:
// false has no recovery (MODEL §11): its line says whether the keys it
// took down stayed down, never "recovered never" beside "served again".
func TestCaseLineSaysWhetherTheLockStayedDown(t *testing.T) {
	sum, err := AnalyzeFile(filepath.Join("..", "checker", "testdata", "stays-unavailable.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Join(CaseLines(sum.Cases[0]), "\n")
	if !strings.Contains(lines, "stayed_down_after_") || strings.Contains(lines, "=never") {
		t.Errorf("lines:\n%s", lines)
	}
	for _, tt := range []struct {
		verdict, want string
	}{{checker.Met, "stayed_down_after_p=yes"}, {checker.Unmet, "stayed_down_after_p=no (served again)"}, {checker.Undecided, "stayed_down_after_p=unknown"}} {
		l := checker.Liveness{Faults: []checker.FaultLiveness{{Fault: "p", Verdict: tt.verdict, RecoveredAfterMs: -1, StaysDown: true}}}
		if got := Availability(l); !strings.HasSuffix(got, tt.want) {
			t.Errorf("%s: %q, want it to end %q", tt.verdict, got, tt.want)
		}
	}
}

// TestCaseLineSaysLateCalls: late releases and extensions (MODEL §6) and
// the service's answers are on the case line, and nothing when none.
func TestCaseLineSaysLateCalls(t *testing.T) {
	if got := LateText(checker.Late{}); got != "" {
		t.Errorf("none: %q", got)
	}
	if got, want := LateText(checker.Late{Releases: 9, ReleasesAccepted: 5, ReleasesRefused: 3, Extends: 1, ExtendsRefused: 1}),
		" late_releases=9(accepted 5, refused 3) late_extensions=1(accepted 0, refused 1)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
