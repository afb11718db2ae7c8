package report

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/verdict"
)

// TestEnvelope: the points of a swept case, over their trials, become one
// line per backend, sorted by magnitude, each point with its rate of two
// holders; the plot is written.
func TestEnvelope(t *testing.T) {
	var cases []verdict.CaseSummary
	add := func(backend string, x float64, value string, trial, violations int) {
		row := backend + "-pause[for=" + value + "]"
		cases = append(cases, verdict.CaseSummary{Check: checker.Result{Case: row, Backend: backend, Status: checker.StatusOK, Valid: true, Decided: true, Violations: violations,
			Meta: history.CaseMeta{Name: row, Backend: backend, Row: row, Trial: trial, Trials: 4, Need: 1,
				Sweep: &history.SweepPoint{Case: backend + "-pause", Labels: []string{"for"}, Values: []string{value}, X: []float64{x}}}}})
	}
	for trial := 1; trial <= 4; trial++ {
		add("redis", 2, "2×lease", trial, 1)
		add("redis", 0.5, "0.5×lease", trial, 0)
		add("etcd", 0.5, "0.5×lease", trial, 0)
		v := 0
		if trial <= 2 {
			v = 3
		}
		add("etcd", 2, "2×lease", trial, v)
	}
	s := verdict.Recount(&verdict.Summary{Cases: cases})
	lines := verdict.Envelope(s)
	if len(lines) != 2 || lines[0].Backend != "redis" || len(lines[0].Points) != 2 || lines[0].Points[0].X != 0.5 {
		t.Fatalf("lines: %+v", lines)
	}
	if r := lines[1].Points[1].Rate; r.Hits != 2 || r.Of != 4 || r.Low <= 0 || r.High >= 1 {
		t.Errorf("etcd at 2×lease: %+v", r)
	}
	dir := t.TempDir()
	ok, err := WriteEnvelopePlot(filepath.Join(dir, EnvelopePlot), s)
	if err != nil || !ok {
		t.Fatalf("plot: %v %v", ok, err)
	}
	if st, err := os.Stat(filepath.Join(dir, EnvelopePlot+".png")); err != nil || st.Size() == 0 {
		t.Errorf("no png: %v", err)
	}
}
