package verdict

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/checker"
)

// TestLanes: a batch of two side-by-side trials is judged as two trials of
// its row, each seeing its own instances, keys and fault: in lane 1 the
// paused holder still believed when the waiter got the key (a violation);
// in lane 2 the holder had released before its instance was paused, so
// the pause missed its aim (MODEL §10) and the trial is invalid. The row
// cannot be reproduced with a trial that could have been anything.
func TestLanes(t *testing.T) {
	sum, err := AnalyzeFile(filepath.Join("testdata", "lanes.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Cases) != 2 {
		t.Fatalf("%d cases, want one per lane", len(sum.Cases))
	}
	l1, l2 := sum.Cases[0].Check, sum.Cases[1].Check
	if l1.Case != "p.t1" || l1.Violations != 1 || l1.Status != checker.StatusOK || l1.FaultsFired != 1 || l1.Meta.Trial != 1 || l1.Exposures != 1 {
		t.Errorf("lane 1: %s %s violations %d faults %d trial %d exposures %d (%v)", l1.Case, l1.Status, l1.Violations, l1.FaultsFired, l1.Meta.Trial, l1.Exposures, l1.Invalid)
	}
	if l2.Case != "p.t2" || l2.Violations != 0 || l2.Status != checker.StatusInvalid || l2.Meta.Trial != 2 || l2.AcquiresOK != 3 || l2.Exposures != 0 ||
		len(l2.Invalid) != 1 || !strings.Contains(l2.Invalid[0], "missed its aim") {
		t.Errorf("lane 2: %s %s violations %d trial %d acquires %d exposures %d (%v)", l2.Case, l2.Status, l2.Violations, l2.Meta.Trial, l2.AcquiresOK, l2.Exposures, l2.Invalid)
	}
	r := sum.Rows
	if len(r) != 1 || r[0].Verdict != RowInvalid || r[0].Met != 1 || r[0].Missing != 0 || r[0].Decided != 1 || r[0].TwoHolders.String() != "1 of 1, ≥ 21%" {
		t.Errorf("row: %+v", r)
	}
}
