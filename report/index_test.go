package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/verdict"
)

// TestWriteIndex: the index lists every results folder under the root,
// one and two levels deep, newest first, each linking to its report;
// results/latest (a link) is not listed twice; an unreadable summary is
// listed as such.
func TestWriteIndex(t *testing.T) {
	root := t.TempDir()
	put := func(rel string, started time.Time, rowVerdict verdict.RowVerdict) {
		dir := filepath.Join(root, rel)
		os.MkdirAll(dir, 0o755)
		s := verdict.Summary{Scenario: rel, Conditions: &verdict.Conditions{Started: started}, Rows: []verdict.RowSummary{{Row: "a", Verdict: rowVerdict}}, Cases: []verdict.CaseSummary{{}}}
		b, _ := json.Marshal(s)
		os.WriteFile(filepath.Join(dir, layout.SummaryFile), b, 0o644)
	}
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	put("old", t0, "reproduced")
	put("new", t0.Add(time.Hour), "violation")
	put("known-1/R1", t0.Add(30*time.Minute), "reproduced")
	os.Symlink("new", filepath.Join(root, "latest"))
	os.MkdirAll(filepath.Join(root, "broken"), 0o755)
	os.WriteFile(filepath.Join(root, "broken", layout.SummaryFile), []byte("{"), 0o644)
	if err := WriteIndex(root); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, IndexHTML))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	iNew, iKnown, iOld := strings.Index(page, `href="new/report.html"`), strings.Index(page, `href="known-1/R1/report.html"`), strings.Index(page, `href="old/report.html"`)
	if iNew < 0 || iKnown < 0 || iOld < 0 || !(iNew < iKnown && iKnown < iOld) {
		t.Errorf("order or links wrong (%d %d %d):\n%s", iNew, iKnown, iOld, page)
	}
	if strings.Contains(page, "latest/report.html") {
		t.Error("results/latest listed as a run of its own")
	}
	if !strings.Contains(page, "1 violation") || !strings.Contains(page, "summary.json unreadable") {
		t.Errorf("page lacks the tally or the broken folder:\n%s", page)
	}
}
