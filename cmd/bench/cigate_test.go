package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gateScenario is a tiny run: one Redis, two clients on keys of their
// own; slow adds 20 ms of latency on the link for the whole case (the
// planted regression), under the same case name.
func gateScenario(slow bool) string {
	s := `name: gate
seed: 1
workload: {duration: 1500ms, instances: 1, clients: 2, keys: {count: 2, pick: per-client}, hold: {dist: constant, value: 0s}, think: {dist: constant, value: 1ms}}
cases:
  - name: redis
    backend: redis
`
	if slow {
		s += "    faults: [{type: latency, target: link:redis-1, at: 0s, for: 1200ms, latency: 20ms}]\n"
	}
	return s
}

// runGate runs scripts/ci-gate.sh with this test binary as bench.
func runGate(t *testing.T, args ...string) (string, int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", append([]string{"../../scripts/ci-gate.sh"}, args...)...)
	cmd.Env = append(os.Environ(), "BENCH="+exe, envBeBench+"=1")
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// TestCIGateScript runs the CI gate end to end: the first run stores the
// baseline; an unchanged candidate passes; a candidate with a planted
// latency regression fails with the threshold exit code; too few runs a
// side fail -min-runs.
//
// It runs alone: twice in three CI runs, beside the other integration
// tests on two cores, a candidate run's harness missed its own deadlines
// (resource requests late outside any fault) and the run was invalid.
func TestCIGateScript(t *testing.T) {
	alone(t)
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is not installed (make setup installs it): %v", err)
	}
	dir := t.TempDir()
	fast, slow := filepath.Join(dir, "fast.yaml"), filepath.Join(dir, "slow.yaml")
	os.WriteFile(fast, []byte(gateScenario(false)), 0o644)
	os.WriteFile(slow, []byte(gateScenario(true)), 0o644)
	baseline := filepath.Join(dir, "baseline")

	out, code := runGate(t, "-n", "4", "-b", baseline, "-o", filepath.Join(dir, "first"), fast)
	if code != 0 || !strings.Contains(out, "stored these 4 run(s) as the baseline") {
		t.Fatalf("first gate: exit %d\n%s", code, out)
	}
	out, code = runGate(t, "-n", "4", "-b", baseline, "-o", filepath.Join(dir, "same"), fast)
	if code != 0 || !strings.Contains(out, "ci-gate: passed") {
		t.Fatalf("unchanged candidate: exit %d\n%s", code, out)
	}
	out, code = runGate(t, "-n", "4", "-b", baseline, "-o", filepath.Join(dir, "slow"), slow)
	if code != 99 || !strings.Contains(out, "regression") {
		t.Fatalf("planted regression: exit %d, want 99\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "slow", "candidate", "run-4", "report.html")); err != nil {
		t.Errorf("the failing gate did not keep its results: %v", err)
	}
	out, code = runGate(t, "-n", "1", "-m", "4", "-b", baseline, "-o", filepath.Join(dir, "few"), fast)
	if code != 101 || !strings.Contains(out, "too few") {
		t.Fatalf("one candidate run with -m 4: exit %d, want 101\n%s", code, out)
	}
	if _, code := runGate(t, "-n", "x", fast); code != 104 {
		t.Errorf("bad -n: exit %d, want 104", code)
	}
}
