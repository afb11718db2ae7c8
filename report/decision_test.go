package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/verdict"
)

// TestDecisionRendering: the Markdown table and the image say each cell's
// outcome in words, its evidence and its cost without faults.
func TestDecisionRendering(t *testing.T) {
	pause := []history.ScheduledAt{{FaultCore: history.FaultCore{Type: "pause", Target: "holder"}, Class: history.ClassPause}}
	mk := func(backend string, faults []history.ScheduledAt, viol, rejected int) verdict.CaseSummary {
		r := checker.Result{Case: backend, Backend: backend, Valid: true, Decided: true, Violations: viol, AcquiresOK: 10, Status: checker.StatusOK,
			Meta: history.CaseMeta{Backend: backend, Fenced: true, Faults: faults}, OverlapMaxMs: 12, ZombieMaxMs: 900}
		if len(faults) > 0 {
			r.Exposures = 1
		}
		r.Resource.StaleRejected = rejected
		return verdict.CaseSummary{Check: r}
	}
	clean := mk("etcd", nil, 0, 0)
	clean.Metrics.AcquireLatency = checker.Percentiles{Count: 100, P50: 2, P99: 9}
	d := verdict.NewDecision(&verdict.Summary{Cases: []verdict.CaseSummary{clean, mk("etcd", pause, 2, 2), mk("postgres", pause, 0, 0)}})
	var buf bytes.Buffer
	if err := WriteDecisionMarkdown(&buf, d); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"◐ unsafe, fenced (2 overlaps, 2 late writes stopped)", "two holders in 1 of 1", "zombie up to 900 ms",
		"| postgres", "2.00 / 9.00", "too few to call it safe", "—"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, buf.String())
		}
	}
	if err := WriteDecisionPlot(t.TempDir()+"/decision", d); err != nil {
		t.Fatal(err)
	}
}
