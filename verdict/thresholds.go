package verdict

import (
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
// only on a figure with a value: a latency with no sample has none, and
// no figure of a case cut short is complete. A threshold that no longer
// parses (a history from another version) fails rather than passes.
func (c *CaseSummary) evaluate() {
	c.Thresholds = nil
	cut := c.Check.CutShort
	for _, src := range c.Check.Meta.Thresholds {
		t, err := threshold.Parse(src)
		get, known := observed[t.Metric]
		if err != nil || !known {
			c.Thresholds = append(c.Thresholds, threshold.Verdict{Threshold: threshold.Threshold{Source: src}, Pass: false})
			continue
		}
		v, ok := get(c)
		switch {
		case cut:
			c.Thresholds = append(c.Thresholds, t.NoValue("the history was cut short"))
		case !ok:
			c.Thresholds = append(c.Thresholds, t.NoValue("no sample"))
		default:
			c.Thresholds = append(c.Thresholds, t.Judge(v))
		}
	}
}
