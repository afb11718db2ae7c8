package verdict

import (
	"fmt"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/internal/threshold"
)

// observed maps every threshold metric (package threshold names them) to
// its value in a case summary, in the metric's base unit, and whether it
// has one (MODEL §19: a latency with no sample has none). A test checks
// that each name the grammar accepts has a getter here.
var observed = map[string]func(c *CaseSummary) (float64, bool){
	"acquire_p50":           latency(func(c *CaseSummary) checker.Percentiles { return c.Metrics.AcquireLatency }, func(p checker.Percentiles) float64 { return p.P50 }),
	"acquire_p90":           latency(func(c *CaseSummary) checker.Percentiles { return c.Metrics.AcquireLatency }, func(p checker.Percentiles) float64 { return p.P90 }),
	"acquire_p99":           latency(func(c *CaseSummary) checker.Percentiles { return c.Metrics.AcquireLatency }, func(p checker.Percentiles) float64 { return p.P99 }),
	"acquire_p999":          latency(func(c *CaseSummary) checker.Percentiles { return c.Metrics.AcquireLatency }, func(p checker.Percentiles) float64 { return p.P999 }),
	"acquire_max":           latency(func(c *CaseSummary) checker.Percentiles { return c.Metrics.AcquireLatency }, func(p checker.Percentiles) float64 { return p.Max }),
	"handoff_p50":           latency(func(c *CaseSummary) checker.Percentiles { return c.Metrics.Handoff }, func(p checker.Percentiles) float64 { return p.P50 }),
	"handoff_p99":           latency(func(c *CaseSummary) checker.Percentiles { return c.Metrics.Handoff }, func(p checker.Percentiles) float64 { return p.P99 }),
	"longest_gap":           value(func(c *CaseSummary) float64 { return c.Metrics.LongestGapMs }),
	"overlap_max":           value(func(c *CaseSummary) float64 { return c.Check.OverlapMaxMs }),
	"overlap_p50":           value(func(c *CaseSummary) float64 { return c.Check.OverlapP50Ms }),
	"zombie_max":            value(func(c *CaseSummary) float64 { return c.Check.ZombieMaxMs }),
	"zombie_p50":            value(func(c *CaseSummary) float64 { return c.Check.ZombieP50Ms }),
	"zombies":               count(func(c *CaseSummary) int { return c.Check.Zombies }),
	"throughput":            value(func(c *CaseSummary) float64 { return c.Metrics.AcquiresPerSec }),
	"acquisitions":          count(func(c *CaseSummary) int { return c.Metrics.Acquisitions }),
	"acquires_failed":       count(func(c *CaseSummary) int { return c.Metrics.AcquiresFailed }),
	"acquires_unknown":      count(func(c *CaseSummary) int { return c.Metrics.AcquiresUnknown }),
	"acquires_dropped":      count(func(c *CaseSummary) int { return c.Metrics.Dropped }),
	"violations":            count(func(c *CaseSummary) int { return c.Check.Violations }),
	"lost_updates":          count(func(c *CaseSummary) int { return c.Check.Resource.LostUpdates }),
	"stale_writes_accepted": count(func(c *CaseSummary) int { return c.Check.Resource.StaleAccepted }),
	"stale_writes_rejected": count(func(c *CaseSummary) int { return c.Check.Resource.StaleRejected }),
	"token_regressions":     count(func(c *CaseSummary) int { return c.Check.TokenRegressions }),
	"leases_lost":           count(func(c *CaseSummary) int { return c.Check.LeasesLost }),
	// A job workload's (MODEL §20).
	"duplicate_effects":      jobCount(func(j *checker.Jobs) int { return j.Duplicates }),
	"jobs_duplicated":        jobCount(func(j *checker.Jobs) int { return j.DuplicatedJobs }),
	"stale_effects_accepted": jobCount(func(j *checker.Jobs) int { return j.StaleAccepted }),
	"lost_jobs":              jobCount(func(j *checker.Jobs) int { return j.Lost }),
	"stuck_max":              jobMs(func(j *checker.Jobs) *float64 { return j.StuckMaxMs }),
	"completion_p50":         jobMs(func(j *checker.Jobs) *float64 { return j.LatencyP50Ms }),
	"completion_p99":         jobMs(func(j *checker.Jobs) *float64 { return j.LatencyP99Ms }),
	"jobs_per_s": func(c *CaseSummary) (float64, bool) {
		return c.jobValue(func(j *checker.Jobs) float64 { return j.PerSec })
	},
	"periods_missed":     periodCount(func(p *checker.JobPeriods) int { return p.Missed }),
	"delay_p50":          periodMs(func(p *checker.JobPeriods) *float64 { return p.DelayP50Ms }),
	"delay_p99":          periodMs(func(p *checker.JobPeriods) *float64 { return p.DelayP99Ms }),
	"most_in_one_period": periodCount(func(p *checker.JobPeriods) int { return p.MostInOne }),
	"served_stale":       periodCount(func(p *checker.JobPeriods) int { return p.ServedStale }),
	"served_fresh":       periodCount(func(p *checker.JobPeriods) int { return p.ServedFresh }),
	"wait_p99":           periodMs(func(p *checker.JobPeriods) *float64 { return p.WaitP99Ms }),
}

// jobMetrics are a job workload's figures (none in a case of the lock
// loop); true for those read from the sink's own records, which no worker
// writes (MODEL §20, A4): they keep their value in a record that lost
// worker lines.
var jobMetrics = map[string]bool{"duplicate_effects": true, "jobs_duplicated": true, "lost_jobs": true, "most_in_one_period": true,
	"stale_effects_accepted": false, "stuck_max": false, "completion_p50": false, "completion_p99": false, "jobs_per_s": false,
	"periods_missed": false, "delay_p50": false, "delay_p99": false, "served_stale": false, "served_fresh": false, "wait_p99": false}

// jobValue is a job figure of a job workload's case; none for the lock
// loop.
func (c *CaseSummary) jobValue(get func(j *checker.Jobs) float64) (float64, bool) {
	if c.Check.Jobs == nil {
		return 0, false
	}
	return get(c.Check.Jobs), true
}

// jobCount is a job count; a negative one (unknown: the sink's record not
// whole) has no value.
func jobCount(get func(j *checker.Jobs) int) func(*CaseSummary) (float64, bool) {
	return func(c *CaseSummary) (float64, bool) {
		if c.Check.Jobs == nil || get(c.Check.Jobs) < 0 {
			return 0, false
		}
		return float64(get(c.Check.Jobs)), true
	}
}

// periodCount is a periodic job's count; none for one-off jobs, nor when
// unknown.
func periodCount(get func(p *checker.JobPeriods) int) func(*CaseSummary) (float64, bool) {
	return jobCount(func(j *checker.Jobs) int {
		if j.Periods == nil {
			return -1
		}
		return get(j.Periods)
	})
}

// periodMs is a periodic job's duration; none for one-off jobs, nor
// without a sample.
func periodMs(get func(p *checker.JobPeriods) *float64) func(*CaseSummary) (float64, bool) {
	return jobMs(func(j *checker.Jobs) *float64 {
		if j.Periods == nil {
			return nil
		}
		return get(j.Periods)
	})
}

// jobMs is a job duration, none without a sample.
func jobMs(get func(j *checker.Jobs) *float64) func(*CaseSummary) (float64, bool) {
	return func(c *CaseSummary) (float64, bool) {
		if c.Check.Jobs == nil || get(c.Check.Jobs) == nil {
			return 0, false
		}
		return *get(c.Check.Jobs), true
	}
}

// mutexMetrics are the figures of mutual exclusion (MODEL §6): a
// lockless backend has none (A6).
var mutexMetrics = map[string]bool{"violations": true, "overlap_max": true, "overlap_p50": true, "zombies": true, "zombie_max": true, "zombie_p50": true}

// resourceMetric reports whether metric is read from the resource's own
// marks alone, which no worker writes (MODEL §12, A4): a store backend's
// lost updates also count increments its workers' lines say committed.
func resourceMetric(metric string, c *CaseSummary) bool {
	switch metric {
	case "stale_writes_accepted", "stale_writes_rejected":
		return true
	case "lost_updates":
		return !c.Check.Meta.Store
	}
	return jobMetrics[metric]
}

// noValue says why the case gives metric no value (MODEL §19), or "".
func noValue(metric string, c *CaseSummary) string {
	switch r := c.Check; {
	case r.CutShort:
		return "the history was cut short"
	case r.Meta.Lockless && mutexMetrics[metric]:
		return "n/a: a lockless backend takes no lock"
	case r.Jobs == nil && hasKey(jobMetrics, metric):
		return "n/a: not a job workload"
	case r.Unproven != nil && !resourceMetric(metric, c):
		// A4: the lost lines could have moved it either way.
		return fmt.Sprintf("%d worker line(s) lost: the figure is open", r.Unproven.Lines)
	}
	return ""
}

func hasKey(m map[string]bool, k string) bool {
	_, ok := m[k]
	return ok
}

func latency(of func(*CaseSummary) checker.Percentiles, pick func(checker.Percentiles) float64) func(*CaseSummary) (float64, bool) {
	return func(c *CaseSummary) (float64, bool) {
		p := of(c)
		return pick(p), p.Count > 0
	}
}

func value(get func(*CaseSummary) float64) func(*CaseSummary) (float64, bool) {
	return func(c *CaseSummary) (float64, bool) { return get(c), true }
}

func count(get func(*CaseSummary) int) func(*CaseSummary) (float64, bool) {
	return func(c *CaseSummary) (float64, bool) { return float64(get(c)), true }
}

// evaluate applies the case's thresholds (MODEL §19). A threshold passes
// only on a figure with a value: a latency with no sample has none, no
// figure of a case cut short is complete, a lockless backend has no
// figure of mutual exclusion, and a record that lost worker lines none
// that its workers' lines make. A threshold that no longer parses (a
// history from another version) fails rather than passes.
func (c *CaseSummary) evaluate() {
	c.Thresholds = nil
	for _, src := range c.Check.Meta.Thresholds {
		t, err := threshold.Parse(src)
		get, known := observed[t.Metric]
		if err != nil || !known {
			c.Thresholds = append(c.Thresholds, threshold.Verdict{Threshold: threshold.Threshold{Source: src}, Pass: false})
			continue
		}
		v, ok := get(c)
		switch why := noValue(t.Metric, c); {
		case why != "":
			c.Thresholds = append(c.Thresholds, t.NoValue(why))
		case !ok:
			c.Thresholds = append(c.Thresholds, t.NoValue("no sample"))
		default:
			c.Thresholds = append(c.Thresholds, t.Judge(v))
		}
	}
}
