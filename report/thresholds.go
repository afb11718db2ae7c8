package report

import (
	"github.com/lockbench/lockbench/internal/threshold"
)

// observed maps every threshold metric (package threshold names them) to
// its value in a case summary, in the metric's base unit. A test checks
// that each name the grammar accepts has a getter here.
var observed = map[string]func(c *CaseSummary) float64{
	"acquire_p50":           func(c *CaseSummary) float64 { return c.Metrics.AcquireLatency.P50 },
	"acquire_p90":           func(c *CaseSummary) float64 { return c.Metrics.AcquireLatency.P90 },
	"acquire_p99":           func(c *CaseSummary) float64 { return c.Metrics.AcquireLatency.P99 },
	"acquire_p999":          func(c *CaseSummary) float64 { return c.Metrics.AcquireLatency.P999 },
	"acquire_max":           func(c *CaseSummary) float64 { return c.Metrics.AcquireLatency.Max },
	"handoff_p50":           func(c *CaseSummary) float64 { return c.Metrics.Handoff.P50 },
	"handoff_p99":           func(c *CaseSummary) float64 { return c.Metrics.Handoff.P99 },
	"longest_gap":           func(c *CaseSummary) float64 { return c.Metrics.LongestGapMs },
	"overlap_max":           func(c *CaseSummary) float64 { return c.Check.OverlapMaxMs },
	"overlap_p50":           func(c *CaseSummary) float64 { return c.Check.OverlapP50Ms },
	"zombie_max":            func(c *CaseSummary) float64 { return c.Check.ZombieMaxMs },
	"zombie_p50":            func(c *CaseSummary) float64 { return c.Check.ZombieP50Ms },
	"zombies":               func(c *CaseSummary) float64 { return float64(c.Check.Zombies) },
	"throughput":            func(c *CaseSummary) float64 { return c.Metrics.AcquiresPerSec },
	"acquisitions":          func(c *CaseSummary) float64 { return float64(c.Metrics.Acquisitions) },
	"acquires_failed":       func(c *CaseSummary) float64 { return float64(c.Metrics.AcquiresFailed) },
	"acquires_unknown":      func(c *CaseSummary) float64 { return float64(c.Metrics.AcquiresUnknown) },
	"acquires_dropped":      func(c *CaseSummary) float64 { return float64(c.Metrics.Dropped) },
	"violations":            func(c *CaseSummary) float64 { return float64(c.Check.Violations) },
	"lost_updates":          func(c *CaseSummary) float64 { return float64(c.Check.Resource.LostUpdates) },
	"stale_writes_accepted": func(c *CaseSummary) float64 { return float64(c.Check.Resource.StaleAccepted) },
	"stale_writes_rejected": func(c *CaseSummary) float64 { return float64(c.Check.Resource.StaleRejected) },
	"token_regressions":     func(c *CaseSummary) float64 { return float64(c.Check.TokenRegressions) },
	"leases_lost":           func(c *CaseSummary) float64 { return float64(c.Check.LeasesLost) },
}

// evaluate applies the case's thresholds. A threshold that no longer
// parses (a history from another version) fails rather than passes.
func (c *CaseSummary) evaluate() {
	for _, src := range c.Check.Meta.Thresholds {
		t, err := threshold.Parse(src)
		get, known := observed[t.Metric]
		if err != nil || !known {
			c.Thresholds = append(c.Thresholds, threshold.Verdict{Threshold: threshold.Threshold{Source: src}, Pass: false})
			continue
		}
		c.Thresholds = append(c.Thresholds, t.Judge(get(c)))
	}
}
