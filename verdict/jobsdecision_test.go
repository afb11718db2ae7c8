package verdict

import (
	"testing"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/history"
)

// jobCase is a decided job case for the view's tests.
func jobCase(variant, backend, family, class string, lock, control, valid bool, j checker.Jobs) CaseSummary {
	var faults []history.ScheduledAt
	if class != ClassNone {
		faults = []history.ScheduledAt{{FaultCore: history.FaultCore{Name: "f"}, Class: class}}
	}
	exp := history.Expectation{}
	if control {
		t := true
		exp.DuplicateEffects = &t
	}
	j.Variant, j.Family, j.Strategy = variant, family, variant
	jc := j
	r := checker.Result{Case: variant + "/" + class, Backend: backend, Valid: valid, Decided: valid || j.Duplicates > 0, Expect: exp, Jobs: &jc,
		Meta: history.CaseMeta{Faults: faults, Jobs: &history.JobsMeta{Lock: lock, Variant: variant, Family: family}}}
	if class != ClassNone {
		r.Exposures = 12
	}
	return CaseSummary{Check: r}
}

func p(v float64) *float64 { return &v }

// TestJobDecision: each cell's outcome (worst first), its rates per job,
// too few and vacuous (MODEL §21), and the rows' costs.
func TestJobDecision(t *testing.T) {
	once := checker.Jobs{Due: 60, Touched: 12, Faults: []checker.JobFault{{Phases: map[string]int{checker.PhaseBefore: 1}}, {Phases: map[string]int{checker.PhaseAfter: 2}}},
		LatencyP50Ms: p(50), LatencyP99Ms: p(90), PerSec: 15}
	dup := once
	dup.Duplicates, dup.Concurrent, dup.DuplicatedJobs, dup.TouchedDuplicated = 3, 3, 2, 2
	stale := dup
	stale.StaleAccepted = 1
	lost := once
	lost.Lost = 2
	s := &Summary{Cases: []CaseSummary{
		jobCase("lock", "redis", "lock", ClassPause, true, true, true, stale),                // the lock family's control on redis: it showed
		jobCase("lock {fenced: true}", "redis", "lock", ClassPause, true, false, true, once), // exactly once, its control showed: not vacuous
		jobCase("lock {fenced: true}", "etcd", "lock", ClassPause, true, false, true, once),  // no control on etcd: vacuous
		jobCase("skip-locked", "postgres", "queue", ClassPause, false, false, true, once),    // no queue control ran
		jobCase("skip-locked", "postgres", "queue", ClassNone, false, false, true, once),     // no fault: never vacuous
		jobCase("idempotency-key", "postgres", "dedupe", ClassPause, false, false, true, lost),
		jobCase("check-then-insert", "postgres", "dedupe", ClassPause, false, true, true, once), // a control that showed nothing
		jobCase("idempotency-key", "postgres", "dedupe", history.ClassCrash, false, false, true, once),
		jobCase("check-then-insert", "postgres", "dedupe", history.ClassCrash, false, true, false, dup), // invalid, but its damage stands
	}}
	d := NewJobDecision(s)
	cell := func(variant, backend, class string) *JobCell {
		for _, r := range d.Rows {
			if r.Variant == variant && r.Backend == backend {
				return r.Cells[class]
			}
		}
		t.Fatalf("no row %s on %s", variant, backend)
		return nil
	}
	for _, tt := range []struct {
		variant, backend, class, outcome string
		vacuous, tooFew                  bool
	}{
		{"lock", "redis", ClassPause, JobOutcomeStale, false, false},
		{"lock {fenced: true}", "redis", ClassPause, JobOutcomeOnce, false, false},
		{"lock {fenced: true}", "etcd", ClassPause, JobOutcomeOnce, true, false},
		{"skip-locked", "postgres", ClassPause, JobOutcomeOnce, true, false},
		{"skip-locked", "postgres", ClassNone, JobOutcomeOnce, false, false},
		{"idempotency-key", "postgres", ClassPause, JobOutcomeLost, false, false},
		{"check-then-insert", "postgres", ClassPause, JobOutcomeOnce, false, false},
		{"idempotency-key", "postgres", history.ClassCrash, JobOutcomeOnce, false, false},
		{"check-then-insert", "postgres", history.ClassCrash, JobOutcomeDuplicates, false, false},
	} {
		c := cell(tt.variant, tt.backend, tt.class)
		if c.Outcome != tt.outcome || c.Vacuous != tt.vacuous || c.TooFew != tt.tooFew {
			t.Errorf("%s on %s × %s: %s vacuous %v (%s) too few %v, want %s vacuous %v too few %v", tt.variant, tt.backend, tt.class,
				c.Outcome, c.Vacuous, c.VacuousWhy, c.TooFew, tt.outcome, tt.vacuous, tt.tooFew)
		}
	}
	c := cell("lock", "redis", ClassPause)
	if c.Duplicated.Hits != 2 || c.Duplicated.Of != 60 || c.TouchedDuplicated.Hits != 2 || c.TouchedDuplicated.Of != 12 || c.DamageTrials.Hits != 1 {
		t.Errorf("rates: jobs %+v touched %+v damage %+v", c.Duplicated, c.TouchedDuplicated, c.DamageTrials)
	}
	if c.PhaseExposures[checker.PhaseBefore] != 1 || c.PhaseExposures[checker.PhaseAfter] != 1 {
		t.Errorf("phase exposures %v: a fault counts once per phase it met", c.PhaseExposures)
	}
	if c := cell("check-then-insert", "postgres", history.ClassCrash); c.Invalid != 1 || c.Trials != 1 || c.Lost != 0 {
		t.Errorf("an invalid trial that proved damage: %+v", c)
	}
	for _, r := range d.Rows {
		if r.Variant == "skip-locked" && (r.NoFaultCases != 1 || r.P99Ms != 90 || r.FaultCases != 1 || r.FaultPerSec != 15) {
			t.Errorf("skip-locked costs: %+v", r)
		}
		if r.Variant == "check-then-insert" && !r.Control {
			t.Errorf("a row of controls only is a control row")
		}
	}
	// Few exposures: exactly once on 3 touched jobs is too few.
	few := once
	few.Touched = 3
	d = NewJobDecision(&Summary{Cases: []CaseSummary{jobCase("lock", "redis", "lock", ClassPause, true, true, true, dup),
		jobCase("lock {register: true}", "redis", "lock", ClassPause, true, false, true, few)}})
	for _, r := range d.Rows {
		if c := r.Cells[ClassPause]; r.Variant != "lock" && !c.TooFew {
			t.Errorf("3 jobs touched: not too few")
		}
	}
	// The lock decision view leaves job workloads out.
	if ld := NewDecision(s); len(ld.Rows) != 0 {
		t.Errorf("the lock decision view holds job workloads: %+v", ld.Rows)
	}
}

// TestJobCellsAgree: two runs whose jobs duplicated per job have disjoint
// intervals disagree (MODEL §21).
func TestJobCellsAgree(t *testing.T) {
	mk := func(id string, dups int) *Summary {
		j := checker.Jobs{Due: 400, DuplicatedJobs: dups, Duplicates: dups, Touched: 24, TouchedDuplicated: min(dups, 24)}
		return &Summary{RunID: id, Cases: []CaseSummary{jobCase("no-lock", "postgres", "none", ClassNone, false, true, true, j)}}
	}
	if a := Agree(mk("a", 200), mk("b", 210)); !a.Agreed() {
		t.Errorf("200 and 210 of 400 disagree: %v", a.Lines())
	}
	a := Agree(mk("a", 20), mk("b", 300))
	if a.Agreed() || len(a.JobCells) != 1 || !a.JobCells[0].Disjoint {
		t.Errorf("20 and 300 of 400 agree: %+v", a)
	}
}
