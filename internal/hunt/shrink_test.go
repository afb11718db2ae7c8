package hunt

import (
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/realized"
)

func TestCandidates(t *testing.T) {
	lease := 2 * time.Second
	s := Schedule{Instances: 2, Clients: 2, Duration: 12 * time.Second, Faults: []Fault{
		{Type: "pause", Target: "holder", At: time.Second, For: 4 * time.Second},
		{Type: "cpu-starve", Target: "a-waiter", At: 2 * time.Second, For: 60 * time.Millisecond},
	}}
	aimed := s.clone()
	aimed.Faults[0].Target, aimed.Faults[0].Phase = "instance-2", realized.PhaseHolding
	var steps []string
	for _, c := range Candidates(s, lease) {
		steps = append(steps, c.Step)
		f0, w0, c0, d0 := s.Size()
		f1, w1, c1, d1 := c.Schedule.Size()
		if f1 > f0 || w1 > w0 || c1 > c0 || d1 > d0 {
			t.Errorf("%s: %s is not smaller than %s", c.Step, c.Schedule, s)
		}
		if f1 == f0 && w1 == w0 && c1 == c0 && d1 == d0 {
			t.Errorf("%s: changed nothing", c.Step)
		}
	}
	want := []string{
		"case 12s → 7.5s", // the last window ends at 5s, and a tail of 2.5s (checker.MinEvidence and half a second)
		"drop fault 1 (pause holder at 1s for 4s)",
		"drop fault 2 (cpu-starve a-waiter at 2s for 60ms)",
		"halve fault 1's window (4s → 2s)", // fault 2's 60ms is not halved below MinWindow
		"instances 2 → 1",
		"clients per instance 2 → 1",
	}
	if c := Candidates(aimed, lease); c[0].Step != "aim fault 1 at the holder (instance-2 was it when the fault began)" || c[0].Schedule.Faults[0].Target != "holder" {
		t.Errorf("first candidate of a fault on an instance that held: %s, %s", c[0].Step, c[0].Schedule)
	}
	if strings.Join(steps, "\n") != strings.Join(want, "\n") {
		t.Errorf("candidates:\n%s\nwant:\n%s", strings.Join(steps, "\n"), strings.Join(want, "\n"))
	}
	if len(s.Faults) != 2 || s.Faults[0].For != 4*time.Second {
		t.Errorf("Candidates changed its input: %s", s)
	}
}

func TestAKilledInstancesWindowIsNotHalved(t *testing.T) {
	s := Schedule{Instances: 2, Clients: 1, Duration: 4 * time.Second, Faults: []Fault{{Type: "kill", Target: "holder", At: time.Second, For: time.Second}}}
	for _, c := range Candidates(s, time.Second) {
		if strings.HasPrefix(c.Step, "halve") {
			t.Errorf("%s: an instance killed stays dead, whatever its window", c.Step)
		}
	}
}

func TestCandidatesOfTheSmallest(t *testing.T) {
	s := Schedule{Instances: 1, Clients: 1, Duration: 2500 * time.Millisecond}
	if c := Candidates(s, time.Second); len(c) != 0 {
		t.Errorf("a schedule of one client, no fault and the least case has candidates: %v", c)
	}
	s.Duration = 8 * time.Second
	c := Candidates(s, time.Second)
	if len(c) != 1 || c[0].Schedule.Duration != 2500*time.Millisecond {
		t.Errorf("a fault-free case of 8s: %v; want it cut to the least tail, 2.5s", c)
	}
}

func TestWindowClassAndCoverage(t *testing.T) {
	lease := 2 * time.Second
	for d, want := range map[time.Duration]string{500 * time.Millisecond: "<0.5×", time.Second: "0.5–1×", 2 * time.Second: "1–2×", 8 * time.Second: "≥2×"} {
		if got := WindowClass(d, lease); got != want {
			t.Errorf("WindowClass(%s) = %s; want %s", d, got, want)
		}
	}
	c := NewCoverage([]string{"pause", "kill"}, lease)
	c.Add(realized.Trial{Faults: []realized.Fault{
		{FaultCore: history.FaultCore{Type: "pause"}, Phase: realized.PhaseHolding, ForNs: int64(3 * time.Second), Applied: true},
		{FaultCore: history.FaultCore{Type: "pause"}, Phase: realized.PhaseHolding, ForNs: int64(2 * time.Second), Applied: true},
		{FaultCore: history.FaultCore{Type: "kill"}, Phase: realized.PhaseUnknown},
	}})
	if got := c.Count[Cell{"pause", realized.PhaseHolding, "1–2×"}]; got != 2 {
		t.Errorf("pause/holding/1–2× = %d; want 2", got)
	}
	if cov, of := c.Covered(); cov != 1 || of != 2*5*4 {
		t.Errorf("covered %d of %d; want 1 of 40", cov, of)
	}
	if c.Unapplied != 1 || c.Trials != 1 {
		t.Errorf("unapplied %d, trials %d; want 1, 1", c.Unapplied, c.Trials)
	}
	for _, l := range c.Least(39) {
		if l == (Cell{"pause", realized.PhaseHolding, "1–2×"}) {
			t.Errorf("the one covered cell is among the 39 least covered")
		}
	}
	if !strings.Contains(c.Table(), "| pause | holding | 0 | 0 | 2 | 0 |") {
		t.Errorf("table:\n%s", c.Table())
	}
}
