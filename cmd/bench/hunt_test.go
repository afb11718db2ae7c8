package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/internal/realized"
)

// TestHuntFindsAndShrinksLocal hunts the in-process control, which lets
// two instances in all the time, with a small space and budget: it must
// find two holders, confirm them by replays, shrink the schedule to no
// fault at all, write a scenario bench validate accepts, and exit 100;
// bench replay of the confirming run must say how often it recurred; and
// every results folder carries its realized schedules.
func TestHuntFindsAndShrinksLocal(t *testing.T) {
	integration(t)
	root := t.TempDir()
	out, errb, err := runBench(t, nil, "hunt", "local", "-o", root, "-seed", "3", "-trials", "2", "-batch", "2", "-n", "3", "-k", "2",
		"-kinds", "pause", "-targets", "holder", "-windows", "0.25", "-max-faults", "1", "-workload", "{ttl: 1s}", "-shrink-budget", "2m")
	if exitcode.Of(err) != exitcode.Violation {
		t.Fatalf("bench hunt local: %v; want exit 100\n%s\n%s", err, out, errb)
	}
	for _, want := range []string{"batch 1: 2 trials", "replaying it 3 times", "recurs", "found: ", "shrunk: ", "→ 0 fault(s)", "the written scenario reproduced in 3 of 3"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	m := regexp.MustCompile(`hunt: (\S+)/hunt\.md`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no hunt folder in the output:\n%s", out)
	}
	dir := m[1]
	if _, _, err := runInProcess(t, "validate", filepath.Join(dir, "shrunk.yaml")); err != nil {
		t.Errorf("bench validate shrunk.yaml: %v", err)
	}
	md := readFile(filepath.Join(dir, "hunt.md"))
	for _, want := range []string{"## Shrinking", "| drop fault 1 (pause holder", "## Coverage", "| pause | holding |"} {
		if !strings.Contains(md, want) {
			t.Errorf("hunt.md lacks %q:\n%s", want, md)
		}
	}
	r, err := realized.Read(filepath.Join(dir, "hunt-b1"))
	if err != nil || len(r.Trials) != 2 || r.Trials[0].PlanSeed == 0 || len(r.Trials[0].Faults) != 1 || r.Trials[0].Faults[0].Phase == realized.PhaseUnknown {
		t.Errorf("realized.json of the batch: %+v, %v; want two trials with a plan seed, a fault each, its phase known", r, err)
	}
	rout, rerr, err := runBench(t, nil, "replay", filepath.Join(dir, "confirm-1"), "-n", "2", "-need", "1", "-o", root)
	if err != nil {
		t.Fatalf("bench replay: %v\n%s\n%s", err, rout, rerr)
	}
	if !regexp.MustCompile(`same outcome \((two-holders|damage)\) in [12] of 2`).MatchString(rout) {
		t.Errorf("bench replay output:\n%s", rout)
	}
	if _, err := os.Stat(filepath.Join(dir, "verify", realized.File)); err != nil {
		t.Errorf("the verifying run has no realized schedules: %v", err)
	}
}
