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
	return false
}

// noValue says why the case gives metric no value (MODEL §19), or "".
func noValue(metric string, c *CaseSummary) string {
	switch r := c.Check; {
	case r.CutShort:
		return "the history was cut short"
	case r.Meta.Lockless && mutexMetrics[metric]:
		return "n/a: a lockless backend takes no lock"
	case r.Unproven != nil && !resourceMetric(metric, c):
		// A4: the lost lines could have moved it either way.
		return fmt.Sprintf("%d worker line(s) lost: the figure is open", r.Unproven.Lines)
	}
	return ""
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
