package verdict

import (
	"testing"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/history"
)

func trial(row string, n, trials, need int, status string) CaseSummary {
	return CaseSummary{Check: checker.Result{Status: checker.Status(status), Meta: history.CaseMeta{Name: row, Row: row, Trial: n, Trials: trials, Need: need}}}
}

func TestRowVerdicts(t *testing.T) {
	tests := []struct {
		name     string
		statuses []string
		need     int
		want     RowVerdict
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
		// An undecided trial could have been the unsafe one: enough met
		// trials do not make the row reproduced (MODEL §14).
		{"enough met, one invalid", []string{"ok", "invalid", "ok"}, 2, "invalid"},
		{"an unsafe trial wins over an invalid one", []string{"invalid", "violation", "ok"}, 1, "violation"},
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

// TestRowMissingTrials: a trial the history does not hold (a run
// interrupted while its cluster started) is undecided, like an invalid one;
// trials that disagree on the row, or repeat a number, make it invalid.
func TestRowMissingTrials(t *testing.T) {
	two := []CaseSummary{trial("r", 1, 3, 2, "ok"), trial("r", 2, 3, 2, "ok")}
	if got := rows(two); got[0].Verdict != "invalid" || got[0].Missing != 1 || got[0].Met != 2 {
		t.Errorf("3 trials declared, 2 present: %+v", got[0])
	}
	all := append(two, trial("r", 3, 3, 2, "ok"))
	if got := rows(all); got[0].Verdict != "reproduced" || got[0].Missing != 0 {
		t.Errorf("3 of 3 present: %+v", got[0])
	}
	dup := []CaseSummary{trial("r", 1, 2, 1, "ok"), trial("r", 1, 2, 1, "ok")}
	if got := rows(dup); got[0].Verdict != "invalid" || got[0].Why == "" {
		t.Errorf("a repeated trial: %+v", got[0])
	}
	mixed := []CaseSummary{trial("r", 1, 2, 1, "ok"), trial("r", 2, 3, 1, "ok")}
	if got := rows(mixed); got[0].Verdict != "invalid" {
		t.Errorf("trials disagreeing on the row: %+v", got[0])
	}
}
