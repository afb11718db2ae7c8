package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/internal/premise"
	"github.com/lockbench/lockbench/verdict"
)

// jobsScenario is scenarios/jobs.yaml cut down to one trial of each of the
// contrasts of issue 38: the executor paused 1.2s, longer than the lock's
// lease and the queue's visibility timeout (500ms).
const jobsScenario = `
name: jobs-test
seed: 11
workload:
  duration: 3s
  instances: 3
  clients: 2
  keys: {count: 1}
  hold: {min: 20ms, max: 40ms}
  think: {min: 5ms, max: 15ms}
  ttl: 500ms
  acquire_timeout: 200ms
  op_timeout: 1s
  retry: {attempts: 1, base: 1ms, max: 1ms}
  abort_on_lost: false
  resource: false
  jobs: {count: 40, every: 40ms, effect: 5ms, after: 10ms, grace: 1s}
cases:
  - {name: lock-unfenced, backend: redis, strategy: lock, faults: [{type: pause, target: holder, at: 800ms, for: 1.2s}], expect: {violations: any}}
  - {name: lock-fenced, backend: redis, strategy: lock, strategy_options: {fenced: true}, faults: [{type: pause, target: holder, at: 800ms, for: 1.2s}], expect: {violations: any}}
  - {name: idempotency-key, strategy: idempotency-key, faults: [{type: pause, target: holder, at: 800ms, for: 1.2s}]}
  - {name: skip-locked, strategy: skip-locked, faults: [{type: pause, target: holder, at: 800ms, for: 1.2s}]}
  - {name: skip-locked-visibility, strategy: skip-locked-visibility, strategy_options: {visibility: 500ms}, faults: [{type: pause, target: holder, at: 800ms, for: 1.2s}]}
`

// TestJobsAgainstRealServers runs jobs through five strategies on real
// Redis and PostgreSQL under a pause of the executor, and checks the
// contrasts the issue asks for — each only where the record shows its
// premise: the pause outlasted the lease (its window in the history) and
// met an attempt before its effect (MODEL §20's phases). No due job may be
// lost: its timing premise is that the executors did each job within its
// grace (1 s), which a busy machine may not; a case that lost jobs while
// the ones done took more than half the grace to complete (p99) ran on such
// a machine, and the run is made again with a 4 s grace (and a longer case
// to keep every job due), then skipped with the figures.
func TestJobsAgainstRealServers(t *testing.T) {
	needRedis(t)
	premise.Retry(t, []time.Duration{time.Second, 4 * time.Second}, func(grace time.Duration) string {
		src := strings.Replace(jobsScenario, "grace: 1s}", fmt.Sprintf("grace: %s}", grace), 1)
		src = strings.Replace(src, "duration: 3s", fmt.Sprintf("duration: %s", 2*time.Second+grace), 1)
		return jobsAgainstRealServers(t, src, grace)
	})
}

// jobsAgainstRealServers is TestJobsAgainstRealServers's attempt with
// the grace given: "" once its checks were made, or its premise unmet.
func jobsAgainstRealServers(t *testing.T, scenario string, grace time.Duration) string {
	dir := filepath.Join(t.TempDir(), "out")
	stdout, stderr, err := runInProcess(t, "run", "-dir", dir, writeScenario(t, scenario))
	if err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	windows := pauseWindows(t, filepath.Join(dir, layout.HistoryFile))
	sum := readSummary(t, dir)
	var unmet []string
	for _, c := range sum.Cases {
		if j := c.Check.Jobs; j != nil && j.Lost > 0 && (j.LatencyP99Ms == nil || *j.LatencyP99Ms > float64(grace.Milliseconds())/2) {
			p99 := "none done"
			if j.LatencyP99Ms != nil {
				p99 = fmt.Sprintf("%.0fms", *j.LatencyP99Ms)
			}
			unmet = append(unmet, fmt.Sprintf("%s: %d of %d due jobs lost, the jobs done completed in p99 %s of their %s grace", c.Check.Case, j.Lost, j.Due, p99, grace))
		}
	}
	if len(unmet) > 0 {
		return strings.Join(unmet, "; ")
	}
	for _, c := range sum.Cases {
		r := c.Check
		j := r.Jobs
		if j == nil {
			t.Errorf("%s: no jobs judged", r.Case)
			continue
		}
		t.Logf("%s: %s", r.Case, strings.TrimSpace(verdict.JobsLine(j)))
		if !r.Valid {
			t.Errorf("%s: invalid: %v", r.Case, r.Invalid)
			continue
		}
		if w := windows[r.Case]; w <= 500*time.Millisecond {
			t.Errorf("%s: the pause lasted %s in the record, not longer than the 500ms lease: the contrast has no premise", r.Case, w)
			continue
		}
		before := j.TouchedPhases[checker.PhaseBefore] > 0
		if j.Lost != 0 || j.Due != 40 {
			t.Errorf("%s: %d of %d due jobs lost", r.Case, j.Lost, j.Due)
		}
		switch r.Case {
		case "lock-unfenced":
			if before && j.Concurrent == 0 {
				t.Errorf("lock-unfenced: the paused executor resumed after its lease and applied its effect: want a concurrent duplicate, got %d", j.Concurrent)
			}
		case "lock-fenced":
			if j.StaleAccepted != 0 {
				t.Errorf("lock-fenced: %d stale effects accepted", j.StaleAccepted)
			}
			if before && j.RefusedStale == 0 {
				t.Errorf("lock-fenced: the resumed executor's token is below the next holder's: want a stale effect refused")
			}
		case "idempotency-key":
			if j.Duplicates != 0 {
				t.Errorf("idempotency-key: %d duplicate effects", j.Duplicates)
			}
			if before && j.RefusedDuplicate == 0 {
				t.Errorf("idempotency-key: the resumed executor's effect must be absorbed (refused as a duplicate)")
			}
		case "skip-locked":
			if j.Duplicates != 0 {
				t.Errorf("skip-locked: %d duplicate effects with the effect in the job's transaction", j.Duplicates)
			}
		case "skip-locked-visibility":
			if before && j.Duplicates == 0 {
				t.Errorf("skip-locked-visibility: the job was handed out again after 500ms: want a duplicate")
			}
		}
	}
	// bench check judges the history from its file alone, as the run did.
	checkOut, _, err := runInProcess(t, "check", filepath.Join(dir, layout.HistoryFile))
	if err != nil && !strings.Contains(err.Error(), "exit") {
		t.Fatalf("check: %v", err)
	}
	for _, c := range sum.Cases {
		if line := strings.TrimSpace(verdict.JobsLine(c.Check.Jobs)); !strings.Contains(checkOut, line) {
			t.Errorf("bench check does not reproduce %s's jobs line %q:\n%s", c.Check.Case, line, checkOut)
		}
	}
	return ""
}

// pauseWindows reads, per case, how long its pause was in force: from its
// fault-start to its fault-end mark.
func pauseWindows(t *testing.T, path string) map[string]time.Duration {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := history.NewReader(bufio.NewReader(f), path)
	out := map[string]time.Duration{}
	var name string
	var start int64
	for r.Next() {
		e := r.Event()
		switch e.F {
		case history.MarkCaseStart:
			m, err := checker.MetaOf(e)
			if err != nil {
				t.Fatal(err)
			}
			name = m.Name
		case history.MarkFaultStart:
			start = e.T
		case history.MarkFaultEnd:
			out[name] = time.Duration(e.T - start)
		}
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
