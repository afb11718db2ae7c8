package verdict

import (
	"path/filepath"
	"strings"
	"testing"
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
