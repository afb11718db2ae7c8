package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHTMLEmbedsEveryPlot: every image report.md references is inlined,
// whatever characters its case's name gives the file (a swept case's
// "[pause=2×lease]", which the markdown renderer escapes in the link).
func TestHTMLEmbedsEveryPlot(t *testing.T) {
	dir := t.TempDir()
	names := []string{"latency.png", "timeline-redis[pause=2×lease].t1.png", "timeline-a b.png"}
	var md strings.Builder
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("\x89PNG "+n), 0o644); err != nil {
			t.Fatal(err)
		}
		md.WriteString("![plot](" + strings.ReplaceAll(n, " ", "%20") + ")\n\n")
	}
	if err := WriteHTML(dir, []byte(md.String()), "t"); err != nil {
		t.Fatalf("WriteHTML: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ReportHTML))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(b), `<img src="data:image/png;base64,`); got != len(names) {
		t.Errorf("%d of %d images embedded:\n%s", got, len(names), b)
	}
}
