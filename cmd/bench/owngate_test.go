package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// copyExample copies examples/own-client into dir/name and, with plant
// set, puts plant/<plant> in place of its mylock.py: a pull request that
// changed the team's lock helper.
func copyExample(t *testing.T, dir, name, plant string) string {
	t.Helper()
	src := "../../examples/own-client"
	dst := filepath.Join(dir, name)
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	if plant != "" {
		b, err := os.ReadFile(filepath.Join(src, "plant", plant))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, "mylock.py"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// runGateIn runs scripts/ci-gate.sh from folder with this test binary as
// bench, as the example's CI job runs it from its checkout.
func runGateIn(t *testing.T, folder string, args ...string) (string, int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs("../../scripts/ci-gate.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	cmd.Dir = folder
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

// TestGateOwnLockClient runs examples/own-client's gate end to end, the
// way its CI job does: a team's own Python lock helper behind a driver of
// its own, gated by scripts/ci-gate.sh against the base commit's copy.
// The unchanged helper passes; a pull request that drops NX from the SET
// fails on safety (100) in one run; one that adds 20 ms to each attempt
// fails on latency (99). The noise floor of 25% and five interleaved runs
// a side keep the unchanged comparison from failing on a busy machine
// (the planted slowdown is a ninefold median); the slow candidate is
// compared with the five stored base runs.
func TestGateOwnLockClient(t *testing.T) {
	needRedis(t)
	if _, err := os.Stat("/usr/lib/python3/dist-packages/redis/lock.py"); err != nil {
		t.Fatalf("Debian's python3-redis is not installed (make setup installs it): %v", err)
	}
	dir := t.TempDir()
	base := copyExample(t, dir, "base", "")
	same := copyExample(t, dir, "same", "")
	out, code := runGateIn(t, same, "-n", "5", "-S", filepath.Join(base, "scenario.yaml"), "-c", "-noise 25%",
		"-o", filepath.Join(dir, "gate-same"), "scenario.yaml")
	if code != 0 || !strings.Contains(out, "ci-gate: passed") {
		t.Fatalf("unchanged lock helper: exit %d, want 0\n%s", code, out)
	}
	stored := filepath.Join(dir, "gate-same", "baseline")

	unsafe := copyExample(t, dir, "unsafe", "unsafe_mylock.py")
	out, code = runGateIn(t, unsafe, "-n", "1", "-m", "1", "-b", stored, "-o", filepath.Join(dir, "gate-unsafe"), "scenario.yaml")
	if code != 100 || !strings.Contains(out, "unexpected mutual-exclusion violations") {
		t.Fatalf("a lock helper without NX: exit %d, want 100\n%s", code, out)
	}

	slow := copyExample(t, dir, "slow", "slow_mylock.py")
	out, code = runGateIn(t, slow, "-n", "4", "-b", stored, "-c", "-noise 25%", "-o", filepath.Join(dir, "gate-slow"), "scenario.yaml")
	if code != 99 || !strings.Contains(out, "acquire_p50_ms") || !strings.Contains(out, "regression") {
		t.Fatalf("a lock helper 20 ms slower an attempt: exit %d, want 99\n%s", code, out)
	}
}
