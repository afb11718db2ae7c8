package verdict

import (
	"path/filepath"
	"testing"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/internal/threshold"
)

// TestEveryThresholdMetricHasAValue: a metric the grammar accepts but the
// report cannot compute would fail every gate that names it.
func TestEveryThresholdMetricHasAValue(t *testing.T) {
	for _, m := range threshold.Metrics() {
		if observed[m.Name] == nil {
			t.Errorf("threshold metric %s has no getter in report.observed", m.Name)
		}
	}
	for name := range observed {
		if _, ok := threshold.Lookup(name); !ok {
			t.Errorf("report.observed has %s, which the threshold grammar does not know", name)
		}
	}
}

func TestEvaluateThresholds(t *testing.T) {
	c := &CaseSummary{Check: checker.Result{Violations: 2, Meta: history.CaseMeta{Thresholds: []string{"acquire_p99 < 50ms", "violations == 0", "throughput > 500/s", "bogus < 1"}}},
		Metrics: Metrics{AcquiresPerSec: 480.4, AcquireLatency: checker.Percentiles{Count: 1, P99: 31.2}}}
	c.evaluate()
	want := []string{"✓ 'acquire_p99 < 50ms' acquire_p99=31.2ms", "✗ 'violations == 0' violations=2", "✗ 'throughput > 500/s' throughput=480.4/s"}
	if len(c.Thresholds) != 4 {
		t.Fatalf("got %d verdicts", len(c.Thresholds))
	}
	for i, w := range want {
		if got := c.Thresholds[i].String(); got != w {
			t.Errorf("verdict %d = %q, want %q", i, got, w)
		}
	}
	if c.Thresholds[3].Pass {
		t.Errorf("a threshold that does not parse must fail")
	}
}

// TestDurationThresholds: thresholds on overlap and zombie time judge the
// checker's figures of a planted history (an 80 ms overlap, zombies of
// 130 ms and 40 ms: the second holder's release is refused after its lease
// ran out).
func TestDurationThresholds(t *testing.T) {
	sum, err := AnalyzeFile(filepath.Join("testdata", "overlap-threshold.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	th := sum.Cases[0].Thresholds
	if len(th) != 3 || th[0].Pass || th[0].Observed != 80 || !th[1].Pass || th[1].Observed != 130 || !th[2].Pass {
		t.Fatalf("thresholds: %+v", th)
	}
	if got := sum.ExitCode(); got != exitcode.Threshold {
		t.Errorf("exit code %d, want %d (a threshold failed, safety as expected)", got, exitcode.Threshold)
	}
}

// TestJobThresholds: a job figure gates a job workload's case, has no
// value in a case of the lock loop, and none when unknown (lost jobs of a
// sink not read whole) or without a sample.
func TestJobThresholds(t *testing.T) {
	for _, m := range threshold.Metrics() {
		jobsDoc := len(m.Doc) > 5 && (m.Doc[:5] == "jobs:" || (len(m.Doc) > 14 && m.Doc[:14] == "periodic jobs:"))
		if _, ok := jobMetrics[m.Name]; ok != jobsDoc {
			t.Errorf("metric %s: in jobMetrics %v, documented as a job figure %v", m.Name, ok, jobsDoc)
		}
	}
	p99 := 42.0
	jobs := &checker.Jobs{Duplicates: 3, Lost: -1, LatencyP99Ms: &p99}
	c := &CaseSummary{Check: checker.Result{Jobs: jobs, Meta: history.CaseMeta{Thresholds: []string{"duplicate_effects == 0", "lost_jobs == 0", "completion_p99 < 50ms", "delay_p99 < 1s"}}}}
	c.evaluate()
	want := []struct {
		pass, noValue bool
	}{{false, false}, {false, true}, {true, false}, {false, true}}
	for i, v := range c.Thresholds {
		if v.Pass != want[i].pass || (v.NoValue != "") != want[i].noValue {
			t.Errorf("%s: pass %v no value %q, want pass %v no value %v", v.Source, v.Pass, v.NoValue, want[i].pass, want[i].noValue)
		}
	}
	lock := &CaseSummary{Check: checker.Result{Meta: history.CaseMeta{Thresholds: []string{"duplicate_effects == 0"}}}}
	lock.evaluate()
	if v := lock.Thresholds[0]; v.Pass || v.NoValue == "" {
		t.Errorf("a job figure in a case of the lock loop: pass %v, no value %q", v.Pass, v.NoValue)
	}
}
