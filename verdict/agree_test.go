package verdict

import (
	"strings"
	"testing"
)

func TestAgree(t *testing.T) {
	row := func(name string, verdict RowVerdict, hits, of int) RowSummary {
		return RowSummary{Row: name, Backend: "etcd", Verdict: verdict, TwoHolders: NewRate(hits, of)}
	}
	run := func(id string, rows ...RowSummary) *Summary {
		d := &Decision{Rows: []DecisionRow{{Backend: "etcd", Cells: map[string]*DecisionCell{}}}}
		for _, r := range rows {
			d.Rows[0].Cells[r.Row] = &DecisionCell{Class: r.Row, TwoHolders: r.TwoHolders, Damage: NewRate(0, r.TwoHolders.Of)}
		}
		return &Summary{RunID: id, Rows: rows, Decision: d}
	}
	tests := []struct {
		name               string
		runs               []*Summary
		flipped, disjoint  int
		agreed             bool
		wantLine, wantNone string
	}{
		{"same", []*Summary{run("a", row("p", "reproduced", 10, 10)), run("b", row("p", "reproduced", 9, 10))}, 0, 0, true, "", ""},
		// 10 of 10 (≥72%) against 0 of 10 (≤28%): the envelope's etcd point
		// of issue 28, row and cell.
		{"disjoint", []*Summary{run("a", row("p", "reproduced", 10, 10)), run("b", row("p", "reproduced", 0, 10))}, 0, 2, false, "row p: two holders, intervals disjoint: 10 of 10, ≥ 72% | 0 of 10, ≤ 28%", ""},
		{"flipped", []*Summary{run("a", row("p", "reproduced", 6, 10)), run("b", row("p", "not-reproduced", 4, 10)), run("c", row("p", "reproduced", 7, 10))}, 1, 0, false, "row p: verdict flipped: reproduced | not-reproduced | reproduced", "disjoint"},
		// A row in one run only says nothing about agreement.
		{"one run only", []*Summary{run("a", row("p", "reproduced", 10, 10)), run("b", row("q", "violation", 0, 10))}, 0, 0, true, "", ""},
		// A rate without decided trials has no interval to compare.
		{"no value", []*Summary{run("a", row("p", "invalid", 0, 0)), run("b", row("p", "invalid", 0, 0)), run("c", row("p", "invalid", 5, 5))}, 0, 0, true, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Agree(tt.runs...)
			if a.Flipped != tt.flipped || a.Disjoint != tt.disjoint || a.Agreed() != tt.agreed {
				t.Errorf("flipped %d disjoint %d agreed %v; want %d %d %v\n%v", a.Flipped, a.Disjoint, a.Agreed(), tt.flipped, tt.disjoint, tt.agreed, a.Lines())
			}
			lines := strings.Join(a.Lines(), "\n")
			if tt.wantLine != "" && !strings.Contains(lines, tt.wantLine) {
				t.Errorf("lines do not say %q:\n%s", tt.wantLine, lines)
			}
			if tt.wantNone != "" && strings.Contains(lines, tt.wantNone) {
				t.Errorf("lines say %q:\n%s", tt.wantNone, lines)
			}
			if tt.agreed && len(a.Lines()) != 0 {
				t.Errorf("agreed runs with lines: %v", a.Lines())
			}
		})
	}
}
