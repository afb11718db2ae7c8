package scenario

import (
	"testing"
)

// TestJobTrialsSideBySide: a job workload's trials run side by side, each
// lane with its own copy of a fault aimed at a phase of a job, and the
// meta says which variant, family and periodic job the case is.
func TestJobTrialsSideBySide(t *testing.T) {
	src := `name: t
workload: {duration: 3s, instances: 3, clients: 1, resource: false, ttl: 300ms, jobs: {periodic: true, count: 10, every: 100ms, grace: 1s}}
cases:
  - name: c
    backend: redis
    strategy: lock
    strategy_options: {fenced: true}
    faults: [{type: pause, target: executor@during-effect, at: 500ms, for: 700ms}]
    expect: {violations: any}
    trials: {count: 3, side_by_side: 3}
`
	s, err := Parse("jobs.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Cases) != 1 {
		t.Fatalf("%d cases, want one batch of three lanes", len(s.Cases))
	}
	c := s.Cases[0]
	if c.Lanes != 3 || c.Workload.Instances != 9 || len(c.Faults) != 3 {
		t.Fatalf("lanes %d, instances %d, faults %d", c.Lanes, c.Workload.Instances, len(c.Faults))
	}
	for i, f := range c.Faults {
		if f.Lane != i+1 || f.Target() != "executor@during-effect" {
			t.Errorf("fault %s: lane %d target %s", f.Name, f.Lane, f.Target())
		}
	}
	m := c.Meta()
	if j := m.Jobs; j == nil || !j.Periodic || j.Variant != "lock {fenced: true}" || j.Family != "lock" || !j.Lock || j.Count != 10 {
		t.Errorf("jobs meta %+v", m.Jobs)
	}
}
