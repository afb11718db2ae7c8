package verdict

import (
	"strings"
	"testing"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/history"
)

// TestFaultClass: a case is filed under its faults' classes, as each fault
// type declares them (faults.Info.ClassOf) and the schedule records them.
func TestFaultClass(t *testing.T) {
	f := func(typ, target string) history.ScheduledAt {
		info, err := faults.Lookup(typ)
		if err != nil {
			t.Fatal(err)
		}
		return history.ScheduledAt{FaultCore: history.FaultCore{Type: typ, Target: target}, Class: info.ClassOf(target)}
	}
	for _, tc := range []struct {
		name   string
		meta   history.CaseMeta
		expect string
	}{
		{"nothing", history.CaseMeta{}, ClassNone},
		{"pause holder", history.CaseMeta{Faults: []history.ScheduledAt{f("pause", "holder")}}, ClassPause},
		{"pause an instance", history.CaseMeta{Faults: []history.ScheduledAt{f("pause", "instance-2")}}, ClassPause},
		{"pause a server", history.CaseMeta{Faults: []history.ScheduledAt{f("pause", "etcd-2")}}, history.ClassPauseSrv},
		{"kill a named member", history.CaseMeta{Faults: []history.ScheduledAt{f("kill", "redis-1")}}, history.ClassKill},
		{"kill the leader", history.CaseMeta{Faults: []history.ScheduledAt{f("kill", "leader")}}, ClassKillLead},
		{"kill the master", history.CaseMeta{Faults: []history.ScheduledAt{f("kill", "master")}}, ClassKillLead},
		{"crash a client", history.CaseMeta{Faults: []history.ScheduledAt{f("kill", "holder-of:k0")}}, history.ClassCrash},
		{"latency", history.CaseMeta{Faults: []history.ScheduledAt{f("latency", "link:redis-1")}}, history.ClassSlow},
		{"two partitions of kinds", history.CaseMeta{Faults: []history.ScheduledAt{f("drop", "link:redis-1"), f("isolate", "etcd-1")}}, history.ClassPartition},
		{"clock", history.CaseMeta{Faults: []history.ScheduledAt{f("clock-jump", "redis-1")}}, history.ClassClock},
		{"misuse", history.CaseMeta{Misuse: []string{"wrong-token release"}}, ClassMisuse},
		{"loss", history.CaseMeta{Faults: []history.ScheduledAt{f("loss", "etcd-1")}}, history.ClassLossy},
		{"cpu starve the holder", history.CaseMeta{Faults: []history.ScheduledAt{f("cpu-starve", "holder")}}, history.ClassStarve},
		{"disk stall", history.CaseMeta{Faults: []history.ScheduledAt{f("disk-stall", "etcd-1")}}, history.ClassDisk},
		{"promote", history.CaseMeta{Faults: []history.ScheduledAt{f("promote", "postgres-2")}}, history.ClassFailover},
		{"a history without classes", history.CaseMeta{Faults: []history.ScheduledAt{{FaultCore: history.FaultCore{Type: "pause", Target: "holder"}}}}, ClassUnclassified},
		{"mixed", history.CaseMeta{Faults: []history.ScheduledAt{f("pause", "holder"), f("kill", "leader")}}, ClassMixed},
	} {
		if got := FaultClass(tc.meta); got != tc.expect {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.expect)
		}
	}
}

// cs builds a case summary for the decision view.
func cs(backend string, fenced bool, faults []history.ScheduledAt, valid bool, viol, rejected, accepted, lost, regressions int) CaseSummary {
	r := checker.Result{Case: backend, Backend: backend, Valid: valid, Violations: viol, TokenRegressions: regressions, AcquiresOK: 10,
		Meta: history.CaseMeta{Backend: backend, Fenced: fenced, Faults: faults}, Status: "ok"}
	r.Resource.StaleRejected, r.Resource.StaleAccepted, r.Resource.LostUpdates = rejected, accepted, lost
	r.Liveness.Faults = []checker.FaultLiveness{{AcquisitionsDuring: 3, AcquisitionsAfter: 4, RecoveredAfterMs: 10, Verdict: checker.Met, ClearMs: 3000}}
	if !valid {
		r.Status = "invalid"
	}
	r.Decided = valid || viol > 0 || r.Damaged()
	if r.Decided && len(faults) > 0 {
		r.Exposures = 1
	}
	return CaseSummary{Check: r}
}

func TestDecisionOutcomes(t *testing.T) {
	pause := []history.ScheduledAt{{FaultCore: history.FaultCore{Type: "pause", Target: "holder"}, Class: history.ClassPause}}
	for _, tc := range []struct {
		name string
		c    CaseSummary
		want string
	}{
		{"clean", cs("etcd", true, pause, true, 0, 0, 0, 0, 0), OutcomeSafe},
		{"overlap stopped by the token", cs("etcd", true, pause, true, 5, 3, 0, 3, 0), OutcomeFenced},
		{"overlap, no late write reached the token", cs("etcd", true, pause, true, 5, 0, 0, 0, 0), OutcomeUntested},
		{"late write landed", cs("etcd", true, pause, true, 5, 2, 1, 3, 0), OutcomeDamage},
		{"no token, overlap, no write", cs("redlock", false, pause, true, 5, 0, 0, 0, 0), OutcomeUnfenced},
		{"no token, overlap, a lost update", cs("redlock", false, pause, true, 5, 0, 0, 2, 0), OutcomeDamage},
		{"tokens went backwards", cs("redis", true, pause, true, 0, 9, 0, 0, 4), OutcomeRegressed},
		{"invalid and clean: no evidence", cs("etcd", true, pause, false, 0, 0, 0, 0, 0), OutcomeNone},
		{"invalid but proven unsafe", cs("etcd", true, pause, false, 2, 0, 1, 0, 0), OutcomeDamage},
	} {
		s := &Summary{Cases: []CaseSummary{tc.c}}
		d := NewDecision(s)
		cell := d.Rows[0].Cells[ClassPause]
		if cell == nil || cell.Outcome != tc.want {
			t.Errorf("%s: %+v, want %s", tc.name, cell, tc.want)
		}
	}
}

// TestDecisionAggregates: a cell sums every case of its backend and
// class; one unsafe trial makes the cell unsafe; the no-fault columns
// come from the fault-free cases only.
func TestDecisionAggregates(t *testing.T) {
	pause := []history.ScheduledAt{{FaultCore: history.FaultCore{Type: "pause", Target: "holder"}, Class: history.ClassPause}}
	kill := []history.ScheduledAt{{FaultCore: history.FaultCore{Type: "kill", Target: "leader"}, Class: history.ClassKillLead}}
	clean := cs("etcd", true, nil, true, 0, 0, 0, 0, 0)
	clean.Metrics.AcquireLatency = checker.Percentiles{Count: 100, P50: 2, P99: 9}
	clean.Metrics.Handoff = checker.Percentiles{Count: 50, P50: 1.5}
	slow := cs("etcd", true, pause, true, 0, 0, 0, 0, 0)
	slow.Metrics.AcquireLatency = checker.Percentiles{Count: 1000, P50: 200, P99: 900} // a fault's latency must not count
	s := &Summary{Cases: []CaseSummary{clean, slow, cs("etcd", true, pause, true, 2, 2, 0, 0, 0), cs("etcd", true, kill, true, 0, 0, 0, 0, 0),
		cs("postgres", true, pause, true, 0, 0, 0, 0, 0)}}
	d := NewDecision(s)
	if strings.Join(d.Classes, ",") != "no fault,pause holder,kill leader/master" {
		t.Errorf("classes %v", d.Classes)
	}
	if len(d.Rows) != 2 || d.Rows[0].Backend != "etcd" {
		t.Fatalf("rows %+v", d.Rows)
	}
	e := d.Rows[0]
	if c := e.Cells[ClassPause]; c.Cases != 2 || c.Outcome != OutcomeFenced || c.Trials != 2 || c.Exposures != 2 || c.TwoHolders.String() != "1 of 2, 9.5%–91%" || c.TooFew {
		t.Errorf("pause cell %+v", c)
	}
	if e.P50Ms != 2 || e.P99Ms != 9 || e.HandoffP50Ms != 1.5 {
		t.Errorf("no-fault latency %v/%v hand-off %v", e.P50Ms, e.P99Ms, e.HandoffP50Ms)
	}
	if d.Rows[1].Cells[ClassKillLead] != nil {
		t.Error("postgres has a kill cell it never ran")
	}
}

// TestDecisionLockless: where no lock is taken, two holders mean nothing
// (MODEL §18): the cell has no two-holders rate and is judged on damage.
func TestDecisionLockless(t *testing.T) {
	pause := []history.ScheduledAt{{FaultCore: history.FaultCore{Type: "pause", Target: "holder"}, Class: history.ClassPause}}
	c := cs("postgres-occ", false, pause, true, 0, 0, 0, 0, 0)
	c.Check.Meta.Lockless, c.Check.Meta.Store = true, true
	d := NewDecision(&Summary{Cases: []CaseSummary{c}})
	cell := d.Rows[0].Cells[ClassPause]
	if cell.TwoHolders.Of != 0 || cell.Damage.Of != 1 || cell.Outcome != OutcomeSafe {
		t.Errorf("lockless cell: %+v", cell)
	}
}

// TestDecisionCountsEachAcquisitionOnce: with several faults in a case,
// its acquisitions during and after the faults are the case's, counted
// once, not once per fault (MODEL §15).
func TestDecisionCountsEachAcquisitionOnce(t *testing.T) {
	pause := []history.ScheduledAt{{FaultCore: history.FaultCore{Type: "pause", Target: "holder"}, Class: history.ClassPause}, {FaultCore: history.FaultCore{Type: "pause", Target: "holder"}, Class: history.ClassPause}}
	c := cs("etcd", true, pause, true, 0, 0, 0, 0, 0)
	c.Check.Figures.AcquiresDuringFaults, c.Check.Figures.AcquiresAfterFaults = 1, 2
	d := NewDecision(&Summary{Cases: []CaseSummary{c}})
	if cell := d.Rows[0].Cells[ClassPause]; cell.AcquisitionsDuring != 1 || cell.AcquisitionsAfter != 2 {
		t.Errorf("during %d after %d, want 1 and 2", cell.AcquisitionsDuring, cell.AcquisitionsAfter)
	}
}

// TestDecisionCountsARunOnce: one run given twice (bench table DIR DIR,
// or results/latest beside the folder it links to) counts its trials
// once: five trials stay five, and too few to call the lock safe.
func TestDecisionCountsARunOnce(t *testing.T) {
	pause := []history.ScheduledAt{{FaultCore: history.FaultCore{Type: "pause", Target: "holder"}, Class: history.ClassPause}}
	var cases []CaseSummary
	for range 5 {
		cases = append(cases, cs("etcd", true, pause, true, 0, 0, 0, 0, 0))
	}
	s := &Summary{RunID: "run-1", Cases: cases}
	cell := NewDecision(s, s).Rows[0].Cells[ClassPause]
	if cell.Trials != 5 || !cell.TooFew {
		t.Errorf("one run given twice: %d trials (%s), too few %v; want 5 trials, too few", cell.Trials, cell.TwoHolders, cell.TooFew)
	}
}

// TestDecisionRateOverTrialsThatAnswer: a trial is a sample of each
// outcome it can answer for (MODEL §17). An invalid trial that proved two
// holders and no damage says nothing of damage: with one valid damaged
// trial beside three such, damage is 1 of 1 (not 1 of 4) and two holders
// 4 of 4; an invalid trial that proved damage alone is no sample of two
// holders.
func TestDecisionRateOverTrialsThatAnswer(t *testing.T) {
	pause := []history.ScheduledAt{{FaultCore: history.FaultCore{Type: "pause", Target: "holder"}, Class: history.ClassPause}}
	cases := []CaseSummary{cs("etcd", true, pause, true, 1, 0, 1, 0, 0)}
	for range 3 {
		cases = append(cases, cs("etcd", true, pause, false, 1, 0, 0, 0, 0))
	}
	damagedOnly := cs("etcd", true, pause, false, 0, 0, 1, 0, 0)
	cases = append(cases, damagedOnly)
	cell := NewDecision(&Summary{Cases: cases}).Rows[0].Cells[ClassPause]
	if cell.Trials != 5 || cell.Damage.Hits != 2 || cell.Damage.Of != 2 || cell.TwoHolders.Hits != 4 || cell.TwoHolders.Of != 4 {
		t.Errorf("trials %d, damage %d of %d, two holders %d of %d; want 5, 2 of 2, 4 of 4",
			cell.Trials, cell.Damage.Hits, cell.Damage.Of, cell.TwoHolders.Hits, cell.TwoHolders.Of)
	}
}

// TestDecisionTooFewTrials: one trial with ten fault windows is ten
// exposures but one sample of the rate ("0 of 1, ≤ 79%"): too few to call
// the lock safe, however many windows it held.
func TestDecisionTooFewTrials(t *testing.T) {
	part := []history.ScheduledAt{{FaultCore: history.FaultCore{Type: "partition", Target: "link:redis-1"}, Class: history.ClassPartition}}
	one := cs("redis", true, part, true, 0, 0, 0, 0, 0)
	one.Check.Exposures = 10
	cell := NewDecision(&Summary{Cases: []CaseSummary{one}}).Rows[0].Cells[history.ClassPartition]
	if cell.Outcome != OutcomeSafe || !cell.TooFew {
		t.Errorf("one trial of ten windows: %q, too few %v (%s)", cell.Outcome, cell.TooFew, cell.TwoHolders)
	}
	var ten []CaseSummary
	for range 10 {
		ten = append(ten, cs("redis", true, part, true, 0, 0, 0, 0, 0))
	}
	if cell := NewDecision(&Summary{Cases: ten}).Rows[0].Cells[history.ClassPartition]; cell.TooFew {
		t.Errorf("ten trials of one window each: too few (%s)", cell.TwoHolders)
	}
}

// TestDecisionNoFaultCostIsTheMedian: a backend's cost without faults is
// the median over its valid no-fault cases, of an even count the worse
// middle value; not the busiest case, which of lanes of one workload is
// the quickest.
func TestDecisionNoFaultCostIsTheMedian(t *testing.T) {
	var cases []CaseSummary
	for i, p99 := range []float64{1, 500, 40, 30} {
		c := cs("redis", true, nil, true, 0, 0, 0, 0, 0)
		c.Metrics.AcquireLatency = checker.Percentiles{Count: int64(1000 - i), P50: p99 / 10, P99: p99}
		c.Metrics.AcquiresPerSec = 100 * float64(i+1)
		cases = append(cases, c)
	}
	row := NewDecision(&Summary{Cases: cases}).Rows[0]
	if row.P99Ms != 40 || row.P50Ms != 4 || row.AcquiresPerSec != 200 || row.NoFaultCases != 4 {
		t.Errorf("p50 %v p99 %v acq/s %v over %d cases; want 4, 40, 200 over 4", row.P50Ms, row.P99Ms, row.AcquiresPerSec, row.NoFaultCases)
	}
}
