package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/internal/premise"
	"github.com/lockbench/lockbench/verdict"
)

// brokersScenario runs 40 jobs through NATS JetStream and Redis Streams:
// each broker once with its executor paused longer than the ack wait /
// min idle (500ms), and once without a fault with an ack wait / min idle
// (%[2]s) no attempt comes near. %[1]s is the pause.
const brokersScenario = `
name: brokers-test
seed: 17
workload:
  duration: 3s
  instances: 3
  clients: 2
  keys: {count: 1}
  hold: {min: 20ms, max: 40ms}
  think: {min: 5ms, max: 15ms}
  ttl: 500ms
  op_timeout: 1s
  abort_on_lost: false
  resource: false
  jobs: {count: 40, every: 40ms, effect: 5ms, after: 10ms, grace: 1s}
cases:
  - {name: nats-paused, strategy: nats, strategy_options: {ack_wait: 500ms}, faults: [{type: pause, target: holder, at: 800ms, for: %[1]s}], expect: {duplicate_effects: any}}
  - {name: nats-acked, strategy: nats, strategy_options: {ack_wait: %[2]s}}
  - {name: streams-paused, strategy: redis-streams, strategy_options: {min_idle: 500ms}, faults: [{type: pause, target: holder, at: 800ms, for: %[1]s}], expect: {duplicate_effects: any}}
  - {name: streams-acked, strategy: redis-streams, strategy_options: {min_idle: %[2]s}}
`

// TestBrokersRedeliverAgainstRealServers runs jobs through a real
// nats-server (JetStream) and a real Redis (Streams) and shows, from the
// sink's own record, the two halves of at-least-once delivery: a job
// whose executor was paused past the ack wait (min idle) is delivered
// again — an extra attempt — and its effect applied twice; a job acked
// in time is never delivered again (one attempt per job, no duplicate).
// Each claim stands only where the record shows its premise: the pause
// outlasted the ack wait and met an attempt before its effect; every job
// completed well within the long ack wait.
func TestBrokersRedeliverAgainstRealServers(t *testing.T) {
	needRedis(t)
	if _, err := exec.LookPath("nats-server"); err != nil {
		if _, err := exec.LookPath("/usr/sbin/nats-server"); err != nil {
			t.Fatalf("nats-server is not installed (make setup installs it): %v", err)
		}
	}
	const long = 5 * time.Second
	premise.Retry(t, []time.Duration{1200 * time.Millisecond, 2500 * time.Millisecond}, func(pause time.Duration) string {
		dir := filepath.Join(t.TempDir(), "out")
		stdout, stderr, err := runInProcess(t, "run", "-dir", dir, writeScenario(t, fmt.Sprintf(brokersScenario, pause, long)))
		if err != nil {
			t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
		}
		windows := pauseWindows(t, filepath.Join(dir, layout.HistoryFile))
		var unmet []string
		for _, c := range readSummary(t, dir).Cases {
			r, j := c.Check, c.Check.Jobs
			if j == nil || !r.Valid {
				t.Fatalf("%s: not judged (valid %v: %v)", r.Case, r.Valid, r.Invalid)
			}
			t.Logf("%s: %s", r.Case, strings.TrimSpace(verdict.JobsLine(j)))
			if j.Lost != 0 {
				t.Errorf("%s: %d of %d due jobs lost", r.Case, j.Lost, j.Due)
			}
			if strings.HasSuffix(r.Case, "-acked") {
				if j.LatencyP99Ms == nil || time.Duration(*j.LatencyP99Ms*float64(time.Millisecond)) >= long {
					unmet = append(unmet, fmt.Sprintf("%s: a job took %v ms from due to ack, not within the %s ack wait", r.Case, j.LatencyP99Ms, long))
					continue
				}
				if j.Attempts != j.Count || j.Duplicates != 0 {
					t.Errorf("%s: every job acked within the ack wait, yet %d attempts of %d jobs and %d duplicate effects: an acked job was delivered again", r.Case, j.Attempts, j.Count, j.Duplicates)
				}
				continue
			}
			if w := windows[r.Case]; w <= 500*time.Millisecond || j.TouchedPhases[checker.PhaseBefore] == 0 {
				unmet = append(unmet, fmt.Sprintf("%s: the pause lasted %s in the record and met %v", r.Case, w, j.TouchedPhases))
				continue
			}
			if j.Attempts <= j.Count {
				t.Errorf("%s: the paused executor held a job past the 500ms ack wait: want it delivered again (an extra attempt), got %d attempts of %d jobs", r.Case, j.Attempts, j.Count)
			}
			if j.Duplicates == 0 || j.TouchedDuplicated == 0 {
				t.Errorf("%s: the redelivered job's effect ran again while the paused executor resumed and applied its own: want a duplicate effect, got %d (touched jobs duplicated: %d)", r.Case, j.Duplicates, j.TouchedDuplicated)
			}
		}
		return strings.Join(unmet, "; ")
	})
}
