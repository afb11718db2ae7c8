package report

import (
	"path/filepath"
	"testing"
)

// TestLanes: a batch of two side-by-side trials is judged as two trials of
// its row, each seeing its own instances, keys and fault: in lane 1 the
// paused holder still believed when the waiter got the key (a violation);
// in lane 2 the holder had released before its instance was paused (none). The row
// expects violations in both: one of two, not reproduced.
func TestLanes(t *testing.T) {
	sum, err := AnalyzeFile(filepath.Join("testdata", "lanes.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Cases) != 2 {
		t.Fatalf("%d cases, want one per lane", len(sum.Cases))
	}
	l1, l2 := sum.Cases[0].Check, sum.Cases[1].Check
	if l1.Case != "p.t1" || l1.Violations != 1 || l1.Status != "ok" || l1.FaultsFired != 1 || l1.Meta.Trial != 1 {
		t.Errorf("lane 1: %s %s violations %d faults %d trial %d (%v)", l1.Case, l1.Status, l1.Violations, l1.FaultsFired, l1.Meta.Trial, l1.Invalid)
	}
	if l2.Case != "p.t2" || l2.Violations != 0 || l2.Status != "not-reproduced" || l2.Meta.Trial != 2 || l2.AcquiresOK != 3 {
		t.Errorf("lane 2: %s %s violations %d trial %d acquires %d (%v)", l2.Case, l2.Status, l2.Violations, l2.Meta.Trial, l2.AcquiresOK, l2.Invalid)
	}
	if len(sum.Rows) != 1 || sum.Rows[0].Verdict != "not-reproduced" || sum.Rows[0].Met != 1 || sum.Rows[0].Missing != 0 {
		t.Errorf("row: %+v", sum.Rows)
	}
}
