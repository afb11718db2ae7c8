package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockbench/lockbench/history"
)

const overrides = `
name: overrides
workload:
  duration: 3s
  instances: 2
  clients: 1
  ttl: 5s
  hold: {dist: constant, value: 20ms}
  think: {dist: constant, value: 10ms}
  overrides:
    - {instances: [1], hold: {dist: constant, value: 600ms}}
cases:
  - name: long-and-quick
    backend: redis
`

// TestWorkloadOverridesPerInstance: one long holder and one quick one, as
// the scenario's overrides say, seen in the history's own hold times.
func TestWorkloadOverridesPerInstance(t *testing.T) {
	needRedis(t)
	dir := filepath.Join(t.TempDir(), "out")
	stdout, stderr, err := runInProcess(t, "run", "-dir", dir, writeScenario(t, overrides))
	if err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, stdout, stderr)
	}
	f, err := os.Open(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	acquired := map[string]int64{}
	longest, shortest := map[string]time.Duration{}, map[string]time.Duration{}
	r := history.NewReader(f, "history.jsonl")
	for r.Next() {
		e := r.Event()
		switch {
		case e.F == history.OpAcquire && e.Type == history.OK:
			acquired[e.Proc] = e.T
		case e.F == history.OpRelease && e.Type == history.Invoke && acquired[e.Proc] > 0:
			d := time.Duration(e.T - acquired[e.Proc])
			if s, ok := shortest[e.Proc]; !ok || d < s {
				shortest[e.Proc] = d
			}
			longest[e.Proc] = max(longest[e.Proc], d)
			acquired[e.Proc] = 0
		}
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if s := shortest["i1c0"]; s < 550*time.Millisecond {
		t.Errorf("instance 1 (hold 600ms) held as briefly as %s", s)
	}
	// Holds take at least what they were given, and on a busy machine
	// more: instance 2's shortest, not its longest, tells its 20 ms from
	// the 600 ms it would hold without its override.
	if s, ok := shortest["i2c0"]; !ok || s > 300*time.Millisecond {
		t.Errorf("instance 2 (hold 20ms) never held shorter than %s (seen: %v, longest %s)", s, ok, longest["i2c0"])
	}
}
