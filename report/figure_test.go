package report

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/internal/docmark"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/results.md's table of figures from the registry")

// TestFiguresRegistered: every figure has a name of its own, a known slot,
// a caption, a line for the results folder's table and a way to draw it.
func TestFiguresRegistered(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range Figures() {
		if f.Name == "" || seen[f.Name] {
			t.Errorf("figure %q: no name, or registered twice", f.Name)
		}
		seen[f.Name] = true
		if !slices.Contains(slots, f.Slot) {
			t.Errorf("figure %s: slot %q is not one of %v", f.Name, f.Slot, slots)
		}
		if f.Caption == "" || f.Contents == "" || f.Alt == "" || f.Draw == nil {
			t.Errorf("figure %s: caption, contents, alt text and Draw are all required", f.Name)
		}
	}
	for _, want := range []string{DecisionPlot, EnvelopePlot, OverlapPlot, LatencyPlot, ScatterPlot} {
		if !seen[want] {
			t.Errorf("figure %s is not registered", want)
		}
	}
}

// TestResultsDocListsEveryFigure: docs/results.md's table of a run's
// figures is the registry's (go test ./report -run ResultsDoc -update-docs).
func TestResultsDocListsEveryFigure(t *testing.T) {
	var b strings.Builder
	b.WriteString("| file | contents |\n|---|---|\n")
	for _, f := range Figures() {
		fmt.Fprintf(&b, "| `%s.png`, `.svg` | %s |\n", f.Name, f.Contents)
	}
	docmark.Hold(t, "../docs/results.md", "figures", b.String(), *updateDocs, "go test ./report -run ResultsDoc -update-docs")
}
