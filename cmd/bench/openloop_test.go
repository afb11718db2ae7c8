package main

import (
	"math"
	"path/filepath"
	"testing"
)

const openLoop = `
name: open-loop
workload: {duration: 5s, instances: 2, clients: 32, keys: {count: 64}, hold: {min: 0ms, max: 0ms}, rate: {per_second: 60}}
cases:
  - name: steady
    backend: redis
  - name: slowed
    backend: redis
    faults: [{type: latency, target: link:redis-1, at: 1500ms, for: 2s, latency: 200ms}]
`

// TestOpenLoopKeepsItsSchedule: in open loop, a slow lock shows as latency
// measured from when each attempt was due, while the attempts keep their
// schedule (the offered rate does not fall with the lock's speed).
func TestOpenLoopKeepsItsSchedule(t *testing.T) {
	needRedis(t)
	dir := filepath.Join(t.TempDir(), "out")
	stdout, stderr, err := runInProcess(t, "run", "-dir", dir, writeScenario(t, openLoop))
	if err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, stdout, stderr)
	}
	cs := byCase(readSummary(t, dir))
	for _, name := range []string{"steady", "slowed"} {
		m := cs[name].Metrics
		if math.Abs(m.OfferedPerSec-60) > 6 {
			t.Errorf("%s: offered %.1f/s, want the schedule's 60/s", name, m.OfferedPerSec)
		}
	}
	steady, slowed := cs["steady"].Metrics, cs["slowed"].Metrics
	if steady.AcquireLatency.P99 > 100 || steady.Dropped > 0 {
		t.Errorf("steady: p99 %.1fms, %d dropped; want a fast lock and no drops", steady.AcquireLatency.P99, steady.Dropped)
	}
	if slowed.AcquireLatency.P99 < 200 {
		t.Errorf("slowed: p99 %.1fms under a 200ms latency; the delay must show", slowed.AcquireLatency.P99)
	}
}
