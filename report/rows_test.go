package report

import (
	"testing"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/internal/history"
)

func trial(row string, n, trials, need int, status string) CaseSummary {
	return CaseSummary{Check: checker.Result{Status: status, Meta: history.CaseMeta{Name: row, Row: row, Trial: n, Trials: trials, Need: need}}}
}

func TestRowVerdicts(t *testing.T) {
	tests := []struct {
		name     string
		statuses []string
		need     int
		want     string
	}{
		{"all met", []string{"ok", "ok", "ok"}, 3, "reproduced"},
		{"enough met", []string{"ok", "not-reproduced", "ok"}, 2, "reproduced"},
		{"too few met", []string{"ok", "not-reproduced", "not-reproduced"}, 2, "not-reproduced"},
		{"undecided because invalid", []string{"ok", "invalid", "not-reproduced"}, 2, "invalid"},
		{"unexpected violation", []string{"ok", "violation", "ok"}, 3, "violation"},
		// One unsafe trial fails a row that expects safety, however many
		// others met the expectation.
		{"one unsafe trial of three, need 2", []string{"ok", "violation", "ok"}, 2, "violation"},
		{"one trial not live", []string{"ok", "unavailable", "ok"}, 2, "unavailable"},
		{"single invalid", []string{"unknown"}, 1, "invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cases []CaseSummary
			for i, st := range tt.statuses {
				cases = append(cases, trial("r", i+1, len(tt.statuses), tt.need, st))
			}
			got := rows(cases)
			if len(got) != 1 || got[0].Verdict != tt.want {
				t.Errorf("rows = %+v, want one row %s", got, tt.want)
			}
		})
	}
}
