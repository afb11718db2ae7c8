package report

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/verdict"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden/")

// TestGoldenResults writes the results of a fixed history (hand-made cases:
// an overlap, a crash, a stale token, a safe run) and compares the report,
// the summary and the plots with the stored files. Run with -update after
// an intended change and review the diff.
func TestGoldenResults(t *testing.T) {
	sum, err := verdict.AnalyzeFile(filepath.Join("testdata", "golden.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	sum.Scenario, sum.Seed = "golden", 1
	dir := t.TempDir()
	if err := WriteAll(dir, sum); err != nil {
		t.Fatal(err)
	}
	files := []string{layout.ReportFile, layout.SummaryFile, layout.BenchFile, "latency.svg", "decision.svg", "timeline-overlap.svg"}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("%s not written: %v", f, err)
		}
		golden := filepath.Join("testdata", "golden", f)
		if *update {
			os.MkdirAll(filepath.Dir(golden), 0o755)
			if err := os.WriteFile(golden, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test ./report -update to create it)", err)
		}
		if !bytes.Equal(got, want) {
			os.WriteFile(golden+".got", got, 0o644)
			t.Errorf("%s differs from %s (got written next to it as .got)", f, golden)
		}
	}
	html, err := os.ReadFile(filepath.Join(dir, ReportHTML))
	if err != nil || !bytes.Contains(html, []byte("data:image/png;base64,")) || bytes.Contains(html, []byte(`src="latency.png"`)) {
		t.Errorf("report.html must embed its plots: %v", err)
	}
}
