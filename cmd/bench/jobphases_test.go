package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/verdict"
)

// jobPhasesScenario aims a pause and a kill at each phase of a job
// (executor@<phase>), two trials side by side, against real Redis and
// PostgreSQL.
const jobPhasesScenario = `
name: jobs-phases
seed: 3
workload:
  duration: 3.5s
  instances: 4
  clients: 1
  keys: {count: 1}
  hold: {min: 20ms, max: 40ms}
  think: {min: 10ms, max: 30ms}
  ttl: 300ms
  acquire_timeout: 200ms
  op_timeout: 1s
  retry: {attempts: 1, base: 1ms, max: 1ms}
  abort_on_lost: false
  resource: false
  jobs: {count: 60, every: 40ms, effect: 5ms, after: 10ms, grace: 1s}
cases:
  - name: fenced-pause
    backend: redis
    strategy: lock
    strategy_options: {fenced: true}
    faults:
      - {type: pause, target: executor@before-effect, at: 200ms, for: 500ms}
      - {type: pause, target: executor@during-effect, at: 1s, for: 500ms}
      - {type: pause, target: executor@after-effect, at: 1.8s, for: 500ms}
    expect: {violations: any, duplicate_effects: any, stale_effects_accepted: false}
    trials: {count: 2, side_by_side: 2, spread: false}
  - name: queue-kill
    strategy: skip-locked
    faults:
      - {type: kill, target: executor@before-effect, at: 200ms}
      - {type: kill, target: executor@during-effect, at: 700ms}
      - {type: kill, target: executor@after-effect, at: 1.2s}
    expect: {duplicate_effects: false, lost_jobs: false}
    trials: {count: 2, side_by_side: 2}
`

// TestJobFaultsAtEachPhase: each fault aimed at a phase of a job meets an
// executor in that phase (the worker holds it there until the fault has
// taken effect), in every trial of a batch run side by side; each trial
// is judged apart, with jobs of its own; a killed queue executor's
// transaction rolls back and its job is taken up again (exactly once, not
// stuck for good); and bench check judges the history from its file alone.
func TestJobFaultsAtEachPhase(t *testing.T) {
	needRedis(t)
	dir := filepath.Join(t.TempDir(), "out")
	stdout, stderr, err := runInProcess(t, "run", "-dir", dir, writeScenario(t, jobPhasesScenario))
	if err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	sum := readSummary(t, dir)
	if len(sum.Cases) != 4 {
		t.Fatalf("%d trials judged, want 4 (two batches of two lanes)", len(sum.Cases))
	}
	for _, c := range sum.Cases {
		r := c.Check
		j := r.Jobs
		if !r.Valid || j == nil {
			t.Errorf("%s: invalid (%v) or no jobs", r.Case, r.Invalid)
			continue
		}
		t.Logf("%s: %s", r.Case, verdict.JobsLine(j))
		if j.Due != 60 || r.Exposures != 3 {
			t.Errorf("%s: %d jobs due, %d exposures: want 60 of its own and 3", r.Case, j.Due, r.Exposures)
		}
		for _, f := range j.Faults {
			if f.Aimed == "" || f.Phases[f.Aimed] == 0 {
				t.Errorf("%s: fault %s aimed at %q met %v", r.Case, f.Fault, f.Aimed, f.Phases)
			}
		}
		if j.Stuck < 3 {
			t.Errorf("%s: %d stuck attempts, want one per fault at least", r.Case, j.Stuck)
		}
		switch {
		case strings.HasPrefix(r.Case, "fenced-pause") && j.StaleAccepted != 0:
			t.Errorf("%s: the fence accepted %d stale effects", r.Case, j.StaleAccepted)
		case strings.HasPrefix(r.Case, "queue-kill") && (j.Duplicates != 0 || j.Lost != 0 || j.StuckOpen != 0):
			t.Errorf("%s: a killed executor's job: %d duplicates, %d lost, %d never taken up", r.Case, j.Duplicates, j.Lost, j.StuckOpen)
		}
	}
	d := verdict.NewJobDecision(sum)
	if len(d.Rows) != 2 {
		t.Errorf("jobs decision view: %d rows, want 2", len(d.Rows))
	}
	for _, row := range d.Rows {
		for _, cell := range row.Cells {
			if cell.PhaseExposures[checker.PhaseBefore] != 2 || cell.PhaseExposures[checker.PhaseDuring] != 2 || cell.PhaseExposures[checker.PhaseAfter] != 2 {
				t.Errorf("%s × %s: exposures by phase %v, want 2 each", row.Variant, cell.Class, cell.PhaseExposures)
			}
		}
	}
	checkOut, _, _ := runInProcess(t, "check", filepath.Join(dir, layout.HistoryFile))
	for _, c := range sum.Cases {
		if line := strings.TrimSpace(verdict.JobsLine(c.Check.Jobs)); !strings.Contains(checkOut, line) {
			t.Errorf("bench check does not reproduce %s's jobs line %q", c.Check.Case, line)
		}
	}
}
